// tessera/backend.hpp - tessera::backend, the long-lived owner of the thread pool and caches, and
// backend_options. Start here: build one backend, then call backend::run for each batch of work.
#pragma once

#include <tessera/detail/backend_core.hpp>
#include <tessera/detail/runtime.hpp>
#include <tessera/session.hpp>
#include <tessera/stats.hpp>

#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>

namespace tessera {

/// Construction options for a backend. Each `with_*` returns a modified copy, so options chain:
/// `backend_options{}.with_threads(4).with_session_slots(2)`.
struct backend_options {
    /// Threads one session may use, itself included (the arena's maximum concurrency). Unset:
    /// the TESSERA_NUM_THREADS environment variable if set, else the process's CPU-affinity
    /// count; with a placement option, the concurrency the placement leaves (a NUMA node's),
    /// and the variable is not read. 1 gives an inline backend that never touches oneTBB
    /// (without a placement option). A value outside 1..4096 is a config_error, and so is a
    /// TESSERA_NUM_THREADS (read only when this is unset) that is not a whole number in 1..4096.
    /// More threads than CPUs are honoured (the backend raises oneTBB's process-wide limit while
    /// it lives; see docs/faq.md). An attached backend takes its arena's concurrency: setting
    /// this is a config_error, and TESSERA_NUM_THREADS is not read.
    std::optional<int> threads;
    /// Application threads that may hold sessions at once; further callers wait for a slot.
    /// Each slot is an arena slot reserved for application threads. A value outside 1..4096 is a
    /// config_error. No effect on a one-thread backend: it has no arena, so no caller waits (a
    /// placement option gives it one, and then the limit applies).
    /// An attached backend reserves none (see backend::session_slots): anything but 1 is a
    /// config_error.
    int session_slots = 1;
    /// The most payload bytes the buffer pool owns, free or lent out. Allocations beyond the cap
    /// come from the heap and go straight back to it, so retained bytes never exceed the cap.
    std::size_t retained_bytes_cap = std::size_t{512} << 20;
    /// Work (elements x the op family's relative cost, 1 for an addition) at or below which an
    /// op runs inline on the session's thread; above it, work is halved while a piece holds more
    /// than this much, so chunks hold at least about half of it (oneTBB's default partitioner may
    /// leave chunks larger than it). 0 is a config_error. Waking a second thread costs ~2.4 us
    /// warm; 32k float additions is about that.
    std::size_t grain = std::size_t{1} << 15;
    /// The most einsum plans the backend keeps; the least recently used one is dropped beyond it.
    /// Each workspace also keeps the last 16 plans its sessions used in front of this cache, so
    /// a plan may live on there after its eviction. A value outside 1..262144 is a config_error.
    std::size_t plan_cache_capacity = 256;

    // Placement of the backend's own arena, as oneTBB's arena constraints. They need
    // oneTBB's NUMA and CPU-topology support (libtbbbind, with hwloc); where the process cannot
    // load it, setting one is a config_error that says so. A backend with a placement option has
    // an arena even at one thread, so that the thread running a session is bound while in it.

    /// NUMA node (an id from tbb::info::numa_nodes()) whose CPUs the arena's threads run on.
    /// With `threads` unset, the backend takes the node's concurrency. A node that does not
    /// exist is a config_error. tessera::backends_per_numa_node (tessera/arena.hpp) makes one
    /// backend per node.
    std::optional<int> numa_node;
    /// The most threads the arena puts on one physical core (1: no two on hyper-threads of one
    /// core); unset: all. Below 1 is a config_error.
    std::optional<int> threads_per_core;
    /// Core type (an id from tbb::info::core_types(), for CPUs with several kinds of core) the
    /// arena's threads run on; unset: any. An id not in that list is a config_error.
    std::optional<int> core_type;

    /// Runs the backend in an arena the application already has instead of one of its own. Set
    /// through tessera::attached_to(arena) or tessera::attached_to_current_arena() in
    /// tessera/arena.hpp, which names the oneTBB type this header does not include.
    struct attachment_to_arena {
        bool attached = false;
        detail::application_arena* arena = nullptr;  // null when attached: the constructor's arena
    } attachment;

    /// Returns a copy with `threads` set to `n`; `n` is checked when a backend is built.
    backend_options with_threads(int n) const {
        backend_options o = *this;
        o.threads = n;
        return o;
    }
    /// Returns a copy with `session_slots` set to `n`; `n` is checked when a backend is built.
    backend_options with_session_slots(int n) const {
        backend_options o = *this;
        o.session_slots = n;
        return o;
    }
    /// Returns a copy with `retained_bytes_cap` set to `bytes` (any value; 0 pools nothing).
    backend_options with_retained_bytes_cap(std::size_t bytes) const {
        backend_options o = *this;
        o.retained_bytes_cap = bytes;
        return o;
    }
    /// Returns a copy with `plan_cache_capacity` set to `plans`; checked when a backend is built.
    backend_options with_plan_cache_capacity(std::size_t plans) const {
        backend_options o = *this;
        o.plan_cache_capacity = plans;
        return o;
    }
    /// Returns a copy with `grain` set to `work`; 0 is rejected when a backend is built.
    backend_options with_grain(std::size_t work) const {
        backend_options o = *this;
        o.grain = work;
        return o;
    }
    /// Returns a copy with `numa_node` set to `node`; checked when a backend is built.
    backend_options with_numa_node(int node) const {
        backend_options o = *this;
        o.numa_node = node;
        return o;
    }
    /// Returns a copy with `threads_per_core` set to `n`; checked when a backend is built.
    backend_options with_threads_per_core(int n) const {
        backend_options o = *this;
        o.threads_per_core = n;
        return o;
    }
    /// Returns a copy with `core_type` set to `type`; checked when a backend is built.
    backend_options with_core_type(int type) const {
        backend_options o = *this;
        o.core_type = type;
        return o;
    }
};

/// Owns a persistent oneTBB task_arena (none when threads == 1), or runs in the application's when
/// attached (tessera/arena.hpp), and owns the buffer pool, the plan cache and statistics.
///
/// Create one and share it; any number of application threads may call run() concurrently.
/// Destroying a backend while one of its sessions is open is a checked error; tensors may outlive
/// it (their blocks then go back to the heap).
///
///     tessera::backend be{tessera::backend_options{}.with_threads(4)};
///     float total = be.run([&](tessera::session& s) { return work(s); });
class backend {
public:
    /// Builds a backend with default options (see backend_options::threads).
    backend();
    /// Builds a backend; throws config_error for invalid options or TESSERA_NUM_THREADS.
    explicit backend(const backend_options& options);
    /// Frees the arena, the pool and every retained block. No session of this backend may be
    /// open (checked with TESSERA_CHECK, which aborts by default); live tensors stay valid.
    ~backend();
    backend(const backend&) = delete;
    backend& operator=(const backend&) = delete;

