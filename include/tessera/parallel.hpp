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
/// `n <= grain`; otherwise splits [0, n) into chunks of at least `grain` items run by the arena's
/// threads, including this one, and returns when all are done. An exception from any chunk cancels
/// the rest and is rethrown here once. Inside `body`, call backend::run to get a session on a
/// worker thread (a child session); the outer session must not be used from other threads.
template <class Body>
void parallel_for(session& s, std::size_t n, std::size_t grain, const Body& body) {
    detail::session_access::check_thread(s);
    detail::parallel_range(s, n, grain == 0 ? 1 : grain, body);
}

}  // namespace tessera
