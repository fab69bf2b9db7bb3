// tessera/ops/einsum.hpp - einsum (NumPy notation, any number of operands), its out-parameter form
// einsum_into, and prepare/einsum_plan for callers who hold a plan. Start with einsum.
//
// A spec and the operands' shapes are parsed and planned once per backend: the plan (the pairwise
// contraction order and how each step runs) is cached in the backend (bounded, least recently used
// evicted) and in the session's workspace in front of it, so a warm call does no parsing, no path
// search and no heap allocation. Includes Eigen and oneTBB (through ops/matmul.hpp).
#pragma once

#include <tessera/detail/einsum.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>

namespace tessera {

/// One step of a contraction path, in NumPy's (and opt_einsum's) convention: contract the operands
/// at these two positions of the current operand list, remove both, append the result at the end.
using einsum_step = detail::path_step;

namespace detail {
/// The operands of a call as views; every one must have element type T (no promotion).
template <class T, class... Ops>
std::array<tensor_view<const T>, sizeof...(Ops)> einsum_views(const Ops&... ops) noexcept {
    static_assert((std::same_as<T, value_of_t<Ops>> && ...),
                  "einsum: every operand must have the same element type (float is not promoted to double)");
    return {as_view(ops)...};
}

struct einsum_plan_access;

/// The common start of einsum and einsum_into: checks the thread, then finds the plan for `spec`
/// and the operands' shapes (the workspace's slots, the backend's cache, else the planner).
template <class T, std::size_t N>
const einsum_program& einsum_program_for(session& s, std::string_view spec,
                                         const std::array<tensor_view<const T>, N>& in) {
    session_access::check_thread(s);
    std::array<const shape*, N> shapes;
    for (std::size_t i = 0; i < N; ++i) shapes[i] = &in[i].shape();
    return *find_plan(s, {spec, dtype_code<T>, shapes, {}});
}
}  // namespace detail

/// Returns the Einstein summation of the operands as `spec` (NumPy's notation) describes it.
///
/// Notation: `ij,jk->ik` (explicit output), `ij,jk` (implicit: the indices used once, in ASCII
/// order, upper case first), repeated indices within an operand for diagonals and traces (`ii->i`,
/// `ii->`), `...` for broadcast axes aligned at the right (`...ij,...jk->...ik`; an operand's
/// extent-1 axes there stretch), any number of operands. Indices that the output lacks are summed.
/// Every operand must have the same element type (float, double or complex): mixing types does not
/// compile.
///
/// Throws spec_error for a malformed spec, a wrong operand count, an output index that no operand
/// has or that repeats; shape_error for an operand whose rank does not fit its subscripts, an
/// index whose extents differ, '...' axes that do not broadcast, or a result above rank 8.
///
/// Pairwise steps with a summed index run as batched matrix products (tessera::batched_matmul's
/// kernels); elementwise products, outer products, dot products, permutations and single-operand
/// sums run as strided loops. With three or more operands the order is chosen to minimise
/// multiply-adds plus intermediate sizes (exhaustively up to 5 operands, greedily beyond); use
/// prepare with a path to choose it yourself. Allocates the result (and intermediates) from the
/// session's workspace.
///
///     auto c = tessera::einsum(s, "ij,jk->ik", a, b);        // a @ b
///     auto t = tessera::einsum(s, "bii->b", batch_of_squares);  // traces
template <tensor_like A, tensor_like... Rest, class T = value_of_t<A>>
    requires floating<T>
tensor<T> einsum(session& s, std::string_view spec, const A& a, const Rest&... rest) {
    const auto in = detail::einsum_views<T>(a, rest...);
    const detail::einsum_program& p = detail::einsum_program_for(s, spec, in);
    tensor<T> out = tensor<T>::uninitialized(s, p.result);
    detail::run_einsum<T>(s, p, in, out.view());
    return out;
}

/// Writes einsum(spec, operands...) into `out` (the result's shape, any strides); never allocates
/// on the heap in a warm session, and borrows intermediates from the workspace. Throws as einsum,
/// plus shape_error when out's shape differs from the result's and alias_error when out overlaps
/// an operand, before anything is written.
template <tensor_like A, tensor_like... Rest, class T = value_of_t<A>>
    requires floating<T>
void einsum_into(session& s, std::string_view spec, const std::type_identity_t<tensor_view<T>>& out, const A& a,
                 const Rest&... rest) {
    const auto in = detail::einsum_views<T>(a, rest...);
    const detail::einsum_program& p = detail::einsum_program_for(s, spec, in);
    detail::check_einsum_out<T>(p, out, in);
    detail::run_einsum<T>(s, p, in, out);
}

/// A planned einsum for one spec, element type and set of operand shapes, made by prepare.
///
/// Holds the plan (shared with the backend's cache, so it stays valid after an eviction or after
/// the backend is gone). Calling it checks only that the operands have the prepared shapes (any
/// strides), then runs the plan. A plan is immutable: any number of sessions, on any thread or
/// backend, may run it at once.
///
///     auto plan = tessera::prepare<double>(s, "ab,apc,bpd->cd", e.shape(), a.shape(), b.shape());
///     auto next = plan(s, e, a, b);
template <class T>
    requires floating<T>
class einsum_plan {
public:
    /// Returns the result for `ops`, as einsum would. Throws spec_error for a wrong operand count
    /// and shape_error for an operand whose shape is not the prepared one.
    template <tensor_like... Ops>
    tensor<T> operator()(session& s, const Ops&... ops) const {
        detail::session_access::check_thread(s);
        const auto in = detail::einsum_views<T>(ops...);
        check_operands(in);
        tensor<T> out = tensor<T>::uninitialized(s, program_->result);
        detail::run_einsum<T>(s, *program_, in, out.view());
        return out;
    }

