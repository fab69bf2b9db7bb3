// tessera/ops/structural.hpp - structural ops: contiguous (a dense row-major copy of any view),
// copy (between any two layouts, with broadcasting), fill, concat and stack.
// Start with tessera::contiguous. The copies run on the copy engine (detail/copy.hpp): a
// cache-blocked transpose when the source walks memory across the destination's rows (transposes,
// permutes), else row runs (memcpy when both sides are unit-stride).
// Every op validates all operands before it writes anything.
#pragma once

#include <tessera/detail/copy.hpp>
#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <type_traits>

namespace tessera {

namespace detail {

[[noreturn]] void throw_join_empty(const char* op);
[[noreturn]] void throw_join_rank(const char* op, std::size_t index, std::size_t rank,
                                  std::size_t first_rank);
[[noreturn]] void throw_join_shape(const char* op, std::size_t index, const shape& got,
                                   const shape& first);
[[noreturn]] void throw_join_extent(const char* op, std::size_t index, const shape& got,
                                    const shape& first, std::size_t axis);
[[noreturn]] void throw_join_overflow(const char* op, std::size_t axis);

/// Validates a copy of `src` into `dst`: `src` broadcasts to `dst`'s shape, `dst` repeats no
/// element, and the two do not overlap unless they are exactly the same elements.
template <class T>
tensor_view<const T> check_copy(const char* op, const tensor_view<T>& dst,
                                const tensor_view<const T>& src) {
    if (!broadcasts_to(src.shape(), dst.shape())) throw_broadcast(op, src.shape(), dst.shape());
    check_writable(op, "out", dst);
    const tensor_view<const T> b = broadcast_unchecked(src, dst.shape());
    check_in_place(op, "out", dst, operand_name("input", 0), b);
    return b;
}

/// Validates the operands of concat (`stack` false) or stack and returns the result's shape;
/// `axis` is normalised into `norm`.
template <class T>
shape join_shape(const char* op, bool stack, std::span<const tensor_view<const T>> in,
                 std::ptrdiff_t axis, std::size_t& norm) {
    if (in.empty()) throw_join_empty(op);
    const shape& first = in[0].shape();
    const std::size_t rank = first.rank();
    std::array<std::size_t, max_rank> dims{};
    if (stack) {
        if (rank == max_rank) throw_rank_too_large(rank + 1);
        norm = normalize_axis(op, axis, rank + 1);
        for (std::size_t i = 1; i < in.size(); ++i) {
            if (in[i].rank() != rank) throw_join_rank(op, i, in[i].rank(), rank);
            if (!(in[i].shape() == first)) throw_join_shape(op, i, in[i].shape(), first);
        }
        for (std::size_t i = 0, j = 0; i <= rank; ++i) dims[i] = i == norm ? in.size() : first[j++];
        return shape(std::span<const std::size_t>(dims.data(), rank + 1));
    }
    norm = normalize_axis(op, axis, rank);
    std::size_t total = first[norm];
    for (std::size_t i = 1; i < in.size(); ++i) {
        const shape& s = in[i].shape();
        if (s.rank() != rank) throw_join_rank(op, i, s.rank(), rank);
        for (std::size_t a = 0; a < rank; ++a)
            if (a != norm && s[a] != first[a]) throw_join_extent(op, i, s, first, norm);
        if (__builtin_add_overflow(total, s[norm], &total)) throw_join_overflow(op, norm);
    }
    for (std::size_t a = 0; a < rank; ++a) dims[a] = a == norm ? total : first[a];
    return shape(std::span<const std::size_t>(dims.data(), rank));
}

/// Validates `out` against the result shape and every input: right shape, no repeated
/// elements, no overlap with an input (beyond an input that is exactly `out`).
template <class T>
void check_join_out(const char* op, std::span<const tensor_view<const T>> in,
                    const shape& result, const tensor_view<T>& out) {
    check_out(op, "out", out, result);
    for (std::size_t i = 0; i < in.size(); ++i)
        check_in_place(op, "out", out, operand_name("input", i), in[i]);
}

/// Copies each input into its part of `out` (validated): one copy, so at most one dispatch,
/// per input with elements.
template <class T>
void join_run(session& s, bool stack, std::span<const tensor_view<const T>> in, std::size_t axis,
              const tensor_view<T>& out) {
    const auto a = static_cast<std::ptrdiff_t>(axis);
    std::ptrdiff_t offset = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (stack) {
            const auto k = static_cast<std::ptrdiff_t>(i);
            copy_unchecked(s, out.slice(a, k, k + 1).squeeze(a), in[i]);
        } else {
            const auto n = static_cast<std::ptrdiff_t>(in[i].extent(axis));
            copy_unchecked(s, out.slice(a, offset, offset + n), in[i]);
            offset += n;
        }
    }
}

template <class T>
tensor<T> join_new(session& s, const char* op, bool stack,
                   std::span<const tensor_view<const T>> in, std::ptrdiff_t axis) {
    check_session(s);
    std::size_t norm = 0;
    const shape result = join_shape(op, stack, in, axis, norm);
    tensor<T> out = empty<T>(s, result);
    join_run(s, stack, in, norm, out.view());
    return out;
}

template <class T>
void join_into(session& s, const char* op, bool stack, std::span<const tensor_view<const T>> in,
               std::ptrdiff_t axis, const tensor_view<T>& out) {
    check_session(s);
    std::size_t norm = 0;
    const shape result = join_shape(op, stack, in, axis, norm);
    check_join_out(op, in, result, out);
    join_run(s, stack, in, norm, out);
}

}  // namespace detail

