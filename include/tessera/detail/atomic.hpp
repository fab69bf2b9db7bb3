// tessera/detail/atomic.hpp - atomic_cell, the few atomic operations that the inline session paths
// need (the workspace's lease flag, its counters), without <atomic>. With libstdc++ 12
// in C++20, <atomic> alone costs a translation unit about 0.4 s of compile time (it brings in the
// atomic wait machinery, <bits/chrono.h> among it), more than all of session.hpp's other includes
// together. GCC and Clang provide the __atomic builtins that their std::atomic is itself built
// on, so there atomic_cell calls them directly and compiles to the same instructions (and
// ThreadSanitizer instruments them the same way); any other compiler gets std::atomic.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define TESSERA_ATOMIC_BUILTINS 1
#else
#define TESSERA_ATOMIC_BUILTINS 0
#include <atomic>
#endif

#include <type_traits>

namespace tessera::detail {

/// The memory orders atomic_cell takes, with std::memory_order's meaning.
#if TESSERA_ATOMIC_BUILTINS
enum class atomic_order : int {
    relaxed = __ATOMIC_RELAXED,
    acquire = __ATOMIC_ACQUIRE,
    release = __ATOMIC_RELEASE,
    acq_rel = __ATOMIC_ACQ_REL,
};
#else
enum class atomic_order : int {
    relaxed = static_cast<int>(std::memory_order_relaxed),
    acquire = static_cast<int>(std::memory_order_acquire),
    release = static_cast<int>(std::memory_order_release),
    acq_rel = static_cast<int>(std::memory_order_acq_rel),
};
#endif

/// A lock-free atomic object of a small integral type (bool, std::uint64_t, ...) with load, store
/// and exchange: the subset of std::atomic<T> that tessera's headers use. The order passed must
/// be one the operation allows (as for std::atomic: no acquire on a store, no release on a load).
template <class T>
class atomic_cell {
    static_assert(std::is_integral_v<T>, "atomic_cell holds an integral type");

public:
    constexpr atomic_cell() noexcept = default;
    constexpr explicit atomic_cell(T value) noexcept : value_(value) {}
    atomic_cell(const atomic_cell&) = delete;
    atomic_cell& operator=(const atomic_cell&) = delete;

#if TESSERA_ATOMIC_BUILTINS
    static_assert(__atomic_always_lock_free(sizeof(T), 0), "atomic_cell must be lock-free");

    // always_inline, as in libstdc++'s std::atomic: the builtins need the order as a constant,
    // which it is once the call is inlined (a call that is not inlined would be seq_cst).
    [[gnu::always_inline]] T load(atomic_order order) const noexcept {
        return __atomic_load_n(&value_, static_cast<int>(order));
    }
    [[gnu::always_inline]] void store(T value, atomic_order order) noexcept {
        __atomic_store_n(&value_, value, static_cast<int>(order));
    }
    [[gnu::always_inline]] T exchange(T value, atomic_order order) noexcept {
        return __atomic_exchange_n(&value_, value, static_cast<int>(order));
    }

private:
    // Naturally aligned, as std::atomic<T> is (a plain std::uint64_t is 4-aligned on i386).
    alignas(sizeof(T)) T value_{};
#else
    T load(atomic_order order) const noexcept {
        return value_.load(static_cast<std::memory_order>(order));
    }
    void store(T value, atomic_order order) noexcept {
        value_.store(value, static_cast<std::memory_order>(order));
    }
    T exchange(T value, atomic_order order) noexcept {
        return value_.exchange(value, static_cast<std::memory_order>(order));
    }

private:
    std::atomic<T> value_{};
#endif
};

}  // namespace tessera::detail
