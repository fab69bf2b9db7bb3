// tessera/ops/reduce.hpp - reductions over any set of axes: sum, prod, mean, max, min, norm (L2),
// argmax and argmin, their scalar *_all forms, and the engine under them.
//
// Each reduction is a function object with three forms:
//   tessera::sum(s, a)                            over every axis: a rank-0 tensor
//   tessera::sum(s, a, {0, -1}, keepdims)         over the listed axes: a new tensor
//   tessera::sum(s, a, {0, -1}, keepdims, out)    into `out`: never allocates
// and tessera::sum_all(s, a) returns the full reduction as a plain value. argmax/argmin take one
// axis (or tessera::all_axes: the flattened tensor) instead of a list.
//
// What each reduction computes:
// - sum, prod: the element type. Integers wrap modulo 2^bits (accumulated in 64 bits, as
//   NumPy does); an empty sum is 0, an empty product 1.
// - mean: floating types give their own type; integer types give double (accumulated in double,
//   as NumPy does). The mean of zero elements is NaN.
// - norm: sqrt(sum |x|^2), the L2 norm, real for complex input, double for integers; NOT
//   std::norm (which is |z|^2). float types accumulate squares in double; double types take a
//   rescaled second pass when the squares overflow or underflow. The norm of nothing is 0.
// - max, min, argmax, argmin: real types only (complex does not compile). A NaN wins: max/min
//   return NaN, argmax/argmin the index of the first NaN. Ties go to the first occurrence.
//   argmax/argmin return std::int64_t indices along the axis (row-major over the flattened
//   tensor for all_axes). Reducing zero elements into at least one output is a shape_error.
//
// Accuracy and determinism: sums (and mean, norm, prod) are pairwise. Elements are folded in
// leaves of 128 (8 interleaved accumulators; 64 per output when neighbouring outputs are reduced
// together) and leaves are joined as a binary tree of depth ~log2(leaves), so rounding error grows
// with log n rather than n: a 10M-element float sum stays within ~1e-7 of the exact value, where a
// plain float loop is off by ~3e-5 (random values) or ~1e-2 (adding 0.1f ten million times).
// The tree depends only on the input's shape and strides, never on the thread count or on
// timing: a parallel run (the runtime's tree_reduce over the same tree) returns
// bit-for-bit what a one-thread run returns.
//
// Parallel policy: an op whose work (elements read) is at most the backend's grain runs inline
// on the session's thread and wakes nobody (one inline dispatch); a larger one makes exactly one
// parallel dispatch: outputs are spread over the arena and, when there are few outputs, each
// output's tree is split across threads too. No heap: scratch lives on the stack (up to 32 KiB
// for the per-column partial results of a column-wise reduction).
//
// Checks, all before anything is written: axes in range and distinct, `out` of the result's
// shape, not repeating elements and not partially overlapping the input (alias_error), and a
// non-empty reduction for max/min/argmax/argmin. Messages name the op.
#pragma once

#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/runtime.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <complex>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <ranges>
#include <span>
#include <type_traits>