    /// Writes the result into `out`; never allocates on the heap in a warm session. Checks as
    /// operator(), plus out's shape and overlap, before anything is written.
    template <tensor_like... Ops>
    void into(session& s, const tensor_view<T>& out, const Ops&... ops) const {
        detail::session_access::check_thread(s);
        const auto in = detail::einsum_views<T>(ops...);
        check_operands(in);
        detail::check_einsum_out<T>(*program_, out, in);
        detail::run_einsum<T>(s, *program_, in, out);
    }

    /// Returns the spec the plan was made for.
    std::string_view spec() const noexcept { return program_->spec; }
    /// Returns the result's shape.
    const shape& result_shape() const noexcept { return program_->result; }
    /// Returns the pairwise order the plan runs, in NumPy's convention (empty for one operand);
    /// passing it to prepare gives the same plan.
    std::span<const einsum_step> path() const noexcept { return program_->path; }
    /// Returns the multiply-adds of the pairwise steps (the product of the extents of every index
    /// each step touches).
    double flops() const noexcept { return program_->flops; }

private:
    friend struct detail::einsum_plan_access;

    explicit einsum_plan(std::shared_ptr<const detail::einsum_program> p) noexcept : program_(std::move(p)) {}

    template <std::size_t N>
    void check_operands(const std::array<tensor_view<const T>, N>& in) const {
        if (N != program_->inputs.size()) detail::throw_einsum_plan_operands(program_->spec, program_->inputs.size(), N);
        for (std::size_t i = 0; i < N; ++i)
            if (!(in[i].shape() == program_->inputs[i]))
                detail::throw_einsum_plan_shape(program_->spec, i, program_->inputs[i], in[i].shape());
    }

    std::shared_ptr<const detail::einsum_program> program_;
};

namespace detail {
/// The common body of the prepare overloads.
struct einsum_plan_access {
    template <class T, class... S>
    static einsum_plan<T> prepare(session& s, std::string_view spec, std::span<const path_step> path,
                                  const S&... shapes) {
        session_access::check_thread(s);
        const std::array<const shape*, sizeof...(S)> list{&shapes...};
        return einsum_plan<T>(find_plan(s, {spec, dtype_code<T>, list, path}));
    }
};
}  // namespace detail

/// Plans `spec` for operands of element type T and the given shapes, and returns the plan. Goes
/// through the same caches as einsum (a hit or a miss in stats()). Throws as einsum does.
template <class T, std::same_as<shape>... S>
    requires floating<T> && (sizeof...(S) >= 1)
einsum_plan<T> prepare(session& s, std::string_view spec, const S&... shapes) {
    return detail::einsum_plan_access::prepare<T>(s, spec, {}, shapes...);
}

/// Plans `spec` with the caller's pairwise order `path` (n - 1 steps for n operands, NumPy's
/// convention). Throws spec_error for a path step that names a missing or repeated position, or a
/// path of the wrong length, and shape_error for a step whose intermediate would exceed rank 8.
///
///     const tessera::einsum_step left_to_right[] = {{0, 1}, {0, 1}};
///     auto plan = tessera::prepare<float>(s, "ij,jk,kl->il", left_to_right, a.shape(), b.shape(), c.shape());
template <class T, std::same_as<shape>... S>
    requires floating<T> && (sizeof...(S) >= 1)
einsum_plan<T> prepare(session& s, std::string_view spec, std::span<const einsum_step> path, const S&... shapes) {
    return detail::einsum_plan_access::prepare<T>(s, spec, path, shapes...);
}

}  // namespace tessera
