// tessera/arena.hpp and the placement options: a backend attached to the application's oneTBB
// arena runs its sessions and its ops' chunks there and enters no other arena; placement options
// map onto the arena's constraints; every bad option is a config_error naming it.
// tbb::info::core_types and the constraints' core type and threads per core, to compute what a
// placed backend should report independently of the library (which sets the arena's own fields).
#define TBB_PREVIEW_TASK_ARENA_CONSTRAINTS_EXTENSION 1

#include "support/messages.hpp"
#include "support/watchdog.hpp"

// The runtime's ThreadSanitizer edges (empty without TSan), reused for the hand-overs to oneTBB
// these tests make themselves: libtbb is not built with TSan, which cannot see that a task runs
// after the code that spawned it.
#include "../src/fork_join.hpp"

#include <tessera/arena.hpp>
#include <tessera/tessera.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tessera::backend;
using tessera::backend_options;
using tessera::config_error;
using tessera::session;
using tessera::tensor;

// oneTBB has no public "which arena does this thread run in". A handle made with
// task_arena(attach) refers to that arena, and its (protected) my_arena member says which one:
// tests only, where a wrong arena must be caught exactly.
struct arena_peek : tbb::task_arena {
    using tbb::task_arena::my_arena;
};

const void* arena_of(tbb::task_arena& arena) {
    return (arena.*(&arena_peek::my_arena)).load();
}

const void* current_arena() {
    tbb::task_arena here{tbb::task_arena::attach{}};
    return here.is_active() ? arena_of(here) : nullptr;
}

// Doubles 4096 floats in a session with a parallel map whose every call checks the thread's arena
// against `expected`; counts the calls that ran elsewhere into `foreign` and returns true when
// every result is exact.
bool double_in(session& s, const void* expected, std::atomic<int>& foreign) {
    const tensor<float> a = tessera::arange<float>(s, 0, 4096);
    const tensor<float> out = tessera::map(
        s,
        [&](float x) {
            if (current_arena() != expected) foreign.fetch_add(1, std::memory_order_relaxed);
            return 2 * x;
        },
        a);
    for (std::size_t i = 0; i < 4096; ++i)
        if (out.data()[i] != 2 * static_cast<float>(i)) return false;
    return true;
}

// The application's pattern: a parallel_for of its own arena over 64 tasks, each calling run on a
// backend attached to that arena (two of them, taken in turn: two caches over one pool) and doing
// a parallel op. Nothing may run in another arena (the break this guards against: an attach that
// quietly builds a new arena), every result is exact, and each task's session is counted as its
// backend's attached entry.
TEST(AttachedBackendTest, TasksOfTheApplicationsArenaRunThereAndEnterNoOther) {
    tessera::test::watchdog guard("TasksOfTheApplicationsArenaRunThereAndEnterNoOther", 120s);
    for (int round = 0; round < 20; ++round) {
        tbb::task_arena app(2);
        app.initialize();
        const void* const app_id = arena_of(app);
        backend be{tessera::attached_to(app).with_grain(256)};
        backend other{tessera::attached_to(app).with_grain(256)};
        ASSERT_TRUE(be.attached());
        ASSERT_EQ(be.threads(), 2);
        std::atomic<int> foreign{0}, wrong{0};
        {
            tessera::detail::fork_join edges;
            app.execute([&] {
                const auto tasks = [&](const tbb::blocked_range<int>& r) {
                    tessera::detail::fork_join::piece in_task(edges);
                    for (int i = r.begin(); i < r.end(); ++i) {
                        backend& mine = i % 2 == 0 ? be : other;
                        if (!mine.run([&](session& s) { return double_in(s, app_id, foreign); }))
                            wrong.fetch_add(1);
                    }
                };
                edges.fork();  // last, after the body is made (oneTBB's copies of it: tsan.supp)
                tbb::parallel_for(tbb::blocked_range<int>(0, 64, 1), tasks);
            });
        }
        ASSERT_EQ(foreign.load(), 0) << "round " << round << ": chunks ran outside the arena";
        ASSERT_EQ(wrong.load(), 0) << "round " << round;
        for (const backend* b : {&be, &other}) {
            const tessera::stats st = b->stats();
            ASSERT_EQ(st.attached_entries, 32u) << "round " << round;
            ASSERT_EQ(st.arena_entries, 0u);
            ASSERT_EQ(st.inline_entries, 0u);
            ASSERT_EQ(st.sessions, 32u);
            ASSERT_EQ(st.parallel_dispatches, 32u);
            ASSERT_EQ(st.open_sessions, 0u);
        }
    }
}

