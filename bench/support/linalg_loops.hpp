// linalg_loops.hpp - the per-matrix Eigen loops batched_linalg_bench sets tessera against: solve
// (one right-hand side), inverse, cholesky and det over a batch of row-major n x n matrices with
// Eigen's fixed-size types for n = 2..8, as a careful Eigen user writes them. Shared by the
// benchmark (compiled for the build's target) and by the eigen_native library (the same loops
// compiled with -march=native, the target tessera's widest kernels use on this machine).
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/LU>

#include <cstddef>
#include <utility>

namespace tessera_bench {

enum class linalg_op { solve, inverse, cholesky, det };

/// a: [batch, N, N]; b: [batch, N] (solve); out: [batch, N] (solve), [batch, N, N] (inverse,
/// cholesky's L) or [batch] (det).
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
    }
}

/// Runs the loop for n in 2..8; returns false for any other n.
template <class T>
bool eigen_linalg(linalg_op o, int n, const T* a, const T* b, T* out, std::size_t batch) {
    bool found = false;
    [&]<int... I>(std::integer_sequence<int, I...>) {
        ((n == I + 2 ? (eigen_linalg_loop<T, I + 2>(o, a, b, out, batch), found = true) : false) ||
         ...);
    }(std::make_integer_sequence<int, 7>{});
    return found;
}

}  // namespace tessera_bench
