// Sessions: exact entry counts, nesting in all three forms, results, exceptions, threads.
#include "support/backends.hpp"
#include "support/watchdog.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using namespace std::chrono_literals;

backend_options with_threads(int n) { return backend_options{}.with_threads(n); }

TEST(SessionTest, OneRunOnAMultiThreadBackendIsExactlyOneArenaEntry) {
    backend be{with_threads(4)};
    be.run([](session&) {});
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.sessions, 1u);
    EXPECT_EQ(st.arena_entries, 1u);
    EXPECT_EQ(st.inline_entries, 0u);
    EXPECT_EQ(st.nested_reuses, 0u);
    EXPECT_EQ(st.child_sessions, 0u);
    EXPECT_EQ(st.open_sessions, 0u);
}

TEST(SessionTest, OneRunOnAOneThreadBackendIsOneInlineEntryAndNoArenaEntry) {
    backend be{with_threads(1)};
    be.run([](session&) {});
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.sessions, 1u);
    EXPECT_EQ(st.arena_entries, 0u);
    EXPECT_EQ(st.inline_entries, 1u);
    EXPECT_EQ(st.open_sessions, 0u);
}

TEST(SessionTest, ManyRunsCountOneEntryEach) {
    backend multi{with_threads(2)};
    backend single{with_threads(1)};
    for (int i = 0; i < 100; ++i) {
        multi.run([](session&) {});
        single.run([](session&) {});
    }
    EXPECT_EQ(multi.stats().arena_entries, 100u);
    EXPECT_EQ(multi.stats().sessions, 100u);
    EXPECT_EQ(single.stats().inline_entries, 100u);
    EXPECT_EQ(single.stats().arena_entries, 0u);
}

// The one-thread backend never touches oneTBB: a thread that has never used oneTBB runs a session
// with an op and is still not known to the scheduler afterwards (any execute, isolate or
// parallel_for would have registered it).
TEST(SessionTest, OneThreadBackendNeverCallsIntoOneTbb) {
    backend be{with_threads(1)};
    int index_after = 0;
    std::thread fresh([&] {
        be.run([](session& s) {
            auto a = tessera::full<float>(s, {1 << 20}, 1.0f);  // large: would fan out if it could
            auto b = tessera::add(s, a, a);
            EXPECT_EQ(b.values()[12345], 2.0f);
        });
        index_after = tbb::this_task_arena::current_thread_index();
    });
    fresh.join();
    EXPECT_EQ(index_after, int{tbb::task_arena::not_initialized});
    EXPECT_EQ(be.stats().arena_entries, 0u);
    EXPECT_EQ(be.stats().parallel_dispatches, 0u);
}

// Cancelling a parallel op (an exception in one chunk) also cancels parallel work that another
// chunk started in its child session: the child's work belongs to the op's task group.
TEST(SessionTest, ExceptionInAChunkCancelsWorkInTheChildSessionOfAnotherChunk) {
    backend be{with_threads(2)};
    std::atomic<bool> child_started{false};
    std::atomic<bool> thrown{false};
    std::atomic<int> nested_done{0};
    constexpr int nested_items = 200;
    EXPECT_THROW(be.run([&](session& s) {
        tessera::parallel_for(s, 2, 1, [&](std::size_t, std::size_t) {
            be.run([&](session& inner) {
                if (&inner == &s) {  // the owner's chunk: wait for the worker's child session
                    for (int i = 0; i < 5000 && !child_started; ++i)
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    thrown = true;
                    throw std::runtime_error("cancel");
                }
                child_started = true;
                tessera::parallel_for(inner, nested_items, 1, [&](std::size_t b, std::size_t e) {
                    while (!thrown) std::this_thread::yield();
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    nested_done += static_cast<int>(e - b);
                });
            });
        });
    }), std::runtime_error);
    ASSERT_TRUE(child_started.load()) << "no worker took a chunk";
    EXPECT_LT(nested_done.load(), nested_items / 2);
}