    /// Runs `fn(session&)` in a session of this backend and returns its result or rethrows its
    /// exception.
    ///
    /// The first matching case applies:
    /// - On a thread whose innermost open session belongs to this backend it reuses that session,
    ///   also inside a parallel chunk that runs on the session's own thread (a nested reuse).
    /// - On a one-thread backend (without a placement option) it opens the session inline: no
    ///   arena, no oneTBB call.
    /// - Inside a parallel chunk of this backend on another (worker) thread it opens a child
    ///   session with its own workspace, inline (the thread is already in the arena).
    /// - Inside a session or a parallel chunk of another backend it opens a session inline on
    ///   the calling thread, without entering the arena: its ops run serially on that thread
    ///   (session::threads() is 1). Entering would hold that backend's slot while waiting for
    ///   one of this arena's, and two backends calling into each other could deadlock.
    /// - Otherwise it enters the arena once (isolated) and opens a session. An attached backend
    ///   enters the application's arena the same way; from a thread already running in that
    ///   arena (a task of the application's), oneTBB calls the session directly: no slot is
    ///   taken and no other arena is entered.
    /// `fn` runs on the calling thread unless every session slot is taken, in which case oneTBB
    /// may run it on an arena thread while the caller waits. Results are returned by value.
    template <class Fn>
    std::invoke_result_t<Fn&, session&> run(Fn&& fn) {
        using result = std::invoke_result_t<Fn&, session&>;
        static_assert(!std::is_reference_v<result>,
                      "backend::run: fn must return by value; a session's storage does not "
                      "outlive it");
        using detail::entry_kind;
        using detail::session_access;
        detail::thread_state& ts = detail::this_thread;
        detail::backend_core& core = *core_;

        session* const open = ts.innermost;
        if (open != nullptr && session_access::belongs_to(*open, core)) {
            ++session_access::counters(*open).nested_reuses;
            return session_access::call(fn, *open);
        }
        if (!core.has_arena()) return session_access::open(core, entry_kind::inline_thread, fn);
        // Inside the work of another backend (its session or its parallel chunk) this thread
        // holds a slot of that backend's arena. Waiting here for a slot of this one could close
        // a cycle (two backends calling into each other, each thread holding the slot the other
        // waits for), so the session runs inline and serial on this thread instead.
        if ((ts.innermost != nullptr || ts.chunk_of != nullptr) && ts.chunk_of != &core)
            return session_access::open(core, entry_kind::nested_serial, fn);

        // Inside one of this backend's parallel chunks on a worker: a child session with its own
        // workspace, on this thread, already in the arena and in the chunk's isolated region.
        if (ts.chunk_of == &core) return session_access::open(core, entry_kind::child, fn);

        // The arena entry is the compiled runtime's: the result travels back through `out`.
        if constexpr (std::is_void_v<result>) {
            detail::run_in_arena(core, [&fn](session& s) { session_access::call(fn, s); });
        } else {
            std::optional<result> out;
            detail::run_in_arena(
                core, [&fn, &out](session& s) { out.emplace(session_access::call(fn, s)); });
            return std::move(*out);
        }
    }

    /// Returns a snapshot of the counters (see tessera::stats). Thread-safe.
    tessera::stats stats() const;

    /// Frees the retained blocks of the shared pool and of every workspace not leased right now;
    /// returns the bytes freed. Thread-safe.
    std::size_t trim() noexcept;

    /// Returns the thread count one session may use (1 for an inline backend): the requested
    /// count, or less when the application caps oneTBB's max_allowed_parallelism below it. For
    /// an attached backend, its arena's concurrency (as oneTBB reports it, whatever the caps).
    int threads() const noexcept { return core_->settings().threads; }
    /// Returns how many application threads may hold sessions at once: 0 for an attached backend,
    /// which reserves no slots (threads already in the application's arena need none; a thread
    /// from outside takes a free slot of that arena, or waits while an arena thread runs it).
    int session_slots() const noexcept { return core_->settings().session_slots; }
    /// Returns true when the backend runs in the application's arena rather than one of its own.
    bool attached() const noexcept { return core_->settings().attached; }
    /// Returns the options after defaults, the environment and the process's thread limit were
    /// applied.
    backend_options options() const noexcept;

private:
    detail::backend_core* core_;  // owned; a raw pointer keeps <memory> out of this header
};

}  // namespace tessera
