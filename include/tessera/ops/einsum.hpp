// tessera/ops/einsum.hpp - einsum (NumPy notation, any number of operands, as arguments or as a
// runtime list), its out form einsum(s, spec, {a, b}, out), and prepare/einsum_plan for callers
// who hold a plan. Start with einsum.
//
// A spec and the operands' shapes are parsed and planned once per backend: the plan (the pairwise
// contraction order and how each step runs) is cached in the backend (bounded, least recently used
// evicted) and in the session's workspace in front of it, so a warm call does no parsing, no path
// search and no heap allocation. The executor is compiled in the library: this header includes
// neither Eigen nor oneTBB.
#pragma once

#include <tessera/detail/einsum.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>

namespace tessera {

/// One step of a contraction path, in NumPy's (and opt_einsum's) convention: contract the operands
/// at these two positions of the current operand list, remove both, append the result at the end.
using einsum_step = detail::path_step;

/// The most operands a runtime operand list (a `std::span` or `std::initializer_list` of views, or
/// a span of shapes for prepare) may hold; a longer list throws spec_error. The forms that take the
/// operands as separate arguments have no limit. A call keeps a shape pointer per operand and an
/// intermediate per step on the stack, sized for this many (1.5 KiB), so it never allocates.
inline constexpr std::size_t max_einsum_operands = 64;

namespace detail {
/// The operands of a call as views; every one must have element type T (no promotion).
template <class T, class... Ops>
std::array<tensor_view<const T>, sizeof...(Ops)> einsum_views(const Ops&... ops) noexcept {
    static_assert((std::same_as<T, value_of_t<Ops>> && ...),
                  "einsum: every operand must have the same element type (float is not promoted "
                  "to double)");
    return {as_view(ops)...};
}

struct einsum_plan_access;

/// The common start of every einsum form: checks the thread and the list's length (1..Cap: a pack
/// passes its own size, a runtime list max_einsum_operands), then finds the plan for `spec` and
/// the operands' shapes (the workspace's slots, the backend's cache, else the planner).
template <class T, std::size_t Cap>
const einsum_program& einsum_program_for(session& s, std::string_view spec,
                                         std::span<const tensor_view<const T>> in) {
    check_session(s);
    check_operand_list<Cap>(spec, in.size());
    std::array<const shape*, Cap> shapes;
    for (std::size_t i = 0; i < in.size(); ++i) shapes[i] = &in[i].shape();
    const std::span<const shape* const> used(shapes.data(), in.size());
    return *find_plan(s, {spec, dtype_code<T>, used, {}});
}

/// The body of every allocating einsum form: the result, allocated from the workspace.
template <class T, std::size_t Cap>
tensor<T> einsum_new(session& s, std::string_view spec, std::span<const tensor_view<const T>> in) {
    const einsum_program& p = einsum_program_for<T, Cap>(s, spec, in);
    tensor<T> out = empty<T>(s, p.result);
    run_einsum<T, Cap>(s, p, in, out.view());
    return out;
}

/// The body of every einsum out form: everything is checked before `out` is written.
template <class T, std::size_t Cap>
void einsum_write(session& s, std::string_view spec, std::span<const tensor_view<const T>> in,
                  const tensor_view<T>& out) {
    const einsum_program& p = einsum_program_for<T, Cap>(s, spec, in);
    check_einsum_out<T>(p, out, in);
    run_einsum<T, Cap>(s, p, in, out);
}
}  // namespace detail

// What an allocating form says when its result is dropped: most likely the caller meant the out
// form and wrote the destination as one more operand (which then fails the operand count).
#define TESSERA_EINSUM_NODISCARD                                                               \
    [[nodiscard("einsum returns its result; to write into an existing tensor, pass the "        \
                "operands as a list and the destination last: einsum(s, spec, {a, b}, out), "   \
                "plan(s, {a, b}, out)")]]

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
/// session's workspace. Every argument after the spec is an operand: the out form takes the
/// operands as one list (`einsum(s, spec, {a, b}, out)`), and dropping this form's result draws a
/// compiler warning that shows that spelling.
///
///     auto c = tessera::einsum(s, "ij,jk->ik", a, b);        // a @ b
///     auto t = tessera::einsum(s, "bii->b", batch_of_squares);  // traces
template <tensor_like A, tensor_like... Rest, class T = value_of_t<A>>
    requires floating<T>
TESSERA_EINSUM_NODISCARD tensor<T> einsum(session& s, std::string_view spec, const A& a,
                                          const Rest&... rest) {
    const auto in = detail::einsum_views<T>(a, rest...);
    return detail::einsum_new<T, 1 + sizeof...(Rest)>(s, spec, in);
}

/// Returns einsum(spec, operands...) for a runtime list of operands, such as a network read from a
/// file: the same plan (and plan-cache entry) as the form with separate arguments, with the same
/// results bit for bit, and no heap allocation apart from the result in a warm session.
///
/// Throws as that form does (the same spec_error for a count that differs from the spec's), plus
/// spec_error for an empty list or one longer than max_einsum_operands. A
/// `std::vector<tensor_view<const T>>` converts to the span once T is named:
///
///     std::vector<tessera::tensor_view<const double>> ops = read_network(s);  // n views
///     auto r = tessera::einsum<double>(s, spec, ops);
template <floating T>
TESSERA_EINSUM_NODISCARD tensor<T> einsum(session& s, std::string_view spec,
                                          std::span<const tensor_view<const T>> operands) {
    return detail::einsum_new<T, max_einsum_operands>(s, spec, operands);
}

/// Returns einsum(spec, operands...) for a braced list, as the span overload does (same errors);
/// name the element type when the list holds tensors: `tessera::einsum<float>(s, spec, {a, b})`.
template <floating T>
TESSERA_EINSUM_NODISCARD tensor<T> einsum(session& s, std::string_view spec,
                                          std::initializer_list<tensor_view<const T>> operands) {
    return detail::einsum_new<T, max_einsum_operands>(s, spec, detail::span_of(operands));
}

/// Writes einsum(spec, operands...) into `out` (a tensor, or a view of the result's shape with any
/// strides) for a list of operands: a span (a `std::vector<tensor_view<const T>>` converts) or a
/// braced list. The element type comes from `out`, so neither list needs it named:
///
///     tessera::einsum(s, "ij,jk->ik", {a, b}, c);   // c = a @ b
///     tessera::einsum(s, spec, views, result);      // views: a std::vector of n operands
///
/// The same plan, cache entry and checks as the allocating forms, all before anything is written,
/// plus shape_error when out's shape differs from the result's and alias_error when out overlaps
/// an operand or repeats elements. Never allocates on the heap in a warm session; intermediates
/// are borrowed from the workspace.
template <writable_tensor O, class T = writable_value_t<O>>
    requires floating<T>
void einsum(session& s, std::string_view spec,
            std::span<const tensor_view<const std::type_identity_t<T>>> operands, O&& out) {
    detail::einsum_write<T, max_einsum_operands>(s, spec, operands, as_writable_view(out));
}

/// Writes einsum(spec, operands...) for a braced list into `out`, as the span overload does (same
/// checks before any write, no heap allocation in a warm session).
template <writable_tensor O, class T = writable_value_t<O>>
    requires floating<T>
void einsum(session& s, std::string_view spec,
            std::initializer_list<tensor_view<const std::type_identity_t<T>>> operands, O&& out) {
    detail::einsum_write<T, max_einsum_operands>(s, spec, detail::span_of(operands),
                                                 as_writable_view(out));
}

/// A planned einsum for one spec, element type and set of operand shapes, made by prepare.
///
/// Holds the plan (shared with the backend's cache, so it stays valid after an eviction or after
/// the backend is gone). Calling it checks only that the operands have the prepared shapes (any
/// strides), then runs the plan. A plan is immutable: any number of sessions, on any thread or
/// backend, may run it at once. Its calls mirror einsum's: operands as arguments or a list for a
/// new result, a list and then `out` to write into a tensor.
///
///     auto plan = tessera::prepare<double>(s, "ab,apc,bpd->cd", e.shape(), a.shape(), b.shape());
///     auto next = plan(s, e, a, b);
///     plan(s, {e, a, b}, next);  // into an existing tensor
template <class T>
    requires floating<T>
class einsum_plan {
public:
    /// Returns the result for `ops`, as einsum would. Throws spec_error for a wrong operand count
    /// and shape_error for an operand whose shape is not the prepared one.
    template <tensor_like... Ops>
    TESSERA_EINSUM_NODISCARD tensor<T> operator()(session& s, const Ops&... ops) const {
        const auto in = detail::einsum_views<T>(ops...);
        return run_new<sizeof...(Ops)>(s, in);
    }
    /// Returns the result for a runtime list of operands; checks as the form above, plus
    /// spec_error for a list longer than max_einsum_operands.
    TESSERA_EINSUM_NODISCARD tensor<T> operator()(
        session& s, std::span<const tensor_view<const T>> operands) const {
        return run_new<max_einsum_operands>(s, operands);
    }
    /// Returns the result for a braced list of operands, as the span overload does.
    TESSERA_EINSUM_NODISCARD tensor<T> operator()(
        session& s, std::initializer_list<tensor_view<const T>> operands) const {
        return run_new<max_einsum_operands>(s, detail::span_of(operands));
    }

