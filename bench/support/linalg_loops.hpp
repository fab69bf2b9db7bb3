// linalg_loops.hpp - the per-matrix Eigen loops batched_linalg_bench sets tessera against: solve
// (one right-hand side), inverse, cholesky and det over a batch of row-major n x n matrices with
// Eigen's fixed-size types for n = 2..8, and svd (JacobiSVD) and eigh (SelfAdjointEigenSolver) for
// n = 2, 3, 4 and 8, as a careful Eigen user writes them. Shared by the benchmark (compiled for
// the build's target) and by the eigen_native library (the same loops compiled with
// -march=native, the target tessera's widest kernels use on this machine).
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/LU>
#include <Eigen/SVD>

#include <cstddef>
#include <utility>

namespace tessera_bench {

enum class linalg_op { solve, inverse, cholesky, det, svd, eigh };

/// a: [batch, N, N]; b: [batch, N] (solve); out: [batch, N] (solve), [batch, N, N] (inverse,
/// cholesky's L) or [batch] (det). The decompositions are eigen_decomposition_loop's.
template <class T, int N>
void eigen_linalg_loop(linalg_op o, const T* a, const T* b, T* out, std::size_t batch) {
    using matrix = Eigen::Matrix<T, N, N, Eigen::RowMajor>;
    using vector = Eigen::Matrix<T, N, 1>;
    constexpr std::size_t nn = N * N;
    switch (o) {
        case linalg_op::solve:
            for (std::size_t i = 0; i < batch; ++i)
                Eigen::Map<vector>(out + i * N) = Eigen::Map<const matrix>(a + i * nn)
                                                      .partialPivLu()
                                                      .solve(Eigen::Map<const vector>(b + i * N));
            break;
        case linalg_op::inverse:
            for (std::size_t i = 0; i < batch; ++i)
                Eigen::Map<matrix>(out + i * nn) = Eigen::Map<const matrix>(a + i * nn).inverse();
            break;
        case linalg_op::cholesky:
            for (std::size_t i = 0; i < batch; ++i) {
                const Eigen::LLT<matrix> llt(Eigen::Map<const matrix>(a + i * nn));
                Eigen::Map<matrix>(out + i * nn) = llt.matrixL();
            }
            break;
        case linalg_op::det:
            for (std::size_t i = 0; i < batch; ++i)
                out[i] = Eigen::Map<const matrix>(a + i * nn).determinant();
            break;
        case linalg_op::svd:
        case linalg_op::eigh: break;
    }
}

/// svd: u, s, vh = [batch, N, N], [batch, N], [batch, N, N]; eigh (from a's lower triangle):
/// v = u, w = s.
template <class T, int N>
void eigen_decomposition_loop(linalg_op o, const T* a, T* u, T* s, T* vh, std::size_t batch) {
    using matrix = Eigen::Matrix<T, N, N, Eigen::RowMajor>;
    using vector = Eigen::Matrix<T, N, 1>;
    constexpr std::size_t nn = N * N;
    if (o == linalg_op::svd) {
        for (std::size_t i = 0; i < batch; ++i) {
            const Eigen::JacobiSVD<matrix> svd(Eigen::Map<const matrix>(a + i * nn),
                                               Eigen::ComputeFullU | Eigen::ComputeFullV);
            Eigen::Map<matrix>(u + i * nn) = svd.matrixU();
            Eigen::Map<vector>(s + i * N) = svd.singularValues();
            Eigen::Map<matrix>(vh + i * nn) = svd.matrixV().transpose();
        }
    } else {
        for (std::size_t i = 0; i < batch; ++i) {
            const Eigen::SelfAdjointEigenSolver<matrix> es(Eigen::Map<const matrix>(a + i * nn));
            Eigen::Map<matrix>(u + i * nn) = es.eigenvectors();
            Eigen::Map<vector>(s + i * N) = es.eigenvalues();
        }
    }
}

/// Runs the loop for n in 2..8 (svd and eigh: 2, 3, 4 and 8, whose fixed-size instantiations
/// are slow to compile); returns false for any other n. out2, out3: s and vh of svd, w of eigh.
template <class T>
bool eigen_linalg(linalg_op o, int n, const T* a, const T* b, T* out, T* out2, T* out3,
                  std::size_t batch) {
    bool found = false;
    if (o == linalg_op::svd || o == linalg_op::eigh) {
        [&]<int... N>(std::integer_sequence<int, N...>) {
            ((n == N ? (eigen_decomposition_loop<T, N>(o, a, out, out2, out3, batch), found = true)
                     : false) ||
             ...);
        }(std::integer_sequence<int, 2, 3, 4, 8>{});
        return found;
    }
    [&]<int... I>(std::integer_sequence<int, I...>) {
        ((n == I + 2 ? (eigen_linalg_loop<T, I + 2>(o, a, b, out, batch), found = true) : false) ||
         ...);
    }(std::make_integer_sequence<int, 7>{});
    return found;
}

}  // namespace tessera_bench
