// src/linalg_kernels.hpp - the bodies of the batched linear algebra ops declared in
// tessera/ops/linalg.hpp: batch traversal, size classes, closed forms and per-item Eigen kernels.
// Private to the library: the src/linalg_*.cpp files include it and instantiate the op bodies for
// float, double, complex<float> and complex<double>, one group of ops per file, so that the Eigen
// decompositions compile once, in parallel, and never in a user's translation unit.
#pragma once

// eigen.hpp configures Eigen, so it comes before anything that may include Eigen.
#include <tessera/eigen.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/ops/linalg.hpp>

#include <Eigen/Eigenvalues>
#include <Eigen/LU>
#include <Eigen/QR>
#include <Eigen/SVD>

#include <mutex>

namespace tessera::detail {

// ---- batch traversal --------------------------------------------------------------------------

/// The strides of `v`'s batch axes (all but the last `core`) as seen from the broadcast `batch`.
template <class T>
stride_array batch_strides(const tensor_view<T>& v, std::size_t core, const shape& batch) noexcept {
    stride_array st{};
    const std::size_t own = v.rank() - core;
    const std::size_t lead = batch.rank() - own;
    for (std::size_t i = lead; i < batch.rank(); ++i)
        st[i] = v.extent(i - lead) == 1 ? 0 : v.stride(i - lead);
    return st;
}

/// Calls `fn(item, offsets)` for items [begin, end) of the collapsed batch `it`, where offsets[k]
/// is operand k's element offset; stops early when `fn` returns false.
template <std::size_t K, class Fn>
void walk_batch(const iteration<K>& it, std::size_t begin, std::size_t end, Fn&& fn) {
    std::array<std::size_t, max_rank> index{};
    std::array<std::ptrdiff_t, K> off{};
    std::size_t rest = begin;
    for (std::size_t a = it.rank; a-- > 0;) {
        index[a] = rest % it.extents[a];
        rest /= it.extents[a];
    }
    for (std::size_t a = 0; a < it.rank; ++a)
        for (std::size_t k = 0; k < K; ++k)
            off[k] += static_cast<std::ptrdiff_t>(index[a]) * it.strides[k][a];
    const std::size_t last = it.rank - 1;
    for (std::size_t item = begin; item < end; ++item) {
        if (!fn(item, std::as_const(off))) return;
        std::size_t a = last;
        ++index[a];
        for (std::size_t k = 0; k < K; ++k) off[k] += it.strides[k][a];
        while (index[a] == it.extents[a] && a > 0) {
            for (std::size_t k = 0; k < K; ++k)
                off[k] -= static_cast<std::ptrdiff_t>(it.extents[a]) * it.strides[k][a];
            index[a] = 0;
            --a;
            ++index[a];
            for (std::size_t k = 0; k < K; ++k) off[k] += it.strides[k][a];
        }
    }
}



// Only touched when an item fails, so a plain mutex is fine.
struct failure_log {
    std::mutex mutex;
    std::size_t item = static_cast<std::size_t>(-1);
    int info = 0;
    void record(std::size_t i, int code) {
        std::lock_guard<std::mutex> lock(mutex);
        if (i < item) {
            item = i;
            info = code;
        }
    }
};

/// Work units (the backend's grain is in float additions) of one item: a per-item overhead of
/// ~64 (index walk, copies in and out) plus `per_n3` units per n^3. An n x n LU is ~n^3 units.
inline std::size_t item_work(std::size_t n, double per_n3, double extra = 0) noexcept {
    const double nd = static_cast<double>(n);
    const double w = 64.0 + per_n3 * nd * nd * nd + extra;
    return w > 1e18 ? static_cast<std::size_t>(1e18) : static_cast<std::size_t>(w);
}

/// Runs one chunk [begin, end) of the batch with a kernel from `make()` (it owns the chunk's
/// scratch), called once per item with the operands' offsets.
///
/// Out of line on purpose: each kernel is instantiated for one call site, and GCC inlines such
/// functions whatever their size, so without this a caller using several ops got every Eigen
/// decomposition of every size class inlined into one function (over 10 GB to compile a test).
template <on_failure Mode, std::size_t K, class Make>
[[gnu::noinline]] void run_chunk(const iteration<K>& it, std::size_t begin, std::size_t end,
                                 std::int32_t* info, failure_log& failures, const Make& make) {
    auto kernel = make();
    walk_batch(it, begin, end, [&](std::size_t item, const std::array<std::ptrdiff_t, K>& off) {
        // One kernel instantiation serves both modes: offsets go in as a pointer, not as an
        // array whose length (info or not) would be part of the kernel's type.
        const int code = kernel(off.data());
        if constexpr (Mode == on_failure::info) {
            info[off[K - 1]] = code;
            if (code != 0) kernel.fail(off.data());
        } else if constexpr (Mode == on_failure::raise) {
            if (code != 0) {
                failures.record(item, code);
                return false;
            }
        }
        return true;
    });
}

/// Runs `make()`-built kernels over the batch, inline or in parallel per the grain, and throws
/// linalg_error for the lowest failing item when Mode is raise.
template <on_failure Mode, std::size_t K, class Make>
void run_batch(session& s, const char* op, linalg_reason reason, const shape& batch,
               const std::array<stride_array, K>& strides, std::size_t work, std::int32_t* info,
               const Make& make) {
    const std::size_t count = batch.count();
    if (count == 0) return;
    std::array<const stride_array*, K> st{};
    for (std::size_t k = 0; k < K; ++k) st[k] = &strides[k];
    const iteration<K> it = collapse<K>(batch, st);
    const std::size_t grain = std::max<std::size_t>(
        1, session_access::core(s).settings().grain / std::max<std::size_t>(work, 1));
    failure_log failures;
    parallel_range(s, count, grain, [&](std::size_t begin, std::size_t end) {
        run_chunk<Mode>(it, begin, end, info, failures, make);
    });
    if constexpr (Mode == on_failure::raise)
        if (failures.item != static_cast<std::size_t>(-1))
            throw_linalg_failure(op, reason, failures.item, count, failures.info);
}

// Size classes. Kernels are templates on N: an exact size (N > 0) for the few sizes whose unrolled
// code pays for its compile time, `bounded_n` for every other n <= max_bounded_n (Eigen's dynamic
// algorithms on matrices with inline storage of at most 8 x 8: no heap), and Eigen::Dynamic above.
// Instantiating every n in 1..8 as its own fixed size multiplied the compile time of a user of all
// ops by ~4 for a small gain over the bounded class.
inline constexpr int bounded_n = -2;
inline constexpr int max_bounded_n = 8;

/// Calls f(std::integral_constant<int, N>) with N = n if n is one of Fixed, else bounded_n for
/// n <= max_bounded_n, else Eigen::Dynamic.
template <int... Fixed, class F>
void with_size_class(std::size_t n, F&& f) {
    const bool done =
        ((n == static_cast<std::size_t>(Fixed) ? (f(std::integral_constant<int, Fixed>{}), true)
                                               : false) ||
         ...);
    if (done) return;
    if (n <= static_cast<std::size_t>(max_bounded_n)) f(std::integral_constant<int, bounded_n>{});
    else f(std::integral_constant<int, Eigen::Dynamic>{});
}

// ---- scalar helpers ---------------------------------------------------------------------------

template <class T>
T nan_of() noexcept {
    using R = real_type_t<T>;
    constexpr R q = std::numeric_limits<R>::quiet_NaN();
    if constexpr (is_complex_v<T>) return T(q, q);
    else return q;
}

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

// ---- matrices in and out ----------------------------------------------------------------------

template <class T, int N>
struct size_class_types {
    using square = Eigen::Matrix<T, N, N, Eigen::RowMajor>;
    using column = Eigen::Matrix<T, N, 1>;
};
template <class T>
struct size_class_types<T, bounded_n> {
    using square = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor, max_bounded_n,
                                 max_bounded_n>;
    using column = Eigen::Matrix<T, Eigen::Dynamic, 1, Eigen::ColMajor, max_bounded_n, 1>;
};
/// The square matrix type (row-major, as tessera's tensors) and column type of size class N.
template <class T, int N>
using square_t = typename size_class_types<T, N>::square;
template <class T, int N>
using column_t = typename size_class_types<T, N>::column;

/// One [n, m] matrix (or [n] vector, cs unused) of an operand: base pointer and strides.
template <class T>
struct operand {
    T* data;
    std::ptrdiff_t rs;
    std::ptrdiff_t cs;
};

template <class T>
operand<T> matrix_operand(const tensor_view<T>& v) noexcept {
    return {v.data(), v.stride(v.rank() - 2), v.stride(v.rank() - 1)};
}
template <class T>
operand<T> vector_operand(const tensor_view<T>& v) noexcept {
    return {v.data(), v.stride(v.rank() - 1), 0};
}
template <class T>
operand<T> scalar_operand(const tensor_view<T>& v) noexcept {
    return {v.data(), 0, 0};
}

/// Copies the row-major matrix at p (strides rs, cs) into `m`.
template <class M, class T>
void load_matrix(M& m, const T* p, std::ptrdiff_t rs, std::ptrdiff_t cs) noexcept {
    const Eigen::Index rows = m.rows(), cols = m.cols();
    if (M::IsRowMajor && cs == 1 && rs == cols) {
        std::copy_n(p, rows * cols, m.data());
        return;
    }
    for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = p[i * rs + j * cs];
}

/// Copies `m` to the matrix at p (strides rs, cs).
template <class M, class T>
void store_matrix(const M& m, T* p, std::ptrdiff_t rs, std::ptrdiff_t cs) noexcept {
    const Eigen::Index rows = m.rows(), cols = m.cols();
    if (M::IsRowMajor && cs == 1 && rs == cols) {
        std::copy_n(m.data(), rows * cols, p);
        return;
    }
    for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < cols; ++j) p[i * rs + j * cs] = m(i, j);
}