namespace tessera {

namespace detail {
[[noreturn]] void throw_empty_reduction(const char* op, const shape& in, std::uint32_t mask);
}  // namespace detail

// The engine lives in its own namespace so that its helpers cannot collide with other headers'.
namespace detail::reductions {

// ---------------------------------------------------------------------------------------------
// Validation

/// Returns the reduced axes of a rank-`rank` input as a bit mask, or throws shape_error naming
/// `op` for an axis out of range or given twice.
inline std::uint32_t reduction_mask(const char* op, const axis_list& axes, std::size_t rank) {
    if (axes.all()) return (std::uint32_t{1} << rank) - 1u;
    if (axes.given() > max_rank) throw_permutation_size(op, axes.given(), rank);
    std::uint32_t mask = 0;
    for (const any_integer& axis : axes.values()) {
        const std::size_t a = normalize_axis(op, axis, rank);
        if ((mask >> a) & 1u) throw_duplicate_axis(op, a);
        mask |= std::uint32_t{1} << a;
    }
    return mask;
}

/// Returns the shape of the result: the kept axes, with extent-1 axes in place of the reduced
/// ones when `keepdims`.
inline shape reduced_shape(const shape& in, std::uint32_t mask, bool keepdims) noexcept {
    std::array<std::size_t, max_rank> dims{};
    std::size_t rank = 0;
    for (std::size_t a = 0; a < in.rank(); ++a) {
        if (((mask >> a) & 1u) == 0)
            dims[rank++] = in[a];
        else if (keepdims)
            dims[rank++] = 1;
    }
    return shape::unchecked(std::span<const std::size_t>(dims.data(), rank));
}

/// Throws shape_error when a reduction without identity (max, argmax, ...) would have to produce
/// an output from zero elements.
inline void check_nonempty(const char* op, const shape& in, std::uint32_t mask) {
    std::size_t reduced = 1, kept = 1;
    for (std::size_t a = 0; a < in.rank(); ++a) ((mask >> a) & 1u ? reduced : kept) *= in[a];
    if (reduced == 0 && kept != 0) throw_empty_reduction(op, in, mask);
}

// ---------------------------------------------------------------------------------------------
// Per-op policies: how to start, fold one element, join two partial results (left = earlier
// elements) and finish. `init` is only a starting value for accumulators; `empty` is the result
// of reducing zero elements.

/// A strided index space of rank >= 1, walked in row-major order.
struct strided_space {
    std::size_t rank = 1;
    std::array<std::size_t, max_rank> extents{};
    stride_array strides{};
    std::size_t count = 0;
};

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

// ---------------------------------------------------------------------------------------------
// The engine

/// Elements per leaf of the pairwise tree when each output is reduced alone (scalar mode), and
/// the interleaved accumulators a leaf uses; a leaf of at most `short_leaf` elements uses one.
/// Exact ops (max, min, arg*) give the same result for any tree, so their leaves are longer: the
/// lane joins at the end of a leaf are scalar and branchy.
template <class P>
inline constexpr std::size_t scalar_leaf = P::exact ? 2048 : 128;
inline constexpr std::size_t scalar_lanes = 8;
inline constexpr std::size_t short_leaf = 16;
/// Elements per leaf (per output) when neighbouring outputs are reduced together (tile mode).
template <class P>
inline constexpr std::size_t tile_leaf = P::exact ? 512 : 64;
/// Outputs a tile reduces together: one 64-byte line of input per reduced element.
template <class T>
inline constexpr std::size_t tile_width = std::clamp<std::size_t>(64 / sizeof(T), 4, 16);
/// Stack bytes a streamed group of tile-mode outputs may use for its per-column tree state.
inline constexpr std::size_t stream_bytes = 32 * 1024;

/// Calls `fn(offset, length, stride, first)` for each run along the innermost axis covering the
/// flat indices [lo, hi) of `sp` in row-major order; `first` is the run's first flat index.
template <class Fn>
void for_each_run(const strided_space& sp, std::size_t lo, std::size_t hi, Fn&& fn) noexcept {
    const std::size_t last = sp.rank - 1;
    const std::ptrdiff_t inner_stride = sp.strides[last];
    if (sp.rank == 1) {
        fn(static_cast<std::ptrdiff_t>(lo) * inner_stride, hi - lo, inner_stride, lo);
        return;
    }
    std::array<std::size_t, max_rank> index{};
    std::ptrdiff_t offset = 0;
    std::size_t rest = lo;
    for (std::size_t a = sp.rank; a-- > 0;) {
        index[a] = rest % sp.extents[a];
        rest /= sp.extents[a];
        offset += static_cast<std::ptrdiff_t>(index[a]) * sp.strides[a];
    }
    for (std::size_t pos = lo; pos < hi;) {
        const std::size_t len = std::min(sp.extents[last] - index[last], hi - pos);
        fn(offset, len, inner_stride, pos);
        pos += len;
        index[last] += len;
        offset += static_cast<std::ptrdiff_t>(len) * inner_stride;
        for (std::size_t a = last; a > 0 && index[a] == sp.extents[a]; --a) {
            offset -= static_cast<std::ptrdiff_t>(index[a]) * sp.strides[a];
            index[a] = 0;
            ++index[a - 1];
            offset += sp.strides[a - 1];
        }
    }
}

/// Folds the run q[0], q[st], ... (len elements, the first with flat index j) into `a`. Taking and
/// returning the accumulators by value keeps them in registers.
template <class P, class T>
typename P::acc fold_run(typename P::acc a, const T* q, std::size_t len, std::ptrdiff_t st,
                         std::int64_t j) noexcept {
    for (std::size_t i = 0; i < len; ++i)
        a = P::step(a, q[static_cast<std::ptrdiff_t>(i) * st], j + static_cast<std::int64_t>(i));
    return a;
}

template <class A>
using leaf_lanes = std::array<A, scalar_lanes>;

/// Folds a run into the interleaved accumulators: element i goes to lane i % scalar_lanes.
template <class P, class T>
leaf_lanes<typename P::acc> fold_run_lanes(leaf_lanes<typename P::acc> lanes, const T* q,
                                           std::size_t len, std::ptrdiff_t st,
                                           std::int64_t j) noexcept {
    constexpr std::size_t L = scalar_lanes;
    std::size_t i = 0;
    if (st == 1) {  // the dense case: independent lanes become vector operations
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k)
                lanes[k] = P::step(lanes[k], q[i + k], j + static_cast<std::int64_t>(i + k));
    } else {
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k)
                lanes[k] = P::step(lanes[k], q[static_cast<std::ptrdiff_t>(i + k) * st],
                                   j + static_cast<std::int64_t>(i + k));
    }
    for (std::size_t k = 0; i < len; ++i, ++k)
        lanes[k] = P::step(lanes[k], q[static_cast<std::ptrdiff_t>(i) * st],
                           j + static_cast<std::int64_t>(i));
    return lanes;
}

/// Position lanes of an arg leaf: the same width as T, so values and positions blend together.
template <class T>
using position_t = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;

template <class T>
struct arg_lanes {
    std::array<T, scalar_lanes> value;
    std::array<position_t<T>, scalar_lanes> pos;  // within the leaf; -1: nothing taken yet
};

/// Folds a run into struct-of-arrays arg lanes; `base` is the leaf position of q[0].
template <class P, class T>
arg_lanes<T> fold_arg_run(arg_lanes<T> a, const T* q, std::size_t len, std::ptrdiff_t st,
                          std::size_t base) noexcept {
    using I = position_t<T>;
    constexpr std::size_t L = scalar_lanes;
    std::size_t i = 0;
    auto lane = [&](std::size_t k, T x, std::size_t at) {
        const bool take = P::takes(x, a.value[k]);
        a.value[k] = take ? x : a.value[k];
        a.pos[k] = take ? static_cast<I>(at) : a.pos[k];
    };
    if (st == 1) {
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k) lane(k, q[i + k], base + i + k);
    } else {
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k)
                lane(k, q[static_cast<std::ptrdiff_t>(i + k) * st], base + i + k);
    }
    for (std::size_t k = 0; i < len; ++i, ++k)
        lane(k, q[static_cast<std::ptrdiff_t>(i) * st], base + i);
    return a;
}

