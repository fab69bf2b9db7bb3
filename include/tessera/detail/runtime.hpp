// tessera/detail/runtime.hpp - the compiled runtime: every call into oneTBB, out of line in
// src/runtime.cpp behind non-template functions, so that no public header includes oneTBB. The
// headers keep the paths that involve no other thread inline (a nested reuse, the one-thread
// backend, a range at or below the grain); only entering an arena and fanning out come here, and
// those cost microseconds of synchronisation next to which one indirect call is nothing.
#pragma once

#include <tessera/detail/function_ref.hpp>

#include <bit>
#include <cstddef>

namespace tessera {
class session;
}

namespace tessera::detail {

class backend_core;

/// How a session was opened: by entering the backend's own arena, in the application's arena (an
/// attached backend), inline on a one-thread backend, as a child session inside a parallel chunk
/// of its own backend, or inline and serial inside the work of another backend (see backend::run).
enum class entry_kind { arena, attached, inline_thread, child, nested_serial };

/// Enters `core`'s arena with one task_arena::execute and opens a session there, isolated, so that
/// the thread picks up no unrelated task while code in the session waits; runs `body` in it. For
/// an attached backend the arena is the application's: on a thread already in it, oneTBB's execute
/// calls the session directly (no slot taken, no other arena entered).
/// Rethrows what `body` throws. (A child session needs no call here: it opens inside a parallel
/// chunk, which runs in its fan-out's isolated region already.)
void run_in_arena(backend_core& core, function_ref<void(session&)> body);

/// Calls `body(begin, end)` over [0, n) with tbb::parallel_for (ranges halved while they hold more
/// than `grain` items), each chunk marked as `core`'s and given its ThreadSanitizer edges. The one
/// place tessera's ops fan out; callers decide and count the dispatch. Isolated: while the calling
/// thread waits for the chunks it runs only tasks of this fan-out, never another session's work.
/// Rethrows the first exception of a chunk after cancelling the rest.
void fan_out(const backend_core& core, std::size_t n, std::size_t grain,
             function_ref<void(std::size_t, std::size_t)> body);

/// Where the pairwise reduction tree splits a node of `n` > 1 leaves: halves for a power of two,
/// else the largest power of two first. This is the tree a binary counter builds when leaves
/// arrive one by one (perfect subtrees for the set bits of n, joined right to left), so a group of
/// outputs can also be reduced streaming, leaf after leaf (see detail/reduce_leaves.hpp).
constexpr std::size_t tree_split(std::size_t n) noexcept {
    const std::size_t p = std::bit_floor(n);
    return p == n ? n / 2 : p;
}

/// Reduces leaves [0, n) (n >= 1) with the pairwise tree that splits every node at tree_split: subtrees of at most `grain` leaves are reduced by
/// `range(value, lo, hi)` into `value`, on whichever threads of `core`'s arena, and the nodes
/// above them are joined by `join(left, right)` (left = join(left, right)) in the tree's shape,
/// so the result, written to `result`, is bit for bit that of the serial tree whatever the
/// threads. Values are trivially copyable objects of at most max_tree_value bytes.
inline constexpr std::size_t max_tree_value = 512;
void tree_reduce(const backend_core& core, std::size_t n, std::size_t grain, void* result,
                 function_ref<void(void*, std::size_t, std::size_t)> range,
                 function_ref<void(void*, const void*)> join);

/// Returns the calling thread's index in the arena it runs in (0 to the arena's concurrency - 1),
/// or a negative value outside any arena.
int arena_thread_index() noexcept;

}  // namespace tessera::detail