// The existing chunk test lets the scheduler decide, and on a small machine the owner usually runs
// every chunk itself. Here the owner's chunk holds on until a worker has taken the other one.
TEST(SessionTest, RunInAChunkOnAWorkerOpensAChildSession) {
    backend be{with_threads(2)};
    std::atomic<bool> worker_in{false};
    be.run([&](session& s) {
        tessera::parallel_for(s, 2, 1, [&](std::size_t, std::size_t) {
            be.run([&](session& inner) {
                if (&inner == &s) {
                    for (int i = 0; i < 5000 && !worker_in; ++i)
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    return;
                }
                worker_in = true;
                auto t = tessera::full<float>(inner, {16}, 1.0f);  // its own workspace
                EXPECT_EQ(t.values()[0], 1.0f);
            });
        });
    });
    ASSERT_TRUE(worker_in.load()) << "no worker took a chunk";
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.child_sessions, 1u);
    EXPECT_EQ(st.arena_entries, 1u);
    EXPECT_EQ(st.nested_reuses, 1u);
    EXPECT_EQ(st.sessions, 2u);
    EXPECT_EQ(st.open_sessions, 0u);
}

TEST(SessionTest, ReturnsValuesMoveOnlyResultsAndVoid) {
    backend be{with_threads(2)};
    EXPECT_EQ(be.run([](session&) { return 42; }), 42);
    std::unique_ptr<int> p = be.run([](session&) { return std::make_unique<int>(7); });
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(*p, 7);
    be.run([](session&) {});
    backend one{with_threads(1)};
    EXPECT_EQ(*one.run([](session&) { return std::make_unique<int>(9); }), 9);
}

TEST(SessionTest, SessionReportsItsBackendsThreadCount) {
    backend be{with_threads(3)};
    EXPECT_EQ(be.run([](session& s) { return s.threads(); }), 3);
}

class SessionThreadsTest : public ::testing::TestWithParam<int> {};

TEST_P(SessionThreadsTest, NestedRunOnTheSameBackendReusesTheSession) {
    backend be{with_threads(GetParam())};
    be.run([&](session& outer) {
        be.run([&](session& inner) {
            EXPECT_EQ(&inner, &outer);
            be.run([&](session& innermost) { EXPECT_EQ(&innermost, &outer); });
        });
    });
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.sessions, 1u);
    EXPECT_EQ(st.nested_reuses, 2u);
    EXPECT_EQ(st.arena_entries + st.inline_entries, 1u);
}

TEST_P(SessionThreadsTest, RunOnAnotherBackendInsideASessionWorks) {
    backend a{with_threads(GetParam())};
    backend b{with_threads(2)};
    const int result = a.run([&](session& sa) {
        // Inside a's session, b's session opens inline and serial on this thread: entering b's
        // arena while holding a's slot is how two backends calling into each other deadlock.
        return b.run([&](session& sb) {
            EXPECT_NE(&sa, &sb);
            EXPECT_EQ(sb.threads(), 1);
            // Back to the first backend from inside the second: a fresh session, not a reuse,
            // because this thread's innermost session belongs to b.
            return a.run([&](session& sa2) {
                EXPECT_NE(&sa2, &sa);
                EXPECT_EQ(sa2.threads(), 1);
                return 5;
            });
        });
    });
    EXPECT_EQ(result, 5);
    EXPECT_EQ(b.stats().arena_entries, 0u);
    EXPECT_EQ(b.stats().inline_entries, 1u);
    EXPECT_EQ(a.stats().sessions, 2u);
    EXPECT_EQ(a.stats().arena_entries, GetParam() > 1 ? 1u : 0u);
    EXPECT_EQ(a.stats().inline_entries, GetParam() > 1 ? 1u : 2u);
    EXPECT_EQ(a.stats().nested_reuses, 0u);
    EXPECT_EQ(a.stats().open_sessions, 0u);
    EXPECT_EQ(b.stats().open_sessions, 0u);
}

