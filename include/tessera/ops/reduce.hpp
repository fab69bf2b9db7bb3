// tessera/ops/reduce.hpp - reductions over any set of axes: sum, prod, mean, max, min, norm (L2),
// argmax and argmin, their scalar *_all forms, and the engine under them.
//
// Each reduction is a function object with these forms:
//   tessera::sum(s, a)                                 over every axis: a rank-0 tensor
//   tessera::sum(s, a, {0, -1})                        over the listed axes: a new tensor
//   tessera::sum(s, a, {0, -1}, tessera::keepdims)     the same, reduced axes kept with extent 1
//   tessera::sum(s, a, {0, -1}, out)                   into `out`: never allocates
// `out` may have either result shape (with or without the kept axes): its rank says which.
// tessera::sum_all(s, a) returns the full reduction as a plain value. argmax/argmin take one axis
// (or tessera::all_axes: the flattened tensor) instead of a list.
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

#include <tessera/detail/reduce_runner.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace tessera {

namespace detail::reductions {

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
    /// Reduces over `axes` (a braced list, one axis, a range of integers or tessera::all_axes).
    template <tensor_like A, class T = value_of_t<A>>
    requires Accepts<T>::value tensor<typename Policy<T>::result>
    operator()(session& s, const A& a, const axis_list& axes) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axes, false);
    }
    /// Reduces over `axes`, keeping them as extent-1 axes (`tessera::sum(s, a, {1}, keepdims)`).
    template <tensor_like A, class T = value_of_t<A>>
    requires Accepts<T>::value tensor<typename Policy<T>::result>
    operator()(session& s, const A& a, const axis_list& axes, keepdims_t) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axes, true);
    }
    /// Writes the reduction over `axes` into `out` (any strides), whose shape is the result's with
    /// or without the reduced axes kept as extent-1 axes; never allocates.
    template <tensor_like A, class T = value_of_t<A>>
    requires Accepts<T>::value void operator()(
        session& s, const A& a, const axis_list& axes,
        const std::type_identity_t<tensor_view<typename Policy<T>::result>>& out) const {
        reduce_into<Policy<T>>(s, name, as_view(a), axes, out);
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
        reduce_into<Policy<T>>(s, name, as_view(a), axis_list(all_axes),
                               tensor_view<R>(&result, shape()));
        return result;
    }
};

/// One axis or tessera::all_axes: what argmax and argmin reduce over.
template <class I>
concept arg_axis = std::same_as<I, all_axes_t> || (std::integral<I> && !std::same_as<I, bool>);

/// argmax/argmin: indices along one axis, or into the flattened tensor (tessera::all_axes).
template <template <class> class Policy>
struct arg_reduce_op {
    const char* name;

    /// Returns the row-major index into the flattened tensor, as a rank-0 tensor.
    template <tensor_like A, class T = value_of_t<A>>
    requires real_numeric<T> tensor<std::int64_t>
    operator()(session& s, const A& a) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axis_list(all_axes), false);
    }
    /// Returns indices along `axis` (negative counts from the end), or the flattened index for
    /// tessera::all_axes.
    template <tensor_like A, arg_axis I, class T = value_of_t<A>>
    requires real_numeric<T> tensor<std::int64_t> operator()(session& s, const A& a, I axis) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axis_list(axis), false);
    }
    /// The same with the reduced axes kept as extent-1 axes (all_axes: shaped [1, 1, ...]).
    template <tensor_like A, arg_axis I, class T = value_of_t<A>>
    requires real_numeric<T> tensor<std::int64_t> operator()(session& s, const A& a, I axis,
                                                            keepdims_t) const {
        return reduce_new<Policy<T>>(s, name, as_view(a), axis_list(axis), true);
    }
    /// Writes the indices into `out`, shaped as the result with or without the reduced axes kept;
    /// never allocates.
    template <tensor_like A, arg_axis I, class T = value_of_t<A>>
    requires real_numeric<T> void operator()(session& s, const A& a, I axis,
                                             const tensor_view<std::int64_t>& out) const {
        reduce_into<Policy<T>>(s, name, as_view(a), axis_list(axis), out);
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
        reduce_into<Policy<T>>(s, name, as_view(a), axis_list(all_axes),
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
