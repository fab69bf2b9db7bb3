// The oneTBB arena a backend runs in, kept out of the public headers: backend_core holds it through
// a pointer to this incomplete type, and only the compiled runtime (runtime.cpp) and the backend's
// construction (backend.cpp) see the definition. It is the backend's own arena, or the
// application's for an attached backend: one the application passed (tessera::attached_to), or a
// handle attached to the arena the constructing thread ran in (tessera::attached_to_current_arena).
#pragma once

#include <oneapi/tbb/task_arena.h>

#include <optional>
#include <tessera/detail/backend_core.hpp>

namespace tessera::detail {

/// The application's arena behind the pointer tessera/arena.hpp made of it (application_arena is
/// never defined: the pointer only carries a tbb::task_arena's address through backend.hpp).
inline tbb::task_arena& task_arena_of(application_arena* arena) noexcept {
    return *reinterpret_cast<tbb::task_arena*>(arena);
}

struct arena_state {
    /// An arena of the backend's own, placed by `constraints`.
    arena_state(const tbb::task_arena::constraints& constraints, int reserved_for_masters)
        : owned(std::in_place, constraints, static_cast<unsigned>(reserved_for_masters)),
          arena(*owned) {}
    /// A handle on the arena the calling thread runs in (inactive when it runs in none).
    explicit arena_state(tbb::task_arena::attach)
        : owned(std::in_place, tbb::task_arena::attach{}), arena(*owned) {}
    /// The application's arena, which outlives the backend.
    explicit arena_state(tbb::task_arena& application) : arena(application) {}

    std::optional<tbb::task_arena> owned;
    tbb::task_arena& arena;  // the arena sessions enter: *owned, or the application's
};

}  // namespace tessera::detail