template <class V, class T>
void store_vector(const V& v, T* p, std::ptrdiff_t st) noexcept {
    for (Eigen::Index i = 0; i < v.size(); ++i) p[i * st] = v(i);
}

template <class T>
void fill_matrix(T* p, std::ptrdiff_t rs, std::ptrdiff_t cs, Eigen::Index rows, Eigen::Index cols,
                 T value) noexcept {
    for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < cols; ++j) p[i * rs + j * cs] = value;
}

/// Copies a small N x N matrix into a row-major array.
template <int N, class T>
void load_small(T* e, const T* p, std::ptrdiff_t rs, std::ptrdiff_t cs) noexcept {
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) e[i * N + j] = p[i * rs + j * cs];
}

// ---- closed forms (n <= 3) --------------------------------------------------------------------

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

// ---- factorisations shared by several kernels ------------------------------------------------

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

/// Overwrites the lower triangle of `m` with L (A = L L^H, reading only A's lower triangle and the
/// real part of its diagonal) and zeroes the strict upper triangle. Returns 0, or k when the
/// leading minor of order k is not positive definite (the matrix is then partly overwritten).
template <class M>
int cholesky_lower_inplace(M& m) noexcept {
    using T = typename M::Scalar;
    using R = typename Eigen::NumTraits<T>::Real;
    const Eigen::Index n = m.rows();
    for (Eigen::Index k = 0; k < n; ++k) {
        R x = Eigen::numext::real(m(k, k));
        if constexpr (M::RowsAtCompileTime == Eigen::Dynamic) {
            if (k > 0) x -= m.row(k).head(k).squaredNorm();
        } else {
            for (Eigen::Index j = 0; j < k; ++j) x -= Eigen::numext::abs2(m(k, j));
        }
        // As LAPACK's potrf: NaN is not caught here; it propagates.
        if (x <= R(0)) return static_cast<int>(k) + 1;
        const R d = std::sqrt(x);
        m(k, k) = T(d);
        const R inv_d = R(1) / d;
        for (Eigen::Index i = k + 1; i < n; ++i) {
            T v = m(i, k);
            // a_ik = sum_j l_ij conj(l_kj); dot() conjugates its left operand.
            if constexpr (M::RowsAtCompileTime == Eigen::Dynamic) {
                if (k > 0) v -= m.row(k).head(k).dot(m.row(i).head(k));
            } else {
                for (Eigen::Index j = 0; j < k; ++j) v -= m(i, j) * Eigen::numext::conj(m(k, j));
            }
            m(i, k) = v * inv_d;
        }
    }
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = i + 1; j < n; ++j) m(i, j) = T(0);
    return 0;
}

