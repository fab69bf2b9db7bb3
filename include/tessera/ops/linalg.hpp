// tessera/ops/linalg.hpp - batched dense linear algebra on stacks of square matrices [..., n, n]:
// inverse, solve, cholesky, lu, det, slogdet, qr, svd/svdvals and eigh/eigvalsh, with per-item
// failure reports (tessera::linalg_error, or an info tensor). Start with tessera::solve.
// The op bodies live in the library (src/linalg_*.cpp), so this header does not include Eigen.
#pragma once

#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/dtype.hpp>
#include <tessera/error.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>


#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

// Conventions shared by every op in this header.
//
// Types: float, double, std::complex<float>, std::complex<double> (the `linalg_element` concept),
// for every op. Singular values, eigenvalues and log|det| are real (real_type_t<T>).
//
// Shapes: a matrix operand is [..., n, n]; the leading axes are the batch. solve's right-hand
// sides are [..., n, k] (a vector b is passed as b.unsqueeze(-1)); the batch axes of `a` and `b`
// broadcast as in NumPy. Results are [batch..., ...] with the broadcast batch. Empty batches and
// n = 0 are valid (det of a 0 x 0 matrix is 1). Inputs may be any strided view (transposed,
// sliced, broadcast).
//
// Forms: each op returns new tensors from the session's workspace, or writes into caller-given
// out-parameter views (a tensor<T> converts to one). Every check (squareness, batch broadcast, out shapes, out writable, out
// overlapping an input or another out, info shape) happens before anything is written; those
// failures throw shape_error or alias_error. An out may be exactly the same view as an input of
// the same shape (in place); any other overlap is an alias_error.
//
// Numerical failure is per batch item. Without an info tensor, a failing item throws
// tessera::linalg_error naming the lowest failing flat batch index once the batch has run (each
// chunk of items stops at its first failure; out's contents are then unspecified). With an info
// tensor (int32, batch shape), nothing is thrown for numerical failures: info[i] is 0 for success
// or a LAPACK-like code > 0, and the outputs of a failed item are filled with NaN. Codes:
//   inverse, solve: k + 1 where U(k, k) is the first zero pivot of the LU factorisation (getrf);
//   cholesky:       k where the leading minor of order k is not positive definite (potrf);
//   eigh, eigvalsh: 1 when the QR iteration did not converge;
//   lu:             as inverse, but the factorisation is still valid and is written (not NaN).
// A pivot counts as zero when its magnitude is below the smallest normal number (zero or
// subnormal); only exact (or subnormal) singularity is detected - a nearly singular matrix gives
// large, inaccurate results, not an error. NaN or infinite inputs propagate to the outputs and are
// not reported (svd and svdvals give NaN for all of the item's outputs), except by eigh and
// eigvalsh, whose iteration then does not converge.
//
// Algorithms, real matrices of size 2 to 8 (inverse, solve, cholesky, lu, det, slogdet): SIMD
// across the batch. W matrices at a time (W = the vector width in elements: 8 floats or 4 doubles
// with AVX2, 16 or 8 with AVX-512, chosen at run time) sit one per vector lane, and each
// instruction works on all W: LU with partial pivoting (per-lane pivot choice and row swaps by
// selects, multipliers divided by the pivot as in Eigen), the closed form for 2 x 2 inverse and
// solve and for 2 x 2 and 3 x 3 det, Cholesky as below. Real eigh, eigvalsh, svd and svdvals at
// n = 2 and 3 run the same way (with AVX2's W on AVX-512 CPUs, where it was faster), by Jacobi
// rotations (two-sided for eigh, one rotation at n = 2; one-sided for svd) on each item scaled by
// a power of two, every lane rotating until its own off-diagonal entries (svd: column products)
// are negligible. A batch whose items are interleaved
// (a [n, n, batch] array seen as [batch, n, n] through permute({2, 0, 1}), batch stride 1) is
// read and written with one vector access per element; a dense batch with W x W shuffle
// transposes; any other layout element by element. An item the block cannot finish (a zero or
// subnormal pivot, a determinant or partial pivot product outside the normal range, a
// non-positive Cholesky pivot; for the Jacobi ops a NaN, infinite or all-subnormal item, a zero
// matrix for svd, a 3 x 3 singular value too small for its column of U to be orthogonal to the
// others, an item still rotating after 12 sweeps) is redone alone by the per-matrix path below,
// which decides its failure code; its outputs are not written by the block first. Each lane computes alone, so an
// item's result does not depend on the other items, the block size or the layout.
//
// Per-matrix path (complex types, n = 1 and n > 8, and the items handed back): 1 x 1 to 3 x 3
// inverse, solve, det and slogdet use closed forms (adjugate over the determinant); when that
// determinant is zero, subnormal or not finite (an intermediate product may overflow or underflow
// while the determinant is in range) the item is redone with LU, which decides whether it is
// singular. 4 x 4 inverse and det use Eigen's fixed-size cofactor formulas with the same
// fallback. Otherwise sizes up to 8 use Eigen's fixed-size decompositions on stack copies, and
// larger sizes dynamic-size Eigen (PartialPivLU, HouseholderQR, JacobiSVD,
// SelfAdjointEigenSolver, without eigenvectors for eigvalsh; cholesky is tessera's own, reading
// only the lower triangle). det from LU is sign(P) times the product of U's diagonal, taken with
// a separate binary exponent when a partial product leaves the normal range, so that it is inf or
// 0 only when the determinant itself is out of range.
//
// Accuracy on ill-conditioned real items (condition number kappa up to 1e6 in double, 1e3 in
// float; tests/ops/linalg_lanes_test.cpp): solve's and inverse's max error over max |x| stays
// within n kappa epsilon on the SIMD path's LU and 2 x 2 closed forms (its solve, and its inverse
// except at n = 3 and 4; measured up to 0.2), and within 256 n kappa epsilon elsewhere (the 3 x 3
// adjugate and the 4 x 4 cofactor formulas, inverse at n = 3 and 4 on both paths, reach 14 and
// 117).
//
// Threads and memory: work is split over the batch with the backend's grain (an item counts
// about n^3 units, more for svd and eigh), inline on the session's thread when small. Each item is
// copied in (Map-ed when dense) before any of its outputs is written. For n <= 8 nothing is
// allocated on the heap beyond the allocating forms' tensors (served by the workspace when warm).
// For n > 8 the dynamic-size Eigen objects allocate once per chunk of items; eigh also allocates
// per item (SelfAdjointEigenSolver forming the eigenvectors; eigvalsh does not), and for large n
// (beyond about 100) Eigen's blocked LU and triangular solves may allocate their pack buffers per
// item.

