// eigh and eigvalsh of the batched linear algebra ops: their per-item kernel and op bodies,
// instantiated for the four element types (see src/linalg_batch.hpp).
#include "linalg_batch.hpp"

#include <Eigen/Eigenvalues>

#include <complex>
#include <cstddef>
#include <cstdint>

namespace tessera::detail {

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

template <on_failure Mode, class T>
void eigh_run(session& s, const tensor_view<const T>& a, const tensor_view<real_type_t<T>>& w,
              const tensor_view<T>& v, const tensor_view<std::int32_t>& info) {
    shape batch;
    std::size_t n = 0;
    if (!start_square_batch<Mode>(a, info, batch, n)) return;
    const auto st = with_info<Mode>(
        std::array<stride_array, 3>{batch_strides(a, 2, batch), batch_strides(w, 1, batch),
                                    batch_strides(v, 2, batch)},
        info, batch);
    const auto ni = static_cast<Eigen::Index>(n);
    const auto lanes = plan_lanes<T>(lane_op::eigh, n, matrix_operand(a), vector_operand(w),
                                     matrix_operand(v));
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "eigh", linalg_reason::no_convergence, batch, st, item_work(n, 15.0),
                        info.data(), [&] {
                            return eigh_kernel<T, N, true>(matrix_operand(a), vector_operand(w),
                                                           matrix_operand(v), ni);
                        }, lanes);
    });
}

template <on_failure Mode, class T>
void eigvalsh_run(session& s, const tensor_view<const T>& a, const tensor_view<real_type_t<T>>& w,
                  const tensor_view<std::int32_t>& info) {
    shape batch;
    std::size_t n = 0;
    if (!start_square_batch<Mode>(a, info, batch, n)) return;
    const auto st = with_info<Mode>(
        std::array<stride_array, 2>{batch_strides(a, 2, batch), batch_strides(w, 1, batch)}, info,
        batch);
    const auto ni = static_cast<Eigen::Index>(n);
    // Without vectors: the tridiagonalisation (~4/3 n^3 flops) and O(n^2) QR steps, about a fifth
    // of eigh's 15 units per n^3 (estimated from the flop counts).
    const auto lanes = plan_lanes<T>(lane_op::eigvalsh, n, matrix_operand(a), vector_operand(w));
    with_size_class(n, [&](auto size) {
        constexpr int N = decltype(size)::value;
        run_batch<Mode>(s, "eigvalsh", linalg_reason::no_convergence, batch, st, item_work(n, 3.0),
                        info.data(), [&] {
                            return eigh_kernel<T, N, false>(matrix_operand(a), vector_operand(w),
                                                            operand<T>{nullptr, 0, 0}, ni);
                        }, lanes);
    });
}

#define TESSERA_INSTANTIATE(T)                                                                     \
    template void eigh_run<on_failure::raise, T>(session&, const tensor_view<const T>&,            \
                                                 const tensor_view<real_type_t<T>>&,               \
                                                 const tensor_view<T>&,                            \
                                                 const tensor_view<std::int32_t>&);                \
    template void eigh_run<on_failure::info, T>(session&, const tensor_view<const T>&,             \
                                                const tensor_view<real_type_t<T>>&,                \
                                                const tensor_view<T>&,                             \
                                                const tensor_view<std::int32_t>&);                \
    template void eigvalsh_run<on_failure::raise, T>(session&, const tensor_view<const T>&,        \
                                                     const tensor_view<real_type_t<T>>&,           \
                                                     const tensor_view<std::int32_t>&);            \
    template void eigvalsh_run<on_failure::info, T>(session&, const tensor_view<const T>&,         \
                                                    const tensor_view<real_type_t<T>>&,            \
                                                    const tensor_view<std::int32_t>&);
TESSERA_FOR_LINALG_TYPES(TESSERA_INSTANTIATE)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::detail
