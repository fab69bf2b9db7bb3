// White-box: the thread markers a session sets are restored on every exit path.
#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using tessera::detail::this_thread;

TEST(ThreadStateTest, MarkersAreRestoredAfterReturnAndException) {
    for (int threads : {1, 2}) {
        tessera::backend be{tessera::backend_options{}.with_threads(threads)};
        ASSERT_EQ(this_thread.innermost, nullptr);
        be.run([&](tessera::session& s) { EXPECT_EQ(this_thread.innermost, &s); });
        EXPECT_EQ(this_thread.innermost, nullptr);
        EXPECT_THROW(be.run([](tessera::session&) { throw std::runtime_error("x"); }),
                     std::runtime_error);
        EXPECT_EQ(this_thread.innermost, nullptr);
        EXPECT_EQ(this_thread.chunk_of, nullptr);
    }
}

TEST(ThreadStateTest, ChunkMarkerDoesNotLeakIntoASessionOfAnotherBackend) {
    tessera::backend a{tessera::backend_options{}.with_threads(2)};
    tessera::backend b{tessera::backend_options{}.with_threads(2)};
    a.run([&](tessera::session& s) {
        tessera::parallel_for(s, 8, 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i)
                b.run([&](tessera::session&) { EXPECT_EQ(this_thread.chunk_of, nullptr); });
        });
    });
    EXPECT_EQ(this_thread.chunk_of, nullptr);
    EXPECT_EQ(b.stats().child_sessions, 0u);
    EXPECT_EQ(b.stats().arena_entries, 0u);  // inside a's chunks: inline and serial
    EXPECT_EQ(b.stats().inline_entries, 8u);
}

}  // namespace
