// The compiled runtime (tessera/detail/runtime.hpp): every place tessera hands work to oneTBB.
// Each hand-over carries the fork and join edges that ThreadSanitizer cannot see through oneTBB
// (fork_join.hpp), and every piece of parallel work is marked as a chunk of its backend, so
// that backend::run inside it opens a child session rather than entering the arena again.
#include "arena.hpp"

#include "fork_join.hpp"
#include <tessera/detail/runtime.hpp>
#include <tessera/detail/thread_state.hpp>
#include <tessera/session.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_invoke.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <cstddef>

namespace tessera::detail {

void run_in_arena(backend_core& core, function_ref<void(session&)> body) {
    // With every slot taken, oneTBB may run the entry on an arena thread: the fork/join edges for
    // ThreadSanitizer. They are the entry's first member, so that thread names them from the
    // entry's address without reading anything first. The session is isolated so that a oneTBB
    // wait in the caller's own code (fan_out and tree_reduce isolate their own) runs no unrelated
    // task on this thread: not another session's chunk, not another thread's arena entry.
    struct arena_entry {
        fork_join edges;
        backend_core& core;
        entry_kind kind;
        function_ref<void(session&)> body;
        void operator()() {
            fork_join::piece in_arena(edges);
            tbb::this_task_arena::isolate([this] { session_access::open(core, kind, body); });
        }
    } entry{{}, core, core.settings().attached ? entry_kind::attached : entry_kind::arena, body};
    entry.edges.fork();
    core.arena().arena.execute(entry);
}

void fan_out(const backend_core& core, std::size_t n, std::size_t grain,
             function_ref<void(std::size_t, std::size_t)> body) {
    fork_join edges;
    const auto chunk = [&](const tbb::blocked_range<std::size_t>& r) {
        fork_join::piece in_piece(edges);
        chunk_scope in_chunk(core);
        body(r.begin(), r.end());
    };
    edges.fork();
    // Isolated: while this thread waits for the chunks it runs only tasks of this fan-out (and
    // of what they start), never another session's or op's work.
    tbb::this_task_arena::isolate(
        [&] { tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, grain), chunk); });
}

namespace {

// The reduction tree over [0, n): what every node reads, written before the first hand-over.
struct reduction_tree {
    const backend_core& core;
    std::size_t grain;
    function_ref<void(void*, std::size_t, std::size_t)> range;
    function_ref<void(void*, const void*)> join;
    tbb::task_group_context& context;

    // Node [lo, hi): a subtree of at most `grain` leaves is one piece of work (a chunk of the
    // backend); above that the two children run as parallel tasks, the right one into a buffer on
    // this frame, and are joined here, in the tree's shape.
    void run(void* value, std::size_t lo, std::size_t hi) const;
};

// A child of a node, handed to oneTBB. Its fork/join edges come first, so a thread that steals it
// names them from its address before reading anything the parent wrote; the parent forks just
// before the hand-over and its destructor, after parallel_invoke returns, is the join: the
// children's results happen before the parent joins them. Siblings stay unordered with each other,
// so a race between two subtrees is still reported.
struct tree_child {
    mutable fork_join edges;
    const reduction_tree& tree;
    void* value;
    std::size_t lo, hi;

    void operator()() const {
        fork_join::piece in_piece(edges);
        tree.run(value, lo, hi);
    }
};

void reduction_tree::run(void* value, std::size_t lo, std::size_t hi) const {
    if (hi - lo <= grain) {
        chunk_scope in_chunk(core);
        range(value, lo, hi);
        return;
    }
    const std::size_t mid = lo + tree_split(hi - lo);
    alignas(std::max_align_t) unsigned char right[max_tree_value];
    {
        const tree_child left_child{{}, *this, value, lo, mid};
        const tree_child right_child{{}, *this, right, mid, hi};
        left_child.edges.fork();
        right_child.edges.fork();
        tbb::parallel_invoke(left_child, right_child, context);
    }
    join(value, right);
}

}  // namespace

void tree_reduce(const backend_core& core, std::size_t n, std::size_t grain, void* result,
                 function_ref<void(void*, std::size_t, std::size_t)> range,
                 function_ref<void(void*, const void*)> join) {
    // One context for the whole tree (parallel_invoke would otherwise make one per node).
    tbb::task_group_context context;
    const reduction_tree tree{core, grain < 1 ? 1 : grain, range, join, context};
    // Isolated as fan_out is: a thread waiting at a node runs only tasks of this tree.
    tbb::this_task_arena::isolate([&] { tree.run(result, 0, n); });
}

int arena_thread_index() noexcept { return tbb::this_task_arena::current_thread_index(); }

}  // namespace tessera::detail
