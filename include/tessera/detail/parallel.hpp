// tessera/detail/parallel.hpp - the parallel policy: one helper that decides, from the work size,
// whether an op step runs inline on the session's thread or fans out over the arena (through the
// compiled runtime's fan_out).
#pragma once

#include <tessera/detail/runtime.hpp>
#include <tessera/session.hpp>

#include <cstddef>

namespace tessera::detail {

/// Calls `body(begin, end)` over [0, n): inline when the session is serial (a one-thread backend's,
/// or one opened inside another backend's work) or n is at most `grain` (nothing is woken, no
/// out-of-line call), else across the arena with fan_out, which halves a range only while it
/// holds more than `grain` items: chunks hold at least about grain / 2 items, and oneTBB's default
/// (auto) partitioner may leave some larger than `grain`. `grain` must be at least 1. Each
/// decision is counted as an inline or a parallel dispatch.
template <class Body>
void parallel_range(session& s, std::size_t n, std::size_t grain, const Body& body) {
    session_counters& counters = session_access::counters(s);
    if (n <= grain || !session_access::may_fan_out(s)) {
        ++counters.inline_dispatches;
        body(std::size_t{0}, n);
        return;
    }
    ++counters.parallel_dispatches;
    fan_out(session_access::core(s), n, grain, body);
}

}  // namespace tessera::detail
