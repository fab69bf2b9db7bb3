// tessera/ops/matmul.hpp - matrix products: matmul (2-D, with an accumulate form), batched_matmul
// (NumPy-broadcast batches, compile-time kernels for tiny sizes), tensordot, dot, vdot and outer.
// This header includes neither Eigen nor oneTBB: the engines are compiled in the library for the
// four element types, and only the 2x2-4x4 out-parameter matmul runs inline (plain loops). Start
// with matmul and batched_matmul.
//
// Element types: float, double, complex<float>, complex<double>. Inputs are tensors or views with
// any strides (transposed, sliced, broadcast); out-parameters must have the result's shape and
// must not overlap an input. Every check happens before anything is written. Large products are
// split into tiles run on the backend's threads, each tile an Eigen GEMM on one thread; small ones
// run inline. A warm session allocates nothing on the heap: copies that Eigen's kernel needs and
// its pack buffers are borrowed from the session's workspace.
#pragma once

#include <tessera/detail/matmul.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <type_traits>

namespace tessera {

/// Returns a @ b for a of shape [m, k] and b of shape [k, n], as a new [m, n] tensor.
/// Throws shape_error unless both have rank 2 and the inner extents agree.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
tensor<T> matmul(session& s, const A& a, const B& b) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    tensor<T> out = empty<T>(s, detail::check_matmul_2d<T>("matmul", av, bv));
    detail::matmul_2d<T>(s, detail::matrix_of(av), detail::matrix_of(bv), detail::matrix_of(out),
                         false, T{1}, T{0});
    return out;
}

/// Writes a @ b into `out` ([m, n]; a tensor, or a view of any strides); never allocates on the
/// heap. The checks are inlined for rank-2 operands; 2x2, 3x3 and 4x4 products then run inline
/// with no look-up and no workspace (with a tensor as `out` its strides are known at compile
/// time, which is most of the cost of a 2x2 product), other small real shapes with the kernel a
/// batch of them would run (the same bits), which the session's workspace remembers: the next
/// product of the same shape, strides and form calls it without choosing or planning again.
/// Throws shape_error for bad shapes and alias_error if `out` overlaps `a` or `b`, before writing
/// anything.
template <tensor_like A, tensor_like B, writable_tensor O, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && std::same_as<T, writable_value_t<O>> && floating<T>
void matmul(session& s, const A& a, const B& b, O&& out) {
    detail::check_session(s);
    if (detail::try_matrix_product<T>(s, a, b, out)) return;
    detail::matmul_general<T>(s, a, b, out);
}

/// Accumulates: out = alpha * (a @ b) + beta * out. With beta == 0, out is only written (NaNs in
/// it do not survive), as in BLAS. Same checks as the out-parameter form.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
void matmul(session& s, const A& a, const B& b, const std::type_identity_t<tensor_view<T>>& out,
            std::type_identity_t<T> alpha, std::type_identity_t<T> beta) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    detail::check_product_out<T>("matmul", out, detail::check_matmul_2d<T>("matmul", av, bv), av, bv);
    detail::matmul_2d<T>(s, detail::matrix_of(av), detail::matrix_of(bv), detail::matrix_of(out),
                         true, alpha, beta);
}

/// Returns the batched product of a [..., m, k] and b [..., k, n]: a [..., m, n] tensor whose
/// batch axes are the NumPy broadcast of the operands' (so one operand may be a single matrix
/// shared by the whole batch). Throws shape_error for rank < 2, different inner extents or batch
/// axes that do not broadcast. An empty batch gives an empty result.
///
/// Square sizes 2, 3, 4, 5, 6, 8, 16, 32 and [4,4]x[4,1], [3,3]x[3,1] run compile-time kernels,
/// built for AVX-512, AVX2+FMA and the build's baseline; the widest one the CPU (and OS) supports
/// is chosen once per process. Other float and double shapes with m, k and n up to 64 run a
/// register-blocked kernel over the run-time sizes (likewise built for each level), as do the
/// compile-time sizes it measured faster than; larger products run Eigen's GEMM per matrix, and
/// tiny complex ones a plain loop. The batch is split across the backend's threads when it is
/// large enough.
///
///     auto c = tessera::batched_matmul(s, a, b);  // a [100000, 4, 4], b [4, 4] -> [100000, 4, 4]
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
tensor<T> batched_matmul(session& s, const A& a, const B& b) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    tensor<T> out = empty<T>(s, detail::check_batched<T>("batched_matmul", av, bv));
    detail::run_products<T>(s, av, bv, out.view(), false, T{1}, T{0});
    return out;
}