// Inside a parallel chunk, run opens a child session when the chunk runs on another thread and
// reuses the session when it runs on the session's own thread. Which thread takes which chunk is
// up to the scheduler, so the test records it and pins the counts against the record.
TEST_P(SessionThreadsTest, RunInsideAParallelChunkOpensAChildSessionOnWorkers) {
    const int threads = GetParam();
    backend be{with_threads(threads)};
    std::atomic<int> on_owner{0};
    std::atomic<int> on_worker{0};
    constexpr int items = 64;
    be.run([&](session& s) {
        tessera::parallel_for(s, items, 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) {
                be.run([&](session& inner) {
                    ASSERT_TRUE(inner.on_owner_thread());
                    if (&inner == &s) {
                        ++on_owner;
                    } else {
                        ++on_worker;
                        // A child session has its own workspace: allocating works on this thread.
                        auto t = tessera::full<float>(inner, {16}, 1.0f);
                        EXPECT_EQ(t.values()[3], 1.0f);
                    }
                });
            }
        });
    });
    const tessera::stats st = be.stats();
    EXPECT_EQ(on_owner + on_worker, items);
    EXPECT_EQ(st.child_sessions, static_cast<std::uint64_t>(on_worker.load()));
    EXPECT_EQ(st.nested_reuses, static_cast<std::uint64_t>(on_owner.load()));
    EXPECT_EQ(st.sessions, 1u + on_worker.load());
    EXPECT_EQ(st.open_sessions, 0u);
    if (threads == 1) {
        EXPECT_EQ(on_worker.load(), 0);
        EXPECT_EQ(st.parallel_dispatches, 0u);
    } else {
        EXPECT_EQ(st.parallel_dispatches, 1u);
    }
}

TEST_P(SessionThreadsTest, ExceptionPropagatesAndTheBackendStaysUsable) {
    backend be{with_threads(GetParam())};
    try {
        be.run([](session& s) {
            auto t = tessera::full<float>(s, {32}, 1.0f);
            throw std::runtime_error("boom");
        });
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "boom");
    }
    tessera::stats st = be.stats();
    EXPECT_EQ(st.open_sessions, 0u);
    EXPECT_EQ(st.sessions, 1u);
    // The thread marker was cleared: the next run opens a new session instead of "reusing" the
    // dead one, and the block freed during unwinding is reused.
    const float v = be.run([](session& s) {
        auto t = tessera::full<float>(s, {32}, 2.0f);
        return t.values()[0];
    });
    EXPECT_EQ(v, 2.0f);
    st = be.stats();
    EXPECT_EQ(st.sessions, 2u);
    EXPECT_EQ(st.nested_reuses, 0u);
    EXPECT_EQ(st.pool_misses, 1u);
    EXPECT_EQ(st.pool_hits, 1u);
}

TEST_P(SessionThreadsTest, ExceptionFromANestedRunPropagatesThroughTheOuterSession) {
    backend be{with_threads(GetParam())};
    EXPECT_THROW(be.run([&](session&) { be.run([](session&) { throw std::logic_error("inner"); }); }),
                 std::logic_error);
    EXPECT_EQ(be.stats().open_sessions, 0u);
    EXPECT_EQ(be.run([](session&) { return 1; }), 1);
    EXPECT_EQ(be.stats().sessions, 2u);
}

TEST_P(SessionThreadsTest, ExceptionFromAParallelChunkPropagatesOnce) {
    backend be{with_threads(GetParam())};
    std::atomic<int> thrown{0};
    try {
        be.run([&](session& s) {
            tessera::parallel_for(s, 1000, 1, [&](std::size_t begin, std::size_t end) {
                if (begin <= 500 && 500 < end) {
                    ++thrown;
                    throw std::runtime_error("chunk");
                }
            });
        });
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "chunk");
    }
    EXPECT_EQ(thrown.load(), 1);
    EXPECT_EQ(be.stats().open_sessions, 0u);
    EXPECT_EQ(be.run([](session&) { return 3; }), 3);
}

