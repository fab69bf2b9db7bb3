// svd and svdvals of the batched linear algebra ops: their per-item kernel and op body,
// instantiated for the four element types (see src/linalg_batch.hpp).
#include "linalg_batch.hpp"

#include <Eigen/SVD>

#include <complex>
#include <cstddef>
#include <cstdint>

namespace tessera::detail {

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
        // A NaN or an infinity: Eigen's JacobiSVD would stop without forming any result (what it
        // holds is not initialised) and keep reporting InvalidInput for the next items it is
        // reused for (3.4 resets its status only when it reallocates), so such an item is not
        // given to it; its outputs are NaN, as "propagates" promises.
        const bool finite = m.allFinite();
        if constexpr (Vectors) {
            if (!finite) {
                fill_matrix(u.data + off[1], u.rs, u.cs, n, n, nan_of<T>());
                for (Eigen::Index i = 0; i < n; ++i) sv.data[off[2] + i * sv.rs] = nan_of<R>();
                fill_matrix(vh.data + off[3], vh.rs, vh.cs, n, n, nan_of<T>());
                return 0;
            }
            svd.compute(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
            store_matrix(svd.matrixU(), u.data + off[1], u.rs, u.cs);
            store_vector(svd.singularValues(), sv.data + off[2], sv.rs);
            vhm = svd.matrixV().adjoint();
            store_matrix(vhm, vh.data + off[3], vh.rs, vh.cs);
        } else {
            if (!finite) {
                for (Eigen::Index i = 0; i < n; ++i) sv.data[off[1] + i * sv.rs] = nan_of<R>();
                return 0;
            }
            svd.compute(m, 0);
            store_vector(svd.singularValues(), sv.data + off[1], sv.rs);
        }
        return 0;
    }
    void fail(const std::ptrdiff_t*) noexcept {}
};

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
                                          }, plan_lanes<T>(lane_op::svd, n, matrix_operand(a),
                                                           matrix_operand(u), vector_operand(sv),
                                                           matrix_operand(vh)));
        } else {
            const std::array<stride_array, 2> st{batch_strides(a, 2, batch),
                                                 batch_strides(sv, 1, batch)};
            run_batch<on_failure::ignore>(s, "svdvals", linalg_reason::no_convergence, batch, st,
                                          work, nullptr, [&] {
                                              return svd_kernel<T, N, false>(
                                                  matrix_operand(a), operand<T>{nullptr, 0, 0},
                                                  vector_operand(sv), operand<T>{nullptr, 0, 0},
                                                  ni);
                                          }, plan_lanes<T>(lane_op::svdvals, n, matrix_operand(a),
                                                           vector_operand(sv)));
        }
    });
}

#define TESSERA_INSTANTIATE(T)                                                                     \
    template void svd_run<true, T>(session&, const tensor_view<const T>&, const tensor_view<T>&,   \
                                   const tensor_view<real_type_t<T>>&, const tensor_view<T>&);     \
    template void svd_run<false, T>(session&, const tensor_view<const T>&, const tensor_view<T>&,  \
                                    const tensor_view<real_type_t<T>>&, const tensor_view<T>&);
TESSERA_FOR_LINALG_TYPES(TESSERA_INSTANTIATE)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::detail
