// Backend construction: thread count resolution, TESSERA_NUM_THREADS, invalid options.
#include <tessera/tessera.hpp>

#include <gtest/gtest.h>
#include <oneapi/tbb/info.h>

#include <cstdlib>
#include <optional>
#include <string>

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

}  // namespace