/// An argmax/argmin leaf: lanes in struct-of-arrays form, joined into one (value, index).
template <class P, class T>
typename P::acc reduce_arg_leaf(const T* p, const strided_space& red, std::size_t lo,
                                std::size_t hi) noexcept {
    arg_lanes<T> a;
    a.value.fill(P::init().value);
    a.pos.fill(-1);
    if (red.rank == 1) {
        const std::ptrdiff_t st = red.strides[0];
        a = fold_arg_run<P>(a, p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, 0);
    } else {
        for_each_run(red, lo, hi,
                     [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t s, std::size_t first) {
                         a = fold_arg_run<P>(a, p + off, len, s, first - lo);
                     });
    }
    std::array<typename P::acc, scalar_lanes> r;
    for (std::size_t k = 0; k < scalar_lanes; ++k)
        r[k] = {a.value[k],
                a.pos[k] < 0 ? -1
                             : static_cast<std::int64_t>(lo) + static_cast<std::int64_t>(a.pos[k])};
    return P::join(P::join(P::join(r[0], r[1]), P::join(r[2], r[3])),
                   P::join(P::join(r[4], r[5]), P::join(r[6], r[7])));
}

/// Reduces the flat indices [lo, hi) of `red` from base `p` into one accumulator.
template <class P, class T>
typename P::acc reduce_leaf(const T* p, const strided_space& red, std::size_t lo,
                            std::size_t hi) noexcept {
    using A = typename P::acc;
    if constexpr (P::uses_index)
        if (hi - lo > short_leaf) return reduce_arg_leaf<P>(p, red, lo, hi);
    const bool one_run = red.rank == 1;
    const std::ptrdiff_t st = red.strides[red.rank - 1];
    const auto j = static_cast<std::int64_t>(lo);
    if (hi - lo <= short_leaf) {
        if (one_run)
            return fold_run<P>(P::init(), p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, j);
        A a = P::init();
        for_each_run(red, lo, hi,
                     [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t s, std::size_t first) {
                         a = fold_run<P>(a, p + off, len, s, static_cast<std::int64_t>(first));
                     });
        return a;
    }
    leaf_lanes<A> lanes;
    lanes.fill(P::init());
    if (one_run) {
        lanes = fold_run_lanes<P>(lanes, p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, j);
    } else {
        for_each_run(red, lo, hi,
                     [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t s, std::size_t first) {
                         lanes = fold_run_lanes<P>(lanes, p + off, len, s,
                                                   static_cast<std::int64_t>(first));
                     });
    }
    return P::join(P::join(P::join(lanes[0], lanes[1]), P::join(lanes[2], lanes[3])),
                   P::join(P::join(lanes[4], lanes[5]), P::join(lanes[6], lanes[7])));
}

/// Accumulators of the W outputs of one tile.
template <class A, std::size_t W>
struct lane_values {
    std::array<A, W> v;
};

/// Folds `len` reduced elements (flat indices from j, stride st) into the accumulators of a tile
/// of `width` outputs, output w at q + w * lane_stride.
template <class P, std::size_t W, class T>
lane_values<typename P::acc, W> fold_tile_run(lane_values<typename P::acc, W> acc, const T* q,
                                              std::size_t len, std::ptrdiff_t st, std::int64_t j,
                                              std::ptrdiff_t lane_stride,
                                              std::size_t width) noexcept {
    if (width == W && lane_stride == 1) {  // a full tile of a row: W contiguous elements
        for (std::size_t i = 0; i < len; ++i) {
            const T* r = q + static_cast<std::ptrdiff_t>(i) * st;
            const std::int64_t ji = j + static_cast<std::int64_t>(i);
            for (std::size_t w = 0; w < W; ++w) acc.v[w] = P::step(acc.v[w], r[w], ji);
        }
    } else {
        for (std::size_t i = 0; i < len; ++i) {
            const T* r = q + static_cast<std::ptrdiff_t>(i) * st;
            const std::int64_t ji = j + static_cast<std::int64_t>(i);
            for (std::size_t w = 0; w < width; ++w)
                acc.v[w] = P::step(acc.v[w], r[static_cast<std::ptrdiff_t>(w) * lane_stride], ji);
        }
    }
    return acc;
}

/// Reduces the flat indices [lo, hi) of `red` for `width` neighbouring outputs at once: output w
/// starts at p + w * lane_stride. Each input row read is one short contiguous run when
/// lane_stride is 1.
template <class P, std::size_t W, class T>
lane_values<typename P::acc, W> reduce_tile_leaf(const T* p, std::ptrdiff_t lane_stride,
                                                 std::size_t width, const strided_space& red,
                                                 std::size_t lo, std::size_t hi) noexcept {
    lane_values<typename P::acc, W> acc;
    acc.v.fill(P::init());
    if (red.rank == 1) {
        const std::ptrdiff_t st = red.strides[0];
        return fold_tile_run<P, W>(acc, p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st,
                                   static_cast<std::int64_t>(lo), lane_stride, width);
    }
    for_each_run(red, lo, hi,
                 [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t st, std::size_t first) {
                     acc =
                         fold_tile_run<P, W>(acc, p + off, len, st,
                                             static_cast<std::int64_t>(first), lane_stride, width);
                 });
    return acc;
}

