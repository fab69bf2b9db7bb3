// White-box tests of the workspace and the shared pool: zero heap allocations when warm,
// where freed blocks go, the retained-bytes cap and trim().
#include "support/alloc_counter.hpp"
#include "support/backends.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <thread>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::test::allocation_scope;

class BufferPoolTest : public ::testing::TestWithParam<int> {};

TEST_P(BufferPoolTest, WarmSessionLoopMakesZeroHeapAllocations) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto step = [&] {
            auto a = tessera::full<float>(s, {8}, 1.0f);
            auto b = tessera::full<float>(s, {8}, 2.0f);
            auto c = tessera::add(s, a, b);
            auto big = tessera::empty<double>(s, {4096});
            tessera::add(s, a, b, c);
            return c.values()[0];
        };
        step();  // warm-up: fills the workspace's free lists
        allocation_scope counted;
        float acc = 0;
        for (int i = 0; i < 1000; ++i) acc += step();
        EXPECT_EQ(counted.count(), 0u);
        EXPECT_EQ(acc, 3000.0f);
    });
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.pool_misses, 4u);  // a, b, c, big once each, during warm-up
    EXPECT_EQ(st.pool_hits, 4u * 1000u);
}

TEST_P(BufferPoolTest, WarmEmptySessionsMakeZeroHeapAllocations) {
    backend be{backend_options{}.with_threads(GetParam())};
    auto one = [&] {
        be.run([](session& s) { auto t = tessera::full<float>(s, {8}, 1.0f); });
    };
    one();
    allocation_scope counted;
    for (int i = 0; i < 1000; ++i) one();
    EXPECT_EQ(counted.count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Threads, BufferPoolTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

TEST(BufferPoolTest, SizeClassesArePowersOfTwoFrom64Bytes) {
    using tessera::detail::size_class_for;
    EXPECT_EQ(size_class_for(1), 6u);
    EXPECT_EQ(size_class_for(64), 6u);
    EXPECT_EQ(size_class_for(65), 7u);
    EXPECT_EQ(size_class_for(128), 7u);
    EXPECT_EQ(size_class_for(std::size_t{1} << 47), 47u);
    EXPECT_EQ(size_class_for((std::size_t{1} << 47) + 1), tessera::detail::size_class_count);
}

TEST(BufferPoolTest, BlocksFreedInASessionGoBackToItsWorkspace) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        { auto t = tessera::empty<float>(s, {100}); }
        { auto t = tessera::empty<float>(s, {100}); }  // same 512-byte class: reused
        { auto t = tessera::empty<float>(s, {120}); }  // still 512 bytes
        { auto t = tessera::empty<float>(s, {129}); }  // 1024 bytes: a new block
    });
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.pool_misses, 2u);
    EXPECT_EQ(st.pool_hits, 2u);
    EXPECT_EQ(st.bytes_retained, 512u + 1024u);
}

TEST(BufferPoolTest, BlockFreedInItsOwnSessionStaysInTheLeasedWorkspace) {
    backend be{backend_options{}.with_threads(2)};
    be.run([&](session& s) {
        { auto t = tessera::empty<float>(s, {16}); }  // freed on the lock-free path
        EXPECT_EQ(tessera::detail::session_access::workspace_of(s).lists.retained_bytes, 64u);
        EXPECT_EQ(be.trim(), 0u);  // nothing in the shared pool; the leased workspace is skipped
        { auto t = tessera::empty<float>(s, {16}); }
    });
    EXPECT_EQ(be.stats().pool_misses, 1u);
    EXPECT_EQ(be.stats().pool_hits, 1u);
}

