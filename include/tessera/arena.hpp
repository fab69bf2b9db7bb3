// tessera/arena.hpp - running where the application runs: a backend attached to an arena the
// application already has (its oneTBB pool instead of a second one), and one backend per NUMA node.
// The one public header that includes oneTBB (task_arena.h), because it takes the application's
// tbb::task_arena; include it only where that is wanted. See docs/integration.md.
#pragma once

#include <tessera/backend.hpp>

#include <oneapi/tbb/task_arena.h>

#include <memory>
#include <vector>

namespace tessera {

/// Options for a backend that runs its sessions and its ops' parallel chunks in `arena`, which the
/// application keeps alive for as long as the backend lives. The backend keeps its own buffer
/// pool, plan cache and statistics; its thread count is the arena's concurrency. Chain the other
/// options as usual: `tessera::attached_to(arena).with_grain(1 << 12)`.
///
///     tbb::task_arena app(8);
///     tessera::backend be{tessera::attached_to(app)};
///     app.execute([&] { tbb::parallel_for(0, n, [&](int i) { be.run(work(i)); }); });
///
/// From a thread already running in the arena, run() enters no arena (oneTBB calls the session
/// directly); from a thread outside it, run() enters it as an owned backend's run() enters its
/// own: it takes a free slot of the arena (oneTBB tries those reserved for application threads
/// first), or waits while a thread of the arena runs the session. Keep the arena alive, and do not
/// terminate or re-initialise it, while the backend lives: the backend reads its concurrency once.
inline backend_options attached_to(tbb::task_arena& arena) {
    backend_options options;
    options.attachment.attached = true;
    // Only the address travels through backend.hpp, as an incomplete type; the library converts
    // it back to the tbb::task_arena it was.
    options.attachment.arena = reinterpret_cast<detail::application_arena*>(&arena);
    return options;
}

/// Options for a backend attached, as with attached_to, to the arena of the thread that builds it:
/// inside task_arena::execute or a task of the application's, that arena. Note oneTBB's rule: a
/// thread that has used oneTBB outside any task_arena (or whose execute has returned) runs in its
/// implicit arena, and that is what it attaches to. Building it on a thread that has never used
/// oneTBB, or inside a tessera session or parallel op (whose arena is that backend's own), is a
/// config_error. The backend's options() carry the attached arena on, for as long as the backend
/// lives.
inline backend_options attached_to_current_arena() {
    backend_options options;
    options.attachment.attached = true;
    return options;
}

/// Builds one backend per NUMA node of the machine (tbb::info::numa_nodes()), each with `options`
/// and that node's numa_node: its arena's threads run on the node's CPUs, and so its sessions
/// first touch their pool's blocks there. A backend gets the node's concurrency unless `options`
/// sets threads. Throws config_error where oneTBB cannot place threads on nodes (no libtbbbind), or
/// where `options` attach to an arena or set a numa_node themselves.
std::vector<std::unique_ptr<backend>> backends_per_numa_node(const backend_options& options = {});

}  // namespace tessera