namespace tessera {

/// Why a batch item failed.
enum class linalg_reason {
    singular,               ///< a zero (or subnormal) pivot in the LU factorisation
    not_positive_definite,  ///< cholesky met a leading minor that is not positive definite
    no_convergence,         ///< eigh's iteration did not converge
};

/// Thrown by a linalg op (without an info tensor) when an item of the batch fails numerically,
/// e.g. "solve: item 17 of 100 is singular (pivot 2 is 0)".
class linalg_error : public error {
public:
    /// Builds the error with what() = `message` and the accessors' values; no checks (the ops
    /// pass item < items and info > 0). Copies `message`, so it may throw std::bad_alloc.
    linalg_error(const std::string& message, linalg_reason reason, std::size_t item,
                 std::size_t items, int info)
        : error(message), reason_(reason), item_(item), items_(items), info_(info) {}

    /// Returns why the item failed.
    linalg_reason reason() const noexcept { return reason_; }
    /// Returns the lowest failing flat (row-major) index in the broadcast batch.
    std::size_t item() const noexcept { return item_; }
    /// Returns the number of items in the batch.
    std::size_t items() const noexcept { return items_; }
    /// Returns the LAPACK-like code the info form would have written for the item (> 0).
    int info() const noexcept { return info_; }

private:
    linalg_reason reason_;
    std::size_t item_;
    std::size_t items_;
    int info_;
};

/// The element types the linalg ops accept: float, double, complex<float>, complex<double>.
template <class T>
concept linalg_element = floating<T>;

/// lu's results: the packed factors and the row permutation.
template <linalg_element T>
struct lu_result {
    tensor<T> lu;                  ///< [..., n, n]: L below the diagonal (unit diagonal implied), U on and above
    tensor<std::int64_t> pivots;   ///< [..., n]: row i of L U is row pivots[i] of A
};

/// slogdet's results: det = sign * exp(logabs).
template <linalg_element T>
struct slogdet_result {
    tensor<T> sign;                    ///< [...]: -1, 0 or 1 (complex: a unit-modulus phase, or 0)
    tensor<real_type_t<T>> logabs;     ///< [...]: log|det| (-inf for a singular matrix)
};

/// qr's results: A = Q R.
template <linalg_element T>
struct qr_result {
    tensor<T> q;  ///< [..., n, n], unitary
    tensor<T> r;  ///< [..., n, n], upper triangular (its diagonal may be negative, as in LAPACK)
};

/// svd's results: A = U diag(S) V^H.
template <linalg_element T>
struct svd_result {
    tensor<T> u;                  ///< [..., n, n], unitary
    tensor<real_type_t<T>> s;     ///< [..., n], non-negative, descending
    tensor<T> vh;                 ///< [..., n, n], V^H (unitary)
};

/// eigh's results: A V = V diag(W).
template <linalg_element T>
struct eigh_result {
    tensor<real_type_t<T>> w;  ///< [..., n], ascending
    tensor<T> v;               ///< [..., n, n], unitary; column j is the eigenvector of w[j]
};

namespace detail {

[[noreturn]] void throw_linalg_failure(const char* op, linalg_reason reason, std::size_t item,
                                       std::size_t items, int info);
[[noreturn]] void throw_not_square(const char* op, const char* operand, const shape& s);
[[noreturn]] void throw_rhs_shape(const char* op, const shape& a, const shape& b);

// ---- validation -------------------------------------------------------------------------------

/// Returns n for an [..., n, n] operand, or throws shape_error.
inline std::size_t square_extent(const char* op, const char* operand, const shape& s) {
    if (s.rank() < 2 || s[s.rank() - 1] != s[s.rank() - 2]) throw_not_square(op, operand, s);
    return s[s.rank() - 1];
}

/// How a run treats an item whose kernel returns a non-zero code.
enum class on_failure {
    raise,   ///< remember the lowest failing item, throw linalg_error after the batch
    info,    ///< write the code to the info tensor (last operand) and NaN-fill the item's outputs
    ignore,  ///< nothing fails (lu without info)
};

// ---- op bodies: defined in the library (src/linalg_*.cpp), instantiated there for the four
// element types, so that a user's translation unit never compiles an Eigen decomposition ---------

template <on_failure Mode, class T>
void inverse_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& x,
                 const tensor_view<std::int32_t>& info);
template <on_failure Mode, class T>
void solve_run(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b,
               const tensor_view<T>& x, const shape& batch, const tensor_view<std::int32_t>& info);
template <on_failure Mode, class T>
void cholesky_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& l,
                  const tensor_view<std::int32_t>& info);
