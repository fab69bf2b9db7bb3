// The oneTBB arena a backend owns, kept out of the public headers: backend_core holds it through a
// pointer to this incomplete type, and only the compiled runtime (runtime.cpp) and the backend's
// construction (backend.cpp) see the definition.
#pragma once

#include <tessera/detail/backend_core.hpp>

#include <oneapi/tbb/task_arena.h>

namespace tessera::detail {

struct arena_state {
    arena_state(int slots, int reserved_for_masters)
        : arena(slots, static_cast<unsigned>(reserved_for_masters)) {}
    tbb::task_arena arena;
};

}  // namespace tessera::detail