/// The pairwise tree over leaves [lo, hi): a leaf alone, else the join of the two parts split by
/// tree_split. Every path below (serial, streamed or parallel) reduces with exactly this tree.
template <class V, class Leaf, class Join>
V reduce_tree(std::size_t lo, std::size_t hi, const Leaf& leaf, const Join& join) {
    if (hi - lo == 1) return leaf(lo);
    const std::size_t mid = lo + tree_split(hi - lo);
    const V left = reduce_tree<V>(lo, mid, leaf, join);
    return join(left, reduce_tree<V>(mid, hi, leaf, join));
}

/// The reduction after validation: reduced axes as one walk, kept axes as the output index space.
template <class T, class R>
struct reduction_plan {
    const T* in = nullptr;
    R* out = nullptr;
    strided_space red;  // reduced axes, collapsed; memory order unless the op reports indices
    std::size_t kept_rank = 0;  // kept axes (without the lane axis in tile mode), collapsed
    std::array<std::size_t, max_rank> kept_extents{};
    stride_array kept_in{}, kept_out{};
    std::size_t outputs = 0;  // all outputs
    bool tile = false;        // neighbouring outputs along the lane axis are reduced together
    std::size_t lane_extent = 1;
    std::ptrdiff_t lane_in = 0, lane_out = 0;
};

inline std::ptrdiff_t stride_magnitude(std::ptrdiff_t x) noexcept {
    return x < 0 ? -x : x;
}

template <class T, class R>
reduction_plan<T, R> plan_reduction(const tensor_view<const T>& in, std::uint32_t mask,
                                    bool keepdims, const tensor_view<R>& out,
                                    bool memory_order) noexcept {
    reduction_plan<T, R> p;
    p.in = in.data();
    p.out = out.data();
    std::array<std::size_t, max_rank> rext{}, kext{};
    stride_array rst{}, kin{}, kout{};
    std::size_t rr = 0, kr = 0, n = 1, outputs = 1, out_axis = 0;
    for (std::size_t a = 0; a < in.rank(); ++a) {
        const std::size_t e = in.extent(a);
        if ((mask >> a) & 1u) {
            n *= e;
            if (keepdims) ++out_axis;
            if (e == 1) continue;
            rext[rr] = e;
            rst[rr++] = in.stride(a);
        } else {
            const std::ptrdiff_t os = out.stride(out_axis++);
            outputs *= e;
            if (e == 1) continue;
            kext[kr] = e;
            kin[kr] = in.stride(a);
            kout[kr++] = os;
        }
    }
    p.outputs = outputs;
    p.red.count = n;
    if (outputs == 0) return p;

    // Sums, products and extrema may walk the reduced elements in any order: walking them in
    // memory order (flipped axes forward, largest stride outermost) makes a transposed or flipped
    // view read like the contiguous tensor and collapse into one dense run.
    if (memory_order && n > 0) {
        for (std::size_t i = 0; i < rr; ++i) {
            if (rst[i] < 0) {
                p.in += rst[i] * static_cast<std::ptrdiff_t>(rext[i] - 1);
                rst[i] = -rst[i];
            }
        }
        for (std::size_t i = 1; i < rr; ++i)
            for (std::size_t j = i; j > 0 && rst[j - 1] < rst[j]; --j) {
                std::swap(rst[j - 1], rst[j]);
                std::swap(rext[j - 1], rext[j]);
            }
    }
    p.red.rank = 0;
    for (std::size_t i = 0; i < rr; ++i) {
        const std::size_t last = p.red.rank - 1;
        if (p.red.rank > 0 &&
            p.red.strides[last] == rst[i] * static_cast<std::ptrdiff_t>(rext[i])) {
            p.red.extents[last] *= rext[i];
            p.red.strides[last] = rst[i];
        } else {
            p.red.extents[p.red.rank] = rext[i];
            p.red.strides[p.red.rank++] = rst[i];
        }
    }
    if (p.red.rank == 0) {  // nothing or only extent-1 axes reduced: one element per output
        p.red.rank = 1;
        p.red.extents[0] = n;
        p.red.strides[0] = 1;
    }

    // Tile mode when the kept axis with the smallest stride moves through memory faster than
    // the reduced axes (a column sum of a row-major matrix), or when each output has so few
    // elements that reducing outputs one by one would be all overhead.
    std::ptrdiff_t red_min = std::numeric_limits<std::ptrdiff_t>::max();
    if (n > 1)
        for (std::size_t i = 0; i < p.red.rank; ++i)
            red_min = std::min(red_min, stride_magnitude(p.red.strides[i]));
    std::size_t lane = kr;
    for (std::size_t i = 0; i < kr; ++i)
        if (kin[i] != 0 && (lane == kr || stride_magnitude(kin[i]) < stride_magnitude(kin[lane])))
            lane = i;
    p.tile = lane < kr && (stride_magnitude(kin[lane]) < red_min || n <= short_leaf);
    if (p.tile) {
        p.lane_extent = kext[lane];
        p.lane_in = kin[lane];
        p.lane_out = kout[lane];
        for (std::size_t i = lane; i + 1 < kr; ++i) {
            kext[i] = kext[i + 1];
            kin[i] = kin[i + 1];
            kout[i] = kout[i + 1];
        }
        --kr;
    }
    for (std::size_t i = 0; i < kr; ++i) {
        const std::size_t last = p.kept_rank - 1;
        const auto e = static_cast<std::ptrdiff_t>(kext[i]);
        if (p.kept_rank > 0 && p.kept_in[last] == kin[i] * e && p.kept_out[last] == kout[i] * e) {
            p.kept_extents[last] *= kext[i];
            p.kept_in[last] = kin[i];
            p.kept_out[last] = kout[i];
        } else {
            p.kept_extents[p.kept_rank] = kext[i];
            p.kept_in[p.kept_rank] = kin[i];
            p.kept_out[p.kept_rank++] = kout[i];
        }
    }
    return p;
}

