// tessera/detail/counters.hpp - the counters a session keeps in plain integers, and their published
// copy in a workspace that backend::stats() reads while sessions run.
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera::detail {

/// Plain counters owned by one session: incrementing them is an ordinary add on the hot path.
struct session_counters {
    std::uint64_t sessions = 0;
    std::uint64_t arena_entries = 0;
    std::uint64_t inline_entries = 0;
    std::uint64_t nested_reuses = 0;
    std::uint64_t child_sessions = 0;
    std::uint64_t parallel_dispatches = 0;
    std::uint64_t inline_dispatches = 0;
    std::uint64_t pool_hits = 0;
    std::uint64_t pool_misses = 0;
    std::uint64_t pool_trims = 0;
    std::uint64_t pool_bypasses = 0;
    std::uint64_t plan_cache_hits = 0;
    std::uint64_t plan_cache_misses = 0;
};

/// The same counters, published once per session. Only the workspace's current leaseholder writes
/// (the lease's acquire/release orders successive holders), so a relaxed load plus store is enough:
/// no read-modify-write, no lock prefix. stats() reads them with relaxed loads.
struct published_counters {
    std::atomic<std::uint64_t> sessions{0};
    std::atomic<std::uint64_t> arena_entries{0};
    std::atomic<std::uint64_t> inline_entries{0};
    std::atomic<std::uint64_t> nested_reuses{0};
    std::atomic<std::uint64_t> child_sessions{0};
    std::atomic<std::uint64_t> parallel_dispatches{0};
    std::atomic<std::uint64_t> inline_dispatches{0};
    std::atomic<std::uint64_t> pool_hits{0};
    std::atomic<std::uint64_t> pool_misses{0};
    std::atomic<std::uint64_t> pool_trims{0};
    std::atomic<std::uint64_t> pool_bypasses{0};
    std::atomic<std::uint64_t> plan_cache_hits{0};
    std::atomic<std::uint64_t> plan_cache_misses{0};
    std::atomic<std::uint64_t> bytes_retained{0};

    void merge(const session_counters& c, std::uint64_t retained) noexcept {
        add(sessions, c.sessions);
        add(arena_entries, c.arena_entries);
        add(inline_entries, c.inline_entries);
        add(nested_reuses, c.nested_reuses);
        add(child_sessions, c.child_sessions);
        add(parallel_dispatches, c.parallel_dispatches);
        add(inline_dispatches, c.inline_dispatches);
        add(pool_hits, c.pool_hits);
        add(pool_misses, c.pool_misses);
        add(pool_trims, c.pool_trims);
        add(pool_bypasses, c.pool_bypasses);
        add(plan_cache_hits, c.plan_cache_hits);
        add(plan_cache_misses, c.plan_cache_misses);
        bytes_retained.store(retained, std::memory_order_relaxed);
    }

private:
    static void add(std::atomic<std::uint64_t>& to, std::uint64_t delta) noexcept {
        to.store(to.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    }
};

}  // namespace tessera::detail