    /// Writes the result for a list of operands into `out` (a tensor or a view, any strides);
    /// never allocates on the heap in a warm session. Checks as operator(), plus out's shape and
    /// overlap, before anything is written.
    template <writable_tensor O>
        requires std::same_as<writable_value_t<O>, T>
    void operator()(session& s, std::span<const tensor_view<const T>> operands, O&& out) const {
        run_write<max_einsum_operands>(s, operands, as_writable_view(out));
    }
    /// Writes the result for a braced list of operands into `out`, as the span overload does.
    template <writable_tensor O>
        requires std::same_as<writable_value_t<O>, T>
    void operator()(session& s, std::initializer_list<tensor_view<const T>> operands,
                    O&& out) const {
        run_write<max_einsum_operands>(s, detail::span_of(operands), as_writable_view(out));
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

    explicit einsum_plan(std::shared_ptr<const detail::einsum_program> p) noexcept
        : program_(std::move(p)) {}

    // The bodies shared by the pack and list forms; Cap bounds the list (a pack passes its size).
    template <std::size_t Cap>
    tensor<T> run_new(session& s, std::span<const tensor_view<const T>> in) const {
        detail::check_session(s);
        check_operands<Cap>(in);
        tensor<T> out = empty<T>(s, program_->result);
        detail::run_einsum<T, Cap>(s, *program_, in, out.view());
        return out;
    }

    template <std::size_t Cap>
    void run_write(session& s, std::span<const tensor_view<const T>> in,
                   const tensor_view<T>& out) const {
        detail::check_session(s);
        check_operands<Cap>(in);
        detail::check_einsum_out<T>(*program_, out, in);
        detail::run_einsum<T, Cap>(s, *program_, in, out);
    }

    template <std::size_t Cap>
    void check_operands(std::span<const tensor_view<const T>> in) const {
        const std::size_t n = in.size();
        if (n != program_->inputs.size())
            detail::throw_einsum_plan_operands(program_->spec, program_->inputs.size(), n);
        // Only a plan prepared from more than Cap separate shapes, run with a runtime list, can
        // fail here.
        detail::check_operand_list<Cap>(program_->spec, n);
        for (std::size_t i = 0; i < n; ++i)
            if (!(in[i].shape() == program_->inputs[i]))
                detail::throw_einsum_plan_shape(program_->spec, i, program_->inputs[i],
                                                in[i].shape());
    }

    std::shared_ptr<const detail::einsum_program> program_;
};

#undef TESSERA_EINSUM_NODISCARD

namespace detail {
/// The common body of the prepare overloads.
struct einsum_plan_access {
    template <class T>
    static einsum_plan<T> prepare(session& s, std::string_view spec,
                                  std::span<const path_step> path,
                                  std::span<const shape* const> shapes) {
        return einsum_plan<T>(find_plan(s, {spec, dtype_code<T>, shapes, path}));
    }

