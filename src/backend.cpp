// Backend construction and teardown, option resolution, the slow lease and refill paths, stats()
// and trim().
#include "arena.hpp"
#include "registry.hpp"

#include <tessera/arena.hpp>
#include <tessera/backend.hpp>
#include <tessera/detail/plan_cache.hpp>
#include <tessera/detail/product_slots.hpp>
#include <tessera/error.hpp>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

namespace tessera {
namespace detail {
namespace {

// Upper bound for a thread count given by option or environment: far above any real machine, low
// enough to catch a typo such as TESSERA_NUM_THREADS=10000000.
constexpr int max_threads = 4096;

// Upper bound for the plan cache: a plan is a few kilobytes, so this bounds it to about 1 GB.
constexpr std::size_t max_plan_cache_capacity = std::size_t{1} << 18;

int threads_from_environment_or(int fallback) {
    const char* env = std::getenv("TESSERA_NUM_THREADS");
    if (env == nullptr) return fallback;
    const std::string_view text(env);
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 1 ||
        value > max_threads)
        throw config_error(fmt::format(
            "backend: TESSERA_NUM_THREADS=\"{}\" is not a thread count between 1 and {}", text,
            max_threads));
    return value;
}

// oneTBB reports a single node with the id `automatic` (-1) when it could not load its topology
// support (libtbbbind, with hwloc); its placement constraints are then ignored without a word.
bool placement_supported() {
    const std::vector<tbb::numa_node_id> nodes = tbb::info::numa_nodes();
    return !(nodes.size() == 1 && nodes.front() == unconstrained);
}

[[noreturn]] void throw_no_placement_support(const char* who, const char* what) {
    throw config_error(fmt::format(
        "{}: {} needs oneTBB's CPU-topology support (libtbbbind, with hwloc), which this process "
        "could not load (Debian: libtbbbind-2-5)",
        who, what));
}

// The core types oneTBB knows, through the exported functions behind tbb::info::core_types, which
// oneTBB 2021 declares only under its preview macro (see placed_arena in arena.hpp).
std::vector<int> core_types() {
    std::vector<int> types(tbb::detail::r1::core_type_count());
    tbb::detail::r1::fill_core_type_indices(types.data());
    return types;
}

void check_placement(const backend_options& o) {
    if (o.numa_node.has_value()) {
        if (!placement_supported()) throw_no_placement_support("backend", "numa_node");
        const std::vector<tbb::numa_node_id> nodes = tbb::info::numa_nodes();
        if (std::find(nodes.begin(), nodes.end(), *o.numa_node) == nodes.end())
            throw config_error(fmt::format(
                "backend: numa_node {} does not exist; this machine's NUMA nodes are {}",
                *o.numa_node, fmt::join(nodes, ", ")));
    }
    if (o.threads_per_core.has_value()) {
        if (*o.threads_per_core < 1)
            throw config_error(fmt::format("backend: threads_per_core must be at least 1, got {}",
                                           *o.threads_per_core));
        if (!placement_supported()) throw_no_placement_support("backend", "threads_per_core");
    }
    if (o.core_type.has_value()) {
        if (!placement_supported()) throw_no_placement_support("backend", "core_type");
        const std::vector<int> types = core_types();
        if (std::find(types.begin(), types.end(), *o.core_type) == types.end() || *o.core_type < 0)
            throw config_error(fmt::format(
                "backend: core_type {} does not exist; this machine's core types are {}",
                *o.core_type,
                types == std::vector<int>{unconstrained}
                    ? std::string("not reported")
                    : fmt::format("{}", fmt::join(types, ", "))));
    }
}

// What an attached backend takes from the application's arena, refused with the reason rather
// than ignored.
void check_attachable(const backend_options& o) {
    if (o.threads.has_value())
        throw config_error(
            fmt::format("backend: threads cannot be set for a backend attached to "
                        "the application's arena (it has the arena's concurrency), "
                        "got {}",
                        *o.threads));
    if (o.session_slots != 1)
        throw config_error(
            fmt::format("backend: session_slots cannot be set for a backend attached "
                        "to the application's arena (the arena has the slots), "
                        "got {}",
                        o.session_slots));
    const char* option = o.numa_node.has_value()          ? "numa_node"
                         : o.threads_per_core.has_value() ? "threads_per_core"
                         : o.core_type.has_value()        ? "core_type"
                                                          : nullptr;
    if (option != nullptr)
        throw config_error(
            fmt::format("backend: {} places an arena of the backend's own; a backend "
                        "attached to the application's arena runs where that arena "
                        "runs",
                        option));
}

// The thread count and session slots of an owned arena.
void resolve_threads(const backend_options& o, backend_settings& s) {
    if (o.threads.has_value()) {
        if (*o.threads < 1 || *o.threads > max_threads)
            throw config_error(fmt::format("backend: threads must be between 1 and {}, got {}",
                                           max_threads, *o.threads));
        s.threads = *o.threads;
    } else if (s.where.constrains()) {
        // The CPUs the placement leaves (a node's); TESSERA_NUM_THREADS, a process-wide default,
        // is not read here, so that one backend per node gets each node's count.
        s.threads = default_concurrency(s.where);
    } else {
        s.threads = threads_from_environment_or(tbb::info::default_concurrency());
    }
    if (o.session_slots < 1 || o.session_slots > max_threads)
        throw config_error(fmt::format("backend: session_slots must be between 1 and {}, got {}",
                                       max_threads, o.session_slots));
    s.session_slots = o.session_slots;
}

backend_settings resolve(const backend_options& o) {
    backend_settings s;
    if (o.attachment.arena != nullptr && !o.attachment.attached)
        throw config_error(
            "backend: attachment.arena is set but attachment.attached is not; "
            "make the options with tessera::attached_to");
    if (o.attachment.attached) {
        check_attachable(o);
        s.attached = true;
        s.attached_to = o.attachment.arena;
        s.session_slots = 0;  // the thread count is the arena's, read when the backend attaches
    } else {
        check_placement(o);
        s.where = {o.numa_node.value_or(unconstrained), o.core_type.value_or(unconstrained),
                   o.threads_per_core.value_or(unconstrained)};
        resolve_threads(o, s);
    }
    s.retained_bytes_cap = o.retained_bytes_cap;
    if (o.grain < 1) throw config_error("backend: grain must be at least 1");
    s.grain = o.grain;
    if (o.plan_cache_capacity < 1 || o.plan_cache_capacity > max_plan_cache_capacity)
        throw config_error(
            fmt::format("backend: plan_cache_capacity must be between 1 and {}, got {}",
                        max_plan_cache_capacity, o.plan_cache_capacity));
    s.plan_cache_capacity = o.plan_cache_capacity;
    return s;
}

// oneTBB lets the arenas of a process use max_allowed_parallelism - 1 workers in all. The limit
// defaults to the process's CPU count, and an arena that asks for more gets no more workers and
// makes oneTBB print a warning on stderr. A backend asked for more threads than the CPUs raises the
// limit with a tbb::global_control for as long as it lives, when the limit in force is lower.
// oneTBB applies the smallest of several controls, so there is one, process-wide, set to the
// largest count a live backend asked for.
class parallelism_limit {
public:
    static parallelism_limit& instance() {
        // Never destroyed: a backend with static storage may outlive any other static.
        static parallelism_limit* const limit = new parallelism_limit;
        return *limit;
    }

