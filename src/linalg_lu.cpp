// The LU family of the batched linear algebra ops: inverse, solve, lu, det and slogdet. Their
// closed forms (n <= 4), the LU state and determinant they share, their per-item kernels and op
// bodies, instantiated for the four element types (see src/linalg_batch.hpp).
#include "linalg_batch.hpp"

#include <Eigen/LU>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace tessera::detail {

/// True when the closed forms may divide by `d`: finite and at least the smallest normal number.
template <class T>
bool usable_det(const T& d) noexcept {
    using R = real_type_t<T>;
    constexpr R tiny = std::numeric_limits<R>::min();
    if constexpr (is_complex_v<T>) {
        return std::isfinite(d.real()) && std::isfinite(d.imag()) &&
               (std::abs(d.real()) >= tiny || std::abs(d.imag()) >= tiny);
    } else {
        return std::isfinite(d) && std::abs(d) >= tiny;
    }
}

/// Returns k + 1 for the first diagonal entry of `lu` below the smallest normal number, else 0.
template <class M>
int first_zero_pivot(const M& lu) noexcept {
    using R = typename Eigen::NumTraits<typename M::Scalar>::Real;
    for (Eigen::Index k = 0; k < lu.rows(); ++k)
        if (std::abs(lu.coeff(k, k)) < std::numeric_limits<R>::min()) return static_cast<int>(k) + 1;
    return 0;
}

/// Copies a small N x N matrix into a row-major array.
template <int N, class T>
void load_small(T* e, const T* p, std::ptrdiff_t rs, std::ptrdiff_t cs) noexcept {
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) e[i * N + j] = p[i * rs + j * cs];
}

template <int N, class T>
T closed_det(const T* e) noexcept {
    if constexpr (N == 1) {
        return e[0];
    } else if constexpr (N == 2) {
        return e[0] * e[3] - e[1] * e[2];
    } else {
        static_assert(N == 3);
        return e[0] * (e[4] * e[8] - e[5] * e[7]) + e[1] * (e[5] * e[6] - e[3] * e[8]) +
               e[2] * (e[3] * e[7] - e[4] * e[6]);
    }
}

/// Writes the inverse of the row-major N x N `e` (adjugate / determinant) to `r` and returns
/// true, or returns false without writing when the determinant is not usable_det.
template <int N, class T>
bool closed_inverse(const T* e, T* r) noexcept {
    if constexpr (N == 1) {
        if (!usable_det(e[0])) return false;
        r[0] = T(1) / e[0];
    } else if constexpr (N == 2) {
        const T det = e[0] * e[3] - e[1] * e[2];
        if (!usable_det(det)) return false;
        const T s = T(1) / det;
        r[0] = e[3] * s;
        r[1] = -e[1] * s;
        r[2] = -e[2] * s;
        r[3] = e[0] * s;
    } else {
        static_assert(N == 3);
        const T c00 = e[4] * e[8] - e[5] * e[7];
        const T c01 = e[5] * e[6] - e[3] * e[8];
        const T c02 = e[3] * e[7] - e[4] * e[6];
        const T det = e[0] * c00 + e[1] * c01 + e[2] * c02;
        if (!usable_det(det)) return false;
        const T s = T(1) / det;
        r[0] = c00 * s;
        r[1] = (e[2] * e[7] - e[1] * e[8]) * s;
        r[2] = (e[1] * e[5] - e[2] * e[4]) * s;
        r[3] = c01 * s;
        r[4] = (e[0] * e[8] - e[2] * e[6]) * s;
        r[5] = (e[2] * e[3] - e[0] * e[5]) * s;
        r[6] = c02 * s;
        r[7] = (e[1] * e[6] - e[0] * e[7]) * s;
        r[8] = (e[0] * e[4] - e[1] * e[3]) * s;
    }
    return true;
}

/// The size class of the LU behind a kernel of class N: the closed forms (n <= 4) fall back to
/// the bounded LU, so that no fixed-size LU is instantiated for their rare fallback.
template <int N>
inline constexpr int lu_class = N > 0 ? bounded_n : N;

