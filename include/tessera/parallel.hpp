// tessera/parallel.hpp - tessera::parallel_for, the session's parallel helper for user kernels.
// It applies the same inline-or-fan-out policy the built-in ops use, and counts each decision.
#pragma once

#include <tessera/detail/parallel.hpp>
#include <tessera/session.hpp>

#include <cstddef>

namespace tessera {

/// Calls `body(begin, end)` over sub-ranges covering [0, n) exactly once each.
///
/// Runs inline on the session's thread (waking nobody) when the backend has one thread or
/// `n <= grain`; otherwise hands [0, n) to tbb::parallel_for, which halves a range only while it
/// holds more than `grain` items, so each chunk holds at least about grain / 2 items (oneTBB's
/// default partitioner may leave chunks larger than `grain`). The arena's threads, including this
/// one, run the chunks; it returns when all are done. `grain` 0 counts as 1. An exception from any
/// chunk cancels the rest and is rethrown here once. Inside `body`, backend::run gives a child
/// session on a worker thread and reuses the outer session on this one; the outer session must
/// not be used from other threads.
template <class Body>
void parallel_for(session& s, std::size_t n, std::size_t grain, const Body& body) {
    detail::check_session(s);
    detail::parallel_range(s, n, grain == 0 ? 1 : grain, body);
}

}  // namespace tessera
