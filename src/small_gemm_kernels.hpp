// src/small_gemm_kernels.hpp - the register-blocked kernel behind run_small_gemm
// (tessera/detail/small_matmul.hpp): batched products of small matrices of any shape (m, n, k up
// to small_gemm_max, known only at run time), compiled three times (AVX-512, AVX2+FMA, the build's
// baseline) like the fixed-size kernels and picked by the level host_kernel_isa() detected.
// Private to the library: src/small_matmul_real.cpp instantiates it for float and double.
#pragma once

#include "small_matmul_kernels.hpp"

#include <tessera/detail/small_matmul.hpp>

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tessera::detail {

namespace small_gemm {

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// L lanes of T: a vector, or T itself for one lane.
template <class T, int L>
using lanes_t = std::conditional_t<L == 1, T, small_kernels::vec_t<T, L>>;

// The register block of each level: R rows of C by two vectors of L lanes, so that R * 2
// accumulators, two rows of B and a broadcast element of A fit the register file (AVX-512: 16 of
// 32 zmm; AVX2: 12 of 16 ymm; SSE2: 8 of 16 xmm).
template <kernel_isa I, class T>
inline constexpr int lanes = (I == kernel_isa::avx512 ? 64 : I == kernel_isa::avx2 ? 32 : 16) /
                             static_cast<int>(sizeof(T));
template <kernel_isa I>
inline constexpr int block_rows = I == kernel_isa::avx512 ? 8 : I == kernel_isa::avx2 ? 6 : 4;

// C[0:R, columns] of one matrix, where the columns are NV vectors of L lanes, the second at
// column `second` (L, or less where it overlaps the first to end at the matrix's last column): the
// accumulators stay in registers over the whole of k, each row of B is loaded once per block,
// each element of A once per block (any strides: it is broadcast from a scalar load). B's and C's
// rows are contiguous.
template <class T, int L, int NV, int R>
[[gnu::always_inline]] inline void block(const small_gemm_args<T>& x, const T* __restrict a,
                                         const T* __restrict b, T* __restrict c,
                                         std::ptrdiff_t second) noexcept {
    using V = lanes_t<T, L>;
    const auto at = [second](int v) { return v == 0 ? std::ptrdiff_t{0} : second; };
    V acc[R][NV];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V{};
    for (std::ptrdiff_t p = 0; p < x.k; ++p) {
        V row[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) std::memcpy(&row[v], b + p * x.b_rs + at(v), sizeof(V));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const T e = a[r * x.a_rs + p * x.a_cs];
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[r][v] += e * row[v];
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
            T* const to = c + r * x.c_rs + at(v);
            V out = acc[r][v];
            if (x.accumulate) {
                // BLAS convention, as naive_product: a zero beta does not read C.
                out = x.alpha * out;
                if (x.beta != T{0}) {
                    V old;
                    std::memcpy(&old, to, sizeof(V));
                    out += x.beta * old;
                }
            }
            std::memcpy(to, &out, sizeof(V));
        }
    }
}

// The block's columns of C for every row: whole blocks of R rows, then one block of the rows
// left (a compile-time row count chosen at run time).
template <class T, int L, int NV, int R>
[[gnu::always_inline]] inline void column_panel(const small_gemm_args<T>& x, const T* a, const T* b,
                                                T* c, std::ptrdiff_t second = L) noexcept {
    std::ptrdiff_t i = 0;
    for (; i + R <= x.m; i += R) block<T, L, NV, R>(x, a + i * x.a_rs, b, c + i * x.c_rs, second);
    const std::ptrdiff_t left = x.m - i;
    if (left == 0) return;
    a += i * x.a_rs;
    c += i * x.c_rs;
    [&]<int... Rows>(std::integer_sequence<int, Rows...>) __attribute__((always_inline)) {
        static_cast<void>(
            ((left == Rows + 1 ? (block<T, L, NV, Rows + 1>(x, a, b, c, second), true) : false) ||
             ...));
    }(std::make_integer_sequence<int, R - 1>{});
}

// The columns from j on, fewer than 2 W: one panel of each power of two up to W that their count
// has, widest first (7 columns: 4, 2, 1).
template <class T, int W, int R>
[[gnu::always_inline]] inline void narrow_panels(const small_gemm_args<T>& x, const T* a, const T* b,
                                                 T* c, std::ptrdiff_t j) noexcept {
    if constexpr (W >= 1) {
        if (x.n - j >= W) {
            column_panel<T, W, 1, R>(x, a, b + j, c + j);
            j += W;
        }
        narrow_panels<T, W / 2, R>(x, a, b, c, j);
    }
}

// Every column with vectors of W lanes, n >= W: panels of two vectors, then the columns left.
// Where C is only written, the last vector ends at the last column and may overlap the one
// before it: those columns are computed twice, by the same operations in the same order, so the
// second write stores the same bits, and the left-over columns cost no narrower panels. Where C
// is also read (beta != 0) a column must be written once, and narrower panels take the rest.
template <class T, int W, int R>
[[gnu::always_inline]] inline void panels(const small_gemm_args<T>& x, const T* a, const T* b,
                                          T* c) noexcept {
    std::ptrdiff_t j = 0;
    for (; j + 2 * W <= x.n; j += 2 * W) column_panel<T, W, 2, R>(x, a, b + j, c + j);
    const std::ptrdiff_t left = x.n - j;
    if (left == 0) return;
    if (!x.accumulate || x.beta == T{0}) {
        if (left > W)
            column_panel<T, W, 2, R>(x, a, b + j, c + j, left - W);
        else
            column_panel<T, W, 1, R>(x, a, b + x.n - W, c + x.n - W);
        return;
    }
    narrow_panels<T, W, R>(x, a, b, c, j);
}

// One matrix: vectors of the level's full width, or of the widest power of two that fits n.
template <class T, int W, int R>
[[gnu::always_inline]] inline void one(const small_gemm_args<T>& x, const T* a, const T* b,
                                       T* c) noexcept {
    if constexpr (W > 1) {
        if (x.n < W) return one<T, W / 2, R>(x, a, b, c);
    }
    panels<T, W, R>(x, a, b, c);
}

template <kernel_isa I, class T>
[[gnu::always_inline]] inline void batch(const small_gemm_args<T>& x) noexcept {
    const T* a = x.a;
    const T* b = x.b;
    T* c = x.c;
    for (std::size_t i = 0; i < x.count; ++i, a += x.sa, b += x.sb, c += x.sc) {
        one<T, lanes<I, T>, block_rows<I>>(x, a, b, c);
        // As in small_kernels::batch_loop_one_by_one: no vectorising across matrices.
        asm("" : "+r"(a), "+r"(b), "+r"(c));
    }
}

// The three compilations, with the target strings of the fixed-size kernels.
template <class T>
[[gnu::target(TESSERA_AVX512_TARGET)]] void batch_avx512(const small_gemm_args<T>& x) noexcept {
    batch<kernel_isa::avx512, T>(x);
}
template <class T>
[[gnu::target("avx2,fma")]] void batch_avx2(const small_gemm_args<T>& x) noexcept {
    batch<kernel_isa::avx2, T>(x);
}
template <class T>
void batch_baseline(const small_gemm_args<T>& x) noexcept {
    batch<kernel_isa::baseline, T>(x);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace small_gemm

template <class T>
void run_small_gemm(kernel_isa isa, const small_gemm_args<T>& args) noexcept {
    switch (isa) {
        case kernel_isa::avx512: return small_gemm::batch_avx512<T>(args);
        case kernel_isa::avx2: return small_gemm::batch_avx2<T>(args);
        case kernel_isa::baseline: break;
    }
    small_gemm::batch_baseline<T>(args);
}

}  // namespace tessera::detail
