// tessera/stats.hpp - tessera::stats, the counter snapshot returned by backend::stats().
// Counters are exact and deterministic for a given program, so tests pin them; the one exception is
// `run` inside parallel chunks, where the split between child_sessions and nested_reuses depends
// on which thread runs each chunk (their sum does not).
#pragma once

#include <cstdint>

// The one list of tessera's counters, each with what it counts. It generates the fields of
// tessera::stats, operator-, the counters of a workspace that its sessions count into and their
// reading (detail/counters.hpp), and to_string(const stats&) (print.hpp). Adding a counter here
// adds it everywhere.
//
// Counted by sessions, on their hot path, into the workspace they hold:
#define TESSERA_SESSION_COUNTERS(X)                                                               \
    X(sessions, "sessions opened (top-level and child)")                                         \
    X(arena_entries, "top-level sessions that entered the backend's own task_arena")             \
    X(attached_entries, "top-level sessions of an attached backend, in the application's arena")  \
    X(inline_entries, "sessions opened without the arena: a one-thread backend's, and serial "   \
                      "ones inside another backend's work")                                       \
    X(nested_reuses, "run calls that reused the thread's open session")                          \
    X(child_sessions, "sessions opened inside a parallel chunk")                                 \
    X(parallel_dispatches, "op steps that fanned out over the arena")                            \
    X(inline_dispatches, "op steps that ran inline on the session thread")                       \
    X(pool_hits, "blocks served from a workspace or the shared pool")                            \
    X(pool_misses, "blocks that had to come from the heap")                                      \
    X(pool_trims, "idle blocks freed to make room under backend_options::retained_bytes_cap")    \
    X(pool_bypasses, "blocks served unpooled: trimming idle blocks could not make room (freed "  \
                     "straight to the heap later)")                                               \
    X(plan_cache_hits, "einsum calls and prepares that found their plan")                        \
    X(plan_cache_misses, "einsum calls and prepares that had to plan")
// Counted by the backend itself:
#define TESSERA_BACKEND_COUNTERS(X) \
    X(plan_cache_evictions, "plans dropped from the backend's full plan cache")
// Describing the moment of the snapshot rather than accumulating:
#define TESSERA_GAUGES(X)                                                  \
    X(bytes_retained, "bytes in free lists, ready for reuse")             \
    X(open_sessions, "workspaces leased right now (0 when idle)")

namespace tessera {

/// A snapshot of a backend's counters. Values are cumulative since the backend was built, except
/// `open_sessions` and `bytes_retained`, which describe the moment of the snapshot. Each field is
/// a std::uint64_t named, with what it counts, in TESSERA_SESSION_COUNTERS,
/// TESSERA_BACKEND_COUNTERS and TESSERA_GAUGES above (and in docs/api.md).
///
/// Sessions count into the workspace they hold as things happen (relaxed atomic stores, by the one
/// thread holding it), so a snapshot taken while sessions run includes what the open sessions have
/// counted so far; `bytes_retained` of a held workspace is as of its last close or trim.
///
/// `run` called inside a parallel chunk reuses the session when the chunk runs on the session's
/// own thread and opens a child session when it runs on a worker, so how such calls divide between
/// `nested_reuses` and `child_sessions` depends on scheduling (and with it `sessions` and the pool
/// hit/miss counts, since each child session leases its own workspace); their sum does not.
struct stats {
#define TESSERA_STATS_FIELD(name, meaning) std::uint64_t name = 0;
    TESSERA_SESSION_COUNTERS(TESSERA_STATS_FIELD)
    TESSERA_BACKEND_COUNTERS(TESSERA_STATS_FIELD)
    TESSERA_GAUGES(TESSERA_STATS_FIELD)
#undef TESSERA_STATS_FIELD

    /// Returns true when every counter of the two snapshots is equal.
    friend bool operator==(const stats&, const stats&) = default;
};

/// Returns `after - before` for every cumulative counter; `bytes_retained` and `open_sessions`
/// are taken from `after`. Handy for pinning what one piece of code did.
constexpr stats operator-(const stats& after, const stats& before) noexcept {
    stats d = after;
#define TESSERA_STATS_SUBTRACT(name, meaning) d.name -= before.name;
    TESSERA_SESSION_COUNTERS(TESSERA_STATS_SUBTRACT)
    TESSERA_BACKEND_COUNTERS(TESSERA_STATS_SUBTRACT)
#undef TESSERA_STATS_SUBTRACT
    return d;
}

}  // namespace tessera