// ---- per-item kernels -------------------------------------------------------------------------
// Each kernel is built once per chunk (owning the chunk's scratch) and called once per item with
// the operands' element offsets, in the order of its params; it returns 0 or a failure code, and
// fail() NaN-fills the item's outputs for the info form.

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
struct cholesky_kernel {
    operand<const T> a;
    operand<T> l;
    Eigen::Index n;
    square_t<T, N> m;

    cholesky_kernel(const operand<const T>& a_, const operand<T>& l_, Eigen::Index n_)
        : a(a_), l(l_), n(n_) {
        if constexpr (N < 0) m.resize(n, n);
    }

    int operator()(const std::ptrdiff_t* off) {
        load_matrix(m, a.data + off[0], a.rs, a.cs);
        if (const int code = cholesky_lower_inplace(m)) return code;
        store_matrix(m, l.data + off[1], l.rs, l.cs);
        return 0;
    }

    void fail(const std::ptrdiff_t* off) noexcept {
        fill_matrix(l.data + off[1], l.rs, l.cs, n, n, nan_of<T>());
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

template <class T, int N>
struct qr_kernel {
    using matrix = square_t<T, N>;
    operand<const T> a;
    operand<T> q, r;
    Eigen::Index n;
    Eigen::HouseholderQR<matrix> qr;
    matrix m, qm, rm;

    qr_kernel(const operand<const T>& a_, const operand<T>& q_, const operand<T>& r_, Eigen::Index n_)
        : a(a_), q(q_), r(r_), n(n_) {
        if constexpr (N < 0) {
            m.resize(n, n);
            qm.resize(n, n);
            rm.resize(n, n);
        }
    }

    int operator()(const std::ptrdiff_t* off) {
        load_matrix(m, a.data + off[0], a.rs, a.cs);
        qr.compute(m);
        qm = qr.householderQ();
        rm = qr.matrixQR().template triangularView<Eigen::Upper>();
        store_matrix(qm, q.data + off[1], q.rs, q.cs);
        store_matrix(rm, r.data + off[2], r.rs, r.cs);
        return 0;
    }
    void fail(const std::ptrdiff_t*) noexcept {}
};

template <class T, int N, bool Vectors>
struct svd_kernel {
    using matrix = square_t<T, N>;
    using R = real_type_t<T>;
    operand<const T> a;
    operand<T> u;
    operand<R> sv;
    operand<T> vh;
    Eigen::Index n;
    // Square input: Jacobi needs no QR preconditioner, so none is instantiated.
    Eigen::JacobiSVD<matrix, Eigen::NoQRPreconditioner> svd;
    matrix m, vhm;

    svd_kernel(const operand<const T>& a_, const operand<T>& u_, const operand<R>& sv_,
               const operand<T>& vh_, Eigen::Index n_)
        : a(a_), u(u_), sv(sv_), vh(vh_), n(n_) {
        if constexpr (N < 0) {
            m.resize(n, n);
            if (Vectors) vhm.resize(n, n);
        }
    }

    int operator()(const std::ptrdiff_t* off) {
        load_matrix(m, a.data + off[0], a.rs, a.cs);
        if constexpr (Vectors) {
            svd.compute(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
            store_matrix(svd.matrixU(), u.data + off[1], u.rs, u.cs);
            store_vector(svd.singularValues(), sv.data + off[2], sv.rs);
            vhm = svd.matrixV().adjoint();
            store_matrix(vhm, vh.data + off[3], vh.rs, vh.cs);
        } else {
            svd.compute(m, 0);
            store_vector(svd.singularValues(), sv.data + off[1], sv.rs);
        }
        return 0;
    }
    void fail(const std::ptrdiff_t*) noexcept {}
};

/// eigh's kernel, and eigvalsh's with Vectors = false: the same solver, told not to form the
/// eigenvectors (no Householder accumulation, no rotations applied to them).
template <class T, int N, bool Vectors>
struct eigh_kernel {
    using matrix = square_t<T, N>;
    using R = real_type_t<T>;
    operand<const T> a;
    operand<R> w;
    operand<T> v;
    Eigen::Index n;
    Eigen::SelfAdjointEigenSolver<matrix> es;
    matrix m;

    eigh_kernel(const operand<const T>& a_, const operand<R>& w_, const operand<T>& v_, Eigen::Index n_)
        : a(a_), w(w_), v(v_), n(n_) {
        if constexpr (N < 0) m.resize(n, n);
    }

    int operator()(const std::ptrdiff_t* off) {
        // The whole matrix is copied; the solver reads only its lower triangle.
        load_matrix(m, a.data + off[0], a.rs, a.cs);
        es.compute(m, Vectors ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
        if (es.info() != Eigen::Success) return 1;
        store_vector(es.eigenvalues(), w.data + off[1], w.rs);
        if constexpr (Vectors) store_matrix(es.eigenvectors(), v.data + off[2], v.rs, v.cs);
        return 0;
    }
    void fail(const std::ptrdiff_t* off) noexcept {
        for (Eigen::Index i = 0; i < n; ++i) w.data[off[1] + i * w.rs] = nan_of<R>();
        if constexpr (Vectors) fill_matrix(v.data + off[2], v.rs, v.cs, n, n, nan_of<T>());
    }
};

// ---- op bodies (operands already validated) ---------------------------------------------------

/// Appends info's batch strides when the op runs with an info tensor.
template <on_failure Mode, std::size_t K>
auto with_info(const std::array<stride_array, K>& st, const tensor_view<std::int32_t>& info,
               const shape& batch) {
    if constexpr (Mode == on_failure::info) {
        std::array<stride_array, K + 1> all{};
        for (std::size_t k = 0; k < K; ++k) all[k] = st[k];
        all[K] = batch_strides(info, 0, batch);
        return all;
    } else {
        return st;
    }
}

template <on_failure Mode>
void fill_info(const tensor_view<std::int32_t>& info, std::int32_t value) noexcept {
    if constexpr (Mode == on_failure::info)
        walk_batch(collapse<1>(info.shape(), {&info.stride_values()}), 0, info.size(),
                   [&](std::size_t, const std::array<std::ptrdiff_t, 1>& off) {
                       info.data()[off[0]] = value;
                       return true;
                   });
}

template <on_failure Mode, class T>
void inverse_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& x,
                 const tensor_view<std::int32_t>& info) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) return fill_info<Mode>(info, 0);
    const auto st = with_info<Mode>(
        std::array<stride_array, 2>{batch_strides(a, 2, batch), batch_strides(x, 2, batch)}, info,
        batch);
    const auto ni = static_cast<Eigen::Index>(n);
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "inverse", linalg_reason::singular, batch, st, item_work(n, 2.0),
                        info.data(), [&] {
                            return inverse_kernel<T, N>(matrix_operand(a), matrix_operand(x), ni);
                        });
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
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "solve", linalg_reason::singular, batch, st,
                        item_work(n, 1.0, 2.0 * nd * nd * static_cast<double>(k)), info.data(), [&] {
                            return solve_kernel<T, N>(matrix_operand(a), matrix_operand(b),
                                                      matrix_operand(x), ni, ki);
                        });
    });
}