template <on_failure Mode, class T>
void lu_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& lu,
            const tensor_view<std::int64_t>& piv, const tensor_view<std::int32_t>& info);
template <class T>
void det_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& d);
template <class T>
void slogdet_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& sign,
                 const tensor_view<real_type_t<T>>& logabs);
template <class T>
void qr_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& q,
            const tensor_view<T>& r);
template <bool Vectors, class T>
void svd_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& u,
             const tensor_view<real_type_t<T>>& sv, const tensor_view<T>& vh);
template <on_failure Mode, class T>
void eigh_run(session& s, const tensor_view<const T>& a, const tensor_view<real_type_t<T>>& w,
              const tensor_view<T>& v, const tensor_view<std::int32_t>& info);
template <on_failure Mode, class T>
void eigvalsh_run(session& s, const tensor_view<const T>& a, const tensor_view<real_type_t<T>>& w,
                  const tensor_view<std::int32_t>& info);

// ---- validation of whole calls ----------------------------------------------------------------

/// An out-parameter as validate_unary sees it.
template <class V>
struct named_out {
    const char* name;
    const tensor_view<V>& view;
    shape expected;
};
template <class V>
named_out(const char*, const tensor_view<V>&, shape) -> named_out<V>;

inline void check_outs_disjoint(const char*) noexcept {}
template <class First, class... Rest>
void check_outs_disjoint(const char* op, const First& first, const Rest&... rest) {
    (check_disjoint(op, first.name, first.view, rest.name, rest.view), ...);
    check_outs_disjoint(op, rest...);
}

