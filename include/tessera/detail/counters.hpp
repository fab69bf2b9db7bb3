// tessera/detail/counters.hpp - the counters of a workspace, which its sessions count into as
// things happen and backend::stats() reads while sessions run. Generated from
// TESSERA_SESSION_COUNTERS (stats.hpp), the one list of counters.
#pragma once

#include <tessera/detail/atomic.hpp>
#include <tessera/stats.hpp>

#include <cstdint>

namespace tessera::detail {

/// One counter of a workspace. Only the workspace's current leaseholder writes it (the lease's
/// acquire/release orders successive holders), and backend::stats() reads it at any time, so a
/// relaxed load plus store is enough: an ordinary add on the hot path, no lock prefix.
class counter {
public:
    // Always inlined: in a large caller GCC may otherwise make the add a call.
    [[gnu::always_inline]] counter& operator++() noexcept { return *this += 1; }
    [[gnu::always_inline]] counter& operator+=(std::uint64_t n) noexcept {
        value_.store(value_.load(atomic_order::relaxed) + n, atomic_order::relaxed);
        return *this;
    }
    std::uint64_t load() const noexcept { return value_.load(atomic_order::relaxed); }

private:
    atomic_cell<std::uint64_t> value_;
};

/// The counters of a workspace, counted by the session that holds it as things happen (a session
/// keeps no copy of its own to merge when it closes), and the retained bytes of its free lists as
/// of the last session's close or trim.
struct session_counters {
#define TESSERA_COUNTER_FIELD(name, meaning) counter name;
    TESSERA_SESSION_COUNTERS(TESSERA_COUNTER_FIELD)
#undef TESSERA_COUNTER_FIELD
    atomic_cell<std::uint64_t> bytes_retained;

    /// Adds these counters and the retained bytes to a snapshot.
    void add_to(stats& to) const noexcept {
#define TESSERA_READ_COUNTER(name, meaning) to.name += name.load();
        TESSERA_SESSION_COUNTERS(TESSERA_READ_COUNTER)
#undef TESSERA_READ_COUNTER
        to.bytes_retained += bytes_retained.load(atomic_order::relaxed);
    }
};

}  // namespace tessera::detail