/// A PartialPivLU of size class N plus a scratch copy for strided inputs.
template <class T, int N>
struct lu_state {
    using matrix = square_t<T, N>;
    Eigen::PartialPivLU<matrix> lu;
    matrix scratch;

    void factor(const T* p, std::ptrdiff_t rs, std::ptrdiff_t cs, Eigen::Index n) {
        if (cs == 1 && rs == n) {
            lu.compute(Eigen::Map<const matrix>(p, n, n));
        } else {
            scratch.resize(n, n);
            load_matrix(scratch, p, rs, cs);
            lu.compute(scratch);
        }
    }
};

/// Returns the parity (+1 or -1) of the permutation `ind` by counting inversions: O(n^2) with
/// no scratch, far below the O(n^3) factorisation it follows.
template <class Indices>
int permutation_sign(const Indices& ind) noexcept {
    int sign = 1;
    for (Eigen::Index i = 0; i < ind.size(); ++i)
        for (Eigen::Index j = i + 1; j < ind.size(); ++j)
            if (ind(i) > ind(j)) sign = -sign;
    return sign;
}

/// Returns `x` over a power of two 2^e (adding e to `exponent`) that brings it, or its larger
/// component, into [0.5, 1); zero, inf and NaN come back as they are (frexp's exponent is unused
/// for them: zero stays zero, and inf and NaN survive any later scaling).
template <class T>
T split_exponent(const T& x, long& exponent) noexcept {
    int e = 0;
    if constexpr (is_complex_v<T>) {
        (void)std::frexp(std::max(std::abs(x.real()), std::abs(x.imag())), &e);
        exponent += e;
        return T(std::ldexp(x.real(), -e), std::ldexp(x.imag(), -e));
    } else {
        const T m = std::frexp(x, &e);
        exponent += e;
        return m;
    }
}

/// Returns the determinant from a PartialPivLU: the sign of the permutation (O(n^2)) times the
/// product of U's diagonal, taken plainly while every partial product is finite and at least the
/// smallest normal number (the usual case); otherwise it is redone as a mantissa renormalised
/// after every factor and a separate binary exponent, so that a determinant in range never
/// overflows or underflows on the way and the final ldexp gives inf or 0 only when the
/// determinant itself is out of range (a subnormal one is rounded once).
template <class LU>
typename LU::Scalar lu_determinant(const LU& lu) noexcept {
    using T = typename LU::Scalar;
    using R = real_type_t<T>;
    const auto& f = lu.matrixLU();
    const Eigen::Index n = f.rows();
    const T sign = T(R(permutation_sign(lu.permutationP().indices())));
    T plain = sign;
    Eigen::Index k = 0;
    for (; k < n; ++k) {
        plain *= f.coeff(k, k);
        if (!usable_det(plain)) break;
    }
    if (k == n) return plain;
    // Mantissas in [0.5, 1) (complex: the larger component): a product of two cannot overflow
    // and loses nothing to underflow beyond a component far below the other.
    long exponent = 0;
    T m = sign;
    for (k = 0; k < n; ++k) m = split_exponent(T(m * split_exponent(f.coeff(k, k), exponent)), exponent);
    // Beyond +-(max_exponent - min_exponent + digits) the result is inf or 0 anyway; the clamp
    // keeps the int conversion defined for any n.
    constexpr long limit = 4 * std::numeric_limits<R>::max_exponent;
    const int e = static_cast<int>(std::clamp(exponent, -limit, limit));
    if constexpr (is_complex_v<T>) return T(std::ldexp(m.real(), e), std::ldexp(m.imag(), e));
    else return std::ldexp(m, e);
}

template <class T, int N>
struct inverse_kernel {
    static constexpr int L = lu_class<N>;
    operand<const T> a;
    operand<T> x;
    Eigen::Index n;
    lu_state<T, L> state;
    square_t<T, L> full;    // the LU path's result
    square_t<T, N> m, inv;  // the 4 x 4 cofactor path only

