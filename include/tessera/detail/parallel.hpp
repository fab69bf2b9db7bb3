// tessera/detail/parallel.hpp - the parallel policy: one helper that decides, from the work size,
// whether an op step runs inline on the session's thread or fans out with tbb::parallel_for.
// Includes oneTBB.
#pragma once

#include <tessera/detail/fork_join.hpp>
#include <tessera/session.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <cstddef>

namespace tessera::detail {

/// Calls `body(begin, end)` over [0, n) with tbb::parallel_for (ranges halved while they hold
/// more than `grain` items), each chunk marked as `core`'s (chunk_scope) and given its fork/join
/// edges for ThreadSanitizer. The one place tessera's ops fan out; callers count the dispatch.
template <class Body>
void fan_out(const backend_core& core, std::size_t n, std::size_t grain, const Body& body) {
    fork_join edges;
    const auto chunk = [&](const tbb::blocked_range<std::size_t>& r) {
        fork_join::piece in_piece(edges);
        chunk_scope in_chunk(core);
        body(r.begin(), r.end());
    };
    edges.fork();
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, grain), chunk);
}

/// Calls `body(begin, end)` over [0, n): inline when the session is serial (a one-thread backend's,
/// or one opened inside another backend's work; session_access::arena is null) or n is at most
/// `grain` (nothing is woken), else across the arena with tbb::parallel_for, which halves a range
/// only while it holds more than `grain` items: chunks hold at least about grain / 2 items, and the
/// default (auto) partitioner may leave some larger than `grain`. `grain` must be at least 1.
/// Each decision is counted as an inline or a parallel dispatch.
template <class Body>
void parallel_range(session& s, std::size_t n, std::size_t grain, const Body& body) {
    backend_core& core = session_access::core(s);
    session_counters& counters = session_access::counters(s);
    if (n <= grain || session_access::arena(s) == nullptr) {
        ++counters.inline_dispatches;
        body(std::size_t{0}, n);
        return;
    }
    ++counters.parallel_dispatches;
    fan_out(core, n, grain, body);
}

}  // namespace tessera::detail