// Built inside the application's arena, attached_to_current_arena takes that arena; a session
// opened from a thread outside it (here the test's main thread) enters it.
TEST(AttachedBackendTest, TheCurrentArenaIsTheConstructingThreadsArena) {
    tbb::task_arena app(2);
    app.initialize();
    std::unique_ptr<backend> be;
    app.execute([&] { be = std::make_unique<backend>(tessera::attached_to_current_arena()); });
    EXPECT_TRUE(be->attached());
    EXPECT_EQ(be->threads(), app.max_concurrency());
    EXPECT_EQ(be->session_slots(), 0);
    std::atomic<int> foreign{0};
    const bool exact = be->run([&](session& s) {
        EXPECT_EQ(s.threads(), 2);
        return double_in(s, arena_of(app), foreign);
    });
    EXPECT_TRUE(exact);
    EXPECT_EQ(foreign.load(), 0);
    const tessera::stats st = be->stats();
    EXPECT_EQ(st.attached_entries, 1u);
    EXPECT_EQ(st.arena_entries, 0u);
    // options() rebuild an equal backend, here on a thread outside the arena: attached to the same
    // arena, the thread count left to it.
    const backend_options o = be->options();
    EXPECT_TRUE(o.attachment.attached);
    EXPECT_FALSE(o.threads.has_value());
    EXPECT_EQ(o.session_slots, 1);
    backend again{o};
    EXPECT_TRUE(again.run([&](session& s) { return double_in(s, arena_of(app), foreign); }));
    EXPECT_EQ(foreign.load(), 0);
    EXPECT_EQ(again.stats().attached_entries, 1u);
}

// oneTBB's implicit arena (the one a thread gets by calling oneTBB outside any task_arena),
// attached from the main thread: a parallel product there indexes its per-thread pack buffers by
// the arena's thread index, which must stay below the backend's arena_slots (a failed check
// aborts).
TEST(AttachedBackendTest, AParallelProductRunsInTheImplicitArena) {
    tbb::parallel_for(0, 2, [](int) {});  // this thread now runs in the implicit arena
    backend be{tessera::attached_to_current_arena().with_grain(1024)};
    EXPECT_EQ(be.threads(), tbb::this_task_arena::max_concurrency());
    if (be.threads() == 1) GTEST_SKIP() << "one CPU: the product cannot fan out";
    tessera::stats matmul_only;
    const auto product = [&](session& s) {
        // Entries 0..3: every sum of products is a small integer, exact in float.
        tensor<float> a = tessera::empty<float>(s, {256, 256});
        for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(i % 4);
        const tessera::stats before = be.stats();
        const tensor<float> c = tessera::matmul(s, a, a);
        matmul_only = be.stats() - before;
        return tessera::sum(s, c).data()[0];
    };
    const float attached = be.run(product);
    EXPECT_EQ(be.stats().attached_entries, 1u);
    EXPECT_EQ(matmul_only.parallel_dispatches, 1u) << "the product itself must fan out";
    backend serial{backend_options{}.with_threads(1)};
    EXPECT_EQ(attached, serial.run([&](session& s) {
        tensor<float> a = tessera::empty<float>(s, {256, 256});
        for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(i % 4);
        return tessera::sum(s, tessera::matmul(s, a, a)).data()[0];
    }));
}