    inverse_kernel(const operand<const T>& a_, const operand<T>& x_, Eigen::Index n_)
        : a(a_), x(x_), n(n_) {
        if constexpr (L < 0) full.resize(n, n);
    }

    int operator()(const std::ptrdiff_t* off) {
        const T* pa = a.data + off[0];
        T* px = x.data + off[1];
        if constexpr (N > 0 && N <= 3) {
            T e[N * N], r[N * N];
            load_small<N>(e, pa, a.rs, a.cs);
            if (closed_inverse<N>(e, r)) {
                for (int i = 0; i < N; ++i)
                    for (int j = 0; j < N; ++j) px[i * x.rs + j * x.cs] = r[i * N + j];
                return 0;
            }
        } else if constexpr (N == 4) {
            load_matrix(m, pa, a.rs, a.cs);
            if (usable_det(m.determinant())) {
                inv = m.inverse();
                store_matrix(inv, px, x.rs, x.cs);
                return 0;
            }
        }
        state.factor(pa, a.rs, a.cs, n);
        if (const int code = first_zero_pivot(state.lu.matrixLU())) return code;
        // One solve against the identity as a matrix right-hand side (Eigen's blocked triangular
        // solver; its pack buffers are in-object for n <= 8, on the stack up to Eigen's 128 KB
        // stack limit, on the heap beyond). Column-by-column vector
        // solves were 3-4x slower than Eigen's own inverse at n = 8 and 32 (batched_linalg_bench).
        full = state.lu.inverse();
        store_matrix(full, px, x.rs, x.cs);
        return 0;
    }

    void fail(const std::ptrdiff_t* off) noexcept {
        fill_matrix(x.data + off[1], x.rs, x.cs, n, n, nan_of<T>());
    }
};

template <class T, int N>
struct solve_kernel {
    static constexpr int L = lu_class<N>;
    operand<const T> a, b;
    operand<T> x;
    Eigen::Index n, k;
    lu_state<T, L> state;
    column_t<T, L> rhs, sol;
    square_t<T, N> m;  // the 4 x 4 cofactor path only

    solve_kernel(const operand<const T>& a_, const operand<const T>& b_, const operand<T>& x_,
                 Eigen::Index n_, Eigen::Index k_)
        : a(a_), b(b_), x(x_), n(n_), k(k_) {
        if constexpr (L < 0) {
            rhs.resize(n);
            sol.resize(n);
        }
    }

    int operator()(const std::ptrdiff_t* off) {
        const T* pa = a.data + off[0];
        const T* pb = b.data + off[1];
        T* px = x.data + off[2];
        if constexpr (N > 0) {
            // x = A^-1 b with the closed-form inverse; 4 x 4 through Eigen's cofactor formulas.
            T r[N * N];
            bool ok = false;
            if constexpr (N <= 3) {
                T e[N * N];
                load_small<N>(e, pa, a.rs, a.cs);
                ok = closed_inverse<N>(e, r);
            } else {
                static_assert(N == 4);
                load_matrix(m, pa, a.rs, a.cs);
                if (usable_det(m.determinant())) {
                    Eigen::Map<square_t<T, 4>> inv(r);
                    inv = m.inverse();
                    ok = true;
                }
            }
            if (ok) {
                for (Eigen::Index j = 0; j < k; ++j) {
                    T col[N];
                    for (int i = 0; i < N; ++i) col[i] = pb[i * b.rs + j * b.cs];
                    for (int i = 0; i < N; ++i) {
                        T acc = r[i * N] * col[0];
                        for (int l = 1; l < N; ++l) acc += r[i * N + l] * col[l];
                        px[i * x.rs + j * x.cs] = acc;
                    }
                }
                return 0;
            }
        }
        state.factor(pa, a.rs, a.cs, n);
        if (const int code = first_zero_pivot(state.lu.matrixLU())) return code;
        // One column at a time: b may alias x exactly, and each column is read before written.
        for (Eigen::Index j = 0; j < k; ++j) {
            for (Eigen::Index i = 0; i < n; ++i) rhs(i) = pb[i * b.rs + j * b.cs];
            sol = state.lu.solve(rhs);
            for (Eigen::Index i = 0; i < n; ++i) px[i * x.rs + j * x.cs] = sol(i);
        }
        return 0;
    }

