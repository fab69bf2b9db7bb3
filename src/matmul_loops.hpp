// src/matmul_loops.hpp - the plain-loop parts shared by the matmul and einsum engines: the 2x2-4x4
// square products on matrix_refs and the loop product for matrices too small for Eigen's packing
// to pay. Operand copies come from the copy engine (tessera/detail/copy.hpp), included here for
// both. Private to the library; no Eigen here.
#pragma once

#include <tessera/detail/copy.hpp>
#include <tessera/detail/matmul.hpp>
#include <tessera/session.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <cstddef>

namespace tessera::detail {

/// Products with m + n + k below this run as plain loops over the strides: packing for Eigen's
/// kernel costs more than it saves there (Eigen's own coefficient-based threshold is 20).
inline constexpr std::size_t naive_product_limit = 24;

/// tiny_square on matrix_refs: compile-time strides when all three are dense.
template <int N, bool Accumulate, class T>
[[gnu::always_inline]] inline void tiny_square_any(const matrix_ref<const T>& a, const matrix_ref<const T>& b,
                                                   const matrix_ref<T>& c, T alpha, T beta) noexcept {
    const bool dense = a.rs == N && a.cs == 1 && b.rs == N && b.cs == 1 && c.rs == N && c.cs == 1;
    if (dense)  // compile-time strides: the product vectorises
        tiny_square<N, Accumulate>(a.data, N, 1, b.data, N, 1, c.data, N, 1, alpha, beta);
    else
        tiny_square<N, Accumulate>(a.data, a.rs, a.cs, b.data, b.rs, b.cs, c.data, c.rs, c.cs, alpha, beta);
}

/// c = beta * c, where beta == 0 writes zeros without reading c (BLAS convention: NaNs in c do
/// not survive a zero beta).
template <class T>
void scale_matrix(const matrix_ref<T>& c, T beta) noexcept {
    if (beta == T{1}) return;
    for (std::ptrdiff_t i = 0; i < c.rows; ++i) {
        T* row = c.data + i * c.rs;
        if (beta == T{0}) {
            for (std::ptrdiff_t j = 0; j < c.cols; ++j) row[j * c.cs] = T{};
        } else {
            for (std::ptrdiff_t j = 0; j < c.cols; ++j) row[j * c.cs] *= beta;
        }
    }
}

/// c = a @ b (accumulate: c = alpha * a @ b + beta * c) with plain loops over any strides: for
/// products too small for packing to pay (Eigen itself switches below m + n + k = 20).
template <class T>
void naive_product(const matrix_ref<const T>& a, const matrix_ref<const T>& b, const matrix_ref<T>& c,
                   bool accumulate, T alpha, T beta) noexcept {
    const std::ptrdiff_t k = a.cols;
    if (c.rows == 0 || c.cols == 0) return;  // an empty c may have null data: no row to address
    if (!accumulate && b.cs == 1 && c.cs == 1) {
        // Rows of b and c are contiguous: four columns of c at a time, each summed in its own
        // register over p (ascending, as below), with unit-stride loads of b's rows.
        for (std::ptrdiff_t i = 0; i < c.rows; ++i) {
            T* row = c.data + i * c.rs;
            std::ptrdiff_t j = 0;
            for (; j + 4 <= c.cols; j += 4) {
                T s0{}, s1{}, s2{}, s3{};
                for (std::ptrdiff_t p = 0; p < k; ++p) {
                    const T x = a(i, p);
                    const T* from = b.data + p * b.rs + j;
                    s0 += x * from[0];
                    s1 += x * from[1];
                    s2 += x * from[2];
                    s3 += x * from[3];
                }
                row[j] = s0;
                row[j + 1] = s1;
                row[j + 2] = s2;
                row[j + 3] = s3;
            }
            for (; j < c.cols; ++j) {
                T sum{};
                for (std::ptrdiff_t p = 0; p < k; ++p) sum += a(i, p) * b(p, j);
                row[j] = sum;
            }
        }
        return;
    }
    if (!accumulate && a.rs == 1 && c.rs == 1 && c.cols > 1) {
        // Column-major a and c: the same loop on the transposes, c^T = b^T a^T.
        naive_product<T>({b.data, b.cols, b.rows, b.cs, b.rs}, {a.data, a.cols, a.rows, a.cs, a.rs},
                         {c.data, c.cols, c.rows, c.cs, c.rs}, false, alpha, beta);
        return;
    }
    for (std::ptrdiff_t i = 0; i < c.rows; ++i) {
        for (std::ptrdiff_t j = 0; j < c.cols; ++j) {
            T sum{};
            for (std::ptrdiff_t p = 0; p < k; ++p) sum += a(i, p) * b(p, j);
            T& out = c(i, j);
            if (!accumulate)
                out = sum;
            else
                out = beta == T{0} ? alpha * sum : alpha * sum + beta * out;
        }
    }
}

}  // namespace tessera::detail