TEST(AttachedBackendTest, AttachingFromOutsideAnyArenaIsAConfigError) {
    std::string what;
    // A fresh thread has never run in a oneTBB arena.
    std::thread fresh([&] {
        what = tessera::test::message_of<config_error>(
            [] { backend be{tessera::attached_to_current_arena()}; });
    });
    fresh.join();
    EXPECT_NE(
        what.find("attached_to_current_arena: the constructing thread runs in no oneTBB arena"),
        std::string::npos)
        << what;
}

TEST(AttachedBackendTest, OptionsThatBelongToTheArenaAreConfigErrors) {
    tbb::task_arena app(2);
    const auto error = [&](const backend_options& o) {
        return tessera::test::message_of<config_error>([&] { backend be{o}; });
    };
    EXPECT_EQ(error(tessera::attached_to(app).with_threads(4)),
              "backend: threads cannot be set for a backend attached to the application's arena "
              "(it has the arena's concurrency), got 4");
    EXPECT_EQ(error(tessera::attached_to(app).with_session_slots(2)),
              "backend: session_slots cannot be set for a backend attached to the application's "
              "arena (the arena has the slots), got 2");
    EXPECT_EQ(error(tessera::attached_to(app).with_numa_node(0)),
              "backend: numa_node places an arena of the backend's own; a backend attached to the "
              "application's arena runs where that arena runs");
    EXPECT_EQ(error(tessera::attached_to(app).with_threads_per_core(1)).substr(0, 33),
              "backend: threads_per_core places ");
    backend_options half;
    half.attachment.arena = tessera::attached_to(app).attachment.arena;
    EXPECT_EQ(error(half),
              "backend: attachment.arena is set but attachment.attached is not; make the options "
              "with tessera::attached_to");
}

// Inside a session (or a parallel op) of an owned backend the thread's arena is that backend's
// own, which attached_to_current_arena must not quietly take.
TEST(AttachedBackendTest, AttachingToTheCurrentArenaInsideASessionIsAConfigError) {
    backend owned{backend_options{}.with_threads(2)};
    const std::string what = owned.run([](session&) {
        return tessera::test::message_of<config_error>(
            [] { backend be{tessera::attached_to_current_arena()}; });
    });
    EXPECT_EQ(what.substr(0, 75),
              "backend: attached_to_current_arena inside a tessera session or parallel op:");
}

// Nesting: an attached and an owned backend inside each other in both orders, and two attached
// backends on one arena. The inner run opens a serial session inline (it never waits for the
// other arena's slot while holding one), so nothing deadlocks and every count is exact.
TEST(AttachedBackendTest, NestsWithOwnedAndAttachedBackendsInBothOrders) {
    tessera::test::watchdog guard("NestsWithOwnedAndAttachedBackendsInBothOrders", 60s);
    tbb::task_arena app(2);
    app.initialize();
    backend attached{tessera::attached_to(app).with_grain(256)};
    backend also_attached{tessera::attached_to(app).with_grain(256)};
    backend owned{tessera::backend_options{}.with_threads(2).with_grain(256)};
    std::atomic<int> foreign{0};
    const auto work = [&](session& s) {
        const tensor<float> a = tessera::arange<float>(s, 0, 4096);
        return tessera::sum(s, a).data()[0];
    };
    const float expected = 4095.0f * 4096.0f / 2;
    EXPECT_EQ(attached.run([&](session&) { return owned.run(work); }), expected);
    EXPECT_EQ(owned.run([&](session&) { return attached.run(work); }), expected);
    EXPECT_EQ(attached.run([&](session&) { return also_attached.run(work); }), expected);
    // From a task of the application's arena: the owned backend is entered from there.
    const void* const app_id = arena_of(app);
    {
        tessera::detail::fork_join edges;
        app.execute([&] {
            const auto tasks = [&](const tbb::blocked_range<int>& r) {
                tessera::detail::fork_join::piece in_task(edges);
                for (int i = r.begin(); i < r.end(); ++i) {
                    attached.run([&](session& s) { double_in(s, app_id, foreign); });
                    owned.run(work);
                }
            };
            edges.fork();  // last, after the body is made (oneTBB's copies of it: tsan.supp)
            tbb::parallel_for(tbb::blocked_range<int>(0, 8, 1), tasks);
        });
    }
    EXPECT_EQ(foreign.load(), 0);
    const tessera::stats a = attached.stats(), b = also_attached.stats(), o = owned.stats();
    EXPECT_EQ(a.attached_entries, 2u + 8u);  // its own two top-level runs and the eight tasks
    EXPECT_EQ(a.inline_entries, 1u);         // inside the owned backend's session
    EXPECT_EQ(a.arena_entries, 0u);
    EXPECT_EQ(b.inline_entries, 1u);  // inside the other attached backend's session
    EXPECT_EQ(b.attached_entries, 0u);
    EXPECT_EQ(o.arena_entries, 1u + 8u);  // its own top-level run and the eight tasks
    EXPECT_EQ(o.inline_entries, 1u);      // inside the attached backend's session
}