/// Validates an op with one square input `a` and out-parameters (name, view, expected shape);
/// every out must match, be writable, overlap `a` only as the very same view, and not overlap
/// another out or `info`.
template <class T, class... Outs>
void validate_unary(const char* op, const tensor_view<const T>& a, const tensor_view<std::int32_t>* info,
                    const Outs&... outs) {
    (check_out(op, outs.name, outs.view, outs.expected), ...);
    (check_in_place(op, outs.name, outs.view, "a", a), ...);
    check_outs_disjoint(op, outs...);
    if (info != nullptr) {
        check_out(op, "info", *info, leading_axes(a.shape(), 2));
        check_disjoint(op, "info", *info, "a", a);
        (check_disjoint(op, "info", *info, outs.name, outs.view), ...);
    }
}

}  // namespace detail

// ---- inverse -----------------------------------------------------------------------------------

/// Returns the inverse of every matrix of `a` ([..., n, n]); throws linalg_error naming the first
/// singular item.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
tensor<T> inverse(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("inverse", "a", av.shape());
    tensor<T> out = empty<T>(s, av.shape());
    detail::inverse_run<detail::on_failure::raise>(s, av, out.view(), {});
    return out;
}

/// Writes the inverses of `a` into `out` (same shape as `a`); never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void inverse(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("inverse", "a", av.shape());
    detail::validate_unary("inverse", av, nullptr, detail::named_out{"out", out, av.shape()});
    detail::inverse_run<detail::on_failure::raise>(s, av, out, {});
}

/// As above, but reports singular items in `info` (int32, batch shape: 0 or k + 1 for a zero
/// pivot k) and fills their inverses with NaN instead of throwing.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void inverse(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& out, const tensor_view<std::int32_t>& info) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("inverse", "a", av.shape());
    detail::validate_unary("inverse", av, &info, detail::named_out{"out", out, av.shape()});
    detail::inverse_run<detail::on_failure::info>(s, av, out, info);
}

// ---- solve ---------------------------------------------------------------------------------------

namespace detail {
template <class T>
shape validate_solve(const char* op, const tensor_view<const T>& a, const tensor_view<const T>& b) {
    const std::size_t n = square_extent(op, "a", a.shape());
    if (b.rank() < 2 || b.extent(b.rank() - 2) != n) throw_rhs_shape(op, a.shape(), b.shape());
    const shape batch = broadcast_shapes(op, a.shape(), b.shape(), 2);
    return batch_and(batch, {n, b.extent(b.rank() - 1)});
}
template <class T>
void validate_solve_out(const char* op, const tensor_view<const T>& a, const tensor_view<const T>& b,
                        const tensor_view<T>& out, const shape& expected) {
    check_out(op, "out", out, expected);
    check_in_place(op, "out", out, "a", a);
    check_in_place(op, "out", out, "b", b);
}
}  // namespace detail

/// Returns X with A X = B for every item: `a` is [..., n, n], `b` is [..., n, k] (batch axes
/// broadcast); the result is [batch..., n, k]. Throws linalg_error naming the first singular item.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires linalg_element<T> && std::same_as<T, value_of_t<B>>
tensor<T> solve(session& s, const A& a, const B& b) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a), bv = as_view(b);
    const shape result = detail::validate_solve("solve", av, bv);
    tensor<T> out = empty<T>(s, result);
    detail::solve_run<detail::on_failure::raise>(s, av, bv, out.view(), detail::leading_axes(result, 2),
                                                 {});
    return out;
}

/// Writes the solutions into `out` ([batch..., n, k]); never allocates for n <= 8. `out` may be
/// exactly `b` (solved in place).
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires linalg_element<T> && std::same_as<T, value_of_t<B>>
void solve(session& s, const A& a, const B& b, const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a), bv = as_view(b);
    const shape result = detail::validate_solve("solve", av, bv);
    detail::validate_solve_out("solve", av, bv, out, result);
    detail::solve_run<detail::on_failure::raise>(s, av, bv, out, detail::leading_axes(result, 2), {});
}

