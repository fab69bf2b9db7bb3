// small_shapes.hpp - the matrix shapes small_gemm_bench measures and an Eigen fixed-size product
// loop for each, shared by the benchmark (compiled for the build's target) and by the
// eigen_native library (the same loops compiled with -march=native).
#pragma once

#include <Eigen/Core>

#include <cstddef>
#include <iterator>
#include <utility>

namespace tessera_bench {

struct small_shape {
    int m, k, n;
};

// Square sizes 2..64 (those with a fixed-size tessera kernel and those without) and the
// rectangular shapes users bring: a Kalman update (6x6 by 6x1), odd tiny products,
// matrix-vector products, a product with two right-hand columns and a wide panel.
inline constexpr small_shape small_shapes[] = {
    {2, 2, 2},    {3, 3, 3},    {4, 4, 4},    {5, 5, 5},    {6, 6, 6},    {7, 7, 7},
    {8, 8, 8},    {10, 10, 10}, {12, 12, 12}, {16, 16, 16}, {20, 20, 20}, {24, 24, 24},
    {32, 32, 32}, {48, 48, 48}, {64, 64, 64}, {6, 6, 1},    {3, 5, 2},    {4, 4, 1},
    {16, 16, 1},  {20, 20, 2},  {16, 64, 16}};

// Row-major maps, as tessera stores matrices (a one-column row-major matrix is not a valid Eigen
// type; the layouts coincide).
template <class T, int Rows, int Cols>
using row_major = Eigen::Matrix<T, Rows, Cols, (Cols == 1 ? Eigen::ColMajor : Eigen::RowMajor)>;

template <class T, int M, int K, int N>
void eigen_fixed_loop(const T* a, const T* b, T* c, std::size_t batch) {
    for (std::size_t i = 0; i < batch; ++i) {
        Eigen::Map<row_major<T, M, N>>(c + i * M * N).noalias() =
            Eigen::Map<const row_major<T, M, K>>(a + i * M * K) *
            Eigen::Map<const row_major<T, K, N>>(b + i * K * N);
    }
}

/// Runs the loop of the listed shape (m, k, n); returns false for a shape not in the list.
template <class T>
bool eigen_fixed_product(int m, int k, int n, const T* a, const T* b, T* c, std::size_t batch) {
    bool found = false;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((small_shapes[I].m == m && small_shapes[I].k == k && small_shapes[I].n == n
              ? (eigen_fixed_loop<T, small_shapes[I].m, small_shapes[I].k, small_shapes[I].n>(
                     a, b, c, batch),
                 found = true)
              : false),
         ...);
    }(std::make_index_sequence<std::size(small_shapes)>{});
    return found;
}

}  // namespace tessera_bench