// The CPUs of a NUMA node, from Linux's sysfs (cpulist: "0-3,8-11"); empty when it cannot be read.
std::set<int> node_cpus(int node) {
    std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    std::string list;
    std::set<int> cpus;
    if (!std::getline(in, list)) return cpus;
    std::stringstream ranges(list);
    for (std::string range; std::getline(ranges, range, ',');) {
        const auto dash = range.find('-');
        const int first = std::stoi(range.substr(0, dash));
        const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
        for (int c = first; c <= last; ++c) cpus.insert(c);
    }
    return cpus;
}

// True when the calling thread may run only on CPUs in `allowed`.
bool affinity_within(const std::set<int>& allowed) {
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) return false;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &mask) && allowed.count(c) == 0) return false;
    return true;
}

// oneTBB loads its topology support (libtbbbind) with dlopen(RTLD_DEEPBIND), which the
// sanitizer runtimes refuse by ending the process; placement cannot be tested under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool under_sanitizer = true;
#else
constexpr bool under_sanitizer = false;
#endif

class PlacementTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (under_sanitizer)
            GTEST_SKIP() << "oneTBB's libtbbbind cannot be loaded under sanitizers";
    }
};

// oneTBB reports one node with the id -1 when it cannot load its topology support (libtbbbind).
bool topology_supported() {
    const std::vector<int> nodes = tbb::info::numa_nodes();
    return !(nodes.size() == 1 && nodes.front() == tbb::task_arena::automatic);
}

// A backend placed on a NUMA node reports the node's concurrency, and every thread that runs its
// ops (the session's and the workers') may run only on the node's CPUs; also with a thread count
// below the node's, where the arena still binds the one session thread.
TEST_F(PlacementTest, ANodesBackendRunsOnTheNodesCpus) {
    if (!topology_supported()) GTEST_SKIP() << "oneTBB could not load its topology support";
    for (const int node : tbb::info::numa_nodes()) {
        SCOPED_TRACE("node " + std::to_string(node));
        const std::set<int> cpus = node_cpus(node);
        if (cpus.empty()) GTEST_SKIP() << "no /sys/devices/system/node on this machine";
        const int concurrency = tbb::info::default_concurrency(node);
        for (const std::optional<int> threads : {std::optional<int>{}, std::optional<int>{1}}) {
            backend_options o = backend_options{}.with_numa_node(node).with_grain(64);
            o.threads = threads;
            backend be{o};
            EXPECT_EQ(be.threads(), threads.value_or(concurrency));
            EXPECT_EQ(be.options().numa_node, node);
            std::atomic<int> outside{0};
            be.run([&](session& s) {
                if (!affinity_within(cpus)) outside.fetch_add(1);
                const tensor<float> a = tessera::arange<float>(s, 0, 4096);
                const tensor<float> b = tessera::map(
                    s,
                    [&](float x) {
                        if (!affinity_within(cpus)) outside.fetch_add(1);
                        return x + 1;
                    },
                    a);
                EXPECT_EQ(b.data()[4095], 4096.0f);
            });
            EXPECT_EQ(outside.load(), 0);
            const tessera::stats st = be.stats();
            EXPECT_EQ(st.arena_entries, 1u)
                << "a placed backend enters its arena, even at 1 thread";
            EXPECT_EQ(st.parallel_dispatches, be.threads() == 1 ? 0u : 1u);
        }
    }
}