    void fail(const std::ptrdiff_t* off) noexcept {
        fill_matrix(x.data + off[2], x.rs, x.cs, n, k, nan_of<T>());
    }
};

template <class T, int N>
struct lu_kernel {
    operand<const T> a;
    operand<T> lu;
    operand<std::int64_t> piv;
    Eigen::Index n;
    lu_state<T, N> state;

    lu_kernel(const operand<const T>& a_, const operand<T>& lu_, const operand<std::int64_t>& piv_,
              Eigen::Index n_)
        : a(a_), lu(lu_), piv(piv_), n(n_) {}

    int operator()(const std::ptrdiff_t* off) {
        state.factor(a.data + off[0], a.rs, a.cs, n);
        store_matrix(state.lu.matrixLU(), lu.data + off[1], lu.rs, lu.cs);
        // Eigen's P A = L U with (P A).row(ind[i]) = A.row(i): row ind[i] of L U is row i of A.
        const auto& ind = state.lu.permutationP().indices();
        std::int64_t* pp = piv.data + off[2];
        for (Eigen::Index i = 0; i < n; ++i) pp[ind(i) * piv.rs] = static_cast<std::int64_t>(i);
        return first_zero_pivot(state.lu.matrixLU());
    }

    // A zero pivot does not invalidate the factorisation: nothing to fill.
    void fail(const std::ptrdiff_t*) noexcept {}
};

template <class T, int N>
struct det_kernel {
    operand<const T> a;
    operand<T> d;
    Eigen::Index n;
    lu_state<T, lu_class<N>> state;  // n <= 4: only items the closed forms cannot take
    square_t<T, N> m;                 // the 4 x 4 cofactor path only

    det_kernel(const operand<const T>& a_, const operand<T>& d_, Eigen::Index n_)
        : a(a_), d(d_), n(n_) {}

    int operator()(const std::ptrdiff_t* off) {
        const T* pa = a.data + off[0];
        T* pd = d.data + off[1];
        // The closed forms and Eigen's 4 x 4 cofactor expansion multiply n entries before any
        // cancellation, so they can overflow (inf, or inf - inf = NaN) or underflow while the
        // determinant is in range; such an item, and any whose determinant is zero or subnormal,
        // is redone with LU, whose scaled pivot product decides.
        if constexpr (N == 1) {
            *pd = *pa;
            return 0;
        } else if constexpr (N > 0 && N <= 3) {
            T e[N * N];
            load_small<N>(e, pa, a.rs, a.cs);
            const T det = closed_det<N>(e);
            if (usable_det(det)) {
                *pd = det;
                return 0;
            }
        } else if constexpr (N == 4) {
            load_matrix(m, pa, a.rs, a.cs);
            const T det = m.determinant();
            if (usable_det(det)) {
                *pd = det;
                return 0;
            }
        }
        state.factor(pa, a.rs, a.cs, n);
        *pd = lu_determinant(state.lu);
        return 0;
    }
    void fail(const std::ptrdiff_t*) noexcept {}
};

template <class T, int N>
struct slogdet_kernel {
    using R = real_type_t<T>;
    operand<const T> a;
    operand<T> sign;
    operand<R> logabs;
    Eigen::Index n;
    lu_state<T, lu_class<N>> state;

    slogdet_kernel(const operand<const T>& a_, const operand<T>& sign_, const operand<R>& logabs_,
                   Eigen::Index n_)
        : a(a_), sign(sign_), logabs(logabs_), n(n_) {}

