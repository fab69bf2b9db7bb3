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

// `unconstrained` is a constant of our own rather than tbb::task_arena::automatic, since binding
// that to a reference (as std::optional::value_or does) needs a definition oneTBB's header lacks.
static_assert(unconstrained == tbb::task_arena::automatic);

/// A task_arena placed through the base's own fields. task_arena::constraints would carry the
/// core type and threads per core only under TBB_PREVIEW_TASK_ARENA_CONSTRAINTS_EXTENSION, which
/// changes that struct's layout and oneTBB's inline code using it; defined in the library alone, it
/// would give a program two different definitions of that code. The base's fields exist in every
/// configuration, and oneTBB reads them when it initialises the arena (binding the threads that
/// join it) and when it reports the concurrency of an arena not yet initialised.
class placed_arena : public tbb::task_arena {
public:
    placed_arena(const placement& where, int max_concurrency, unsigned reserved_for_masters)
        : tbb::task_arena(max_concurrency, reserved_for_masters) {
        my_numa_id = where.numa_node;
        my_core_type = where.core_type;
        my_max_threads_per_core = where.threads_per_core;
    }
    /// A handle on the arena the calling thread runs in (inactive when it runs in none).
    explicit placed_arena(tbb::task_arena::attach) : tbb::task_arena(tbb::task_arena::attach{}) {}
};

/// The threads a placed arena would get by default: the CPUs the placement leaves (a node's).
inline int default_concurrency(const placement& where) {
    // Not initialised, and with an automatic concurrency, an arena reports the default for its
    // placement.
    return placed_arena(where, unconstrained, 1).max_concurrency();
}

struct arena_state {
    /// An arena of the backend's own.
    arena_state(const placement& where, int slots, int reserved_for_masters)
        : owned(std::in_place, where, slots, static_cast<unsigned>(reserved_for_masters)),
          arena(*owned) {}
    /// A handle on the arena the calling thread runs in (inactive when it runs in none).
    explicit arena_state(tbb::task_arena::attach)
        : owned(std::in_place, tbb::task_arena::attach{}), arena(*owned) {}
    /// The application's arena, which outlives the backend.
    explicit arena_state(tbb::task_arena& application) : arena(application) {}

    std::optional<placed_arena> owned;
    tbb::task_arena& arena;  // the arena sessions enter: *owned, or the application's
};

}  // namespace tessera::detail
