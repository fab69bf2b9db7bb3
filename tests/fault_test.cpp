// Fault injection: pool allocations fail after N; every op throws std::bad_alloc cleanly, the
// session is restored and the next session works.
#include "support/backends.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <new>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::detail::fail_block_allocations_after;
using tessera::detail::no_injected_failure;

struct reset_injection {
    ~reset_injection() { fail_block_allocations_after(no_injected_failure); }
};

class FaultTest : public ::testing::TestWithParam<int> {};

// A session that needs six fresh blocks, with the heap failing after 0..5 of them: each attempt
// throws bad_alloc out of run, leaves no session open, and the backend works afterwards.
TEST_P(FaultTest, AllocationFailureUnwindsCleanly) {
    reset_injection reset;
    for (std::size_t budget = 0; budget < 6; ++budget) {
        backend be{backend_options{}.with_threads(GetParam())};
        fail_block_allocations_after(budget);
        EXPECT_THROW(be.run([](session& s) {
            auto a = tessera::full<float>(s, {16}, 1.0f);
            auto b = tessera::full<float>(s, {32}, 2.0f);
            auto c = tessera::full<float>(s, {64}, 3.0f);
            auto d = tessera::exp(s, a);
            auto e = tessera::relu(s, b);
            auto f = tessera::add(s, c, c);
        }), std::bad_alloc) << budget;
        fail_block_allocations_after(no_injected_failure);
        const tessera::stats st = be.stats();
        EXPECT_EQ(st.open_sessions, 0u);
        EXPECT_EQ(st.pool_misses, budget + 1);  // the failed attempt counts as a miss
        EXPECT_EQ(be.run([](session& s) { return tessera::add(s, tessera::full<float>(s, {4}, 1.0f),
                                                              tessera::full<float>(s, {4}, 2.0f))(3); }),
                  3.0f);
    }
}

// An out-parameter op never allocates, so a failing heap cannot touch it; the allocating form
// fails before writing anything.
TEST_P(FaultTest, OutParameterFormIsUnaffectedAndAllocatingFormWritesNothing) {
    reset_injection reset;
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {8}, 1.0f);
        auto out = tessera::full<float>(s, {8}, -1.0f);
        fail_block_allocations_after(0);
        tessera::add(s, a, a, out);
        EXPECT_EQ(out(0), 2.0f);
        EXPECT_THROW((void)tessera::add(s, a, a), std::bad_alloc);  // a and out hold the free blocks
        fail_block_allocations_after(no_injected_failure);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, FaultTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