/// Runs a validated reduction: inline, or with one parallel dispatch, as the work decides.
///
/// Scalar mode reduces each output alone with reduce_tree. Tile mode has two walks that compute
/// the same tree per output: streamed groups (up to a few hundred neighbouring outputs, leaf after
/// leaf, reading each input row of the group in one go) serve the inline path and outputs spread
/// over threads; tiles of W outputs serve outputs whose tree is itself split across threads.
template <class P, class T, class R>
class reduction_runner {
public:
    using A = typename P::acc;
    static constexpr std::size_t W = tile_width<T>;

    explicit reduction_runner(const reduction_plan<T, R>& plan) noexcept
        : p_(plan),
          leaves_((plan.red.count + leaf_size(plan.tile) - 1) / leaf_size(plan.tile)),
          levels_(static_cast<std::size_t>(std::bit_width(leaves_))) {
        if (p_.tile) {
            const std::size_t fit = stream_bytes / ((levels_ + 1) * sizeof(A));
            columns_ = std::max<std::size_t>(1, std::min(fit, p_.lane_extent));
            streams_ = p_.outputs / p_.lane_extent * ((p_.lane_extent + columns_ - 1) / columns_);
        }
    }

    void run(session& s) const {
        if (p_.outputs == 0) return;
        if (p_.tile)
            run_as<true>(s);
        else
            run_as<false>(s);
    }

private:
    struct group {
        const T* in;
        R* out;
        std::size_t width;  // outputs in this group: 1 in scalar mode
    };

    static constexpr std::size_t leaf_size(bool tile) noexcept {
        return tile ? tile_leaf<P> : scalar_leaf<P>;
    }

    // The input and output of position k of the kept axes other than the lane axis.
    group position(std::size_t k) const noexcept {
        std::ptrdiff_t in_off = 0, out_off = 0;
        for (std::size_t a = p_.kept_rank; a-- > 0;) {
            const auto i = static_cast<std::ptrdiff_t>(k % p_.kept_extents[a]);
            k /= p_.kept_extents[a];
            in_off += i * p_.kept_in[a];
            out_off += i * p_.kept_out[a];
        }
        // An empty reduction never reads its input, whose data may be null: no offset then.
        return {p_.red.count == 0 ? p_.in : p_.in + in_off, p_.out + out_off, 1};
    }

    // Group g of `per_row` groups of `size` lane-axis outputs per position of the other kept axes.
    group columns_at(std::size_t g, std::size_t size) const noexcept {
        const std::size_t per_row = (p_.lane_extent + size - 1) / size;
        const group at = position(g / per_row);
        const std::size_t first = g % per_row * size;
        const auto f = static_cast<std::ptrdiff_t>(first);
        return {p_.red.count == 0 ? at.in : at.in + f * p_.lane_in, at.out + f * p_.lane_out,
                std::min(size, p_.lane_extent - first)};
    }

    template <bool Tile>
    using value_t = std::conditional_t<Tile, lane_values<A, W>, A>;

    template <bool Tile>
    auto leaf_of(const group& g) const noexcept {
        return [this, g](std::size_t b) {
            const std::size_t lo = b * leaf_size(Tile);
            const std::size_t hi = std::min(p_.red.count, lo + leaf_size(Tile));
            if constexpr (Tile)
                return reduce_tile_leaf<P, W>(g.in, p_.lane_in, g.width, p_.red, lo, hi);
            else
                return reduce_leaf<P>(g.in, p_.red, lo, hi);
        };
    }
    template <bool Tile>
    static auto joiner() noexcept {
        return [](const value_t<Tile>& a, const value_t<Tile>& b) {
            if constexpr (Tile) {
                value_t<Tile> r;
                for (std::size_t w = 0; w < W; ++w) r.v[w] = P::join(a.v[w], b.v[w]);
                return r;
            } else {
                return P::join(a, b);
            }
        };
    }

    void write_one(R* out, const T* in, const A& a) const noexcept {
        *out = p_.red.count == 0 ? P::empty() : P::finish(a, p_.red.count, in, p_.red);
    }

    // Scalar mode: output g alone.
    void run_single(std::size_t g) const {
        const group at = position(g);
        if (p_.red.count == 0) return write_one(at.out, at.in, A{});
        write_one(at.out, at.in, reduce_tree<A>(0, leaves_, leaf_of<false>(at), joiner<false>()));
    }

    // Folds `len` rows (stride st, flat indices from `first`) into the partial results `cur` of
    // `width` neighbouring outputs. A few rows at a time per block of W outputs: the input is read
    // as a handful of parallel streams, the block's accumulators stay in registers across those
    // rows, and fixed-width blocks vectorize at -O2 (GCC's default cost model skips loops that
    // would need a scalar epilogue).
    void fold_rows(A* cur, std::size_t width, const T* q, std::size_t len, std::ptrdiff_t st,
                   std::size_t first) const noexcept {
        constexpr std::size_t rows_at_once = 8;
        const std::ptrdiff_t ls = p_.lane_in;
        for (std::size_t i = 0; i < len; i += rows_at_once) {
            const std::size_t rows = std::min(rows_at_once, len - i);
            const T* r = q + static_cast<std::ptrdiff_t>(i) * st;
            const auto j = static_cast<std::int64_t>(first + i);
            for (std::size_t c = 0; c < width; c += W) {
                const std::size_t cols = std::min(W, width - c);
                lane_values<A, W> acc;
                if (cols == W) {
                    for (std::size_t w = 0; w < W; ++w) acc.v[w] = cur[c + w];
                } else {
                    for (std::size_t w = 0; w < cols; ++w) acc.v[w] = cur[c + w];
                }
                acc = fold_tile_run<P, W>(acc, r + static_cast<std::ptrdiff_t>(c) * ls, rows, st, j,
                                          ls, cols);
                if (cols == W) {
                    for (std::size_t w = 0; w < W; ++w) cur[c + w] = acc.v[w];
                } else {
                    for (std::size_t w = 0; w < cols; ++w) cur[c + w] = acc.v[w];
                }
            }
        }
    }

