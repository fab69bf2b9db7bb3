// tessera/detail/thread_state.hpp - what a thread knows about the sessions it is running:
// the innermost open session and whether it is running a parallel chunk of some backend.
#pragma once

#include <cstdint>

namespace tessera {
class session;
}

namespace tessera::detail {

class backend_core;

struct thread_state {
    session* innermost = nullptr;            // innermost open session on this thread
    const backend_core* chunk_of = nullptr;  // backend whose parallel chunk this thread runs
    std::uint32_t ordinal = 0;               // 0 until first needed; spreads workspace leases
};

// constinit: a trivially initialised thread_local needs no guard on access.
inline constinit thread_local thread_state this_thread{};

std::uint32_t assign_thread_ordinal() noexcept;

inline std::uint32_t thread_ordinal(thread_state& ts) noexcept {
    if (ts.ordinal == 0) [[unlikely]]
        ts.ordinal = assign_thread_ordinal();
    return ts.ordinal;
}

/// Marks the calling thread as running a parallel chunk of `core` for the scope's lifetime, so
/// that a `run` on that backend inside the chunk, on a thread with no open session of that
/// backend (a worker), opens a child session instead of re-entering. (On the session's own
/// thread the open session is found first and reused.)
class chunk_scope {
public:
    explicit chunk_scope(const backend_core& core) noexcept
        : ts_(this_thread), saved_(ts_.chunk_of) {
        ts_.chunk_of = &core;
    }
    ~chunk_scope() { ts_.chunk_of = saved_; }
    chunk_scope(const chunk_scope&) = delete;
    chunk_scope& operator=(const chunk_scope&) = delete;

private:
    thread_state& ts_;
    const backend_core* saved_;
};

}  // namespace tessera::detail
