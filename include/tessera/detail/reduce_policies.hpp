// tessera/detail/reduce_policies.hpp - what each reduction computes: per op, how an accumulator
// starts, folds one element, joins another and finishes. Part of ops/reduce.hpp; the leaves and
// the tree that fold with them are in detail/reduce_leaves.hpp.
#pragma once

#include <tessera/detail/iteration.hpp>
#include <tessera/dtype.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor_view.hpp>

#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessera::detail::reductions {

/// The reduced elements of one output: an iteration space over the input (rank >= 1, walked in
/// row-major order) and its element count.
struct strided_space : iteration<1> {
    strided_space() noexcept { rank = 1; }
    std::size_t count = 0;
};

// ---------------------------------------------------------------------------------------------
// Per-op policies: how to start, fold one element, join two partial results (left = earlier
// elements) and finish. `init` is only a starting value for accumulators; `empty` is the result
// of reducing zero elements.

template <class T>
constexpr bool is_nan(T x) noexcept {
    if constexpr (std::is_floating_point_v<T>)
        return x != x;
    else
        return false;
}

template <class T>
constexpr T negative_zero() noexcept {
    // -0 is the exact additive identity in IEEE arithmetic: -0 + x == x for every x, +0 and -0
    // included, so starting accumulators there changes no result.
    if constexpr (is_complex_v<T>) {
        using R = real_type_t<T>;
        return T(-R(0), -R(0));
    } else {
        return -T(0);
    }
}

// Integers accumulate in uint64: wrap-around is defined there, and converting back to the
// element type keeps the low bits (two's complement), which is what an exact wrapped sum gives.
template <class T>
using wide_t = std::conditional_t<std::is_integral_v<T>, std::uint64_t, T>;

template <class T>
constexpr wide_t<T> widen(T x) noexcept {
    if constexpr (std::is_integral_v<T>)
        return static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
    else
        return x;
}

template <class T>
struct sum_policy {
    using acc = wide_t<T>;
    using result = T;
    static constexpr bool needs_elements = false;
    static constexpr bool uses_index = false;
    static constexpr bool exact = false;  // rounding depends on the order of operations
    static acc init() noexcept {
        if constexpr (std::is_integral_v<T>)
            return 0;
        else
            return negative_zero<T>();
    }
    static acc step(acc a, T x, std::int64_t) noexcept { return a + widen(x); }
    static acc join(acc a, acc b) noexcept { return a + b; }
    static result finish(acc a, std::size_t, const T*, const strided_space&) noexcept {
        return static_cast<T>(a);
    }
    static result empty() noexcept { return T{}; }
};

template <class T>
struct prod_policy {
    using acc = wide_t<T>;
    using result = T;
    static constexpr bool needs_elements = false;
    static constexpr bool uses_index = false;
    static constexpr bool exact = false;  // rounding depends on the order of operations
    static acc init() noexcept { return acc{1}; }
    static acc step(acc a, T x, std::int64_t) noexcept { return a * widen(x); }
    static acc join(acc a, acc b) noexcept { return a * b; }
    static result finish(acc a, std::size_t, const T*, const strided_space&) noexcept {
        return static_cast<T>(a);
    }
    static result empty() noexcept { return T{1}; }
};

template <class T>
using mean_result_t = std::conditional_t<floating<T>, T, double>;

template <class T>
struct mean_policy {
    using acc = mean_result_t<T>;
    using result = acc;
    static constexpr bool needs_elements = false;
    static constexpr bool uses_index = false;
    static constexpr bool exact = false;  // rounding depends on the order of operations
    static acc init() noexcept { return negative_zero<acc>(); }
    static acc step(acc a, T x, std::int64_t) noexcept { return a + static_cast<acc>(x); }
    static acc join(acc a, acc b) noexcept { return a + b; }
    static result finish(acc a, std::size_t n, const T*, const strided_space&) noexcept {
        return a / static_cast<real_type_t<acc>>(n);
    }
    static result empty() noexcept {
        constexpr auto nan = std::numeric_limits<real_type_t<acc>>::quiet_NaN();
        if constexpr (is_complex_v<acc>)
            return acc(nan, nan);
        else
            return nan;
    }
};

template <class T>
using norm_result_t = std::conditional_t<floating<T>, real_type_t<T>, double>;

template <class T>
double squared_magnitude(T x) noexcept {
    if constexpr (is_complex_v<T>) {
        const auto re = static_cast<double>(x.real()), im = static_cast<double>(x.imag());
        return re * re + im * im;
    } else {
        const auto v = static_cast<double>(x);
        return v * v;
    }
}

template <class T>
double largest_part(T x) noexcept {
    if constexpr (is_complex_v<T>)
        return std::max(std::abs(x.real()), std::abs(x.imag()));
    else
        return std::abs(static_cast<double>(x));
}

template <class Fn>
void for_each_run(const strided_space& sp, std::size_t lo, std::size_t hi, Fn&& fn) noexcept;

// The slow path of norm for double types when the sum of squares overflowed or may have
// underflowed: scale by the largest magnitude, then sum the scaled squares.
template <class T>
double rescaled_norm(const T* p, const strided_space& red) noexcept {
    double scale = 0.0;
    for_each_run(red, 0, red.count,
                 [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t st, std::size_t) {
                     for (std::size_t i = 0; i < len; ++i)
                         scale = std::max(
                             scale, largest_part(p[off + static_cast<std::ptrdiff_t>(i) * st]));
                 });
    if (scale == 0.0 || scale > std::numeric_limits<double>::max()) return scale;
    double ssq = 0.0;
    for_each_run(red, 0, red.count,
                 [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t st, std::size_t) {
                     for (std::size_t i = 0; i < len; ++i) {
                         const T x = p[off + static_cast<std::ptrdiff_t>(i) * st];
                         if constexpr (is_complex_v<T>) {
                             const double re = x.real() / scale, im = x.imag() / scale;
                             ssq += re * re + im * im;
                         } else {
                             const double v = static_cast<double>(x) / scale;
                             ssq += v * v;
                         }
                     }
                 });
    return scale * std::sqrt(ssq);
}