template <on_failure Mode, class T>
void cholesky_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& l,
                  const tensor_view<std::int32_t>& info) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) return fill_info<Mode>(info, 0);
    const auto st = with_info<Mode>(
        std::array<stride_array, 2>{batch_strides(a, 2, batch), batch_strides(l, 2, batch)}, info,
        batch);
    const auto ni = static_cast<Eigen::Index>(n);
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "cholesky", linalg_reason::not_positive_definite, batch, st,
                        item_work(n, 0.5), info.data(), [&] {
                            return cholesky_kernel<T, N>(matrix_operand(a), matrix_operand(l), ni);
                        });
    });
}

template <on_failure Mode, class T>
void lu_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& lu,
            const tensor_view<std::int64_t>& piv, const tensor_view<std::int32_t>& info) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) return fill_info<Mode>(info, 0);
    const auto st = with_info<Mode>(
        std::array<stride_array, 3>{batch_strides(a, 2, batch), batch_strides(lu, 2, batch),
                                    batch_strides(piv, 1, batch)},
        info, batch);
    const auto ni = static_cast<Eigen::Index>(n);
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "lu", linalg_reason::singular, batch, st, item_work(n, 1.0), info.data(),
                        [&] {
                            return lu_kernel<T, N>(matrix_operand(a), matrix_operand(lu),
                                                   vector_operand(piv), ni);
                        });
    });
}

