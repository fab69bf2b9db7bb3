// add: results against a float64 reference on random inputs, bad input, in-place, dispatch counts.
#include "support/backends.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;

class AddTest : public ::testing::TestWithParam<int> {};

TEST_P(AddTest, MatchesAFloat64ReferenceOnRandomInputs) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
    be.run([&](session& s) {
        for (std::size_t n : {1u, 7u, 8u, 1000u, 100000u}) {
            auto a = tessera::empty<float>(s, {n});
            auto b = tessera::empty<float>(s, {n});
            for (float& v : a.values()) v = dist(rng);
            for (float& v : b.values()) v = dist(rng);
            auto c = tessera::add(s, a, b);
            for (std::size_t i = 0; i < n; ++i) {
                const double want = static_cast<double>(a.values()[i]) + static_cast<double>(b.values()[i]);
                ASSERT_NEAR(c.values()[i], want, 1e-5 * (1.0 + std::abs(want))) << n << " " << i;
            }
        }
    });
}

TEST_P(AddTest, OutParameterMayBeAnInputItself) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<double>(s, {3, 4}, 1.25);
        auto b = tessera::full<double>(s, {3, 4}, 2.0);
        tessera::add(s, a, b, a);
        for (double v : a.values()) EXPECT_EQ(v, 3.25);
        tessera::add(s, a, a, a);
        for (double v : a.values()) EXPECT_EQ(v, 6.5);
    });
}

TEST_P(AddTest, MismatchedShapesThrowBeforeWriting) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {3, 4}, 1.0f);
        auto b = tessera::full<float>(s, {4, 3}, 1.0f);
        auto out = tessera::full<float>(s, {3, 4}, -1.0f);
        try {
            tessera::add(s, a, b, out);
            FAIL() << "no exception";
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()), "add: shapes [3,4] and [4,3] do not broadcast");
        }
        for (float v : out.values()) EXPECT_EQ(v, -1.0f);
        EXPECT_THROW(tessera::add(s, a, b), tessera::shape_error);

        auto wrong_out = tessera::full<float>(s, {12}, -1.0f);
        try {
            tessera::add(s, a, a, wrong_out);
            FAIL() << "no exception";
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()), "add: out has shape [12] but the result has shape [3,4]");
        }
        for (float v : wrong_out.values()) EXPECT_EQ(v, -1.0f);
    });
}

TEST_P(AddTest, TinyOpNeverDispatchesInParallel) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {8}, 1.0f);
        for (int i = 0; i < 100; ++i) tessera::add(s, a, a, a);
    });
    EXPECT_EQ(be.stats().parallel_dispatches, 0u);
    EXPECT_EQ(be.stats().inline_dispatches, 100u);
}

TEST_P(AddTest, LargeOpDispatchesOnceInParallelOnAMultiThreadBackend) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    const std::size_t n = be.options().grain + 1;
    be.run([&](session& s) {
        auto a = tessera::full<float>(s, {n}, 1.0f);
        auto c = tessera::add(s, a, a);
        EXPECT_EQ(c.values()[n - 1], 2.0f);
    });
    EXPECT_EQ(be.stats().parallel_dispatches, threads > 1 ? 1u : 0u);
    EXPECT_EQ(be.stats().inline_dispatches, threads > 1 ? 0u : 1u);
}

INSTANTIATE_TEST_SUITE_P(Threads, AddTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