/// Writes the batched product into `out` ([batch..., m, n], any strides); never allocates on the
/// heap in a warm session. Same checks as above, plus out's shape and overlap (alias_error).
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
void batched_matmul(session& s, const A& a, const B& b, const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    detail::check_product_out<T>("batched_matmul", out, detail::check_batched<T>("batched_matmul", av, bv),
                                 av, bv);
    detail::run_products<T>(s, av, bv, out, false, T{1}, T{0});
}

/// Returns the contraction of a and b over the axis pairs (axes_a[i], axes_b[i]), as NumPy's
/// tensordot: the result's axes are a's remaining axes, then b's, in order. Axis lists are braced
/// lists (`tensordot(s, a, b, {1}, {0})`) or ranges of any integer type; negative axes count from
/// the end. Throws shape_error for unequal axis counts, repeated or out-of-range axes, extents
/// that differ, tessera::all_axes, or a result of rank above 8. Runs as one matrix product
/// (copying an operand into the workspace only when its permuted axes cannot be viewed as a
/// matrix).
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
tensor<T> tensordot(session& s, const A& a, const B& b, const axis_list& axes_a,
                    const axis_list& axes_b) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    const detail::contraction plan = detail::plan_contraction(av.shape(), bv.shape(), axes_a, axes_b);
    tensor<T> out = empty<T>(s, plan.result);
    detail::run_contraction<T>(s, plan, av, bv, out.view());
    return out;
}

/// Writes tensordot(a, b, axes_a, axes_b) into `out`; checks as above, plus out's shape and
/// overlap.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
void tensordot(session& s, const A& a, const B& b, const axis_list& axes_a, const axis_list& axes_b,
               const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    const detail::contraction plan = detail::plan_contraction(av.shape(), bv.shape(), axes_a, axes_b);
    detail::check_product_out<T>("tensordot", out, plan.result, av, bv);
    detail::run_contraction<T>(s, plan, av, bv, out);
}

namespace detail {
template <class T>
contraction plan_dot(const tensor_view<const T>& a, const tensor_view<const T>& b) {
    if (a.rank() == 0) throw_matmul_rank("dot", "a", a.shape(), 1, false);
    if (b.rank() == 0) throw_matmul_rank("dot", "b", b.shape(), 1, false);
    const std::size_t contracted = b.rank() >= 2 ? b.rank() - 2 : 0;
    if (a.extent(a.rank() - 1) != b.extent(contracted)) throw_matmul_inner("dot", a.shape(), b.shape());
    return plan_contraction(a.shape(), b.shape(), axis_list(-1), axis_list(contracted));
}
}  // namespace detail

/// Returns NumPy's dot(a, b): the sum over a's last axis and b's second-to-last (its only axis
/// when b is 1-D). Two vectors give a rank-0 tensor, two matrices their matmul. Throws
/// shape_error for a rank-0 operand or extents that differ.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
tensor<T> dot(session& s, const A& a, const B& b) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    const detail::contraction plan = detail::plan_dot<T>(av, bv);
    tensor<T> out = empty<T>(s, plan.result);
    if (av.rank() == 1 && bv.rank() == 1)
        out.data()[0] = detail::flat_dot<false, T>(s, av, bv);
    else
        detail::run_contraction<T>(s, plan, av, bv, out.view());
    return out;
}

/// Writes dot(a, b) into `out`; checks as above, plus out's shape and overlap.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
void dot(session& s, const A& a, const B& b, const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    const detail::contraction plan = detail::plan_dot<T>(av, bv);
    detail::check_product_out<T>("dot", out, plan.result, av, bv);
    if (av.rank() == 1 && bv.rank() == 1)
        out.data()[0] = detail::flat_dot<false, T>(s, av, bv);
    else
        detail::run_contraction<T>(s, plan, av, bv, out);
}

/// Returns sum(conj(a) * b) over both operands flattened in row-major order (NumPy's vdot);
/// real types are not conjugated. Throws shape_error if the element counts differ. The sum is
/// taken in fixed blocks, so it does not depend on the thread count.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
T vdot(session& s, const A& a, const B& b) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    if (av.size() != bv.size()) detail::throw_vdot_size("vdot", av.shape(), bv.shape());
    return detail::run_vdot<T>(s, av, bv);
}

/// Returns the outer product of a and b, both flattened: out[i, j] = a[i] * b[j], of shape
/// [a.size(), b.size()].
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
tensor<T> outer(session& s, const A& a, const B& b) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    tensor<T> out = empty<T>(s, shape{av.size(), bv.size()});
    detail::run_outer<T>(s, av, bv, out.view());
    return out;
}

/// Writes the outer product into `out` ([a.size(), b.size()], any strides); checks its shape and
/// overlap with the inputs before writing.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<T, value_of_t<B>> && floating<T>
void outer(session& s, const A& a, const B& b, const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    detail::check_product_out<T>("outer", out, shape{av.size(), bv.size()}, av, bv);
    detail::run_outer<T>(s, av, bv, out);
}

}  // namespace tessera