TEST_P(SessionThreadsTest, ManyApplicationThreadsShareOneBackend) {
    constexpr int app_threads = 8;
    constexpr int sessions_each = 1000;
    backend be{with_threads(GetParam()).with_session_slots(2)};
    std::atomic<int> wrong{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < app_threads; ++t) {
        pool.emplace_back([&, t] {
            for (int i = 0; i < sessions_each; ++i) {
                const float x = static_cast<float>(t * sessions_each + i);
                const float got = be.run([&](session& s) {
                    auto a = tessera::full<float>(s, {8}, x);
                    auto b = tessera::full<float>(s, {8}, 1.0f);
                    auto c = tessera::add(s, a, b);
                    return c.values()[7];
                });
                if (got != x + 1.0f) ++wrong;
            }
        });
    }
    for (auto& th : pool) th.join();
    EXPECT_EQ(wrong.load(), 0);
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.sessions, static_cast<std::uint64_t>(app_threads * sessions_each));
    EXPECT_EQ(st.arena_entries + st.inline_entries, st.sessions);
    EXPECT_EQ(st.open_sessions, 0u);
    // Every block came back: each 8-float tensor takes a 64-byte block, and every block the pool
    // ever made is free again.
    EXPECT_EQ(st.pool_hits + st.pool_misses, 3u * st.sessions);
    EXPECT_EQ(st.bytes_retained, 64u * st.pool_misses);
}

INSTANTIATE_TEST_SUITE_P(Threads, SessionThreadsTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

TEST(SessionDeathTest, UsingASessionFromAnotherThreadIsCaught) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            backend be{with_threads(2)};
            be.run([](session& s) {
                std::thread other([&] { auto t = tessera::full<float>(s, {4}, 1.0f); });
                other.join();
            });
        },
        "session used from a thread other than the one that opened it");
}

TEST(SessionDeathTest, DestroyingABackendWithAnOpenSessionIsCaught) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            auto be = std::make_unique<backend>(with_threads(1));
            be->run([&](session&) { be.reset(); });
        },
        "backend destroyed while one of its sessions is open");
}

// A session is isolated at its arena entry: while code in it waits inside oneTBB (here the
// application's own parallel_for), its thread runs no unrelated task. The one application slot
// is held by a's session; b's entry, finding no slot, waits in the arena as a task. a's own item
// returns once the worker has taken the other one, and a's thread then waits for it; the worker's
// item keeps it busy until b's session has run or a second has passed. Without isolation a's
// waiting thread would take b's entry and run b's session on its own stack.
TEST(SessionTest, AWaitInsideASessionRunsNoOtherSessionsEntry) {
    tessera::test::watchdog guard("AWaitInsideASessionRunsNoOtherSessionsEntry", 60s);
    backend be{with_threads(2).with_session_slots(1)};
    std::atomic<bool> a_waiting{false}, worker_started{false}, b_ran{false};
    std::atomic<std::thread::id> b_ran_on{};
    // Atomic: the worker reads it through oneTBB, whose hand-overs ThreadSanitizer cannot see.
    std::atomic<std::thread::id> a_thread{};
    std::thread b([&] {
        while (!a_waiting.load()) std::this_thread::yield();
        std::this_thread::sleep_for(20ms);  // a's thread is waiting in its parallel_for by now
        be.run([&](session&) {
            b_ran_on.store(std::this_thread::get_id());
            b_ran.store(true);
        });
    });
    be.run([&](session&) {
        a_thread.store(std::this_thread::get_id());
        tbb::parallel_for(
            tbb::blocked_range<int>(0, 2, 1),
            [&](const tbb::blocked_range<int>&) {
                const auto until = std::chrono::steady_clock::now() + 1s;
                if (std::this_thread::get_id() == a_thread.load()) {
                    while (!worker_started.load() && std::chrono::steady_clock::now() < until)
                        std::this_thread::yield();
                    a_waiting.store(true);
                    return;
                }
                worker_started.store(true);
                while (!b_ran.load() && std::chrono::steady_clock::now() < until)
                    std::this_thread::yield();
            },
            tbb::simple_partitioner{});
    });
    b.join();
    EXPECT_TRUE(worker_started.load()) << "the worker never took an item: nothing was tested";
    EXPECT_TRUE(b_ran.load());
    EXPECT_NE(b_ran_on.load(), a_thread.load()) << "b's session ran on a's thread while a waited";
}

}  // namespace
