// cholesky and qr of the batched linear algebra ops: their per-item kernels and op bodies,
// instantiated for the four element types (see src/linalg_batch.hpp).
#include "linalg_batch.hpp"

#include <Eigen/QR>

#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>

namespace tessera::detail {

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

template <on_failure Mode, class T>
void cholesky_run(session& s, const tensor_view<const T>& a, const tensor_view<T>& l,
                  const tensor_view<std::int32_t>& info) {
    shape batch;
    std::size_t n = 0;
    if (!start_square_batch<Mode>(a, info, batch, n)) return;
    const auto st = with_info<Mode>(
        std::array<stride_array, 2>{batch_strides(a, 2, batch), batch_strides(l, 2, batch)}, info,
        batch);
    const auto ni = static_cast<Eigen::Index>(n);
    const auto lanes = plan_lanes<T>(lane_op::cholesky, n, matrix_operand(a), matrix_operand(l));
    with_size_class<1, 2, 3, 4>(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "cholesky", linalg_reason::not_positive_definite, batch, st,
                        item_work(n, 0.5), info.data(), [&] {
                            return cholesky_kernel<T, N>(matrix_operand(a), matrix_operand(l), ni);
                        }, lanes);
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

#define TESSERA_INSTANTIATE(T)                                                                     \
    template void cholesky_run<on_failure::raise, T>(session&, const tensor_view<const T>&,        \
                                                     const tensor_view<T>&,                        \
                                                     const tensor_view<std::int32_t>&);            \
    template void cholesky_run<on_failure::info, T>(session&, const tensor_view<const T>&,         \
                                                    const tensor_view<T>&,                         \
                                                    const tensor_view<std::int32_t>&);             \
    template void qr_run<T>(session&, const tensor_view<const T>&, const tensor_view<T>&,          \
                            const tensor_view<T>&);
TESSERA_FOR_LINALG_TYPES(TESSERA_INSTANTIATE)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::detail