/// As above, but reports singular items in `info` (int32, batch shape: 0 or k + 1 for a zero
/// pivot k) and fills their solutions with NaN instead of throwing.
template <tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires linalg_element<T> && std::same_as<T, value_of_t<B>>
void solve(session& s, const A& a, const B& b, const std::type_identity_t<tensor_view<T>>& out,
           const tensor_view<std::int32_t>& info) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a), bv = as_view(b);
    const shape result = detail::validate_solve("solve", av, bv);
    detail::validate_solve_out("solve", av, bv, out, result);
    const shape batch = detail::leading_axes(result, 2);
    detail::check_out("solve", "info", info, batch);
    detail::check_disjoint("solve", "info", info, "a", av);
    detail::check_disjoint("solve", "info", info, "b", bv);
    detail::check_disjoint("solve", "info", info, "out", out);
    detail::solve_run<detail::on_failure::info>(s, av, bv, out, batch, info);
}

// ---- cholesky ------------------------------------------------------------------------------------

/// Returns the lower-triangular L with A = L L^H for every item (Hermitian positive definite
/// input; only the lower triangle and the real part of the diagonal are read; L's strict upper
/// triangle is zero). Throws linalg_error naming the first item that is not positive definite.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
tensor<T> cholesky(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("cholesky", "a", av.shape());
    tensor<T> out = empty<T>(s, av.shape());
    detail::cholesky_run<detail::on_failure::raise>(s, av, out.view(), {});
    return out;
}

/// Writes L into `out` (same shape as `a`); never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void cholesky(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("cholesky", "a", av.shape());
    detail::validate_unary("cholesky", av, nullptr, detail::named_out{"out", out, av.shape()});
    detail::cholesky_run<detail::on_failure::raise>(s, av, out, {});
}

/// As above, but reports failures in `info` (int32, batch shape: 0, or k when the leading minor of
/// order k is not positive definite) and fills those items' L with NaN instead of throwing.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void cholesky(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& out, const tensor_view<std::int32_t>& info) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("cholesky", "a", av.shape());
    detail::validate_unary("cholesky", av, &info, detail::named_out{"out", out, av.shape()});
    detail::cholesky_run<detail::on_failure::info>(s, av, out, info);
}

// ---- lu ------------------------------------------------------------------------------------------

/// Returns the LU factorisation with partial pivoting of every item: `lu` packs unit-lower L (below
/// the diagonal) and U (on and above it); `pivots` ([..., n], int64) is a permutation vector:
/// row i of L U is row pivots[i] of A, i.e. A[pivots] = L U. A singular matrix is factored too
/// (U then has a zero on its diagonal); lu never throws linalg_error.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
lu_result<T> lu(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("lu", "a", av.shape());
    lu_result<T> r{empty<T>(s, av.shape()),
                   empty<std::int64_t>(
                       s, detail::batch_and(detail::leading_axes(av.shape(), 2), {n}))};
    detail::lu_run<detail::on_failure::ignore>(s, av, r.lu.view(), r.pivots.view(), {});
    return r;
}

/// Writes the factors into `lu_out` ([..., n, n]) and `pivots` ([..., n]); never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void lu(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& lu_out, const tensor_view<std::int64_t>& pivots) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("lu", "a", av.shape());
    detail::validate_unary(
        "lu", av, nullptr, detail::named_out{"lu", lu_out, av.shape()},
        detail::named_out{"pivots", pivots, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})});
    detail::lu_run<detail::on_failure::ignore>(s, av, lu_out, pivots, {});
}

/// As above, and writes to `info` (int32, batch shape) 0 or k + 1 for the first zero pivot U(k, k),
/// as LAPACK's getrf does; the factors are written for every item (no NaN fill).
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void lu(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& lu_out, const tensor_view<std::int64_t>& pivots,
        const tensor_view<std::int32_t>& info) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("lu", "a", av.shape());
    detail::validate_unary(
        "lu", av, &info, detail::named_out{"lu", lu_out, av.shape()},
        detail::named_out{"pivots", pivots, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})});
    detail::lu_run<detail::on_failure::info>(s, av, lu_out, pivots, info);
}

// ---- det, slogdet --------------------------------------------------------------------------------

