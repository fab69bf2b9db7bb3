// tessera/detail/counters.hpp - the counters a session keeps in plain integers, and their published
// copy in a workspace that backend::stats() reads while sessions run. Both are generated from
// TESSERA_SESSION_COUNTERS (stats.hpp), the one list of counters.
#pragma once

#include <tessera/detail/atomic.hpp>
#include <tessera/stats.hpp>

#include <cstdint>

namespace tessera::detail {

/// Plain counters owned by one session: incrementing them is an ordinary add on the hot path.
struct session_counters {
#define TESSERA_PLAIN_COUNTER(name, meaning) std::uint64_t name = 0;
    TESSERA_SESSION_COUNTERS(TESSERA_PLAIN_COUNTER)
#undef TESSERA_PLAIN_COUNTER
};

/// The same counters, published once per session. Only the workspace's current leaseholder writes
/// (the lease's acquire/release orders successive holders), so a relaxed load plus store is enough:
/// no read-modify-write, no lock prefix. stats() reads them with relaxed loads.
struct published_counters {
#define TESSERA_PUBLISHED_COUNTER(name, meaning) atomic_cell<std::uint64_t> name;
    TESSERA_SESSION_COUNTERS(TESSERA_PUBLISHED_COUNTER)
#undef TESSERA_PUBLISHED_COUNTER
    atomic_cell<std::uint64_t> bytes_retained;

    /// Adds a closing session's counters and records the workspace's retained bytes.
    void merge(const session_counters& c, std::uint64_t retained) noexcept {
#define TESSERA_MERGE_COUNTER(name, meaning) add(name, c.name);
        TESSERA_SESSION_COUNTERS(TESSERA_MERGE_COUNTER)
#undef TESSERA_MERGE_COUNTER
        bytes_retained.store(retained, atomic_order::relaxed);
    }

    /// Adds these counters and the retained bytes to a snapshot.
    void add_to(stats& to) const noexcept {
        constexpr auto relaxed = atomic_order::relaxed;
#define TESSERA_READ_COUNTER(name, meaning) to.name += name.load(relaxed);
        TESSERA_SESSION_COUNTERS(TESSERA_READ_COUNTER)
#undef TESSERA_READ_COUNTER
        to.bytes_retained += bytes_retained.load(relaxed);
    }

private:
    static void add(atomic_cell<std::uint64_t>& to, std::uint64_t delta) noexcept {
        to.store(to.load(atomic_order::relaxed) + delta, atomic_order::relaxed);
    }
};

}  // namespace tessera::detail
