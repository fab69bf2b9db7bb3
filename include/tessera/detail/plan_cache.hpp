// tessera/detail/plan_cache.hpp - where einsum plans are kept: a bounded LRU cache in the backend,
// shared by all sessions under a mutex, and a few lock-free slots in each workspace in front of it.
// The plans themselves (einsum_program) are defined in detail/einsum.hpp; parsing and planning
// live in src/einsum.cpp.
#pragma once

#include <tessera/shape.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace tessera::detail {

struct einsum_program;

/// One step of a contraction path in NumPy's convention: contract the operands at these two
/// positions of the current operand list, remove them and append the result at the end.
using path_step = std::array<std::size_t, 2>;

/// What a plan is looked up by: the spec's text, the element type, the operands' shapes and the
/// caller's path (empty: tessera chooses). Strides are not part of it: a plan decides nothing from
/// them (whether an operand can be viewed as a matrix is checked when the plan runs).
struct plan_key {
    std::string_view spec;
    std::uint8_t dtype = 0;
    std::span<const shape* const> shapes;
    std::span<const path_step> path;
};

/// Returns a hash of everything in `key`.
std::uint64_t hash_of(const plan_key& key) noexcept;

/// The plans a workspace remembers, looked up without a lock by the one session that leases it.
/// Direct-mapped on the spec's address and the shapes: a warm call compares one entry.
struct plan_slots {
    static constexpr std::size_t count = 16;
    struct entry {
        const char* spec = nullptr;  // address of the spec text last seen for this plan
        std::shared_ptr<const einsum_program> plan;
    };
    std::array<entry, count> entries;
};

/// The backend's bounded plan cache: least recently used plans are evicted beyond `capacity`.
/// Thread-safe. Plans are immutable and shared, so an evicted plan stays valid for whoever still
/// holds it (a workspace slot, an einsum_plan).
class plan_cache {
public:
    explicit plan_cache(std::size_t capacity);
    ~plan_cache();
    plan_cache(const plan_cache&) = delete;
    plan_cache& operator=(const plan_cache&) = delete;

    /// Returns the plan for `key`, or null. A hit becomes the most recently used entry.
    std::shared_ptr<const einsum_program> find(const plan_key& key, std::uint64_t hash);
    /// Adds `plan` (made for `key`) unless another thread added one first, and returns the one
    /// kept; evicts the least recently used plan when full.
    std::shared_ptr<const einsum_program> insert(std::shared_ptr<const einsum_program> plan,
                                                 std::uint64_t hash);

    std::uint64_t evictions() const noexcept { return evictions_.load(std::memory_order_relaxed); }
    std::size_t capacity() const noexcept { return capacity_; }

private:
    struct impl;
    std::unique_ptr<impl> impl_;
    std::size_t capacity_;
    std::atomic<std::uint64_t> evictions_{0};
};

}  // namespace tessera::detail