// The cap bounds what the pool owns, free or lent out. A block that would cross it is served
// unpooled only while everything the cap allows is in use; idle blocks are trimmed to make room.
TEST(BufferPoolTest, AllocationsBeyondTheCapTrimIdleBlocksOrBypassThePool) {
    backend be{backend_options{}.with_threads(1).with_retained_bytes_cap(1024)};
    be.run([](session& s) {
        auto a = tessera::empty<float>(s, {256});  // 1024 bytes: exactly the cap, pooled
        auto b = tessera::empty<float>(s, {16});   // a is lent out: from the heap, unpooled
    });
    tessera::stats st = be.stats();
    EXPECT_EQ(st.pool_misses, 2u);
    EXPECT_EQ(st.pool_bypasses, 1u);
    EXPECT_EQ(st.pool_trims, 0u);
    EXPECT_EQ(st.bytes_retained, 1024u);  // a, idle in the workspace; b went back to the heap

    be.run([](session& s) { auto b = tessera::empty<float>(s, {16}); });
    st = be.stats();
    EXPECT_EQ(st.pool_misses, 3u);
    EXPECT_EQ(st.pool_trims, 1u);  // the idle 1024-byte block made room for b
    EXPECT_EQ(st.pool_bypasses, 1u);
    EXPECT_EQ(st.bytes_retained, 64u);

    allocation_scope counted;
    be.run([](session& s) { auto b = tessera::empty<float>(s, {16}); });
    EXPECT_EQ(counted.count(), 0u);  // b was pooled this time
    EXPECT_EQ(be.stats().pool_hits, 1u);
}

// Room is made from the session's own idle blocks, the shared pool and workspaces no session
// holds, and the pool never owns more than the cap.
TEST(BufferPoolTest, TheCapTrimsTheSharedPoolAndIdleWorkspaces) {
    backend be{backend_options{}.with_threads(1).with_retained_bytes_cap(4096)};
    auto outside = be.run([](session& s) { return tessera::empty<float>(s, {256}); });
    outside = tessera::tensor<float>{};  // 1024 bytes, freed outside any session: the shared pool
    std::thread([&] {
        be.run([](session& s) { auto t = tessera::empty<float>(s, {512}); });  // 2048, idle there
    }).join();
    EXPECT_EQ(be.stats().bytes_retained, 1024u + 2048u);

    be.run([](session& s) {
        auto a = tessera::empty<float>(s, {16});  // 64 bytes: fits beside the idle ones
        a = tessera::tensor<float>{};
        auto big = tessera::empty<float>(s, {1024});  // 4096: every idle block must go
    });
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.pool_trims, 3u);
    EXPECT_EQ(st.pool_bypasses, 0u);
    EXPECT_EQ(st.bytes_retained, 4096u);  // big, pooled and now idle
}

// A block larger than the cap never fits, however much is trimmed: nothing idle is thrown away.
TEST(BufferPoolTest, ABlockLargerThanTheCapTrimsNothing) {
    backend be{backend_options{}.with_threads(1).with_retained_bytes_cap(1024)};
    be.run([](session& s) {
        { auto a = tessera::empty<float>(s, {16}); }
        auto huge = tessera::empty<float>(s, {1024});
    });
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.pool_trims, 0u);
    EXPECT_EQ(st.pool_bypasses, 1u);
    EXPECT_EQ(st.bytes_retained, 64u);
}

TEST(BufferPoolTest, TrimFreesRetainedBlocks) {
    backend be{backend_options{}.with_threads(2)};
    be.run([](session& s) {
        auto a = tessera::empty<float>(s, {1000});
        auto b = tessera::empty<float>(s, {10});
    });
    auto outside = be.run([](session& s) { return tessera::empty<float>(s, {16}); });
    outside = tessera::tensor<float>{};  // into the shared pool
    // The workspace keeps the 4096-byte block; the 64-byte one went out and came back to the
    // shared pool.
    EXPECT_EQ(be.stats().bytes_retained, 4096u + 64u);
    EXPECT_EQ(be.stats().pool_misses, 2u);
    EXPECT_EQ(be.trim(), 4096u + 64u);
    EXPECT_EQ(be.stats().bytes_retained, 0u);
    be.run([](session& s) { auto a = tessera::empty<float>(s, {1000}); });
    EXPECT_EQ(be.stats().pool_misses, 3u);  // the trimmed block had to be made again
}

}  // namespace