/// Returns a dense row-major copy of `v` (any strides: transposed, sliced, flipped, broadcast).
///
/// Always copies, also when `v` is already contiguous; allocates the result from the session's
/// workspace. Transposed layouts run a cache-blocked transpose. One dispatch: inline when the
/// element count is at most the backend's grain, else in parallel on the arena.
template <tensor_like V, class T = value_of_t<V>>
    requires element<T>
tensor<T> contiguous(session& s, const V& v) {
    const tensor_view<const T> src = as_view(v);
    tensor<T> out = empty<T>(s, src.shape());  // checks the session's thread
    detail::copy_unchecked(s, out.view(), src);
    return out;
}

/// Copies `src` into `dst`, which may have any layout; `src` broadcasts to `dst`'s shape, as
/// NumPy's copyto does.
///
/// Throws shape_error if `src` does not broadcast to `dst`, alias_error if `dst` repeats
/// elements (a stride-0 axis) or overlaps `src` without being exactly the same elements; nothing
/// is written then. Exactly aliased operands are a no-op. Never allocates; one dispatch (none
/// when there is nothing to copy).
template <tensor_like S, class T = value_of_t<S>>
    requires element<T>
void copy(session& s, const S& src, const tensor_view<std::type_identity_t<T>>& dst) {
    detail::check_session(s);
    const tensor_view<const T> from = detail::check_copy("copy", dst, as_view(src));
    detail::copy_unchecked(s, dst, from);
}

/// Writes `value` into every element of `out`: a tensor, or a view of any layout.
///
/// Throws alias_error if `out` repeats elements (a stride-0 axis). Never allocates; one dispatch
/// (none when `out` is empty).
template <writable_tensor O, class T = writable_value_t<O>>
void fill(session& s, std::type_identity_t<T> value, O&& out) {
    detail::check_session(s);
    const tensor_view<T> dst = as_writable_view(out);
    detail::check_writable("fill", "out", dst);
    if (dst.size() == 0) return;
    const stride_array none{};
    const detail::iteration<2> it = detail::copy_iteration(dst.shape(), dst.stride_values(), none);
    T* const d = dst.data();
    const detail::session_dispatch dispatch{s};
    if (const std::ptrdiff_t step = it.inner_stride(0); step == 1) {
        detail::walk_runs(dispatch, it, [=](std::ptrdiff_t o, std::ptrdiff_t, std::size_t n) {
            std::fill_n(d + o, n, value);
        });
    } else {
        detail::walk_runs(dispatch, it, [=](std::ptrdiff_t o, std::ptrdiff_t, std::size_t n) {
            for (std::size_t j = 0; j < n; ++j)
                d[o + static_cast<std::ptrdiff_t>(j) * step] = value;
        });
    }
}

/// Returns the inputs joined along `axis` (negative counts from the end), as NumPy's
/// concatenate does: all inputs have the same rank and agree on every other extent.
///
/// Throws shape_error for an empty list, a rank or extent mismatch, or an axis out of range.
/// Allocates the result; one dispatch per input with elements. With a braced list of tensors,
/// name the element type: `tessera::concat<float>(s, {a, b}, 1)`.
template <element T>
tensor<T> concat(session& s, std::span<const tensor_view<const T>> inputs,
                 std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "concat", false, inputs, axis);
}
/// Returns the braced-list inputs joined along `axis`, as the span overload does (same errors);
/// name the element type when the list holds tensors: `tessera::concat<float>(s, {a, b}, 1)`.
template <element T>
tensor<T> concat(session& s, std::initializer_list<tensor_view<const T>> inputs,
                 std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "concat", false, detail::span_of(inputs), axis);
}
/// Writes the inputs joined along `axis` into `out`; never allocates. Besides the errors above,
/// throws shape_error if `out` has the wrong shape and alias_error if it repeats elements or
/// overlaps an input; nothing is written then.
template <element T>
void concat(session& s, std::span<const tensor_view<const T>> inputs, std::ptrdiff_t axis,
            const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "concat", false, inputs, axis, out);
}
/// Writes the braced-list inputs joined along `axis` into `out`, as the span overload does (same
/// errors, checked before any write); never allocates. Name the element type for tensors.
template <element T>
void concat(session& s, std::initializer_list<tensor_view<const T>> inputs, std::ptrdiff_t axis,
            const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "concat", false, detail::span_of(inputs), axis, out);
}

/// Returns the inputs, which all have one shape, stacked along a new axis at position `axis`
/// (in [-rank-1, rank]; -1 appends), as NumPy's stack does.
///
/// Throws shape_error for an empty list, differing shapes, an axis out of range, or a result
/// rank above max_rank. Allocates the result; one dispatch per input with elements.
template <element T>
tensor<T> stack(session& s, std::span<const tensor_view<const T>> inputs,
                std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "stack", true, inputs, axis);
}
/// Returns the braced-list inputs stacked along a new axis, as the span overload does (same
/// errors); name the element type when the list holds tensors: `tessera::stack<float>(s, {a, b})`.
template <element T>
tensor<T> stack(session& s, std::initializer_list<tensor_view<const T>> inputs,
                std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "stack", true, detail::span_of(inputs), axis);
}
/// Writes the inputs stacked along a new axis into `out`; never allocates. Errors as for the
/// out-parameter form of concat.
template <element T>
void stack(session& s, std::span<const tensor_view<const T>> inputs, std::ptrdiff_t axis,
           const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "stack", true, inputs, axis, out);
}
/// Writes the braced-list inputs stacked along a new axis into `out`, as the span overload does
/// (same errors, checked before any write); never allocates. Name the element type for tensors.
template <element T>
void stack(session& s, std::initializer_list<tensor_view<const T>> inputs, std::ptrdiff_t axis,
           const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "stack", true, detail::span_of(inputs), axis, out);
}

}  // namespace tessera
