// Backend construction: thread count resolution, TESSERA_NUM_THREADS, more threads than CPUs,
// invalid options.
#include <tessera/tessera.hpp>

#include <gtest/gtest.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace {

// Sets an environment variable for one test and restores the previous value.
class scoped_env {
public:
    scoped_env(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value != nullptr)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~scoped_env() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

TEST(BackendTest, DefaultThreadCountIsTheAffinityCount) {
    scoped_env env("TESSERA_NUM_THREADS", nullptr);
    tessera::backend be;
    EXPECT_EQ(be.threads(), tbb::info::default_concurrency());
    EXPECT_EQ(be.session_slots(), 1);
}

TEST(BackendTest, OptionSetsThreadCount) {
    tessera::backend be{tessera::backend_options{}.with_threads(3).with_session_slots(2)};
    EXPECT_EQ(be.threads(), 3);
    EXPECT_EQ(be.session_slots(), 2);
    EXPECT_EQ(be.options().threads, 3);
}

TEST(BackendTest, EnvironmentOverridesTheDefault) {
    scoped_env env("TESSERA_NUM_THREADS", "3");
    tessera::backend be;
    EXPECT_EQ(be.threads(), 3);
}

TEST(BackendTest, OptionOverridesTheEnvironment) {
    scoped_env env("TESSERA_NUM_THREADS", "3");
    tessera::backend be{tessera::backend_options{}.with_threads(1)};
    EXPECT_EQ(be.threads(), 1);
}

class BadThreadEnvTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BadThreadEnvTest, IsAConfigErrorNamingTheVariable) {
    scoped_env env("TESSERA_NUM_THREADS", GetParam());
    try {
        tessera::backend be;
        FAIL() << "TESSERA_NUM_THREADS=\"" << GetParam() << "\" was accepted";
    } catch (const tessera::config_error& e) {
        EXPECT_NE(std::string(e.what()).find("TESSERA_NUM_THREADS"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(GetParam()), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Values, BadThreadEnvTest,
                         ::testing::Values("0", "-1", "abc", "", "4x", " 4", "2.5", "99999999999",
                                           "100000"));

TEST(BackendTest, NonPositiveThreadOptionIsAConfigError) {
    for (int n : {0, -1, -100}) {
        EXPECT_THROW(tessera::backend(tessera::backend_options{}.with_threads(n)),
                     tessera::config_error)
            << n;
    }
}

TEST(BackendTest, NonPositiveSessionSlotsIsAConfigError) {
    EXPECT_THROW(tessera::backend(tessera::backend_options{}.with_threads(2).with_session_slots(0)),
                 tessera::config_error);
}

TEST(BackendTest, ConfigErrorIsATesseraError) {
    EXPECT_THROW(tessera::backend(tessera::backend_options{}.with_threads(0)), tessera::error);
}

std::size_t allowed_parallelism() {
    return tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
}

// How many distinct threads run chunks of one parallel_for in a session of `be` when every chunk
// waits (up to 20 s, so a shortfall fails instead of hanging) for `want` chunks to be running at
// once. A backend that really has `want` threads reaches it; one that oneTBB capped does not.
int threads_running_at_once(tessera::backend& be, int want) {
    return be.run([want](tessera::session&) {
        std::atomic<int> running{0};
        std::mutex m;
        std::set<std::thread::id> ids;
        tbb::parallel_for(
            tbb::blocked_range<int>(0, want, 1),
            [&](const tbb::blocked_range<int>&) {
                {
                    std::lock_guard lock(m);
                    ids.insert(std::this_thread::get_id());
                }
                running.fetch_add(1);
                const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                while (running.load() < want && std::chrono::steady_clock::now() < give_up)
                    std::this_thread::yield();
            },
            tbb::simple_partitioner{});
        return static_cast<int>(ids.size());
    });
}

TEST(BackendTest, MoreThreadsThanCpusAreHonouredWithoutAWarningFromOneTbb) {
    const int cpus = tbb::info::default_concurrency();
    const int want = cpus + 2;
    ::testing::internal::CaptureStderr();
    int ran = 0;
    {
        tessera::backend be{tessera::backend_options{}.with_threads(want)};
        EXPECT_EQ(be.threads(), want);
        ran = threads_running_at_once(be, want);
    }
    const std::string printed = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(ran, want);
    EXPECT_EQ(printed, "") << "oneTBB printed: " << printed;
}

TEST(BackendTest, EnvironmentAboveTheCpuCountIsHonoured) {
    const int want = tbb::info::default_concurrency() + 1;
    scoped_env env("TESSERA_NUM_THREADS", std::to_string(want).c_str());
    ::testing::internal::CaptureStderr();
    {
        tessera::backend be;
        EXPECT_EQ(be.threads(), want);
        EXPECT_EQ(threads_running_at_once(be, want), want);
    }
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(BackendTest, ProcessLimitFollowsTheLargestLiveRequestAndIsRestored) {
    const int cpus = tbb::info::default_concurrency();
    const std::size_t before = allowed_parallelism();
    {
        std::optional<tessera::backend> small{tessera::backend_options{}.with_threads(cpus + 1)};
        EXPECT_EQ(allowed_parallelism(), static_cast<std::size_t>(cpus + 1));
        {
            tessera::backend large{tessera::backend_options{}.with_threads(cpus + 3)};
            EXPECT_EQ(allowed_parallelism(), static_cast<std::size_t>(cpus + 3));
            small.reset();  // the larger request stays in force
            EXPECT_EQ(allowed_parallelism(), static_cast<std::size_t>(cpus + 3));
            EXPECT_EQ(threads_running_at_once(large, cpus + 3), cpus + 3);
        }
        EXPECT_EQ(allowed_parallelism(), before);
    }
    // A backend within the CPU count changes nothing.
    tessera::backend within{tessera::backend_options{}.with_threads(cpus)};
    EXPECT_EQ(allowed_parallelism(), before);
}

TEST(BackendTest, AnApplicationsHigherOneTbbLimitIsLeftAlone) {
    const int cpus = tbb::info::default_concurrency();
    const auto high = static_cast<std::size_t>(cpus + 8);
    const tbb::global_control app(tbb::global_control::max_allowed_parallelism, high);
    {
        tessera::backend be{tessera::backend_options{}.with_threads(cpus + 2)};
        EXPECT_EQ(be.threads(), cpus + 2);
        EXPECT_EQ(allowed_parallelism(), high);  // no control of tessera's caps it lower
    }
    EXPECT_EQ(allowed_parallelism(), high);
}

TEST(BackendTest, ThreadsReportsTheApplicationsLowerOneTbbLimit) {
    const tbb::global_control cap(tbb::global_control::max_allowed_parallelism, 2);
    ::testing::internal::CaptureStderr();
    {
        tessera::backend be{tessera::backend_options{}.with_threads(6)};
        EXPECT_EQ(be.threads(), 2);
        EXPECT_EQ(be.options().threads, 2);
        EXPECT_EQ(be.run([](tessera::session& s) { return s.threads(); }), 2);
    }
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(BackendTest, AnApplicationLimitOfOneMakesAOneThreadBackend) {
    const tbb::global_control cap(tbb::global_control::max_allowed_parallelism, 1);
    tessera::backend be{tessera::backend_options{}.with_threads(4)};
    EXPECT_EQ(be.threads(), 1);
    be.run([](tessera::session&) {});
    EXPECT_EQ(be.stats().arena_entries, 0u);
    EXPECT_EQ(be.stats().inline_entries, 1u);
}

}  // namespace