template <class T>
struct norm_policy {
    using acc = double;
    using result = norm_result_t<T>;
    static constexpr bool needs_elements = false;
    static constexpr bool uses_index = false;
    static constexpr bool exact = false;  // rounding depends on the order of operations
    static acc init() noexcept { return 0.0; }
    static acc step(acc a, T x, std::int64_t) noexcept { return a + squared_magnitude(x); }
    static acc join(acc a, acc b) noexcept { return a + b; }
    static result finish(acc a, std::size_t, const T* p, const strided_space& red) noexcept {
        // float squares cannot overflow or underflow in double; double squares can beyond
        // ~1e154 and below ~1e-154. 2^-900 leaves room for the tiny squares to matter.
        if constexpr (std::same_as<real_type_t<T>, double>)
            if (a > std::numeric_limits<double>::max() || a < 0x1p-900)
                return rescaled_norm(p, red);
        return static_cast<result>(std::sqrt(a));
    }
    static result empty() noexcept { return result{0}; }
};

template <class T>
constexpr T lowest_value() noexcept {
    if constexpr (std::numeric_limits<T>::has_infinity)
        return -std::numeric_limits<T>::infinity();
    else
        return std::numeric_limits<T>::lowest();
}
template <class T>
constexpr T highest_value() noexcept {
    if constexpr (std::numeric_limits<T>::has_infinity)
        return std::numeric_limits<T>::infinity();
    else
        return std::numeric_limits<T>::max();
}

template <class T>
struct max_policy {
    using acc = T;
    using result = T;
    static constexpr bool needs_elements = true;
    static constexpr bool uses_index = false;
    static constexpr bool exact = true;  // any order gives the same result
    static acc init() noexcept { return lowest_value<T>(); }
    // Once the accumulator is NaN, `a < x` is false and no later element replaces it. `|`, not
    // `||`: without a branch the lanes of a leaf become vector compares and blends.
    static acc step(acc a, T x, std::int64_t) noexcept {
        const bool larger = a < x, nan = is_nan(x);
        return (larger | nan) ? x : a;
    }
    static acc join(acc a, acc b) noexcept { return step(a, b, 0); }
    static result finish(acc a, std::size_t, const T*, const strided_space&) noexcept { return a; }
    static result empty() noexcept { return T{}; }
};

template <class T>
struct min_policy {
    using acc = T;
    using result = T;
    static constexpr bool needs_elements = true;
    static constexpr bool uses_index = false;
    static constexpr bool exact = true;  // any order gives the same result
    static acc init() noexcept { return highest_value<T>(); }
    static acc step(acc a, T x, std::int64_t) noexcept {
        const bool smaller = x < a, nan = is_nan(x);
        return (smaller | nan) ? x : a;
    }
    static acc join(acc a, acc b) noexcept { return step(a, b, 0); }
    static result finish(acc a, std::size_t, const T*, const strided_space&) noexcept { return a; }
    static result empty() noexcept { return T{}; }
};

template <class T>
struct arg_acc {
    T value{};
    std::int64_t index = -1;  // -1: no element seen yet
};

template <class T, bool Max>
struct arg_policy {
    using acc = arg_acc<T>;
    using result = std::int64_t;
    static constexpr bool needs_elements = true;
    static constexpr bool uses_index = true;  // indices are logical: axes keep their order
    static constexpr bool exact = true;
    static bool better(T x, T y) noexcept { return Max ? y < x : x < y; }
    // Starts below (above) every element but NaN, so nothing needs a "first element" branch. If
    // the index is still -1 at the end, every element equalled this value: the first one wins.
    static acc init() noexcept { return {Max ? lowest_value<T>() : highest_value<T>(), -1}; }
    static bool takes(T x, T best) noexcept {
        const bool wins = better(x, best), x_nan = is_nan(x), best_nan = is_nan(best);
        return wins | (x_nan & !best_nan);
    }
    // Within one accumulator indices only grow, so a strict comparison keeps the first of ties.
    static acc step(acc a, T x, std::int64_t j) noexcept {
        return takes(x, a.value) ? acc{x, j} : a;
    }
    // A total order (NaN first, then better value, then smaller index), so any grouping of the
    // partial results picks the same element.
    static acc join(acc a, acc b) noexcept {
        if (b.index < 0) return a;
        if (a.index < 0) return b;
        const bool an = is_nan(a.value), bn = is_nan(b.value);
        if (an || bn) {
            if (an && bn) return a.index < b.index ? a : b;
            return an ? a : b;
        }
        if (better(b.value, a.value)) return b;
        if (better(a.value, b.value)) return a;
        return a.index < b.index ? a : b;
    }
    static result finish(acc a, std::size_t, const T*, const strided_space&) noexcept {
        return a.index < 0 ? 0 : a.index;
    }
    static result empty() noexcept { return 0; }
};
template <class T>
using argmax_policy = arg_policy<T, true>;
template <class T>
using argmin_policy = arg_policy<T, false>;

}  // namespace tessera::detail::reductions