/// Returns the determinant of every item ([...]; rank 0 for a single matrix). A singular matrix
/// gives 0 (through LU it may give a value at the rounding level, as NumPy's does). The result is
/// inf or 0 only when the determinant is out of the type's range, which for large n is common
/// (use slogdet), never because an intermediate product overflowed or underflowed.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
tensor<T> det(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("det", "a", av.shape());
    tensor<T> out = empty<T>(s, detail::leading_axes(av.shape(), 2));
    detail::det_run(s, av, out.view());
    return out;
}

/// Writes the determinants into `out` (batch shape); never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void det(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& out) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("det", "a", av.shape());
    detail::validate_unary("det", av, nullptr,
                           detail::named_out{"out", out, detail::leading_axes(av.shape(), 2)});
    detail::det_run(s, av, out);
}

/// Returns the sign (complex: phase) and log|det| of every item, without overflow; a singular
/// matrix gives sign 0 and logabs -inf.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
slogdet_result<T> slogdet(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("slogdet", "a", av.shape());
    const shape batch = detail::leading_axes(av.shape(), 2);
    slogdet_result<T> r{empty<T>(s, batch),
                        empty<real_type_t<T>>(s, batch)};
    detail::slogdet_run(s, av, r.sign.view(), r.logabs.view());
    return r;
}

/// Writes sign and log|det| into `sign` and `logabs` (batch shape); never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void slogdet(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& sign,
             const tensor_view<real_type_t<T>>& logabs) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("slogdet", "a", av.shape());
    const shape batch = detail::leading_axes(av.shape(), 2);
    detail::validate_unary("slogdet", av, nullptr, detail::named_out{"sign", sign, batch},
                           detail::named_out{"logabs", logabs, batch});
    detail::slogdet_run(s, av, sign, logabs);
}

// ---- qr ------------------------------------------------------------------------------------------

/// Returns Q (unitary) and R (upper triangular) with A = Q R for every item (Householder; for a
/// square matrix the reduced and complete forms coincide).
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
qr_result<T> qr(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("qr", "a", av.shape());
    qr_result<T> r{empty<T>(s, av.shape()), empty<T>(s, av.shape())};
    detail::qr_run(s, av, r.q.view(), r.r.view());
    return r;
}

/// Writes Q and R into `q` and `r` (each the shape of `a`); never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void qr(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& q, const std::type_identity_t<tensor_view<T>>& r) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    detail::square_extent("qr", "a", av.shape());
    detail::validate_unary("qr", av, nullptr, detail::named_out{"q", q, av.shape()},
                           detail::named_out{"r", r, av.shape()});
    detail::qr_run(s, av, q, r);
}

// ---- svd -----------------------------------------------------------------------------------------

/// Returns U, S and V^H with A = U diag(S) V^H for every item (one-sided Jacobi, which always
/// converges; S descending and non-negative).
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
svd_result<T> svd(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("svd", "a", av.shape());
    svd_result<T> r{empty<T>(s, av.shape()),
                    empty<real_type_t<T>>(
                        s, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})),
                    empty<T>(s, av.shape())};
    detail::svd_run<true>(s, av, r.u.view(), r.s.view(), r.vh.view());
    return r;
}

/// Writes U, S and V^H into `u`, `sv` and `vh`; never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void svd(session& s, const A& a, const std::type_identity_t<tensor_view<T>>& u, const tensor_view<real_type_t<T>>& sv,
         const std::type_identity_t<tensor_view<T>>& vh) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("svd", "a", av.shape());
    detail::validate_unary(
        "svd", av, nullptr, detail::named_out{"u", u, av.shape()},
        detail::named_out{"s", sv, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})},
        detail::named_out{"vh", vh, av.shape()});
    detail::svd_run<true>(s, av, u, sv, vh);
}

/// Returns only the singular values ([..., n], descending) of every item; cheaper than svd.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
tensor<real_type_t<T>> svdvals(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("svdvals", "a", av.shape());
    tensor<real_type_t<T>> out = empty<real_type_t<T>>(
        s, detail::batch_and(detail::leading_axes(av.shape(), 2), {n}));
    detail::svd_run<false>(s, av, tensor_view<T>{}, out.view(), tensor_view<T>{});
    return out;
}