    /// Registers a backend that wants `threads` (at least 2) and returns how many the process
    /// allows it now: `threads`, unless the application holds a global_control with a lower
    /// max_allowed_parallelism. Adds or raises tessera's control only when the limit in force is
    /// below `threads` (so an application's higher limit is left alone).
    int acquire(int threads) {
        using control = tbb::global_control;
        std::lock_guard lock(mutex_);
        if (threads > tbb::info::default_concurrency()) {
            const auto it = requests_.insert(threads);
            try {
                const int wanted = *requests_.rbegin();
                if (control::active_value(control::max_allowed_parallelism) <
                    static_cast<std::size_t>(wanted))
                    set_control(wanted);
            } catch (...) {
                requests_.erase(it);
                throw;
            }
        }
        const std::size_t allowed = control::active_value(control::max_allowed_parallelism);
        return allowed < static_cast<std::size_t>(threads) ? static_cast<int>(allowed) : threads;
    }

    /// Withdraws what acquire(threads) registered; the control goes with the last request above
    /// the CPU count (one that is still wanted stays, at the largest request left).
    void release(int threads) noexcept {
        std::lock_guard lock(mutex_);
        const auto it = requests_.find(threads);
        if (it == requests_.end()) return;
        requests_.erase(it);
        if (requests_.empty()) {
            control_.reset();
            control_value_ = 0;
        } else if (control_ && control_value_ > *requests_.rbegin()) {
            try {
                set_control(*requests_.rbegin());
            } catch (...) {
                // Keeping the higher limit is harmless: it only lets more workers run.
            }
        }
    }

private:
    // Replaces tessera's control with one at `threads` (higher when a larger request arrives,
    // lower when the largest one leaves).
    void set_control(int threads) {
        if (control_value_ == threads && control_) return;
        // Make the new control before dropping the old one, so the limit never falls to the
        // default in between.
        auto next = std::make_unique<tbb::global_control>(
            tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
        control_ = std::move(next);
        control_value_ = threads;
    }

    std::mutex mutex_;
    std::multiset<int> requests_;  // thread counts above the CPU count, one per live backend
    std::unique_ptr<tbb::global_control> control_;
    int control_value_ = 0;
};

bool is_leased(const workspace& w) noexcept { return w.leased.load(atomic_order::acquire); }

void add_counters(stats& to, const workspace& w) noexcept {
    w.counters.add_to(to);
    to.open_sessions += is_leased(w) ? 1 : 0;
}

}  // namespace

std::uint32_t assign_thread_ordinal() noexcept {
    static std::atomic<std::uint32_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

// An overflow workspace with its plan and product slots, made by lease_slow when the table is
// full.
struct overflow_workspace {
    overflow_workspace() noexcept {
        ws.plans = &plans;
        ws.products = &products;
    }
    overflow_workspace(const overflow_workspace&) = delete;
    overflow_workspace& operator=(const overflow_workspace&) = delete;

    workspace ws;
    plan_slots plans;
    product_slots products;
};

struct backend_core::cold_state {
    cold_state(std::size_t slots, std::size_t plan_cache_capacity)
        : table(new workspace[slots]),
          table_plans(new plan_slots[slots]),
          table_products(new product_slots[slots]),
          plans(plan_cache_capacity) {
        for (std::size_t i = 0; i < slots; ++i) {
            table[i].plans = &table_plans[i];
            table[i].products = &table_products[i];
        }
    }

    std::unique_ptr<arena_state> arena;
    std::unique_ptr<workspace[]> table;
    std::unique_ptr<plan_slots[]> table_plans;        // the table's plan slots, one per workspace
    std::unique_ptr<product_slots[]> table_products;  // and product slots

    mutable std::mutex mutex;  // guards shared and overflow
    free_lists shared;         // blocks freed outside any session of this backend
    std::vector<std::unique_ptr<overflow_workspace>> overflow;
    std::atomic<std::size_t> pooled_bytes{0};  // payload bytes of live pooled blocks, free or lent
    plan_cache plans;
};

backend_core::backend_core(const backend_settings& settings)
    : id_(next_backend_id()), settings_(settings) {
    auto cold = std::make_unique<cold_state>(table_size, settings.plan_cache_capacity);
    table_ = cold->table.get();
    cold_ = cold.get();
    if (settings_.attached) {
        attach(*cold);
        register_backend(this);
        cold.release();  // owned through cold_ from here on
        return;
    }
    if (settings_.threads > 1) {
        // threads() tells the truth: what the process allows, which is what was asked for unless
        // the application caps oneTBB's parallelism lower.
        requested_threads_ = settings_.threads;
        settings_.threads = parallelism_limit::instance().acquire(requested_threads_);
    }
    try {
        // A placed backend has an arena even at one thread, so that the session's thread is
        // bound while it runs in it.
        if (settings_.threads > 1 || settings_.where.constrains()) {
            // threads - 1 workers serve every session; each session slot is reserved for an
            // application thread, so a session always has its own thread plus the workers.
            arena_slots_ = settings_.threads - 1 + settings_.session_slots;
            cold->arena = std::make_unique<arena_state>(settings_.where, arena_slots_,
                                                        settings_.session_slots);
            arena_ = cold->arena.get();
            // Initialise now, not on first use: the first run should not pay for it, and the
            // floating-point environment of the constructing thread is captured here.
            arena_->arena.initialize();
        }
        register_backend(this);
        cold.release();  // owned through cold_ from here on
    } catch (...) {
        // No destructor runs for a constructor that throws: withdraw the request here.
        if (requested_threads_ > 1) parallelism_limit::instance().release(requested_threads_);
        throw;
    }
}

void backend_core::attach(cold_state& cold) {
    if (settings_.attached_to != nullptr) {
        // Not initialised here: the application's settings stay its own until its first use (or
        // ours), and an arena not yet initialised reports the concurrency it will have.
        cold.arena = std::make_unique<arena_state>(task_arena_of(settings_.attached_to));
    } else {
        // Inside a session or chunk of a backend, the thread's arena is that backend's own.
        if (this_thread.innermost != nullptr || this_thread.chunk_of != nullptr)
            throw config_error(
                "backend: attached_to_current_arena inside a tessera session or parallel op: the "
                "thread's arena is that backend's own; pass the application's arena with "
                "tessera::attached_to");
        cold.arena = std::make_unique<arena_state>(tbb::task_arena::attach{});
        if (!cold.arena->arena.is_active())
            throw config_error(
                "backend: attached_to_current_arena: the constructing thread runs in no oneTBB "
                "arena; build the backend inside the application's arena (in task_arena::execute "
                "or one of its tasks), or pass the arena with tessera::attached_to");
        // options() hands this handle on: a backend built from them attaches to the same arena.
        settings_.attached_to = reinterpret_cast<application_arena*>(&cold.arena->arena);
    }
    arena_ = cold.arena.get();
    settings_.threads = arena_->arena.max_concurrency();
    arena_slots_ = settings_.threads;
}

backend_core::~backend_core() {
    for (std::size_t i = 0; i < table_size; ++i)
        TESSERA_CHECK(!is_leased(table_[i]), "backend destroyed while one of its sessions is open");
    unregister_backend(this);
    cold_->arena.reset();
    arena_ = nullptr;
    if (requested_threads_ > 1) parallelism_limit::instance().release(requested_threads_);
    free_all(cold_->shared);
    for (std::size_t i = 0; i < table_size; ++i) free_all(table_[i].lists);
    for (auto& o : cold_->overflow) {
        TESSERA_CHECK(!is_leased(o->ws), "backend destroyed while one of its sessions is open");
        free_all(o->ws.lists);
    }
    delete cold_;
}

plan_cache& backend_core::plans() noexcept { return cold_->plans; }

workspace& backend_core::lease_slow(thread_state& ts) {
    const std::size_t start = thread_ordinal(ts);
    for (std::size_t i = 1; i < table_size; ++i) {
        workspace& w = table_[(start + i) & (table_size - 1)];
        if (!w.leased.load(atomic_order::relaxed) &&
            !w.leased.exchange(true, atomic_order::acquire))
            return w;
    }
    std::lock_guard lock(cold_->mutex);
    for (auto& o : cold_->overflow)
        if (!o->ws.leased.exchange(true, atomic_order::acquire)) return o->ws;
    cold_->overflow.push_back(std::make_unique<overflow_workspace>());
    workspace& w = cold_->overflow.back()->ws;
    w.leased.store(true, atomic_order::relaxed);
    return w;
}

block_header* backend_core::refill(unsigned size_class, workspace& w) {
    session_counters& c = w.counters;
    {
        std::lock_guard lock(cold_->mutex);
        if (block_header* b = cold_->shared.pop(size_class)) {
            ++c.pool_hits;
            return b;
        }
    }
    ++c.pool_misses;
    const std::size_t bytes = std::size_t{1} << size_class;
    if (!reserve(bytes)) {
        make_room(bytes, w);
        if (!reserve(bytes)) {
            // Trimming could not make room: serve it from the heap, unpooled, so it goes
            // straight back when freed.
            ++c.pool_bypasses;
            return heap_allocate_block(size_class, 0);
        }
    }
    try {
        return heap_allocate_block(size_class, id_);
    } catch (...) {
        cold_->pooled_bytes.fetch_sub(bytes, std::memory_order_relaxed);
        throw;
    }
}

bool backend_core::reserve(std::size_t bytes) noexcept {
    const std::size_t cap = settings_.retained_bytes_cap;
    std::atomic<std::size_t>& pooled_bytes = cold_->pooled_bytes;
    std::size_t pooled = pooled_bytes.load(std::memory_order_relaxed);
    do {
        if (bytes > cap || pooled > cap - bytes) return false;
    } while (
        !pooled_bytes.compare_exchange_weak(pooled, pooled + bytes, std::memory_order_relaxed));
    return true;
}

void backend_core::make_room(std::size_t bytes, workspace& w) noexcept {
    const std::size_t cap = settings_.retained_bytes_cap;
    if (bytes > cap) return;  // no amount of trimming makes it fit
    std::atomic<std::size_t>& pooled_bytes = cold_->pooled_bytes;
    // How far over the cap `bytes` more would be; pooled_bytes moves under us, so this is the
    // goal, and reserve() decides.
    auto excess = [&] {
        const std::size_t pooled = pooled_bytes.load(std::memory_order_relaxed);
        return pooled > cap - bytes ? pooled - (cap - bytes) : 0;
    };
    auto trim_from = [&](free_lists& lists) {
        const std::size_t wanted = excess();
        if (wanted == 0) return;
        pooled_bytes.fetch_sub(free_largest(lists, wanted, w.counters.pool_trims),
                               std::memory_order_relaxed);
    };
    // The session's own idle blocks first (no lock: its thread holds them), then the shared pool,
    // then workspaces no session holds (leased for the moment, as trim() does).
    trim_from(w.lists);
    {
        std::lock_guard lock(cold_->mutex);
        trim_from(cold_->shared);
    }
    auto trim_if_idle = [&](workspace& other) {
        if (excess() == 0 || other.leased.exchange(true, atomic_order::acquire)) return;
        trim_from(other.lists);
        other.counters.bytes_retained.store(other.lists.retained_bytes, atomic_order::relaxed);
        other.leased.store(false, atomic_order::release);
    };
    for (std::size_t i = 0; i < table_size; ++i) trim_if_idle(table_[i]);
    std::lock_guard lock(cold_->mutex);
    for (auto& o : cold_->overflow) trim_if_idle(o->ws);
}

void backend_core::take_back(block_header* b) noexcept {
    std::lock_guard lock(cold_->mutex);
    cold_->shared.push(b);
}

stats backend_core::snapshot() const {
    stats s;
    for (std::size_t i = 0; i < table_size; ++i) add_counters(s, table_[i]);
    std::lock_guard lock(cold_->mutex);
    for (const auto& o : cold_->overflow) add_counters(s, o->ws);
    s.bytes_retained += cold_->shared.retained_bytes;
    s.plan_cache_evictions = cold_->plans.evictions();
    return s;
}

std::size_t backend_core::trim() noexcept {
    std::size_t freed = 0;
    auto trim_if_idle = [&](workspace& w) {
        if (w.leased.exchange(true, atomic_order::acquire)) return;  // in use: skip
        freed += free_all(w.lists);
        w.counters.bytes_retained.store(0, atomic_order::relaxed);
        w.leased.store(false, atomic_order::release);
    };
    for (std::size_t i = 0; i < table_size; ++i) trim_if_idle(table_[i]);
    std::lock_guard lock(cold_->mutex);
    for (auto& o : cold_->overflow) trim_if_idle(o->ws);
    freed += free_all(cold_->shared);
    cold_->pooled_bytes.fetch_sub(freed, std::memory_order_relaxed);
    return freed;
}

}  // namespace detail

backend::backend() : backend(backend_options{}) {}

backend::backend(const backend_options& options)
    : core_(new detail::backend_core(detail::resolve(options))) {}

backend::~backend() { delete core_; }

stats backend::stats() const { return core_->snapshot(); }

std::size_t backend::trim() noexcept { return core_->trim(); }

std::vector<std::unique_ptr<backend>> backends_per_numa_node(const backend_options& options) {
    if (options.attachment.attached)
        throw config_error(
            "backends_per_numa_node: the options attach to the application's arena; "
            "a backend per node owns its arena");
    if (options.numa_node.has_value())
        throw config_error(
            fmt::format("backends_per_numa_node: the options set numa_node {}; each "
                        "backend gets its own node",
                        *options.numa_node));
    if (!detail::placement_supported())
        detail::throw_no_placement_support("backends_per_numa_node", "placing backends on nodes");
    std::vector<std::unique_ptr<backend>> backends;
    for (const tbb::numa_node_id node : tbb::info::numa_nodes())
        backends.push_back(std::make_unique<backend>(options.with_numa_node(node)));
    return backends;
}

backend_options backend::options() const noexcept {
    const detail::backend_settings& s = core_->settings();
    backend_options o;
    o.threads = s.threads;
    o.session_slots = s.session_slots;
    o.retained_bytes_cap = s.retained_bytes_cap;
    o.grain = s.grain;
    o.plan_cache_capacity = s.plan_cache_capacity;
    if (s.attached) {
        // Options that build an equal backend: the thread count and slots are the arena's.
        o.threads.reset();
        o.session_slots = 1;
        o.attachment = {true, s.attached_to};
        return o;
    }
    const auto option = [](int value) {
        return value == detail::unconstrained ? std::nullopt : std::optional<int>(value);
    };
    o.numa_node = option(s.where.numa_node);
    o.threads_per_core = option(s.where.threads_per_core);
    o.core_type = option(s.where.core_type);
    return o;
}

}  // namespace tessera