    // Tile mode: streamed group g of up to columns_ outputs. Leaves are folded one by one into a
    // binary counter of per-column partial results (level l holds a perfect subtree of 2^l
    // leaves), which builds exactly the tree reduce_tree builds. The counter lives on the stack.
    void run_streamed(std::size_t g) const {
        const group at = columns_at(g, columns_);
        const std::size_t width = at.width, n = p_.red.count;
        if (n == 0) {
            for (std::size_t c = 0; c < width; ++c)
                at.out[static_cast<std::ptrdiff_t>(c) * p_.lane_out] = P::empty();
            return;
        }
        alignas(64) unsigned char raw[stream_bytes];
        A* const cur = reinterpret_cast<A*>(raw);  // the leaf being folded, then the carry
        A* const levels = cur + width;             // level l at levels + l * width
        for (std::size_t b = 0; b < leaves_; ++b) {
            const std::size_t lo = b * leaf_size(true), hi = std::min(n, lo + leaf_size(true));
            for (std::size_t c = 0; c < width; ++c) std::construct_at(cur + c, P::init());
            auto fold = [this, cur, width](const T* q, std::size_t len, std::ptrdiff_t st,
                                           std::size_t first) {
                fold_rows(cur, width, q, len, st, first);
            };
            if (p_.red.rank == 1) {
                const std::ptrdiff_t st = p_.red.strides[0];
                fold(at.in + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, lo);
            } else {
                for_each_run(p_.red, lo, hi,
                             [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t st,
                                 std::size_t first) { fold(at.in + off, len, st, first); });
            }
            std::size_t l = 0;  // levels 0..l-1 are occupied exactly when b's low bits are set
            for (; (b >> l) & 1u; ++l) {
                const A* level = levels + l * width;
                for (std::size_t c = 0; c < width; ++c) cur[c] = P::join(level[c], cur[c]);
            }
            A* const level = levels + l * width;
            for (std::size_t c = 0; c < width; ++c) std::construct_at(level + c, cur[c]);
        }
        // The occupied levels are the set bits of leaves_; join them right to left.
        const A* right = nullptr;
        for (std::size_t l = 0; l < levels_; ++l) {
            if (((leaves_ >> l) & 1u) == 0) continue;
            A* const level = levels + l * width;
            if (right != nullptr)
                for (std::size_t c = 0; c < width; ++c) level[c] = P::join(level[c], right[c]);
            right = level;
        }
        for (std::size_t c = 0; c < width; ++c) {
            const auto o = static_cast<std::ptrdiff_t>(c);
            at.out[o * p_.lane_out] = P::finish(right[c], n, at.in + o * p_.lane_in, p_.red);
        }
    }

    void run_serial(std::size_t g) const {
        if (p_.tile)
            run_streamed(g);
        else
            run_single(g);
    }

    // One output (scalar mode) or tile of W outputs whose tree is split across the arena.
    template <bool Tile>
    void run_split(std::size_t g, std::size_t leaf_grain, const backend_core& core) const {
        using V = value_t<Tile>;
        static_assert(std::is_trivially_copyable_v<V> && sizeof(V) <= max_tree_value &&
                      alignof(V) <= alignof(std::max_align_t));
        const group at = Tile ? columns_at(g, W) : position(g);
        const auto leaf = leaf_of<Tile>(at);
        const auto join = joiner<Tile>();
        V value{};
        tree_reduce(
            core, leaves_, leaf_grain, &value,
            [&](void* v, std::size_t lo, std::size_t hi) {
                std::construct_at(static_cast<V*>(v), reduce_tree<V>(lo, hi, leaf, join));
            },
            [&](void* left, const void* right) {
                V& l = *static_cast<V*>(left);
                l = join(l, *static_cast<const V*>(right));
            });
        if constexpr (Tile) {
            for (std::size_t w = 0; w < at.width; ++w) {
                const auto o = static_cast<std::ptrdiff_t>(w);
                write_one(at.out + o * p_.lane_out, at.in + o * p_.lane_in, value.v[w]);
            }
        } else {
            write_one(at.out, at.in, value);
        }
    }