/// Writes the singular values into `out` ([..., n]); never allocates for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void svdvals(session& s, const A& a, const tensor_view<real_type_t<T>>& out) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("svdvals", "a", av.shape());
    detail::validate_unary(
        "svdvals", av, nullptr,
        detail::named_out{"out", out, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})});
    detail::svd_run<false>(s, av, tensor_view<T>{}, out, tensor_view<T>{});
}

// ---- eigh ----------------------------------------------------------------------------------------

/// Returns the eigenvalues (ascending, real) and eigenvectors (columns of V, unitary) of every
/// Hermitian (real: symmetric) item. Only the lower triangle of `a` is read (the diagonal's
/// imaginary part is ignored). Throws linalg_error if the iteration fails to converge for an item.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
eigh_result<T> eigh(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("eigh", "a", av.shape());
    eigh_result<T> r{empty<real_type_t<T>>(
                         s, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})),
                     empty<T>(s, av.shape())};
    detail::eigh_run<detail::on_failure::raise>(s, av, r.w.view(), r.v.view(), {});
    return r;
}

/// Writes eigenvalues into `w` ([..., n]) and eigenvectors into `v` ([..., n, n]); never allocates
/// from the heap for n <= 8 (for n > 8 Eigen's solver allocates per item).
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void eigh(session& s, const A& a, const tensor_view<real_type_t<T>>& w, const std::type_identity_t<tensor_view<T>>& v) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("eigh", "a", av.shape());
    detail::validate_unary(
        "eigh", av, nullptr,
        detail::named_out{"w", w, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})},
        detail::named_out{"v", v, av.shape()});
    detail::eigh_run<detail::on_failure::raise>(s, av, w, v, {});
}

/// As above, but reports items that did not converge in `info` (int32, batch shape: 0 or 1) and
/// fills their outputs with NaN instead of throwing.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void eigh(session& s, const A& a, const tensor_view<real_type_t<T>>& w, const std::type_identity_t<tensor_view<T>>& v,
          const tensor_view<std::int32_t>& info) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("eigh", "a", av.shape());
    detail::validate_unary(
        "eigh", av, &info,
        detail::named_out{"w", w, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})},
        detail::named_out{"v", v, av.shape()});
    detail::eigh_run<detail::on_failure::info>(s, av, w, v, info);
}

// ---- eigvalsh ------------------------------------------------------------------------------------

/// Returns only the eigenvalues ([..., n], ascending, real) of every Hermitian (real: symmetric)
/// item, as eigh's w; cheaper than eigh, since no eigenvectors are formed. Only the lower
/// triangle of `a` is read (the diagonal's imaginary part is ignored). Throws linalg_error if the
/// iteration fails to converge for an item.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
tensor<real_type_t<T>> eigvalsh(session& s, const A& a) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("eigvalsh", "a", av.shape());
    tensor<real_type_t<T>> w = empty<real_type_t<T>>(
        s, detail::batch_and(detail::leading_axes(av.shape(), 2), {n}));
    detail::eigvalsh_run<detail::on_failure::raise>(s, av, w.view(), {});
    return w;
}

/// Writes the eigenvalues into `w` ([..., n]); never allocates from the heap for n <= 8.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void eigvalsh(session& s, const A& a, const tensor_view<real_type_t<T>>& w) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("eigvalsh", "a", av.shape());
    detail::validate_unary(
        "eigvalsh", av, nullptr,
        detail::named_out{"w", w, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})});
    detail::eigvalsh_run<detail::on_failure::raise>(s, av, w, {});
}

/// As above, but reports items that did not converge in `info` (int32, batch shape: 0 or 1) and
/// fills their eigenvalues with NaN instead of throwing.
template <tensor_like A, class T = value_of_t<A>>
    requires linalg_element<T>
void eigvalsh(session& s, const A& a, const tensor_view<real_type_t<T>>& w,
              const tensor_view<std::int32_t>& info) {
    detail::check_session(s);
    const tensor_view<const T> av = as_view(a);
    const std::size_t n = detail::square_extent("eigvalsh", "a", av.shape());
    detail::validate_unary(
        "eigvalsh", av, &info,
        detail::named_out{"w", w, detail::batch_and(detail::leading_axes(av.shape(), 2), {n})});
    detail::eigvalsh_run<detail::on_failure::info>(s, av, w, info);
}

}  // namespace tessera