template <class T>
void det_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& d) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) {
        walk_batch(collapse<1>(d.shape(), {&d.stride_values()}), 0, d.size(),
                   [&](std::size_t, const std::array<std::ptrdiff_t, 1>& off) {
                       d.data()[off[0]] = T(1);
                       return true;
                   });
        return;
    }
    const std::array<stride_array, 2> st{batch_strides(a, 2, batch), batch_strides(d, 0, batch)};
    const auto ni = static_cast<Eigen::Index>(n);
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<on_failure::ignore>(s, "det", linalg_reason::singular, batch, st,
                                      item_work(n, 1.0), nullptr, [&] {
                                          return det_kernel<T, N>(matrix_operand(a),
                                                                  scalar_operand(d), ni);
                                      });
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
        walk_batch(collapse<2>(batch, {&sign.stride_values(), &logabs.stride_values()}), 0,
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
    with_size_class<1, 2, 3>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<on_failure::ignore>(s, "slogdet", linalg_reason::singular, batch, st,
                                      item_work(n, 1.0), nullptr, [&] {
                                          return slogdet_kernel<T, N>(
                                              matrix_operand(a), scalar_operand(sign),
                                              scalar_operand(logabs), ni);
                                      });
    });
}

template <class T>
void qr_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& q,
            const tensor_view<T>& r) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0 || n == 0) return;
    const std::array<stride_array, 3> st{batch_strides(a, 2, batch), batch_strides(q, 2, batch),
                                         batch_strides(r, 2, batch)};
    const auto ni = static_cast<Eigen::Index>(n);
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<on_failure::ignore>(s, "qr", linalg_reason::singular, batch, st,
                                      item_work(n, 4.0), nullptr, [&] {
                                          return qr_kernel<T, N>(matrix_operand(a),
                                                                 matrix_operand(q),
                                                                 matrix_operand(r), ni);
                                      });
    });
}