    template <bool Tile>
    void run_as(session& s) const {
        backend_core& core = session_access::core(s);
        session_counters& counters = session_access::counters(s);
        const std::size_t n = std::max<std::size_t>(p_.red.count, 1);
        const std::size_t groups = Tile ? streams_ : p_.outputs;
        const std::size_t grain = core.settings().grain;
        if (p_.outputs * n <= grain || !session_access::may_fan_out(s)) {
            ++counters.inline_dispatches;
            for (std::size_t g = 0; g < groups; ++g) run_serial(g);
            return;
        }
        ++counters.parallel_dispatches;
        // Few outputs with much work each: split every output's tree across threads as well.
        const std::size_t tiles =
            Tile ? p_.outputs / p_.lane_extent * ((p_.lane_extent + W - 1) / W) : groups;
        const std::size_t width = Tile ? std::min(W, p_.lane_extent) : 1;
        const auto threads = static_cast<std::size_t>(core.settings().threads);
        if (leaves_ > 1 && tiles < 4 * threads && n * width > grain) {
            const std::size_t leaf_grain =
                std::max<std::size_t>(1, grain / (leaf_size(Tile) * width));
            if (tiles == 1) return run_split<Tile>(0, leaf_grain, core);
            fan_out(core, tiles, 1, [&](std::size_t begin, std::size_t end) {
                for (std::size_t g = begin; g != end; ++g) run_split<Tile>(g, leaf_grain, core);
            });
            return;
        }
        const std::size_t per_group = n * (Tile ? std::min(columns_, p_.lane_extent) : 1);
        fan_out(core, groups, std::max<std::size_t>(1, grain / per_group), [&](std::size_t begin, std::size_t end) {
            for (std::size_t g = begin; g != end; ++g) run_serial(g);
        });
    }

    const reduction_plan<T, R>& p_;
    std::size_t leaves_;
    std::size_t levels_;
    std::size_t columns_ = 1;  // outputs per streamed group
    std::size_t streams_ = 0;  // streamed groups
};

/// Out-parameter form: validates everything, then reduces `in` over `axes` into `out`.
template <class P, class T>
void reduce_into(session& s, const char* op, const tensor_view<const T>& in, const axis_list& axes,
                 bool keepdims, const tensor_view<typename P::result>& out) {
    session_access::check_thread(s);
    const std::uint32_t mask = reduction_mask(op, axes, in.rank());
    const shape expected = reduced_shape(in.shape(), mask, keepdims);
    if (!(out.shape() == expected)) throw_out_shape(op, out.shape(), expected);
    check_writable(op, out);
    check_overlap(op, out, in, 0);
    if constexpr (P::needs_elements) check_nonempty(op, in.shape(), mask);
    const auto plan = plan_reduction(in, mask, keepdims, out, !P::uses_index);
    reduction_runner<P, T, typename P::result>(plan).run(s);
}

/// Allocating form: the result comes from the session's workspace.
template <class P, class T>
tensor<typename P::result> reduce_new(session& s, const char* op, const tensor_view<const T>& in,
                                      const axis_list& axes, bool keepdims) {
    using R = typename P::result;
    session_access::check_thread(s);
    const std::uint32_t mask = reduction_mask(op, axes, in.rank());
    if constexpr (P::needs_elements) check_nonempty(op, in.shape(), mask);
    tensor<R> out = tensor<R>::uninitialized(s, reduced_shape(in.shape(), mask, keepdims));
    const tensor_view<R> o = out;
    const auto plan = plan_reduction(in, mask, keepdims, o, !P::uses_index);
    reduction_runner<P, T, R>(plan).run(s);
    return out;
}

template <class T>
struct reduce_accepts_numeric : std::bool_constant<numeric<T>> {};
template <class T>
struct reduce_accepts_real : std::bool_constant<real_numeric<T>> {};

/// A reduction over a list of axes; see the top of this file for the forms.
template <template <class> class Policy, template <class> class Accepts>
struct reduce_op {
    const char* name;

    /// Reduces over every axis into a rank-0 tensor.
    template <tensor_like A, class T = value_of_t<A>>
    requires Accepts<T>::value tensor<typename Policy<T>::result>
    operator()(session& s, const A& a) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axis_list(all_axes), false);
    }
    /// Reduces over `axes`; with `keepdims` the reduced axes stay as extent-1 axes.
    template <tensor_like A, class T = value_of_t<A>>
    requires Accepts<T>::value tensor<typename Policy<T>::result>
    operator()(session& s, const A& a, const axis_list& axes, bool keepdims = false) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axes, keepdims);
    }
    /// Writes the reduction into `out` (any strides); never allocates.
    template <tensor_like A, class T = value_of_t<A>>
    requires Accepts<T>::value void operator()(
        session& s, const A& a, const axis_list& axes, bool keepdims,
        const tensor_view<typename Policy<T>::result>& out) const {
        reduce_into<Policy<T>>(s, name, as_view(a), axes, keepdims, out);
    }
};

/// A full reduction returned as a plain value; never allocates.
template <template <class> class Policy, template <class> class Accepts>
struct reduce_all_op {
    const char* name;

    /// Returns the reduction of every element of `a` as a value; never allocates. Throws
    /// shape_error when `a` has no elements and the op has no identity (max_all, min_all). Call on
    /// the session's own thread (checked).
    template <tensor_like A, class T = value_of_t<A>>
    requires Accepts<T>::value typename Policy<T>::result operator()(session& s, const A& a) const {
        using R = typename Policy<T>::result;
        R result{};
        reduce_into<Policy<T>>(s, name, as_view(a), axis_list(all_axes), false,
                               tensor_view<R>(&result, shape()));
        return result;
    }
};

/// argmax/argmin: indices along one axis, or into the flattened tensor.
template <template <class> class Policy>
struct arg_reduce_op {
    const char* name;