    int operator()(const std::ptrdiff_t* off) {
        const T* pa = a.data + off[0];
        T* ps = sign.data + off[1];
        R* pl = logabs.data + off[2];
        if constexpr (N > 0 && N <= 3) {
            T e[N * N];
            load_small<N>(e, pa, a.rs, a.cs);
            const T det = closed_det<N>(e);
            if (usable_det(det)) {
                const R mag = std::abs(det);
                *ps = det / mag;
                *pl = std::log(mag);
                return 0;
            }
        }
        // Through LU, so that neither overflow nor underflow of the product loses the answer.
        state.factor(pa, a.rs, a.cs, n);
        const auto& lu = state.lu.matrixLU();
        T s = T(R(permutation_sign(state.lu.permutationP().indices())));
        R sum = 0;
        for (Eigen::Index i = 0; i < n; ++i) {
            const T u = lu(i, i);
            const R mag = std::abs(u);
            if (mag == R(0)) {
                *ps = T(0);
                *pl = -std::numeric_limits<R>::infinity();
                return 0;
            }
            s *= u / mag;
            sum += std::log(mag);
        }
        if constexpr (is_complex_v<T>) s /= std::abs(s);  // keep the phase at unit modulus
        *ps = s;
        *pl = sum;
        return 0;
    }
    void fail(const std::ptrdiff_t*) noexcept {}
};

template <on_failure Mode, class T>
void inverse_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& x,
                 const tensor_view<std::int32_t>& info) {
    shape batch;
    std::size_t n = 0;
    if (!start_square_batch<Mode>(a, info, batch, n)) return;
    const auto st = with_info<Mode>(
        std::array<stride_array, 2>{batch_strides(a, 2, batch), batch_strides(x, 2, batch)}, info,
        batch);
    const auto ni = static_cast<Eigen::Index>(n);
    const auto lanes = plan_lanes<T>(lane_op::inverse, n, matrix_operand(a), matrix_operand(x));
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "inverse", linalg_reason::singular, batch, st, item_work(n, 2.0),
                        info.data(), [&] {
                            return inverse_kernel<T, N>(matrix_operand(a), matrix_operand(x), ni);
                        }, lanes);
    });
}

template <on_failure Mode, class T>
void solve_run(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b,
               const tensor_view<T>& x, const shape& batch, const tensor_view<std::int32_t>& info) {
    const std::size_t n = a.extent(a.rank() - 1);
    const std::size_t k = b.extent(b.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) return fill_info<Mode>(info, 0);
    // k == 0 still factors every `a`, so that a singular one is reported as for k > 0.
    const auto st = with_info<Mode>(std::array<stride_array, 3>{batch_strides(a, 2, batch),
                                                                batch_strides(b, 2, batch),
                                                                batch_strides(x, 2, batch)},
                                    info, batch);
    const auto ni = static_cast<Eigen::Index>(n), ki = static_cast<Eigen::Index>(k);
    const double nd = static_cast<double>(n);
    auto lanes = plan_lanes<T>(lane_op::solve, n, matrix_operand(a), matrix_operand(b),
                               matrix_operand(x));
    if constexpr (!is_complex_v<T>) lanes.run.k = ki;
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "solve", linalg_reason::singular, batch, st,
                        item_work(n, 1.0, 2.0 * nd * nd * static_cast<double>(k)), info.data(), [&] {
                            return solve_kernel<T, N>(matrix_operand(a), matrix_operand(b),
                                                      matrix_operand(x), ni, ki);
                        }, lanes);
    });
}

template <on_failure Mode, class T>
void lu_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& lu,
            const tensor_view<std::int64_t>& piv, const tensor_view<std::int32_t>& info) {
    shape batch;
    std::size_t n = 0;
    if (!start_square_batch<Mode>(a, info, batch, n)) return;
    const auto st = with_info<Mode>(
        std::array<stride_array, 3>{batch_strides(a, 2, batch), batch_strides(lu, 2, batch),
                                    batch_strides(piv, 1, batch)},
        info, batch);
    const auto ni = static_cast<Eigen::Index>(n);
    const auto lanes = plan_lanes<T>(lane_op::lu, n, matrix_operand(a), matrix_operand(lu),
                                     vector_operand(piv));
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "lu", linalg_reason::singular, batch, st, item_work(n, 1.0), info.data(),
                        [&] {
                            return lu_kernel<T, N>(matrix_operand(a), matrix_operand(lu),
                                                   vector_operand(piv), ni);
                        }, lanes);
    });
}