template <bool Vectors, class T>
void svd_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& u,
             const tensor_view<real_type_t<T>>& sv, const tensor_view<T>& vh) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0 || n == 0) return;
    const auto ni = static_cast<Eigen::Index>(n);
    // Jacobi sweeps: ~30 n^3 units with vectors, about half without (measured in the bench).
    const std::size_t work = item_work(n, Vectors ? 30.0 : 15.0);
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        if constexpr (Vectors) {
            const std::array<stride_array, 4> st{batch_strides(a, 2, batch), batch_strides(u, 2, batch),
                                                 batch_strides(sv, 1, batch),
                                                 batch_strides(vh, 2, batch)};
            run_batch<on_failure::ignore>(s, "svd", linalg_reason::no_convergence, batch, st, work,
                                          nullptr, [&] {
                                              return svd_kernel<T, N, true>(
                                                  matrix_operand(a), matrix_operand(u),
                                                  vector_operand(sv), matrix_operand(vh), ni);
                                          });
        } else {
            const std::array<stride_array, 2> st{batch_strides(a, 2, batch),
                                                 batch_strides(sv, 1, batch)};
            run_batch<on_failure::ignore>(s, "svdvals", linalg_reason::no_convergence, batch, st,
                                          work, nullptr, [&] {
                                              return svd_kernel<T, N, false>(
                                                  matrix_operand(a), operand<T>{nullptr, 0, 0},
                                                  vector_operand(sv), operand<T>{nullptr, 0, 0},
                                                  ni);
                                          });
        }
    });
}

template <on_failure Mode, class T>
void eigh_run(session& s, const tensor_view<const T>& a, const tensor_view<real_type_t<T>>& w,
              const tensor_view<T>& v, const tensor_view<std::int32_t>& info) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) return fill_info<Mode>(info, 0);
    const auto st = with_info<Mode>(
        std::array<stride_array, 3>{batch_strides(a, 2, batch), batch_strides(w, 1, batch),
                                    batch_strides(v, 2, batch)},
        info, batch);
    const auto ni = static_cast<Eigen::Index>(n);
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "eigh", linalg_reason::no_convergence, batch, st, item_work(n, 15.0),
                        info.data(), [&] {
                            return eigh_kernel<T, N, true>(matrix_operand(a), vector_operand(w),
                                                           matrix_operand(v), ni);
                        });
    });
}

template <on_failure Mode, class T>
void eigvalsh_run(session& s, const tensor_view<const T>& a, const tensor_view<real_type_t<T>>& w,
                  const tensor_view<std::int32_t>& info) {
    const shape batch = leading_axes(a.shape(), 2);
    const std::size_t n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return;
    if (n == 0) return fill_info<Mode>(info, 0);
    const auto st = with_info<Mode>(
        std::array<stride_array, 2>{batch_strides(a, 2, batch), batch_strides(w, 1, batch)}, info,
        batch);
    const auto ni = static_cast<Eigen::Index>(n);
    // Without vectors: the tridiagonalisation (~4/3 n^3 flops) and O(n^2) QR steps, about a fifth
    // of eigh's 15 units per n^3 (estimated from the flop counts).
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "eigvalsh", linalg_reason::no_convergence, batch, st, item_work(n, 3.0),
                        info.data(), [&] {
                            return eigh_kernel<T, N, false>(matrix_operand(a), vector_operand(w),
                                                            operand<T>{nullptr, 0, 0}, ni);
                        });
    });
}

}  // namespace tessera::detail

/// Calls X(T) for each linalg element type; the src/linalg_*.cpp files instantiate with it.
#define TESSERA_FOR_LINALG_TYPES(X) \
    X(float)                        \
    X(double)                       \
    X(std::complex<float>)          \
    X(std::complex<double>)