    /// Returns the row-major index into the flattened tensor, as a rank-0 tensor.
    template <tensor_like A, class T = value_of_t<A>>
    requires real_numeric<T> tensor<std::int64_t>
    operator()(session& s, const A& a) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axis_list(all_axes), false);
    }
    /// Returns indices along `axis` (negative counts from the end).
    template <tensor_like A, std::integral I, class T = value_of_t<A>>
    requires real_numeric<T> &&(!std::same_as<I, bool>)tensor<std::int64_t> operator()(
        session& s, const A& a, I axis, bool keepdims = false) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axis_list(axis), keepdims);
    }
    /// Returns the flattened index; with `keepdims` shaped [1, 1, ...].
    template <tensor_like A, class T = value_of_t<A>>
    requires real_numeric<T> tensor<std::int64_t>
    operator()(session& s, const A& a, all_axes_t, bool keepdims = false) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axis_list(all_axes), keepdims);
    }
    /// Writes indices along `axis` into `out`; never allocates.
    template <tensor_like A, std::integral I, class T = value_of_t<A>>
    requires real_numeric<T> &&(!std::same_as<I, bool>)void operator()(
        session& s, const A& a, I axis, bool keepdims, const tensor_view<std::int64_t>& out) const {
        reduce_into<Policy<T>>(s, name, as_view(a), axis_list(axis), keepdims, out);
    }
    /// Writes the flattened index into `out`; never allocates.
    template <tensor_like A, class T = value_of_t<A>>
    requires real_numeric<T>
    void operator()(session& s, const A& a, all_axes_t, bool keepdims,
                    const tensor_view<std::int64_t>& out) const {
        reduce_into<Policy<T>>(s, name, as_view(a), axis_list(all_axes), keepdims, out);
    }
};

/// argmax_all/argmin_all: the flattened index as a plain value; never allocates.
template <template <class> class Policy>
struct arg_reduce_all_op {
    const char* name;

    /// Returns the row-major index into the flattened `a` of its largest (argmax_all) or smallest
    /// (argmin_all) element, the first of ties or the first NaN; never allocates. Throws
    /// shape_error when `a` has no elements. Call on the session's own thread (checked).
    template <tensor_like A, class T = value_of_t<A>>
    requires real_numeric<T> std::int64_t operator()(session& s, const A& a) const {
        std::int64_t result = 0;
        reduce_into<Policy<T>>(s, name, as_view(a), axis_list(all_axes), false,
                               tensor_view<std::int64_t>(&result, shape()));
        return result;
    }
};

template <template <class> class Policy>
using numeric_reduction = reduce_op<Policy, reduce_accepts_numeric>;
template <template <class> class Policy>
using real_reduction = reduce_op<Policy, reduce_accepts_real>;
template <template <class> class Policy>
using numeric_reduction_all = reduce_all_op<Policy, reduce_accepts_numeric>;
template <template <class> class Policy>
using real_reduction_all = reduce_all_op<Policy, reduce_accepts_real>;

}  // namespace detail::reductions

/// Sum over axes (numeric types; integers wrap). Empty: 0.
inline constexpr detail::reductions::numeric_reduction<detail::reductions::sum_policy> sum{"sum"};
/// Product over axes (numeric types; integers wrap). Empty: 1.
inline constexpr detail::reductions::numeric_reduction<detail::reductions::prod_policy> prod{
    "prod"};
/// Arithmetic mean over axes; double for integer input. Empty: NaN.
inline constexpr detail::reductions::numeric_reduction<detail::reductions::mean_policy> mean{
    "mean"};
/// L2 norm sqrt(sum |x|^2) over axes; real for complex input, double for integers. Empty: 0.
inline constexpr detail::reductions::numeric_reduction<detail::reductions::norm_policy> norm{
    "norm"};
/// Largest element over axes (real types; NaN wins). Empty: shape_error.
inline constexpr detail::reductions::real_reduction<detail::reductions::max_policy> max{"max"};
/// Smallest element over axes (real types; NaN wins). Empty: shape_error.
inline constexpr detail::reductions::real_reduction<detail::reductions::min_policy> min{"min"};
/// Index of the largest element along one axis or in the flattened tensor (the first of ties,
/// the first NaN). Empty: shape_error.
inline constexpr detail::reductions::arg_reduce_op<detail::reductions::argmax_policy> argmax{
    "argmax"};
/// Index of the smallest element along one axis or in the flattened tensor (the first of ties,
/// the first NaN). Empty: shape_error.
inline constexpr detail::reductions::arg_reduce_op<detail::reductions::argmin_policy> argmin{
    "argmin"};

/// Sum of all elements as a value.
inline constexpr detail::reductions::numeric_reduction_all<detail::reductions::sum_policy> sum_all{
    "sum_all"};
/// Product of all elements as a value.
inline constexpr detail::reductions::numeric_reduction_all<detail::reductions::prod_policy>
    prod_all{"prod_all"};
/// Mean of all elements as a value (double for integers).
inline constexpr detail::reductions::numeric_reduction_all<detail::reductions::mean_policy>
    mean_all{"mean_all"};
/// L2 norm of all elements as a value.
inline constexpr detail::reductions::numeric_reduction_all<detail::reductions::norm_policy>
    norm_all{"norm_all"};
/// Largest element as a value (real types).
inline constexpr detail::reductions::real_reduction_all<detail::reductions::max_policy> max_all{
    "max_all"};
/// Smallest element as a value (real types).
inline constexpr detail::reductions::real_reduction_all<detail::reductions::min_policy> min_all{
    "min_all"};
/// Row-major index of the largest element as a value (real types).
inline constexpr detail::reductions::arg_reduce_all_op<detail::reductions::argmax_policy>
    argmax_all{"argmax_all"};
/// Row-major index of the smallest element as a value (real types).
inline constexpr detail::reductions::arg_reduce_all_op<detail::reductions::argmin_policy>
    argmin_all{"argmin_all"};

}  // namespace tessera