TEST_F(PlacementTest, BadOptionsAreConfigErrorsNamingTheOption) {
    const auto error = [](const backend_options& o) {
        return tessera::test::message_of<config_error>([&] { backend be{o}; });
    };
    EXPECT_EQ(error(backend_options{}.with_threads(0)),
              "backend: threads must be between 1 and 4096, got 0");
    EXPECT_EQ(error(backend_options{}.with_threads_per_core(0)),
              "backend: threads_per_core must be at least 1, got 0");
    const std::vector<int> nodes = tbb::info::numa_nodes();
    const int missing_node = *std::max_element(nodes.begin(), nodes.end()) + 1;
    if (!topology_supported()) {
        // Without it oneTBB would ignore the placement; tessera says so instead.
        EXPECT_EQ(error(backend_options{}.with_numa_node(0)).substr(0, 71),
                  "backend: numa_node needs oneTBB's CPU-topology support (libtbbbind, with");
        return;
    }
    EXPECT_EQ(error(backend_options{}.with_numa_node(missing_node)).substr(0, 40),
              "backend: numa_node " + std::to_string(missing_node) + " does not exist; thi");
    EXPECT_EQ(error(backend_options{}.with_core_type(1000)).substr(0, 38),
              "backend: core_type 1000 does not exist");
    EXPECT_EQ(error(backend_options{}.with_core_type(-1)).substr(0, 36),
              "backend: core_type -1 does not exist");
}

// threads_per_core and core_type reach the arena: the backend's default thread count is what
// oneTBB computes for the same constraints, and the options round-trip. (On a machine with one
// hyper-thread per core and one core type the counts equal the CPU count.)
TEST_F(PlacementTest, ThreadsPerCoreAndCoreTypeReachTheArena) {
    if (!topology_supported()) GTEST_SKIP() << "oneTBB could not load its topology support";
    backend one_per_core{backend_options{}.with_threads_per_core(1)};
    EXPECT_EQ(
        one_per_core.threads(),
        tbb::info::default_concurrency(tbb::task_arena::constraints{}.set_max_threads_per_core(1)));
    EXPECT_EQ(one_per_core.options().threads_per_core, 1);
    EXPECT_EQ(one_per_core.run([](session& s) { return s.threads(); }), one_per_core.threads());
    for (const int type : tbb::info::core_types()) {
        if (type < 0) continue;  // no core types reported
        backend typed{backend_options{}.with_core_type(type)};
        EXPECT_EQ(typed.threads(), tbb::info::default_concurrency(
                                       tbb::task_arena::constraints{}.set_core_type(type)));
        EXPECT_EQ(typed.options().core_type, type);
    }
}

TEST_F(PlacementTest, OneBackendPerNumaNode) {
    if (!topology_supported()) {
        EXPECT_EQ(tessera::test::message_of<config_error>([] {
                      tessera::backends_per_numa_node();
                  }).substr(0, 55),
                  "backends_per_numa_node: placing backends on nodes needs");
        return;
    }
    const std::vector<int> nodes = tbb::info::numa_nodes();
    const auto backends = tessera::backends_per_numa_node(backend_options{}.with_grain(1024));
    ASSERT_EQ(backends.size(), nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        EXPECT_EQ(backends[i]->options().numa_node, nodes[i]);
        EXPECT_EQ(backends[i]->threads(), tbb::info::default_concurrency(nodes[i]));
        EXPECT_EQ(backends[i]->options().grain, 1024u);
        const int ten = backends[i]->run(
            [](session& s) { return tessera::sum(s, tessera::full<int>(s, {10}, 1)).data()[0]; });
        EXPECT_EQ(ten, 10);
    }
    tbb::task_arena app(2);
    EXPECT_EQ(tessera::test::message_of<config_error>(
                  [&] { tessera::backends_per_numa_node(tessera::attached_to(app)); }),
              "backends_per_numa_node: the options attach to the application's arena; a backend "
              "per node owns its arena");
}

}  // namespace