template <class T>
void det_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& d) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) {
        for_each_item(collapse<1>(d.shape(), {&d.stride_values()}), 0, d.size(),
                      [&](std::size_t, const std::array<std::ptrdiff_t, 1>& off) {
                          d.data()[off[0]] = T(1);
                          return true;
                      });
        return;
    }
    const std::array<stride_array, 2> st{batch_strides(a, 2, batch), batch_strides(d, 0, batch)};
    const auto ni = static_cast<Eigen::Index>(n);
    const auto lanes = plan_lanes<T>(lane_op::det, n, matrix_operand(a), scalar_operand(d));
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<on_failure::ignore>(s, "det", linalg_reason::singular, batch, st,
                                      item_work(n, 1.0), nullptr, [&] {
                                          return det_kernel<T, N>(matrix_operand(a),
                                                                  scalar_operand(d), ni);
                                      }, lanes);
    });
}

template <class T>
void slogdet_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& sign,
                 const tensor_view<real_type_t<T>>& logabs) {
    using R = real_type_t<T>;
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) {
        for_each_item(collapse<2>(batch, {&sign.stride_values(), &logabs.stride_values()}), 0,
                      batch.count(), [&](std::size_t, const std::array<std::ptrdiff_t, 2>& off) {
                          sign.data()[off[0]] = T(1);
                          logabs.data()[off[1]] = R(0);
                          return true;
                      });
        return;
    }
    const std::array<stride_array, 3> st{batch_strides(a, 2, batch), batch_strides(sign, 0, batch),
                                         batch_strides(logabs, 0, batch)};
    const auto ni = static_cast<Eigen::Index>(n);
    const auto lanes = plan_lanes<T>(lane_op::slogdet, n, matrix_operand(a), scalar_operand(sign),
                                     scalar_operand(logabs));
    with_size_class<1, 2, 3>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<on_failure::ignore>(s, "slogdet", linalg_reason::singular, batch, st,
                                      item_work(n, 1.0), nullptr, [&] {
                                          return slogdet_kernel<T, N>(
                                              matrix_operand(a), scalar_operand(sign),
                                              scalar_operand(logabs), ni);
                                      }, lanes);
    });
}

#define TESSERA_INSTANTIATE(T)                                                                     \
    template void inverse_run<on_failure::raise, T>(session&, const tensor_view<const T>&,         \
                                                    const tensor_view<T>&,                         \
                                                    const tensor_view<std::int32_t>&);             \
    template void inverse_run<on_failure::info, T>(session&, const tensor_view<const T>&,          \
                                                   const tensor_view<T>&,                          \
                                                   const tensor_view<std::int32_t>&);              \
    template void solve_run<on_failure::raise, T>(session&, const tensor_view<const T>&,           \
                                                  const tensor_view<const T>&,                     \
                                                  const tensor_view<T>&, const shape&,             \
                                                  const tensor_view<std::int32_t>&);               \
    template void solve_run<on_failure::info, T>(session&, const tensor_view<const T>&,            \
                                                 const tensor_view<const T>&,                      \
                                                 const tensor_view<T>&, const shape&,              \
                                                 const tensor_view<std::int32_t>&);                \
    template void lu_run<on_failure::ignore, T>(session&, const tensor_view<const T>&,             \
                                                const tensor_view<T>&,                             \
                                                const tensor_view<std::int64_t>&,                  \
                                                const tensor_view<std::int32_t>&);                 \
    template void lu_run<on_failure::info, T>(session&, const tensor_view<const T>&,               \
                                              const tensor_view<T>&,                               \
                                              const tensor_view<std::int64_t>&,                    \
                                              const tensor_view<std::int32_t>&);                   \
    template void det_run<T>(session&, const tensor_view<const T>&, const tensor_view<T>&);        \
    template void slogdet_run<T>(session&, const tensor_view<const T>&, const tensor_view<T>&,     \
                                 const tensor_view<real_type_t<T>>&);
TESSERA_FOR_LINALG_TYPES(TESSERA_INSTANTIATE)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::detail
