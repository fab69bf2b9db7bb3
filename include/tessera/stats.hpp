// tessera/stats.hpp - tessera::stats, the counter snapshot returned by backend::stats().
// Counters are exact and deterministic for a given program, so tests pin them; the one exception is
// `run` inside parallel chunks, where the split between child_sessions and nested_reuses depends
// on which thread runs each chunk (their sum does not).
#pragma once

#include <cstdint>

namespace tessera {

/// A snapshot of a backend's counters. Values are cumulative since the backend was built, except
/// `open_sessions` and `bytes_retained`, which describe the moment of the snapshot.
///
/// A session keeps its counters in plain integers and merges them into the backend once, when it
/// closes, so a snapshot taken while sessions run reflects the sessions that have closed.
///
/// `run` called inside a parallel chunk reuses the session when the chunk runs on the session's
/// own thread and opens a child session when it runs on a worker, so how such calls divide between
/// `nested_reuses` and `child_sessions` depends on scheduling (and with it `sessions` and the pool
/// hit/miss counts, since each child session leases its own workspace); their sum does not.
struct stats {
    std::uint64_t sessions = 0;             ///< sessions closed (top-level and child)
    std::uint64_t arena_entries = 0;        ///< top-level sessions that entered the task_arena
    std::uint64_t inline_entries = 0;       ///< sessions opened without the arena: a one-thread
                                            ///< backend's, and serial ones inside another backend's work
    std::uint64_t nested_reuses = 0;        ///< `run` calls that reused the thread's open session
    std::uint64_t child_sessions = 0;       ///< sessions opened inside a parallel chunk
    std::uint64_t parallel_dispatches = 0;  ///< op steps that fanned out with tbb::parallel_for
    std::uint64_t inline_dispatches = 0;    ///< op steps that ran inline on the session thread
    std::uint64_t pool_hits = 0;            ///< blocks served from a workspace or the shared pool
    std::uint64_t pool_misses = 0;          ///< blocks that had to come from the heap
    std::uint64_t pool_trims = 0;           ///< idle blocks freed to make room under the cap
                                            ///< (backend_options::retained_bytes_cap)
    std::uint64_t pool_bypasses = 0;        ///< blocks served unpooled: trimming idle blocks could
                                            ///< not make room (freed straight to the heap later)
    std::uint64_t plan_cache_hits = 0;      ///< einsum calls and prepares that found their plan
    std::uint64_t plan_cache_misses = 0;    ///< einsum calls and prepares that had to plan
    std::uint64_t plan_cache_evictions = 0; ///< plans dropped from the backend's full plan cache
    std::uint64_t bytes_retained = 0;       ///< bytes in free lists, ready for reuse
    std::uint64_t open_sessions = 0;        ///< workspaces leased right now (0 when idle)

    /// Returns true when every counter of the two snapshots is equal.
    friend bool operator==(const stats&, const stats&) = default;
};

/// Returns `after - before` for every cumulative counter; `bytes_retained` and `open_sessions`
/// are taken from `after`. Handy for pinning what one piece of code did.
constexpr stats operator-(const stats& after, const stats& before) noexcept {
    stats d = after;
    d.sessions -= before.sessions;
    d.arena_entries -= before.arena_entries;
    d.inline_entries -= before.inline_entries;
    d.nested_reuses -= before.nested_reuses;
    d.child_sessions -= before.child_sessions;
    d.parallel_dispatches -= before.parallel_dispatches;
    d.inline_dispatches -= before.inline_dispatches;
    d.pool_hits -= before.pool_hits;
    d.pool_misses -= before.pool_misses;
    d.pool_trims -= before.pool_trims;
    d.pool_bypasses -= before.pool_bypasses;
    d.plan_cache_hits -= before.plan_cache_hits;
    d.plan_cache_misses -= before.plan_cache_misses;
    d.plan_cache_evictions -= before.plan_cache_evictions;
    return d;
}

}  // namespace tessera
