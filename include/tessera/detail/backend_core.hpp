// tessera/detail/backend_core.hpp - the state a backend owns, split by temperature. What the inline
// session paths touch (id, settings, the workspace table, the arena pointer) is here; the rest (the
// task_arena itself, held opaquely so that this header does not include oneTBB, the mutex, the
// shared pool, overflow workspaces, the plan cache) sits behind a pointer, defined in
// src/backend.cpp, so that including session.hpp costs no <memory>, <mutex> or <vector>.
// Construction, teardown, the slow lease and pool paths and stats() live in src/backend.cpp and
// src/buffer_pool.cpp.
#pragma once

#include <tessera/detail/atomic.hpp>
#include <tessera/detail/counters.hpp>
#include <tessera/detail/pool.hpp>
#include <tessera/detail/thread_state.hpp>
#include <tessera/stats.hpp>

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

/// The application's tbb::task_arena, named only by tessera/arena.hpp and src/: a backend attached
/// to it keeps a pointer of this incomplete type, so that backend.hpp includes no oneTBB.
struct application_arena;

/// oneTBB's "automatic" (-1, checked against it in src/arena.hpp): no constraint.
inline constexpr int unconstrained = -1;

/// Where an owned arena's threads may run (see backend_options); `unconstrained` leaves one free.
struct placement {
    int numa_node = unconstrained;
    int core_type = unconstrained;
    int threads_per_core = unconstrained;

    bool constrains() const noexcept {
        return numa_node != unconstrained || core_type != unconstrained ||
               threads_per_core != unconstrained;
    }
};

/// Backend settings after defaults, the environment and validation have been applied.
struct backend_settings {
    int threads = 1;
    int session_slots = 1;  // 0 for an attached backend: the application's arena has the slots
    std::size_t retained_bytes_cap = 0;
    std::size_t grain = 0;
    std::size_t plan_cache_capacity = 0;
    placement where;                           // of an owned arena
    application_arena* attached_to = nullptr;  // the application's arena, when attached
    bool attached = false;                     // runs in the application's arena
};

struct plan_slots;
struct product_slots;
class plan_cache;

/// What a session borrows: free lists it may use without locks, the counters it counts into, its
/// einsum plan slots (detail/plan_cache.hpp) and the small products it remembers
/// (detail/product_slots.hpp). Leased by one thread at a time; the `leased` flag's acquire/release
/// hands it over.
struct alignas(64) workspace {
    atomic_cell<bool> leased;
    free_lists lists;
    session_counters counters;
    // Both set when the backend makes the workspace; never null after.
    plan_slots* plans = nullptr;
    product_slots* products = nullptr;
};

/// The backend's oneTBB arena; defined in src/arena.hpp, where the runtime uses it.
struct arena_state;

class backend_core {
public:
    explicit backend_core(const backend_settings& settings);
    ~backend_core();
    backend_core(const backend_core&) = delete;
    backend_core& operator=(const backend_core&) = delete;

    std::uint64_t id() const noexcept { return id_; }
    const backend_settings& settings() const noexcept { return settings_; }
    /// False for a one-thread backend, which has no arena and never touches oneTBB (unless a
    /// placement option gave it one, or it is attached to the application's).
    bool has_arena() const noexcept { return arena_ != nullptr; }
    /// The arena its sessions run in, its own or the application's; has_arena() must be true.
    arena_state& arena() noexcept { return *arena_; }
    /// The slots of that arena. An owned one has threads - 1 workers plus session_slots reserved
    /// for application threads; an attached backend's is the application's arena's concurrency.
    /// oneTBB numbers the threads in the arena 0 to arena_slots() - 1.
    int arena_slots() const noexcept { return arena_slots_; }
    /// The einsum plans shared by every session of this backend.
    plan_cache& plans() noexcept;

    /// Leases a workspace for a session on the calling thread. Lock-free unless every workspace
    /// in the table is taken.
    workspace& lease(thread_state& ts) {
        // The slot first: in `table_[i]` the pointer is read before i is computed, and the call in
        // thread_ordinal would then make the compiler keep it in a callee-saved register.
        const std::size_t slot = thread_ordinal(ts) & (table_size - 1);
        workspace& w = table_[slot];
        if (!w.leased.load(atomic_order::relaxed) && !w.leased.exchange(true, atomic_order::acquire))
            return w;
        return lease_slow(ts);
    }

    /// Records a closing session's retained bytes and hands its workspace back.
    void give_back(workspace& w) noexcept {
        w.counters.bytes_retained.store(w.lists.retained_bytes, atomic_order::relaxed);
        w.leased.store(false, atomic_order::release);
    }

    /// Serves a block of `size_class` when the session's workspace `w` has none free: from the
    /// shared pool, else the heap. A heap block that would take the pool past retained_bytes_cap
    /// first trims idle blocks (w's own, then the shared pool's, then idle workspaces'); only when
    /// that cannot make room is the block served unpooled.
    block_header* refill(unsigned size_class, workspace& w);

    /// Takes a block freed outside any session of this backend (caller holds the registry lock).
    void take_back(block_header* b) noexcept;

    stats snapshot() const;
    std::size_t trim() noexcept;

private:
    /// The state only the out-of-line paths touch; defined in src/backend.cpp.
    struct cold_state;

    /// Takes the application's arena (the one in the settings, or the constructing thread's).
    void attach(cold_state& cold);
    workspace& lease_slow(thread_state& ts);
    /// Counts `bytes` into the pooled bytes if that keeps them within the cap.
    bool reserve(std::size_t bytes) noexcept;
    /// Frees idle blocks until `bytes` more would fit under the cap, or nothing idle is left.
    void make_room(std::size_t bytes, workspace& w) noexcept;

    // 64 slots cover any realistic number of concurrent sessions; past that, lease_slow makes
    // overflow workspaces under the mutex.
    static constexpr std::size_t table_size = 64;

    std::uint64_t id_;
    backend_settings settings_;
    int requested_threads_ = 1;     // settings_.threads before the process's limit applied
    int arena_slots_ = 0;
    arena_state* arena_ = nullptr;  // owned by cold_; null for an unplaced one-thread backend
    workspace* table_ = nullptr;    // table_size workspaces, owned by cold_
    cold_state* cold_ = nullptr;    // owned; deleted by the destructor
};

/// Returns a block to where it belongs: the innermost session's workspace when that session is of
/// the block's backend (no lock), else the backend's shared pool, else the heap if the backend is
/// gone.
void release_block_slow(block_header* b) noexcept;

}  // namespace tessera::detail