    template <class T, class... S>
    static einsum_plan<T> prepare_pack(session& s, std::string_view spec,
                                       std::span<const path_step> path, const S&... shapes) {
        check_session(s);
        const std::array<const shape*, sizeof...(S)> list{&shapes...};
        return prepare<T>(s, spec, path, list);
    }

    template <class T>
    static einsum_plan<T> prepare_list(session& s, std::string_view spec,
                                       std::span<const path_step> path,
                                       std::span<const shape> shapes) {
        check_session(s);
        check_operand_list<max_einsum_operands>(spec, shapes.size());
        std::array<const shape*, max_einsum_operands> list;
        for (std::size_t i = 0; i < shapes.size(); ++i) list[i] = &shapes[i];
        const std::span<const shape* const> used(list.data(), shapes.size());
        return prepare<T>(s, spec, path, used);
    }
};
}  // namespace detail

/// Plans `spec` for operands of element type T and the given shapes, and returns the plan. Goes
/// through the same caches as einsum (a hit or a miss in stats()). Throws as einsum does.
template <class T, std::same_as<shape>... S>
    requires floating<T> && (sizeof...(S) >= 1)
einsum_plan<T> prepare(session& s, std::string_view spec, const S&... shapes) {
    return detail::einsum_plan_access::prepare_pack<T>(s, spec, {}, shapes...);
}

/// Plans `spec` for a runtime list of operand shapes, as the form above does (the same plan and
/// cache entry); throws spec_error for an empty list or one longer than max_einsum_operands.
///
///     std::vector<tessera::shape> shapes = network_shapes();
///     auto plan = tessera::prepare<double>(s, spec, shapes);
template <floating T>
einsum_plan<T> prepare(session& s, std::string_view spec, std::span<const shape> shapes) {
    return detail::einsum_plan_access::prepare_list<T>(s, spec, {}, shapes);
}

/// Plans `spec` with the caller's pairwise order `path` (n - 1 steps for n operands, NumPy's
/// convention). Throws spec_error for a path step that names a missing or repeated position, or a
/// path of the wrong length, and shape_error for a step whose intermediate would exceed rank 8.
///
///     const tessera::einsum_step left_to_right[] = {{0, 1}, {0, 1}};
///     auto plan = tessera::prepare<float>(s, "ij,jk,kl->il", left_to_right, a.shape(),
///                                         b.shape(), c.shape());
template <class T, std::same_as<shape>... S>
    requires floating<T> && (sizeof...(S) >= 1)
einsum_plan<T> prepare(session& s, std::string_view spec, std::span<const einsum_step> path,
                       const S&... shapes) {
    return detail::einsum_plan_access::prepare_pack<T>(s, spec, path, shapes...);
}

/// Plans `spec` with the caller's pairwise order `path` for a runtime list of operand shapes, as
/// the forms above do (same errors).
template <floating T>
einsum_plan<T> prepare(session& s, std::string_view spec, std::span<const einsum_step> path,
                       std::span<const shape> shapes) {
    return detail::einsum_plan_access::prepare_list<T>(s, spec, path, shapes);
}

}  // namespace tessera
