// src/small_gemm_kernels.hpp - the register-blocked kernel behind run_small_gemm
// (tessera/detail/small_matmul.hpp): batched products of small matrices of any shape (m, n, k up
// to small_gemm_max, known only at run time), compiled three times (AVX-512, AVX2+FMA, the build's
// baseline) like the fixed-size kernels and picked by the level host_kernel_isa() detected.
// Private to the library: src/small_matmul_real.cpp instantiates it for float and double.
#pragma once

#include "small_matmul_kernels.hpp"

#include <tessera/detail/small_matmul.hpp>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
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

// The vector width of each level, and the register block of the AVX2 and baseline levels: R rows
// of C by two vectors of L lanes, so that R * 2 accumulators, two rows of B and a broadcast
// element of A fit the register file (AVX2: 12 of 16 ymm; SSE2: 8 of 16 xmm). The AVX-512 level
// cuts its blocks by the shape (namespace masked below).
template <kernel_isa I, class T>
inline constexpr int lanes = (I == kernel_isa::avx512 ? 64 : I == kernel_isa::avx2 ? 32 : 16) /
                             static_cast<int>(sizeof(T));
template <kernel_isa I>
inline constexpr int block_rows = I == kernel_isa::avx2 ? 6 : 4;

// Elements of C from `to` (a vector of them, or one), written as `out` or as alpha out + beta C.
template <class T, class V>
[[gnu::always_inline]] inline void write(const small_gemm_args<T>& x, T* to, V out) noexcept {
    if (x.accumulate) {
        // BLAS convention, as naive_product: a zero beta does not read C. alpha s is rounded on
        // its own (opaque), so that beta c is the product fused into the addition in every row:
        // left to it, GCC fused alpha s in some rows of a block and beta c in others, and a row's
        // bits followed its place in the block.
        out = opaque(x.alpha * out);
        if (x.beta != T{0}) {
            V old;
            std::memcpy(&old, to, sizeof(V));
            out += x.beta * old;
        }
    }
    std::memcpy(to, &out, sizeof(V));
}

// C[0:R, columns] of one matrix, where the columns are NV vectors of L lanes, the second at
// column `second` (L, or less where it overlaps the first to end at the matrix's last column): the
// accumulators stay in registers over the whole of k, each row of B is loaded once per block,
// each element of A once per block (any strides: it is broadcast from a scalar load). B's and C's
// rows are contiguous. Fma: the level has fused multiply-adds (the compiler contracts the vectors'
// multiply-adds into them; one lane's are written fused, below).
template <bool Fma, class T, int L, int NV, int R>
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
            for (int v = 0; v < NV; ++v) {
                // One lane fused by hand: at -O3, GCC versioned the loop over k for B's unit row
                // stride and vectorised that version's products along k, adding them unfused,
                // while the other version fused them, so a column's bits followed B's stride.
                if constexpr (Fma && L == 1)
                    acc[r][v] = std::fma(e, row[v], acc[r][v]);
                else
                    acc[r][v] += e * row[v];
            }
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) write(x, c + r * x.c_rs + at(v), acc[r][v]);
}

// f.template operator()<Rows>() for the compile-time Rows (1 .. Most) equal to `rows` (none
// where it is 0): the last block of rows, whose height is known only at run time.
template <int Most, class F>
[[gnu::always_inline]] inline void with_rows(std::ptrdiff_t rows, F f) noexcept {
    [&]<int... R>(std::integer_sequence<int, R...>) __attribute__((always_inline)) {
        static_cast<void>(
            ((rows == R + 1 ? (f.template operator()<R + 1>(), true) : false) || ...));
    }(std::make_integer_sequence<int, Most>{});
}

// The block's columns of C for every row: whole blocks of R rows, then one block of the rows
// left (a compile-time row count chosen at run time).
template <bool Fma, class T, int L, int NV, int R>
[[gnu::always_inline]] inline void column_panel(const small_gemm_args<T>& x, const T* a, const T* b,
                                                T* c, std::ptrdiff_t second = L) noexcept {
    std::ptrdiff_t i = 0;
    for (; i + R <= x.m; i += R)
        block<Fma, T, L, NV, R>(x, a + i * x.a_rs, b, c + i * x.c_rs, second);
    if (i == x.m) return;  // (a pointer to row m would lie past A)
    a += i * x.a_rs;
    c += i * x.c_rs;
    with_rows<R - 1>(
        x.m - i, [&]<int Rows>() __attribute__((always_inline)) {
            block<Fma, T, L, NV, Rows>(x, a, b, c, second);
        });
}

// The columns from j on, fewer than 2 W: one panel of each power of two up to W that their count
// has, widest first (7 columns: 4, 2, 1).
template <bool Fma, class T, int W, int R>
[[gnu::always_inline]] inline void narrow_panels(const small_gemm_args<T>& x, const T* a,
                                                 const T* b, T* c, std::ptrdiff_t j) noexcept {
    if constexpr (W >= 1) {
        if (x.n - j >= W) {
            column_panel<Fma, T, W, 1, R>(x, a, b + j, c + j);
            j += W;
        }
        narrow_panels<Fma, T, W / 2, R>(x, a, b, c, j);
    }
}

// Every column with vectors of W lanes, n >= W: panels of two vectors, then the columns left.
// Where C is only written, the last vector ends at the last column and may overlap the one
// before it: those columns are computed twice, by the same operations in the same order, so the
// second write stores the same bits, and the left-over columns cost no narrower panels. Where C
// is also read (beta != 0) a column must be written once, and narrower panels take the rest.
template <bool Fma, class T, int W, int R>
[[gnu::always_inline]] inline void panels(const small_gemm_args<T>& x, const T* a, const T* b,
                                          T* c) noexcept {
    std::ptrdiff_t j = 0;
    for (; j + 2 * W <= x.n; j += 2 * W) column_panel<Fma, T, W, 2, R>(x, a, b + j, c + j);
    const std::ptrdiff_t left = x.n - j;
    if (left == 0) return;
    if (!x.accumulate || x.beta == T{0}) {
        if (left > W)
            column_panel<Fma, T, W, 2, R>(x, a, b + j, c + j, left - W);
        else
            column_panel<Fma, T, W, 1, R>(x, a, b + x.n - W, c + x.n - W);
        return;
    }
    narrow_panels<Fma, T, W, R>(x, a, b, c, j);
}

// One matrix: vectors of the level's full width, or of the widest power of two that fits n.
template <bool Fma, class T, int W, int R>
[[gnu::always_inline]] inline void one(const small_gemm_args<T>& x, const T* a, const T* b,
                                       T* c) noexcept {
    if constexpr (W > 1) {
        if (x.n < W) return one<Fma, T, W / 2, R>(x, a, b, c);
    }
    panels<Fma, T, W, R>(x, a, b, c);
}

// Products of one column where A's rows are contiguous and k fills a vector of W lanes: each
// element of C is the dot product of a row of A with B's column, W elements of k at a time (one
// vector of partial sums a row), its lanes then added by halves (sum_of_lanes), and the k mod W
// elements past the last whole vector multiplied and added one by one. The panels above spend
// a lane on each row and go one element of k at a time, a chain of k multiply-adds a row. B's
// column is read in place where its elements are adjacent, else copied to a dense local array
// first: the same operations either way, so the order of every sum depends on the shape (and on
// A's rows being contiguous, as at the AVX-512 level), not on B's stride.
// (The AVX-512 level has its own, namespace masked::dot.)
template <class T, int W>
[[gnu::always_inline]] inline T sum_of_lanes(lanes_t<T, W> v) noexcept {
    if constexpr (W == 1) {
        return v;
    } else {
        using H = lanes_t<T, W / 2>;
        H low, high;
        std::memcpy(&low, &v, sizeof(H));
        std::memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof(H), sizeof(H));
        return sum_of_lanes<T, W / 2>(low + high);
    }
}

// x y + z for vectors of 16 or 32 bytes, rounded once, at every optimisation level, where the
// level has FMA: GCC contracts a multiply and an add only from -O2 (so the sanitizer builds, at
// -O1, would round the products on their own), clang at every level. (The builtins are those
// behind _mm256_fmadd_ps and its kin, which a function without the FMA target may not inline.)
template <class V>
[[gnu::always_inline]] inline V fused_multiply_add(V x, V y, V z) noexcept {
    static_assert(sizeof(V) == 16 || sizeof(V) == 32);
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
    constexpr bool single = sizeof(x[0]) == 4;
    if constexpr (sizeof(V) == 32 && single)
        return __builtin_ia32_vfmaddps256(x, y, z);
    else if constexpr (sizeof(V) == 32)
        return __builtin_ia32_vfmaddpd256(x, y, z);
    else if constexpr (single)
        return __builtin_ia32_vfmaddps(x, y, z);
    else
        return __builtin_ia32_vfmaddpd(x, y, z);
#else
    return x * y + z;  // contracted: clang's default -ffp-contract=on (a build with =off is not)
#endif
}

// The dot products of R rows of A (from `a`, rs apart) with the column b: sums[r]. Each row's
// operations do not depend on R (which only interleaves the rows' chains).
template <bool Fma, class T, int W, int R>
[[gnu::always_inline]] inline void dot_rows(const T* a, std::ptrdiff_t rs, const T* b,
                                            std::ptrdiff_t k, T (&sums)[R]) noexcept {
    using V = lanes_t<T, W>;
    V acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = V{};
    std::ptrdiff_t p = 0;
    for (; p + W <= k; p += W) {
        V column;
        std::memcpy(&column, b + p, sizeof(V));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            V row;
            std::memcpy(&row, a + r * rs + p, sizeof(V));
            if constexpr (Fma)
                acc[r] = fused_multiply_add(row, column, acc[r]);
            else
                acc[r] += row * column;
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sums[r] = sum_of_lanes<T, W>(acc[r]);
    // Fused by hand where the level has fused multiply-adds, as the one-lane panels are.
    for (; p < k; ++p)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
            sums[r] = Fma ? std::fma(a[r * rs + p], b[p], sums[r]) : sums[r] + a[r * rs + p] * b[p];
}

// Rows a block, each its own chain of multiply-adds (eight vectors of partial sums, a column and a
// row: 10 of AVX2's 16 registers). Measured on Zen 5, the AVX2 level, a batch, against blocks of
// four: 4-6 rows 1.1-1.3x faster (6x6x1 double 6.47 -> 5.00 ns a matrix), 16 and 32 rows
// 0.94-1.0x.
inline constexpr int dot_block_rows = 8;

// Where the dot products take a product: one column, A's rows contiguous, k at least a vector.
// With k shorter there are no whole vectors and the dot products are the panels' chains of
// multiply-adds (the same bits), measured no faster (0.84-1.39x the panels, 1-32 rows).
template <class T, int W>
constexpr bool dots_pay(const small_gemm_args<T>& x) noexcept {
    return x.n == 1 && x.a_cs == 1 && x.k >= W;
}

// B's k rows of N columns into `dense`.
template <class T, int N>
[[gnu::always_inline]] inline void copy_b(const small_gemm_args<T>& x, const T* b,
                                          T* dense) noexcept {
    for (std::ptrdiff_t q = 0; q < x.k; ++q)
        for (int j = 0; j < N; ++j) dense[q * N + j] = b[q * x.b_rs + j];
}

// Every matrix of the batch by dot products, B's column copied where it is not dense (once where
// the batch shares it).
template <bool Fma, class T, int W>
[[gnu::always_inline]] inline void dot_batch(const small_gemm_args<T>& args) noexcept {
    const small_gemm_args<T> x = args;  // a local copy: stores into C could otherwise alias it
    T dense[small_gemm_max];
    const bool copy = x.b_rs != 1;
    const T* a = x.a;
    const T* b = x.b;
    T* c = x.c;
    for (std::size_t i = 0; i < x.count; ++i, a += x.sa, b += x.sb, c += x.sc) {
        if (copy && (i == 0 || x.sb != 0)) copy_b<T, 1>(x, b, dense);
        const T* const column = copy ? dense : b;
        const auto rows = [&]<int R>(std::ptrdiff_t first) __attribute__((always_inline)) {
            T sums[R];
            dot_rows<Fma, T, W, R>(a + first * x.a_rs, x.a_rs, column, x.k, sums);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) write(x, c + (first + r) * x.c_rs, sums[r]);
        };
        std::ptrdiff_t r = 0;
        for (; r + dot_block_rows <= x.m; r += dot_block_rows)
            rows.template operator()<dot_block_rows>(r);
        with_rows<dot_block_rows - 1>(
            x.m - r, [&]<int Rows>()
                         __attribute__((always_inline)) { rows.template operator()<Rows>(r); });
        asm("" : "+r"(a), "+r"(b), "+r"(c));  // as in batch below
    }
}

// The AVX-512 level: a row of a panel is NV vectors, the last of which (the tail) has the
// fewest lanes of 1/4, 1/2 or all of the full width that hold the columns left, masked to them,
// so no column is computed twice (a 10-column float row is one masked vector, where the other
// levels take two overlapping halves). The other levels have no such masks (AVX2's masked
// stores are slow on some CPUs), hence their overlaps and narrow panels above.
//
// A masked load costs more than a plain one (16x16x16 float: 1.2x the whole product), so the
// tail's rows of B are read whole where the lanes past the row are B's own next rows (dense B,
// not its last rows): those lanes only feed accumulator lanes that are never stored (their
// products may raise floating-point exception flags, as the rotations and closed forms of the
// batched linear algebra already do; the library promises nothing about the flags).
namespace masked {

template <class T>
inline constexpr int width = lanes<kernel_isa::avx512, T>;
using mask = unsigned;

// The most vectors in one panel, and the most rows in a block of a panel of `vectors` vectors:
// 16, 24, 24 or 24 accumulators (of 32 registers), enough rows to cover the multiply-adds'
// latency; the heights are those measured fastest, not the most the registers hold. Measured on
// Zen 5, with the rows addressed in groups (below), against blocks of at most 8 rows with an
// offset a row: 16x64x16 float 1.11x, 10x10x10 float 1.18x, 5x5x5 float and double 1.11-1.13x
// faster. (Two vectors: one block of 12 rows measured 0.92x two of 6 at 12x12x12 double, one of
// 11 rows 1.17x blocks of 6 and 5 at 11x11x11.) Four vectors of 6 rows read 10 vectors and
// broadcasts a step for 24 multiply-adds, where two panels of two vectors read 13 for 22: against
// panels of at most three vectors, 4x64x64 float 1.14x, 2x64x64 float 1.5x, 32x32x32 double
// 1.04x faster (the rows of 49-64 floats and 25-32 doubles; 64 doubles take two panels of four).
inline constexpr int max_panel_vectors = 4;
constexpr int max_rows(int vectors) noexcept {
    return vectors == 1 ? 16 : vectors == 2 ? 12 : vectors == 3 ? 8 : 6;
}

// A block addresses the rows of A in groups of `row_group`, each group from a pointer of its
// own and each row of a group at the same multiple of A's row stride from its pointer: nine
// general registers for sixteen rows (six pointers, three offsets), where an offset per row would
// take fifteen and spill. Groups of three measured 1.07-1.08x faster than groups of four at
// 10x10x10 double.
inline constexpr int row_group = 3;

// The first L lanes of memory, those of `lanes` only where `Masked` (the others zero). A panel's
// tail reads as few lanes as its columns allow (a wider access would cross more cache lines).
template <class T, int L, bool Masked>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, L> load(
    const T* from, mask lanes) noexcept {
    constexpr int bits = L * static_cast<int>(sizeof(T)) * 8;
    const auto k8 = static_cast<__mmask8>(lanes);
    vec_t<T, L> v;
    if constexpr (!Masked)
        std::memcpy(&v, from, sizeof(v));
    else if constexpr (sizeof(T) == 4 && bits == 512)
        v = _mm512_maskz_loadu_ps(static_cast<__mmask16>(lanes), from);
    else if constexpr (sizeof(T) == 4 && bits == 256)
        v = _mm256_maskz_loadu_ps(k8, from);
    else if constexpr (sizeof(T) == 4)
        v = _mm_maskz_loadu_ps(k8, from);
    else if constexpr (bits == 512)
        v = _mm512_maskz_loadu_pd(k8, from);
    else if constexpr (bits == 256)
        v = _mm256_maskz_loadu_pd(k8, from);
    else
        v = _mm_maskz_loadu_pd(k8, from);
    return v;
}

// The lanes of v in `lanes` into memory.
template <class T, int L>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void store(
    T* to, mask lanes, vec_t<T, L> v) noexcept {
    constexpr int bits = L * static_cast<int>(sizeof(T)) * 8;
    const auto k8 = static_cast<__mmask8>(lanes);
    if constexpr (sizeof(T) == 4 && bits == 512)
        _mm512_mask_storeu_ps(to, static_cast<__mmask16>(lanes), v);
    else if constexpr (sizeof(T) == 4 && bits == 256)
        _mm256_mask_storeu_ps(to, k8, v);
    else if constexpr (sizeof(T) == 4)
        _mm_mask_storeu_ps(to, k8, v);
    else if constexpr (bits == 512)
        _mm512_mask_storeu_pd(to, k8, v);
    else if constexpr (bits == 256)
        _mm256_mask_storeu_pd(to, k8, v);
    else
        _mm_mask_storeu_pd(to, k8, v);
}

// The first Count (1 .. width) elements of memory, or lanes of a full-width vector into it. Where
// they fill a vector of 16 or 32 bytes exactly, a plain access of that width; else one of the full
// width, masked to them where they do not fill it. Against the masked access alone, the tiny
// products' one-vector operands measured on Zen 5 (ns a matrix, a batch): 2x2x2 double 0.97 ->
// 0.58, 4x4x1 float 0.79 -> 0.66, 4x8x1 float 1.92 -> 1.73, 4x4x1 double 1.30 -> 1.20; masked
// accesses of 16 or 32 bytes where the elements do not fill them measured no faster than the full
// width's (3x3x1 double).
template <class T, int Count>
inline constexpr bool fills_narrow = Count * sizeof(T) == 16 || Count * sizeof(T) == 32;

// The elements' vector, the lanes past them zero.
template <class T, int Count>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> load_first(
    const T* from) noexcept {
    constexpr int W = width<T>;
    if constexpr (!fills_narrow<T, Count>) {
        return load<T, W, (Count < W)>(from, static_cast<mask>((1ull << Count) - 1));
    } else {
        // Into a zero vector by the maskz forms: GCC 12's zero-extending casts warn of an
        // uninitialised operand, as the unmasked inserts do.
        const vec_t<T, Count> v = load<T, Count, false>(from, 0);
        if constexpr (sizeof(T) == 4 && Count == 4)
            return _mm512_maskz_insertf32x4(0xffff, _mm512_setzero_ps(), v, 0);
        else if constexpr (sizeof(T) == 4)
            return _mm512_maskz_insertf32x8(0xffff, _mm512_setzero_ps(), v, 0);
        else if constexpr (Count == 2)
            return _mm512_maskz_insertf64x2(0xff, _mm512_setzero_pd(), v, 0);
        else
            return _mm512_maskz_insertf64x4(0xff, _mm512_setzero_pd(), v, 0);
    }
}

// The first Count lanes of v into memory.
template <class T, int Count>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void store_first(
    T* to, vec_t<T, width<T>> v) noexcept {
    if constexpr (!fills_narrow<T, Count>) {
        store<T, width<T>>(to, static_cast<mask>((1ull << Count) - 1), v);
    } else {
        std::memcpy(to, &v, Count * sizeof(T));  // one store of the vector's low 16 or 32 bytes
    }
}

// opaque() (src/simd_vector.hpp) for this level's functions, which carry the AVX-512 target: a
// function without it may not take their 256- and 512-bit vectors (clang rejects the call).
template <class V>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline V opaque_avx512(V v) noexcept {
    asm("" : "+v"(v));
    return v;
}

// Every lane of a vector set to e, in a register of its own: opaque keeps compilers from folding
// the load back into each use.
template <class T>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> broadcast(
    T e) noexcept {
    if constexpr (sizeof(T) == 4)
        return opaque_avx512<vec_t<T, width<T>>>(_mm512_set1_ps(e));
    else
        return opaque_avx512<vec_t<T, width<T>>>(_mm512_set1_pd(e));
}

// One group of equal blocks of one panel, run over the whole batch by `rows_run` below.
struct run {
    std::ptrdiff_t column;      // the panel's first column
    std::ptrdiff_t first_row;   // the group's first row
    int blocks;                 // how many blocks, one after the other
    mask tail;                  // the lanes of the panel's last vector that are columns of C
    std::ptrdiff_t whole_rows;  // rows of B whose tail is read without a mask: 0 .. k
};

// C[0:R, the panel] of one matrix; otherwise as block() above.
template <class T, int NV, int TL, int R>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void block(
    const small_gemm_args<T>& x, const run& q, const T* __restrict a, const T* __restrict b,
    T* __restrict c) noexcept {
    constexpr int W = width<T>;
    constexpr int F = NV - 1;  // full vectors before the tail
    // The tail computes at its own width: a narrower multiply-add issues at twice the rate on
    // CPUs that split 512-bit operations in two, such as AMD's Zen 4.
    using VW = vec_t<T, W>;
    using VT = vec_t<T, TL>;
    VW acc[R][NV > 1 ? F : 1];
    VT tail_acc[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int v = 0; v < F; ++v) acc[r][v] = VW{};
        tail_acc[r] = VT{};
    }
    constexpr int groups = (R + row_group - 1) / row_group;
    const T* group_rows[groups];  // the first row of each group
    std::ptrdiff_t in_group[row_group];  // the offset of each row of a group from its first
#pragma GCC unroll 16
    for (int g = 0; g < groups; ++g) group_rows[g] = a + g * row_group * x.a_rs;
#pragma GCC unroll 4
    for (int i = 0; i < row_group; ++i) in_group[i] = i * x.a_rs;
    const auto step = [&]<bool Masked>(std::ptrdiff_t p)
        __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
        const T* const from = b + p * x.b_rs;
        VW row[NV > 1 ? F : 1];
#pragma GCC unroll 4
        for (int v = 0; v < F; ++v) std::memcpy(&row[v], from + v * W, sizeof(VW));
        const VT tail = load<T, TL, Masked>(from + F * W, q.tail);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const T* const e = group_rows[r / row_group] + p * x.a_cs + in_group[r % row_group];
            if constexpr (F == 0) {
                tail_acc[r] += *e * tail;  // the load folds into the multiply-add as a broadcast
            } else {
                // A row of two vectors or more broadcasts its element of A into a register once;
                // compilers otherwise fold a broadcast load into every multiply-add, and on Zen 5
                // those loads bind (10x10x10 double 1.39x, 20x20x20 float 1.38x, 12x12x12
                // double 1.43x slower than one broadcast a row).
                VW wide = broadcast<T>(*e);
#pragma GCC unroll 4
                for (int v = 0; v < F; ++v) acc[r][v] += wide * row[v];
                VT narrow;  // the tail's lanes of it
                std::memcpy(&narrow, &wide, sizeof(VT));
                tail_acc[r] += narrow * tail;
            }
        }
    };
    std::ptrdiff_t p = 0;
    // A block of few multiply-adds a step (up to 12; of one vector, up to 4 rows) runs two steps
    // an iteration: its loop of one step ran 1.5-1.7x slower than the chains of multiply-adds
    // allow, two steps an iteration at libxsmm's speed (ns a matrix on Zen 5, against libxsmm
    // 0.60-0.78x -> 1.00-1.08x: 3x40x40 float 83 -> 48, 2x64x64 float 151 -> 90, 3x24x24 double
    // 39 -> 30, 3x16x8 double 19.2 -> 12.2). Blocks of one vector and 5-12 rows measured 5-7%
    // slower unrolled (7x7x7, 12x12x12 float), blocks of more than 12 multiply-adds a step no
    // faster. The same steps in the same order, so the same bits. (Two loops: GCC 12's unroll
    // pragma takes no count that depends on a template argument.)
    if constexpr (R * NV <= 12 && (NV >= 2 || R <= 4)) {
#pragma GCC unroll 2
        for (; p < q.whole_rows; ++p) step.template operator()<false>(p);
    } else {
        for (; p < q.whole_rows; ++p) step.template operator()<false>(p);
    }
    for (; p < x.k; ++p) step.template operator()<true>(p);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        T* const to = c + r * x.c_rs;
#pragma GCC unroll 4
        for (int v = 0; v < F; ++v) {
            VW out = acc[r][v];
            if (x.accumulate) {
                out = opaque_avx512(x.alpha * out);  // as in block() above
                if (x.beta != T{0}) {
                    VW old;
                    std::memcpy(&old, to + v * W, sizeof(VW));
                    out += x.beta * old;
                }
            }
            std::memcpy(to + v * W, &out, sizeof(VW));
        }
        VT out = tail_acc[r];
        if (x.accumulate) {
            out = opaque_avx512(x.alpha * out);
            if (x.beta != T{0}) out += x.beta * load<T, TL, true>(to + F * W, q.tail);
        }
        store<T, TL>(to + F * W, q.tail, out);
    }
}

// The group's blocks of every matrix of the batch: every decision but the group's size is
// made at compile time or once per batch.
template <class T, int NV, int TL, int R>
[[gnu::target(TESSERA_AVX512_TARGET)]] void rows_run(const small_gemm_args<T>& args,
                                                     const run& group) noexcept {
    // Local copies: the masked stores into C could otherwise alias them, and every field would
    // be read again after each store.
    const small_gemm_args<T> x = args;
    const run q = group;
    const T* a = x.a + q.first_row * x.a_rs;
    const T* b = x.b + q.column;
    T* c = x.c + q.first_row * x.c_rs + q.column;
    // One block a matrix (a panel of up to 16, 12, 8 or 6 rows: most shapes up to 16) loops
    // without the inner loop of blocks, whose bookkeeping GCC keeps in memory and spends more on
    // than the multiply-adds at 7x7x7 (ns a matrix on Zen 5: 7x7x7 float 12.9 -> 9.2, double
    // 13.7 -> 10.1, 3x3x3 float 4.3 -> 2.0).
    if (q.blocks == 1) {
        for (std::size_t i = 0; i < x.count; ++i, a += x.sa, b += x.sb, c += x.sc) {
            block<T, NV, TL, R>(x, q, a, b, c);
            // As in small_kernels::batch_loop_one_by_one: no vectorising across matrices.
            asm("" : "+r"(a), "+r"(b), "+r"(c));
        }
        return;
    }
    for (std::size_t i = 0; i < x.count; ++i, a += x.sa, b += x.sb, c += x.sc) {
        for (int g = 0; g < q.blocks; ++g)
            block<T, NV, TL, R>(x, q, a + g * R * x.a_rs, b, c + g * R * x.c_rs);
        asm("" : "+r"(a), "+r"(b), "+r"(c));  // as above
    }
}

// The blocks of a single product (a batch of one matrix) whose panel is the whole row of C, cut
// in blocks of equal height: rows_run without the batch loop, and with the group's fields in
// registers rather than in memory. Measured on Zen 5, run_small_gemm a matrix (a driver compiled
// with this header before and after, in one sitting): 3x5x2 float 16.9 -> 12.6 ns, 7x7x7 float
// 28.4 -> 24.8 ns, 10x10x10 double 45.0 -> 39.7 ns against rows_run. The same blocks as rows_run,
// so the same bits.
template <class T, int NV, int TL, int R>
[[gnu::target(TESSERA_AVX512_TARGET)]] void product_run(const small_gemm_args<T>& args,
                                                        const small_gemm_plan<T>& plan) noexcept {
    const small_gemm_args<T> x = args;  // as in rows_run
    const run q{0, 0, plan.blocks, plan.tail_lanes, plan.whole_rows};
    if (q.blocks == 1) return block<T, NV, TL, R>(x, q, x.a, x.b, x.c);  // as in rows_run
    for (int g = 0; g < q.blocks; ++g)
        block<T, NV, TL, R>(x, q, x.a + g * R * x.a_rs, x.b, x.c + g * R * x.c_rs);
}

// The rows_run (Single: the product_run) of NV vectors, a tail of TL lanes and blocks of R rows.
template <class T, bool Single, int NV, int TL, int R>
inline constexpr auto run_entry = [] {
    if constexpr (Single)
        return &product_run<T, NV, TL, R>;
    else
        return &rows_run<T, NV, TL, R>;
}();
template <class T, bool Single, int NV, int TL, int... R>
constexpr auto rows_runs(std::integer_sequence<int, R...>) noexcept {
    return std::array{run_entry<T, Single, NV, TL, R + 1>...};
}
// Those of NV vectors for each tail (a quarter, half, all of the width) and 1 .. max_rows(NV)
// rows.
template <class T, bool Single, int NV>
constexpr auto panel_runs() noexcept {
    constexpr auto rows = std::make_integer_sequence<int, max_rows(NV)>{};
    return std::array{rows_runs<T, Single, NV, width<T> / 4>(rows),
                      rows_runs<T, Single, NV, width<T> / 2>(rows),
                      rows_runs<T, Single, NV, width<T>>(rows)};
}

// The rows_run (Single: the product_run) of NV vectors with a tail of the `tail` (0, 1, 2: a
// quarter, half, all of the width) and blocks of R rows.
template <class T, bool Single = false>
auto rows_run_for(int nv, int tail, int r) noexcept {
    static constexpr auto one = panel_runs<T, Single, 1>();
    static constexpr auto two = panel_runs<T, Single, 2>();
    static constexpr auto three = panel_runs<T, Single, 3>();
    static constexpr auto four = panel_runs<T, Single, 4>();
    const auto t = static_cast<std::size_t>(tail), i = static_cast<std::size_t>(r - 1);
    return nv == 1 ? one[t][i] : nv == 2 ? two[t][i] : nv == 3 ? three[t][i] : four[t][i];
}

// m rows in blocks of at most `most` rows, as near equal in height as they go.
struct row_cut {
    int rows, blocks, taller;  // blocks of `rows` rows, the first `taller` of them one more
};
constexpr row_cut cut_rows(int m, int most) noexcept {
    const int blocks = (m + most - 1) / most;
    return {m / blocks, blocks, m % blocks};
}

// The cuts of every height and the panel widths of every vector count, made at compile time: a
// single product plans its one matrix, and the run-time divisions of planning it on the spot cost
// about 20 ns a call.
inline constexpr auto row_cuts = [] {
    std::array<std::array<row_cut, small_gemm_max + 1>, max_panel_vectors + 1> cuts{};
    for (int vectors = 1; vectors <= max_panel_vectors; ++vectors)
        for (int m = 1; m <= static_cast<int>(small_gemm_max); ++m)
            cuts[vectors][m] = cut_rows(m, max_rows(vectors));
    return cuts;
}();
inline constexpr int most_vectors = static_cast<int>(small_gemm_max) / width<double>;
inline constexpr auto panel_widths = [] {
    constexpr int P = max_panel_vectors;
    std::array<std::array<int, (most_vectors + P - 1) / P>, most_vectors + 1> widths{};
    for (int vectors = 1; vectors <= most_vectors; ++vectors) {
        const int panels = (vectors + P - 1) / P;
        for (int i = 0; i < panels; ++i)
            widths[vectors][i] = vectors / panels + (i < vectors % panels ? 1 : 0);
    }
    return widths;
}();

// Products of one or two columns (matrix-vector products and the like), where a panel spends a
// vector on each row of which only one or two lanes are columns of C, and its multiply-adds go
// one element of k at a time: here each element of C is the dot product of a row of A with a
// column of B, taken L elements of k at a time (the lanes of L zero past k in both operands),
// and the sums of L elements of C, those of L / N consecutive rows, are reduced together by a
// tree of pairwise additions whose result is those L elements in C's row-major order: one store.
// A's rows must be contiguous; B and C may have any row stride (B is copied to a dense local
// array where its rows are not dense, and C is written element by element where its rows are
// not). The order of every sum depends on the shape alone, not on B's or C's strides.
// N elements at `row` (4 to 32 bytes, a divisor of the vector) repeated along the vector: one
// broadcast load.
template <class T, int N>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> broadcast_row(
    const T* row) noexcept {
    using V = vec_t<T, width<T>>;
    constexpr std::size_t bytes = N * sizeof(T);
    static_assert(bytes == 4 || bytes == 8 || bytes == 16 || bytes == 32);
    // The maskz forms, as in flat::permute.
    if constexpr (bytes == 4) {  // one float
        return _mm512_set1_ps(*row);
    } else if constexpr (bytes == 8) {
        double pair;  // two floats or one double, as one double (moves keep any bits)
        std::memcpy(&pair, row, sizeof(pair));
        return reinterpret_cast<V>(_mm512_set1_pd(pair));
    } else if constexpr (sizeof(T) == 4 && N == 4) {
        return _mm512_maskz_broadcast_f32x4(0xffff, _mm_loadu_ps(row));
    } else if constexpr (sizeof(T) == 4) {
        return _mm512_maskz_broadcast_f32x8(0xffff, _mm256_loadu_ps(row));
    } else if constexpr (N == 2) {
        return _mm512_maskz_broadcast_f64x2(0xff, _mm_loadu_pd(row));
    } else {
        return _mm512_maskz_broadcast_f64x4(0xff, _mm256_loadu_pd(row));
    }
}

namespace dot {

// small_kernels::permute2 with this level's target: clang rejects a call that passes 256- or
// 512-bit vectors from a function with the target to one without it (the vectors' ABI differs).
template <class T, int L, class Src, std::size_t... I>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, L> shuffle(
    vec_t<T, L> x, vec_t<T, L> y, Src, std::index_sequence<I...>) noexcept {
    return __builtin_shufflevector(x, y, Src{}(static_cast<int>(I))...);
}

// The even and the odd lanes of the concatenation (x, y): B's two columns from its rows.
template <class T, int L>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, L> evens(
    vec_t<T, L> x, vec_t<T, L> y) noexcept {
    return shuffle<T, L>(
        x, y, [](int l) { return 2 * l; }, std::make_index_sequence<L>{});
}
template <class T, int L>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, L> odds(
    vec_t<T, L> x, vec_t<T, L> y) noexcept {
    return shuffle<T, L>(
        x, y, [](int l) { return 2 * l + 1; }, std::make_index_sequence<L>{});
}

// The tree's levels, on vectors of L lanes in blocks of G (the lanes of 128 bits). A level within
// the blocks adds neighbouring lanes, x's sums then y's in each block (one in-lane shuffle per
// operand, as shufps/unpcklpd do); once the blocks hold one sum each, a level adds neighbouring
// blocks, x's sums then y's (shuff32x4, vperm2f128). After both, lane i holds the sum of v[i].
template <class T>
inline constexpr int block_lanes = 16 / static_cast<int>(sizeof(T));

// The lane of the concatenation (x, y) that lane l of a level's even (odd 0) or odd (odd 1)
// operand takes (the flat tree below simulates its levels with these).
template <class T, int L>
constexpr int in_blocks_source(int l, int odd) noexcept {
    constexpr int G = block_lanes<T>, half = G / 2;
    const int b = l / G, p = l % G;
    return (p < half ? G * b + 2 * p : L + G * b + 2 * (p - half)) + odd;
}
template <class T, int L>
constexpr int of_blocks_source(int l, int odd) noexcept {
    constexpr int G = block_lanes<T>, B = L / G;
    const int j = l / G, p = l % G;
    return (j < B / 2 ? 2 * G * j : L + 2 * G * (j - B / 2)) + G * odd + p;
}

template <class T, int L, int Odd>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, L> in_blocks(
    vec_t<T, L> x, vec_t<T, L> y) noexcept {
    return shuffle<T, L>(
        x, y, [](int l) { return in_blocks_source<T, L>(l, Odd); }, std::make_index_sequence<L>{});
}
template <class T, int L, int Odd>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, L> of_blocks(
    vec_t<T, L> x, vec_t<T, L> y) noexcept {
    return shuffle<T, L>(
        x, y, [](int l) { return of_blocks_source<T, L>(l, Odd); }, std::make_index_sequence<L>{});
}

// Lane i of the result is the sum of the lanes of v[i], added pairwise in lane order: each level
// halves the number of vectors S (a compile-time recursion: GCC keeps a loop that halves its
// count as a loop).
template <class T, int L, int S = L>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, L> sums(
    vec_t<T, L> (&v)[L]) noexcept {
    constexpr bool within = S > L / block_lanes<T>;  // the blocks hold more than one sum each
#pragma GCC unroll 16
    for (int i = 0; i < S / 2; ++i) {
        const vec_t<T, L> x = v[2 * i], y = v[2 * i + 1];
        if constexpr (within)
            v[i] = in_blocks<T, L, 0>(x, y) + in_blocks<T, L, 1>(x, y);
        else
            v[i] = of_blocks<T, L, 0>(x, y) + of_blocks<T, L, 1>(x, y);
    }
    if constexpr (S > 2)
        return sums<T, L, S / 2>(v);
    else
        return v[0];
}

// What a batch's blocks share, worked out once per batch.
template <int L, int N>
struct plan {
    std::ptrdiff_t chunks;  // of L elements of k
    mask last;              // the lanes of the last chunk that are elements of k
    mask b_low, b_high;     // those of B's rows in the last chunk's two vectors (N = 2)
    std::ptrdiff_t blocks;  // of L / N rows
    mask stored;            // the lanes of the last block that are elements of C
    // Row r of a block at its first row plus rows[r], last_rows[r] in the last block (where the
    // rows past m are the last row again).
    std::ptrdiff_t rows[L / N], last_rows[L / N];
};

template <int L, int N>
[[gnu::always_inline]] inline plan<L, N> plan_for(std::ptrdiff_t m, std::ptrdiff_t k,
                                                  std::ptrdiff_t a_rs) noexcept {
    constexpr int R = L / N;
    plan<L, N> p;
    p.chunks = (k + L - 1) / L;
    const auto left = static_cast<int>(k - (p.chunks - 1) * L);  // 1 .. L
    p.last = (1u << left) - 1;
    p.b_low = (1u << std::min(N * left, L)) - 1;
    p.b_high = (1u << std::max(N * left - L, 0)) - 1;
    p.blocks = (m + R - 1) / R;
    p.stored = (1u << ((m - (p.blocks - 1) * R) * N)) - 1;
    const std::ptrdiff_t last_first = (p.blocks - 1) * R;
    for (int r = 0; r < R; ++r) {
        p.rows[r] = r * a_rs;
        p.last_rows[r] = (std::min(last_first + r, m - 1) - last_first) * a_rs;
    }
    return p;
}

// The lanes `stored` of `out`, elements of C in row-major order from `to` (N columns), written as
// they are or as alpha out + beta C. C's rows dense: one masked access each way; else element by
// element through a local array, the arithmetic the same vector code either way (two scalar
// versions of alpha s + beta c could fuse different products).
template <class T, int L, int N>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void write(
    const small_gemm_args<T>& x, T* to, mask stored, vec_t<T, L> out) noexcept {
    using V = vec_t<T, L>;
    const bool dense = x.c_rs == N;
    const int count = std::popcount(stored);
    const auto element = [&x, to](int e) -> T& { return to[e / N * x.c_rs + e % N]; };
    if (x.accumulate) {
        out = opaque_avx512(x.alpha * out);  // as in the blocks above
        if (x.beta != T{0}) {
            V old;
            if (dense) {
                old = load<T, L, true>(to, stored);
            } else {
                T from[L] = {};
                for (int e = 0; e < count; ++e) from[e] = element(e);
                std::memcpy(&old, from, sizeof(V));
            }
            out += x.beta * old;
        }
    }
    if (dense) {
        store<T, L>(to, stored, out);
        return;
    }
    T local[L];
    std::memcpy(local, &out, sizeof(V));
    for (int e = 0; e < count; ++e) element(e) = local[e];
}

// The L elements of C of the rows `first` .. first + L / N - 1 of one matrix (fewer in the last
// block, whose rows past the last are read as the last row again, their sums not stored). Plain:
// C's rows dense and only written (one masked store).
template <class T, int L, int N, bool One, bool Plain>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void block(
    const small_gemm_args<T>& x, const plan<L, N>& p, const T* __restrict a, const T* __restrict b,
    T* __restrict c, std::ptrdiff_t first, const std::ptrdiff_t (&rows)[L / N],
    mask stored) noexcept {
    using V = vec_t<T, L>;
    constexpr int R = L / N;
    constexpr auto all = static_cast<mask>((1u << L) - 1);
    V acc[L];
#pragma GCC unroll 16
    for (int i = 0; i < L; ++i) acc[i] = V{};
    for (std::ptrdiff_t q = 0; q < (One ? 1 : p.chunks); ++q) {
        // Lanes past k are zero in both operands, so they add zeros to the sums.
        const bool last = One || q + 1 == p.chunks;
        const mask lanes = last ? p.last : all;
        V column[N];
        if constexpr (N == 1) {
            column[0] = load<T, L, true>(b + q * L, lanes);
        } else {
            // Rows q L .. of B, its two columns interleaved, split into one vector each.
            const V lo = load<T, L, true>(b + 2 * q * L, last ? p.b_low : all);
            // (Not formed where the chunk has no element there: it may lie past B's end.)
            const mask high = last ? p.b_high : all;
            const V hi = high == 0 ? V{} : load<T, L, true>(b + 2 * q * L + L, high);
            column[0] = evens<T, L>(lo, hi);
            column[1] = odds<T, L>(lo, hi);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const V row = load<T, L, true>(a + first * x.a_rs + rows[r] + q * L, lanes);
#pragma GCC unroll 2
            for (int j = 0; j < N; ++j) acc[r * N + j] += row * column[j];
        }
    }
    if constexpr (Plain)
        store<T, L>(c + first * N, stored, sums<T, L>(acc));
    else
        write<T, L, N>(x, c + first * x.c_rs, stored, sums<T, L>(acc));
}

// One matrix, in blocks of L / N rows; B's rows dense. One: k is one chunk (k <= L), the block
// without its loop over chunks (measured on Zen 5, a batch: 6x6x1 float 1.21-1.25x, 4x5x1 float
// 1.35x, 8x8x2 float 1.13x, 6x6x1 double 1.10-1.14x faster); the same operations in the same
// order.
template <class T, int L, int N, bool One, bool Plain>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void matrix(
    const small_gemm_args<T>& x, const plan<L, N>& p, const T* a, const T* b, T* c) noexcept {
    constexpr int R = L / N;
    constexpr auto all = static_cast<mask>((1u << L) - 1);
    std::ptrdiff_t g = 0;
    for (; g + 1 < p.blocks; ++g) block<T, L, N, One, Plain>(x, p, a, b, c, g * R, p.rows, all);
    block<T, L, N, One, Plain>(x, p, a, b, c, g * R, p.last_rows, p.stored);
}

// one(a, b, c) for every matrix of the batch (Single: for the one matrix, without the batch loop),
// B's k rows of N columns as they are where dense, else copied into `dense` (once where the batch
// shares B). Plain: B's rows dense.
template <class T, int N, bool Single, bool Plain, class One>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void each_matrix(
    const small_gemm_args<T>& x, T* dense, One one) noexcept {
    const bool copy = !Plain && x.b_rs != N;
    if constexpr (Single) {
        if (copy) copy_b<T, N>(x, x.b, dense);
        one(x.a, copy ? dense : x.b, x.c);
    } else {
        const T* a = x.a;
        const T* b = x.b;
        T* c = x.c;
        for (std::size_t i = 0; i < x.count; ++i, a += x.sa, b += x.sb, c += x.sc) {
            if (copy && (i == 0 || x.sb != 0)) copy_b<T, N>(x, b, dense);
            one(a, copy ? dense : b, c);
            // As in small_kernels::batch_loop_one_by_one: no vectorising across matrices.
            asm("" : "+r"(a), "+r"(b), "+r"(c));
        }
    }
}

// each_matrix with one.template operator()<Plain>(a, b, c), where Plain is the plain product (B's
// and C's rows dense, C only written), which has a loop of its own without the tests of the other
// forms in each matrix; the same operations either way, so the same bits.
template <class T, int N, bool Single, class One>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void each_matrix_in_form(
    const small_gemm_args<T>& x, T* dense, One one) noexcept {
    const auto in_form = [&]<bool Plain>()
        __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
        each_matrix<T, N, Single, Plain>(
            x, dense,
            [&](const T* a, const T* b, T* c)
                __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
                    one.template operator()<Plain>(a, b, c);
                });
    };
    if (x.b_rs == N && !x.accumulate && x.c_rs == N)
        in_form.template operator()<true>();
    else
        in_form.template operator()<false>();
}

// Every matrix of the batch (Single: a batch of one, for a remembered product, without the batch
// loop; the same blocks, so the same bits).
template <class T, int L, int N, bool Single>
[[gnu::target(TESSERA_AVX512_TARGET)]] void run(const small_gemm_args<T>& args,
                                                const small_gemm_plan<T>&) noexcept {
    const small_gemm_args<T> x = args;  // as in rows_run
    const plan<L, N> p = plan_for<L, N>(x.m, x.k, x.a_rs);
    T dense[N * small_gemm_max];  // B's rows where they are not dense (each_matrix)
    // The plain product's loop of its own measured on Zen 5, a batch: 16x16x1 float 1.16x,
    // double 1.11x, 20x20x2 float 1.20x, 8x8x2 float 1.29x faster.
    const auto matrices = [&]<bool One>()
        __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
        each_matrix_in_form<T, N, Single>(
            x, dense,
            [&]<bool Plain>(const T* a, const T* b, T* c)
                __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
                    matrix<T, L, N, One, Plain>(x, p, a, b, c);
                });
    };
    if (p.chunks == 1)
        matrices.template operator()<true>();
    else
        matrices.template operator()<false>();
}

// Where the dot products beat the panels: A's rows contiguous, one or two columns and at least
// four rows (a block of fewer leaves most of its lanes unused; 3x5x2 float 0.85x, 2x8x1 0.88x
// the panels' speed), and enough of k for the tree's cost to pay: every k for float columns of
// six rows or more, 5 for four; 4 for two float columns; 8 for two double columns. Measured on
// the AVX-512 machine of docs/performance.md, where 16x16x1 float ran 4.6x and 8x8x2 1.9x faster.
template <class T>
constexpr bool pays(const small_gemm_args<T>& x) noexcept {
    if (x.a_cs != 1 || x.m < 4 || x.n > 2) return false;
    if constexpr (sizeof(T) == 4)
        return x.n == 1 ? (x.m >= 6 || x.k >= 5) : x.k >= 4;
    else
        return x.n == 1 || x.k >= 8;
}

// The run for the shape (Single: for a single product). L is the lanes of 256 bits, except for
// double columns of six rows or more and two double columns, where it is those of 512 bits so
// that a block holds four rows or more and leaves few unused (measured: one float column, 256
// bits 2.7-2.9x faster than 512 at 4 to 8 rows, as fast at 64; one double column, 1.6x faster
// at 4 rows, 0.85x at 6 and 8; two double columns, 4x8x2 0.7x).
template <class T, bool Single>
constexpr auto run_for(std::ptrdiff_t m, std::ptrdiff_t n) noexcept {
    constexpr int L = 32 / static_cast<int>(sizeof(T));
    if constexpr (sizeof(T) == 4)
        return n == 1 ? &run<T, L, 1, Single> : &run<T, L, 2, Single>;
    else
        return n == 2 ? &run<T, 2 * L, 2, Single>
                      : m >= 6 ? &run<T, 2 * L, 1, Single> : &run<T, L, 1, Single>;
}

}  // namespace dot

namespace slots {
// Where the slots below take a product of one column (they are asked first).
template <class T>
constexpr bool pays(int m, int k) noexcept;
}  // namespace slots

// Products of one column where A is dense (its rows end to end) and small: A read as the m k
// elements it is, in whole vectors (the last masked), multiplied lane by lane by B's column
// repeated once a row (one permute a vector), and the k products of each row summed by adding
// the products to themselves shifted along the vectors: sums of 2, 4, 8 neighbours, and of the
// binary digits of k, lowest first (k = 6: (p0 + p1) + ((p2 + p3) + (p4 + p5))); C's m sums, at
// lanes 0, k, 2k, ..., gathered by permutes into one vector (where k divides a vector and A
// fills several, a pairwise tree instead: tree_pays below). Where the dot products above load
// a row a vector and spend a tree on each block of rows (6x6x1 float: 9 masked loads, 14
// shuffles), this loads three vectors and shifts each three times. The slots below take most of
// its shapes of rows of 5-8 elements since (6x6x1 among them).
namespace flat {

template <class T, int NV>
using vectors = vec_t<T, width<T>>[NV];

// The permutes are written as the instructions they are (vpermps, vpermt2ps, valignd and their
// double forms), with their indices as constants: GCC 12 lowers some __builtin_shufflevector
// patterns of 512-bit doubles to an in-lane vpermilpd that takes the wrong element (lane 3 of
// (x, y) from x[5] came out as x[3]).

// The indices Src(0), Src(1), ... of a permute, made at compile time.
template <class T, class Src>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline __m512i index_vector() noexcept {
    using index = std::conditional_t<sizeof(T) == 4, int, long long>;
    static constexpr std::array<index, width<T>> from = [] {
        std::array<index, width<T>> i{};
        for (int l = 0; l < width<T>; ++l) i[static_cast<std::size_t>(l)] = Src{}(l);
        return i;
    }();
    __m512i v;
    std::memcpy(&v, from.data(), sizeof(v));
    return v;
}

// Lane l of the result: lane Src(l) of x, or of y (Src(l) - W) where Src(l) >= W.
template <class T, class Src>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> permute(
    vec_t<T, width<T>> x, vec_t<T, width<T>> y, Src) noexcept {
    if constexpr (sizeof(T) == 4)
        return _mm512_permutex2var_ps(x, index_vector<T, Src>(), y);
    else
        return _mm512_permutex2var_pd(x, index_vector<T, Src>(), y);
}
// Lane l of the result: lane Src(l) of x.
template <class T, class Src>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> permute(
    vec_t<T, width<T>> x, Src) noexcept {
    // The maskz forms: GCC 12's unmasked ones warn of an uninitialised operand.
    if constexpr (sizeof(T) == 4)
        return _mm512_maskz_permutexvar_ps(0xffff, index_vector<T, Src>(), x);
    else
        return _mm512_maskz_permutexvar_pd(0xff, index_vector<T, Src>(), x);
}

// Lanes S .. S + W - 1 of the concatenation (x, y).
template <class T, int S>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> shifted(
    vec_t<T, width<T>> x, vec_t<T, width<T>> y) noexcept {
    const __m512i low = reinterpret_cast<__m512i>(x), high = reinterpret_cast<__m512i>(y);
    using V = vec_t<T, width<T>>;
    if constexpr (sizeof(T) == 4)
        return reinterpret_cast<V>(_mm512_maskz_alignr_epi32(0xffff, high, low, S));  // as above
    else
        return reinterpret_cast<V>(_mm512_maskz_alignr_epi64(0xff, high, low, S));
}

// to[i] += lanes S .. of (from[i], from[i + 1]): position q of `to` gains position q + S of
// `from` (past the last vector, zeros).
template <class T, int NV, int S>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void add_shifted(
    vectors<T, NV>& to, const vectors<T, NV>& from) noexcept {
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i)
        to[i] += shifted<T, S>(from[i], i + 1 < NV ? from[i + 1] : vec_t<T, width<T>>{});
}

// Position q of `sums` becomes the sum of positions q .. q + K - 1 of the products, taking the
// binary digits of K from the lowest: `runs` holds the sums of Bit neighbours, `sums` those of
// the digits below Bit (Offset neighbours; none yet where Offset is 0).
template <class T, int NV, int K, int Bit = 1, int Offset = 0>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void sum_runs(
    vectors<T, NV>& sums, vectors<T, NV>& runs) noexcept {
    constexpr bool digit = (K & Bit) != 0;
    if constexpr (digit) {
        if constexpr (Offset == 0) {
#pragma GCC unroll 8
            for (int i = 0; i < NV; ++i) sums[i] = runs[i];
        } else {
            add_shifted<T, NV, Offset>(sums, runs);
        }
    }
    if constexpr (2 * Bit <= K) {
        vectors<T, NV> doubled;
#pragma GCC unroll 8
        for (int i = 0; i < NV; ++i) doubled[i] = runs[i];
        add_shifted<T, NV, Bit>(doubled, runs);
        sum_runs<T, NV, K, 2 * Bit, digit ? Offset + Bit : Offset>(sums, doubled);
    }
}

// Vector I of v, zeros past the last.
template <int I, class V, int NV>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline V vector_at(
    const V (&v)[NV]) noexcept {
    if constexpr (I < NV)
        return v[I];
    else
        return V{};
}

// Lane r of the result: position r K of the vectors, for r < M.
template <class T, int NV, int M, int K>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> gather(
    const vectors<T, NV>& v) noexcept {
    constexpr int W = width<T>;
    using V = vec_t<T, W>;
    // Positions in vectors 0 and 1, then those in vectors 2 and 3 over them.
    const V low =
        permute<T>(v[0], vector_at<1>(v), [](int r) { return r < M && r * K < 2 * W ? r * K : r; });
    if constexpr (NV <= 2) {
        return low;
    } else {
        const V high = permute<T>(v[2], vector_at<3>(v), [](int r) {
            return r < M && r * K >= 2 * W ? r * K - 2 * W : r;
        });
        return permute<T>(low, high, [](int r) { return r < M && r * K >= 2 * W ? W + r : r; });
    }
}

// Where k divides the vector's lanes and A fills more than one vector (rows of 2 or 4 elements:
// rows of 8 go to the slots or fill one vector), no row straddles two vectors, and the products
// are summed by the dot products' tree levels instead of the shifted sums: each level adds
// neighbouring lanes of two vectors into one (in-lane shuffles, first, where there are the most
// vectors), then, where a row is longer than a 128-bit block, neighbouring blocks; a level left
// with one vector adds each lane's neighbour to it (one shuffle); one permute puts C's sums in
// row order. Each row's products are added in the shifted sums' order ((p0 + p1) + (p2 + p3)),
// so the same bits (tree_lanes checks it). Measured on Zen 5 against the shifted sums (ns a
// matrix of a batch filling half of L2, the fastest of three runs of seven, alternated): double
// rows of 4, 3-8 rows, 2.62-5.44 -> 1.69-3.15 (1.54-1.87x); float rows of 4, 5-16 rows,
// 2.62-5.43 -> 1.60-3.00 (1.51-2.03x); rows of 2 from 5 double or 9 float rows, 1.00-1.29x.
// Where A fills one vector an earlier form of the tree measured 0.65-0.92x the shifted sums,
// so those shapes keep them.
template <class T, int M, int K>
inline constexpr bool tree_pays = K >= 2 && width<T> % K == 0 && M * K > width<T>;

// What one lane of the tree holds: the sum of `count` products of row `row` from its product
// `first` on (row -1: nothing; -2: a level added two sums that are not aligned neighbours of one
// row, as no correct tree in the shifted sums' order does).
struct lane_sum {
    int row = -1, first = 0, count = 0;
};
constexpr lane_sum plus(lane_sum x, lane_sum y) noexcept {
    if (x.row == -1 && y.row == -1) return x;
    const int first = std::min(x.first, y.first);
    const bool neighbours = x.row >= 0 && x.row == y.row && x.count == y.count &&
                            std::max(x.first, y.first) == first + x.count &&
                            first % (2 * x.count) == 0;
    return neighbours ? lane_sum{x.row, first, 2 * x.count} : lane_sum{-2, 0, 0};
}

// The tree's levels (below) on lanes: what each lane of its one vector holds at the end.
template <class T, int M, int K, int NV>
constexpr std::array<lane_sum, width<T>> tree_lanes() noexcept {
    constexpr int W = width<T>, G = dot::block_lanes<T>;
    std::array<std::array<lane_sum, W>, NV> lane{};
    for (int v = 0; v < NV; ++v)
        for (int l = 0; l < W; ++l)
            if (v * W + l < M * K) lane[v][l] = {(v * W + l) / K, (v * W + l) % K, 1};
    int count = NV;
    for (int size = 1; size < K; size *= 2) {
        const bool within = size < G;
        if (count == 1) {  // one vector: each lane gains its neighbour's
            std::array<lane_sum, W> sum{};
            for (int l = 0; l < W; ++l) sum[l] = plus(lane[0][l], lane[0][l ^ (within ? 1 : G)]);
            lane[0] = sum;
            continue;
        }
        for (int i = 0; i < (count + 1) / 2; ++i) {
            std::array<lane_sum, W> sum{};
            for (int l = 0; l < W; ++l) {
                lane_sum from[2];
                for (int odd = 0; odd < 2; ++odd) {
                    const int at = within ? dot::in_blocks_source<T, W>(l, odd)
                                          : dot::of_blocks_source<T, W>(l, odd);
                    const int v = 2 * i + at / W;
                    if (v < count) from[odd] = lane[v][at % W];
                }
                sum[l] = plus(from[0], from[1]);
            }
            lane[i] = sum;
        }
        count = (count + 1) / 2;
    }
    return count == 1 ? lane[0] : std::array<lane_sum, W>{lane_sum{-2, 0, 0}};
}

// Whether the tree ends with every row's whole sum in some lane and nothing else but empty lanes.
template <class T, int M, int K, int NV>
constexpr bool tree_sums_every_row() noexcept {
    const auto lanes = tree_lanes<T, M, K, NV>();
    for (const lane_sum& l : lanes)
        if (l.row != -1 && (l.row < 0 || l.count != K)) return false;
    for (int r = 0; r < M; ++r)
        if (std::none_of(lanes.begin(), lanes.end(), [r](const lane_sum& l) { return l.row == r; }))
            return false;
    return true;
}

// x with each lane's neighbour in its place: lanes 2p and 2p + 1 swapped (Within), else blocks
// 2j and 2j + 1.
template <class T, bool Within>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> neighbours(
    vec_t<T, width<T>> x) noexcept {
    // The maskz forms, as in permute above.
    if constexpr (sizeof(T) == 4 && Within)
        return _mm512_maskz_permute_ps(0xffff, x, 0xB1);
    else if constexpr (sizeof(T) == 4)
        return _mm512_maskz_shuffle_f32x4(0xffff, x, x, 0xB1);
    else if constexpr (Within)
        return _mm512_maskz_permute_pd(0xff, x, 0x55);
    else
        return _mm512_maskz_shuffle_f64x2(0xff, x, x, 0xB1);
}

// The tree's levels from `Size` products of each row summed: one vector. A level adds two
// vectors into one (two shuffles); on one vector, each lane's neighbour (one shuffle).
template <class T, int K, int Count, int Size = 1>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> tree(
    const vectors<T, Count>& v) noexcept {
    constexpr int W = width<T>, next = (Count + 1) / 2;
    constexpr bool within = Size < dot::block_lanes<T>;
    using V = vec_t<T, W>;
    vectors<T, next> sum;
    if constexpr (Count == 1) {
        sum[0] = v[0] + neighbours<T, within>(v[0]);
    } else {
#pragma GCC unroll 8
        for (int i = 0; i < next; ++i) {
            const V x = v[2 * i], y = 2 * i + 1 < Count ? v[2 * i + 1] : V{};
            if constexpr (within)
                sum[i] = dot::in_blocks<T, W, 0>(x, y) + dot::in_blocks<T, W, 1>(x, y);
            else
                sum[i] = dot::of_blocks<T, W, 0>(x, y) + dot::of_blocks<T, W, 1>(x, y);
        }
    }
    if constexpr (2 * Size < K)
        return tree<T, K, next, 2 * Size>(sum);
    else
        return sum[0];
}

// Lane r of the result: the sum of row r, for r < M.
template <class T, int NV, int M, int K>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> row_sums(
    vectors<T, NV>& runs) noexcept {
    if constexpr (tree_pays<T, M, K>) {
        static_assert(tree_sums_every_row<T, M, K, NV>());
        return permute<T>(tree<T, K, NV>(runs), [](int r) {
            constexpr auto lanes = tree_lanes<T, M, K, NV>();
            for (int l = 0; l < width<T>; ++l)
                if (lanes[static_cast<std::size_t>(l)].row == r) return l;
            return 0;  // past C's rows: not stored
        });
    } else {
        vectors<T, NV> sums;
        sum_runs<T, NV, K>(sums, runs);
        return gather<T, NV, M, K>(sums);
    }
}

// Vector I of B's column repeated once a row: lane l holds element (I W + l) mod K.
template <class T, int K, int I>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> repeated(
    vec_t<T, width<T>> column) noexcept {
    return permute<T>(column, [](int l) { return (I * width<T> + l) % K; });
}

// B's column as the products read it. Where k divides the vector, every vector repeats it alike,
// and one broadcast load does, where a load and a permute did (measured on Zen 5, a batch: k = 1
// and float k = 2 1.0-2x faster, k = 4 the same, 4x4x1 double's shuffle fewer included); else the
// column, which each vector permutes its own way.
template <class T, int K>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> column_of(
    const T* b) noexcept {
    if constexpr (width<T> % K != 0 || K == width<T>)
        return load_first<T, K>(b);
    else
        return broadcast_row<T, K>(b);
}

// The products of A's vector I and B's column (column_of); the last vector's lanes past A zero.
template <class T, int M, int K, int I>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vec_t<T, width<T>> products(
    const T* a, vec_t<T, width<T>> column) noexcept {
    constexpr int W = width<T>, left = M * K - I * W;
    const vec_t<T, W> a_part = load_first<T, std::min(left, W)>(a + I * W);
    if constexpr (W % K == 0)
        return a_part * column;
    else
        return a_part * repeated<T, K, I>(column);
}

// One matrix, B's column dense. Plain: C dense and only written (one store).
template <class T, int M, int K, bool Plain, std::size_t... I>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void matrix(
    const small_gemm_args<T>& x, const T* a, const T* b, T* c, std::index_sequence<I...>) noexcept {
    constexpr int W = width<T>, NV = sizeof...(I);
    const vec_t<T, W> column = column_of<T, K>(b);
    vectors<T, NV> runs = {products<T, M, K, static_cast<int>(I)>(a, column)...};
    if constexpr (Plain)
        store_first<T, M>(c, row_sums<T, NV, M, K>(runs));
    else
        dot::write<T, W, 1>(x, c, (1u << M) - 1, row_sums<T, NV, M, K>(runs));
}

// Every matrix of the batch (Single: one, for a remembered product), B's column copied to a
// dense local array where its elements are not adjacent (once where the batch shares it). The
// plain product (B's and C's columns dense, C only written) has a loop of its own, as the dot
// products' (measured: a batch, 6x6x1 float 1.19x, 4x4x1 float 1.45x, 16x4x1 float 1.4x, 6x6x1
// double 1.12x faster than one loop for all).
template <class T, int M, int K, bool Single>
[[gnu::target(TESSERA_AVX512_TARGET)]] void run(const small_gemm_args<T>& args,
                                                const small_gemm_plan<T>&) noexcept {
    const small_gemm_args<T> x = args;  // as in rows_run
    constexpr auto of_a = std::make_index_sequence<(M * K + width<T> - 1) / width<T>>{};
    T dense[K];
    dot::each_matrix_in_form<T, 1, Single>(
        x, dense,
        [&]<bool Plain>(const T* a, const T* b, T* c)
            __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
                matrix<T, M, K, Plain>(x, a, b, c, of_a);
            });
}

// The shapes it takes: rows of up to `most_k` elements, at most a vector of rows, C's sums in
// the first four vectors (at most five of A); and of those, where it beats the dot products and
// the panels. Measured on Zen 5, a batch of each shape (float m 2-16 by k 1-8 up to 64 elements,
// double m 2-8 up to 32, and 6x6, 5x7, 7x5): 1.1-5.4x faster than before (3x5x1 float and other
// shapes of fewer than four rows took the panels), but where the dot products fill their one
// block of rows and k is long: m 7 or 8 with k >= 5 (float 0.75-1.08x, double 7x5 0.93x), double
// m 4 with k >= 7 (0.89x). The slots, asked first, now take those shapes and every double one of
// k >= 5; of the float rows of 5, they take those this rule refuses.
inline constexpr int most_k = 8;
template <class T>
constexpr bool pays(int m, int k) noexcept {
    constexpr int W = width<T>;
    const bool fits = m <= W && k <= most_k && (m - 1) * k < 4 * W && m * k <= 5 * W;
    const bool dot_fills = ((m == 7 || m == 8) && k >= 5) || (sizeof(T) == 8 && m == 4 && k >= 7);
    return fits && !dot_fills;
}

template <class T>
using entry = void (*)(const small_gemm_args<T>&, const small_gemm_plan<T>&) noexcept;
// Runs by two of a shape's extents (m and k of one column; k and n of the outer products below),
// table[i][j] for i 1..R and j 1..Cols (none at 0), given Rows 0..R-1 (a make_integer_sequence):
// each the run `run_of.template operator()<i, j>()` gives, or none.
template <class T, int Cols, int M, class RunOf, int... K>
constexpr auto row_of_runs(RunOf run_of, std::integer_sequence<int, K...>) noexcept {
    return std::array<entry<T>, Cols + 1>{nullptr, run_of.template operator()<M, K + 1>()...};
}
template <class T, int Cols, class RunOf, int... Rows>
constexpr auto runs_by_shape(RunOf run_of, std::integer_sequence<int, Rows...>) noexcept {
    return std::array{
        std::array<entry<T>, Cols + 1>{},
        row_of_runs<T, Cols, Rows + 1>(run_of, std::make_integer_sequence<int, Cols>{})...};
}

// The run for a product of these shapes (Single: for a single product), or none. The slots are
// asked first, so the shapes they take are left out (their runs would never be called).
template <class T, bool Single>
entry<T> run_for(const small_gemm_args<T>& x) noexcept {
    static constexpr auto table = runs_by_shape<T, most_k>(
        []<int M, int K>() -> entry<T> {
            if constexpr (pays<T>(M, K) && !slots::pays<T>(M, K))
                return &run<T, M, K, Single>;
            else
                return nullptr;
        },
        std::make_integer_sequence<int, width<T>>{});
    // (One row of A is dense whatever its row stride.)
    if (x.n != 1 || x.a_cs != 1 || (x.a_rs != x.k && x.m != 1) || x.m > width<T> || x.k > most_k)
        return nullptr;
    return table[static_cast<std::size_t>(x.m)][static_cast<std::size_t>(x.k)];
}

}  // namespace flat

// Products of one column whose rows hold 5 to 16 elements, at most a vector of rows, A's rows
// contiguous: each row of A in a slot of 8 lanes or of a vector (a float vector holds two slots of
// 8, the second row inserted into its upper half; a double row of 9-16 elements is two vectors,
// their products added into one), multiplied by B's column repeated in every slot, and the slots
// summed by a tree: each level adds the lower halves of the slots of two vectors to their upper
// halves into one vector (two shuffles and an add), halving the slots' lanes and the vectors, so
// that C's m sums end in one vector, which one permute puts in row order. Where the shifted sums
// shift every vector of A once a binary digit of k and then gather (6x6x1 float: 15 shuffles),
// this spends 13 (6x6x1 float: B's column repeated, three inserts, eight in the tree, the
// permute); where the dot products cut k into chunks of 256 bits (512 for double products of six
// rows or more) and spend a tree on a block of eight rows (four for double products of fewer than
// six rows) whatever m, this reads a row in one or two vectors and sums only the rows there are.
// A row of 8-lane slots sums as ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)), the products
// past k zero; a float slot of 16 lanes adds p(i + 8) to p(i) first; a double row of two vectors
// first multiply-adds the second's products to the first's (one rounding: a fused multiply-add).
namespace slots {

template <class T>
using vector = vec_t<T, width<T>>;

// The lanes of a row's slot: 8 for rows of up to 8 elements, else a vector (16 floats, 8
// doubles: a double row of 9-16 elements is two vectors, their products added into one slot).
template <class T>
constexpr int slot_of(int k) noexcept {
    return k <= 8 ? 8 : width<T>;
}
inline constexpr int most_k = 16;

// Lane l of the lower halves' sum at a level of slots of G lanes, as a position in the
// concatenation (x, y) of the level's two vectors; the upper halves' lane is G / 2 further on.
// Slots wider than a 128-bit block move by whole blocks, x's to the result's lower half and y's
// to its upper half (shuff32x4, shuff64x2); the others within each block, x's lanes to the
// block's lower half and y's to its upper half (shufps, shufpd). The row whose sum a lane holds
// follows from it (rows_of_sums), and the shuffles of `halves` are these.
template <class T>
constexpr int lower_half(int l, int G) noexcept {
    constexpr int W = width<T>, B = dot::block_lanes<T>;
    const int H = G / 2, block = l / B, p = l % B;
    if (G > B) {
        const int half_blocks = H / B, j = block % 2;  // j: the source's j-th lower-half block
        return (block >= 2 ? W : 0) + (j / half_blocks * (G / B) + j % half_blocks) * B + p;
    }
    const int q = p % (B / 2);  // the source block's q-th lower-half lane
    return (p >= B / 2 ? W : 0) + block * B + q / H * G + q % H;
}

// The lower (Upper: upper) halves of the slots of G lanes of x and y, as lower_half places them.
template <class T, int G, bool Upper>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vector<T> halves(
    vector<T> x, vector<T> y) noexcept {
    // The maskz forms, as in flat::permute.
    if constexpr (sizeof(T) == 4 && G == 16)
        return _mm512_maskz_shuffle_f32x4(0xffff, x, y, Upper ? 0xEE : 0x44);
    else if constexpr (sizeof(T) == 4 && G == 8)
        return _mm512_maskz_shuffle_f32x4(0xffff, x, y, Upper ? 0xDD : 0x88);
    else if constexpr (sizeof(T) == 4 && G == 4)
        return _mm512_maskz_shuffle_ps(0xffff, x, y, Upper ? 0xEE : 0x44);
    else if constexpr (sizeof(T) == 4)
        return _mm512_maskz_shuffle_ps(0xffff, x, y, Upper ? 0xDD : 0x88);
    else if constexpr (G == 8)
        return _mm512_maskz_shuffle_f64x2(0xff, x, y, Upper ? 0xEE : 0x44);
    else if constexpr (G == 4)
        return _mm512_maskz_shuffle_f64x2(0xff, x, y, Upper ? 0xDD : 0x88);
    else
        return _mm512_maskz_shuffle_pd(0xff, x, y, Upper ? 0xFF : 0x00);
}

// The vectors holding M rows' slots of S lanes.
template <class T, int M, int S>
inline constexpr int vectors_of = (M * S + width<T> - 1) / width<T>;

// The tree's result: lane l holds the sum of row rows_of_sums<T, M, S>()[l] (-1: of none).
template <class T, int M, int S>
constexpr std::array<int, width<T>> rows_of_sums() noexcept {
    constexpr int W = width<T>, count = vectors_of<T, M, S>;
    using lanes = std::array<int, W>;
    std::array<lanes, count> row{};
    for (int v = 0; v < count; ++v)
        for (int l = 0; l < W; ++l) row[v][l] = (v * W + l) / S < M ? (v * W + l) / S : -1;
    int left = count;
    for (int G = S; G > 1; G /= 2) {
        for (int i = 0; i < (left + 1) / 2; ++i) {
            lanes sum{};
            for (int l = 0; l < W; ++l) {
                const int from = lower_half<T>(l, G), v = 2 * i + from / W;
                sum[l] = v < left ? row[v][from % W] : -1;
            }
            row[i] = sum;
        }
        left = (left + 1) / 2;
    }
    return row[0];
}

// The sums of the slots of the Count vectors v, G lanes a slot: one vector (rows_of_sums).
template <class T, int G, int Count>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline vector<T> sums(
    const vector<T> (&v)[Count]) noexcept {
    constexpr int next = (Count + 1) / 2;
    vector<T> sum[next];
#pragma GCC unroll 8
    for (int i = 0; i < next; ++i) {
        const vector<T> x = v[2 * i], y = 2 * i + 1 < Count ? v[2 * i + 1] : vector<T>{};
        sum[i] = halves<T, G, false>(x, y) + halves<T, G, true>(x, y);
    }
    if constexpr (G > 2)
        return sums<T, G / 2, next>(sum);
    else
        return sum[0];
}

// One matrix, B's column dense. Plain: C dense and only written (one store).
template <class T, int M, int K, bool Plain>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void matrix(
    const small_gemm_args<T>& x, const T* a, const T* b, T* c) noexcept {
    constexpr int W = width<T>, S = slot_of<T>(K), count = vectors_of<T, M, S>;
    constexpr bool two = K > W;  // a row of two vectors: W elements and the rest
    constexpr int first = two ? W : K;
    constexpr auto first_lanes = static_cast<mask>((1u << first) - 1);
    constexpr auto rest_lanes = static_cast<mask>((1u << (K - first)) - 1);
    using V = vector<T>;
    V column, rest;
    if constexpr (S < W)
        column = _mm512_maskz_broadcast_f32x8(0xffff, load<T, S, (K < S)>(b, first_lanes));
    else
        column = load<T, W, (first < W)>(b, first_lanes);
    if constexpr (two) rest = load<T, W, (K - first < W)>(b + W, rest_lanes);
    V products[count];
#pragma GCC unroll 16
    for (int v = 0; v < count; ++v) {
        const T* row = a + v * (W / S) * x.a_rs;
        V rows = load<T, W, (first < W)>(row, first_lanes);  // the first slot's; the rest zero
        if constexpr (S < W) {
            if (2 * v + 1 < M) {
                const vec_t<T, S> second = load<T, S, (K < S)>(row + x.a_rs, first_lanes);
                rows = _mm512_maskz_insertf32x8(0xffff, rows, second, 1);
            }
        }
        products[v] = rows * column;
        if constexpr (two) {  // double rows only (a float row of 16 is one vector)
            const V more = load<T, W, (K - first < W)>(row + W, rest_lanes);
            products[v] = _mm512_fmadd_pd(more, rest, products[v]);
        }
    }
    const V out = flat::permute<T>(sums<T, S, count>(products), [](int r) {
        constexpr auto rows = rows_of_sums<T, M, S>();
        for (int l = 0; l < W; ++l)
            if (rows[static_cast<std::size_t>(l)] == r) return l;
        return 0;  // past C's rows: not stored
    });
    if constexpr (Plain)
        store_first<T, M>(c, out);
    else
        dot::write<T, W, 1>(x, c, (1u << M) - 1, out);
}

// Every matrix of the batch (Single: one, for a remembered product), B's column copied to a
// dense local array where its elements are not adjacent, as flat::run.
template <class T, int M, int K, bool Single>
[[gnu::target(TESSERA_AVX512_TARGET)]] void run(const small_gemm_args<T>& args,
                                                const small_gemm_plan<T>&) noexcept {
    const small_gemm_args<T> x = args;  // as in rows_run
    T dense[K];
    dot::each_matrix_in_form<T, 1, Single>(
        x, dense,
        [&]<bool Plain>(const T* a, const T* b, T* c) __attribute__((
            always_inline, target(TESSERA_AVX512_TARGET))) { matrix<T, M, K, Plain>(x, a, b, c); });
}

// The shapes it takes, of those it fits, measured on Zen 5 against the path each took before (ns
// a matrix of a batch, two alternating runs, the fastest): every double shape (m 2-8, k 5-16),
// 1.1-3.9x faster (6x6x1 3.94 -> 2.89, 7x7x1 7.61 -> 3.35, 6x12x1 10.64 -> 3.65); float rows of
// 9-16 elements, 1.8-5.0x faster (16x16x1 13.58 -> 5.33, 3x16x1 9.00 -> 1.81, 2x12x1 5.20 ->
// 1.85); float rows of 6-8 from 3 rows, 1.0-2.6x faster (6x6x1 2.81 -> 2.42, 16x8x1 8.27 ->
// 3.97) but for 5x6x1 (0.85x: left to the shifted sums), and rows of 5 where the shifted sums do
// not take the shape (7, 8 and 14-16 rows: 1.3-1.7x). The shifted sums stay faster at two float
// rows of 5-8 (the slots 0.71-0.97x) and at most float rows of 5 (0.65-0.96x: three of a slot's
// eight lanes unused). A single product (one call a matrix) of the shifted sums' shapes is about
// 1.4 ns slower (6x6x1 float 4.71 -> 6.14); of the other shapes, faster (16x16x1 float 1.9x).
inline constexpr int least_k = 5;
template <class T>
constexpr bool pays(int m, int k) noexcept {
    const bool fits = m >= 2 && m <= width<T> && k >= least_k && k <= most_k;
    if constexpr (sizeof(T) == 8)
        return fits;
    else
        return fits && (m >= 3 || k > 8) && (k > least_k || !flat::pays<T>(m, k)) &&
               !(m == 5 && k == 6);
}

// The run for a product of these shapes (Single: for a single product), or none.
template <class T, bool Single>
flat::entry<T> run_for(const small_gemm_args<T>& x) noexcept {
    static constexpr auto table = flat::runs_by_shape<T, most_k>(
        []<int M, int K>() -> flat::entry<T> {
            if constexpr (pays<T>(M, K))
                return &run<T, M, K, Single>;
            else
                return nullptr;
        },
        std::make_integer_sequence<int, width<T>>{});
    if (x.n != 1 || x.a_cs != 1 || x.m > width<T> || x.k > most_k) return nullptr;
    return table[static_cast<std::size_t>(x.m)][static_cast<std::size_t>(x.k)];
}

}  // namespace slots

// Products whose C fits one vector (m n lanes, two columns or more) and whose A fits two, A
// dense: C as the sum of k outer products, column p of A by row p of B. Lane i n + j of the
// vector is C's element (i, j): each step spreads A's column p over C's rows (each element n
// times: one permute of A's two vectors) and repeats B's row p once a row (a broadcast load where
// n is 2, 4 or 8 elements, else a permute of B's vectors), and adds their product. Where a panel
// of m < 4 rows keeps too few accumulators to cover the multiply-add's latency and leaves most of
// each vector's lanes unused (3x5x2: three vectors of two lanes, 15 multiply-adds in chains of
// five), this spends one multiply-add a step on all of C.
namespace outer {

// Whether B's row repeats by a broadcast load: n elements of 8, 16 or 32 bytes.
template <class T>
constexpr bool broadcasts(int n) noexcept {
    const int bytes = n * static_cast<int>(sizeof(T));
    return bytes == 8 || bytes == 16 || bytes == 32;
}

// The first Count elements from `from` in two vectors, lanes past them zero (A's m k elements,
// or B's k n).
template <class T, int Count>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void load_two(
    const T* from, vec_t<T, width<T>> (&v)[2]) noexcept {
    constexpr int W = width<T>;
    v[0] = load_first<T, std::min(Count, W)>(from);
    if constexpr (Count > W)
        v[1] = load_first<T, std::min(Count - W, W)>(from + W);
    else
        v[1] = vec_t<T, W>{};
}

// One matrix, B's rows dense. Plain: C dense and only written (one store).
template <class T, int M, int K, int N, bool Plain, std::size_t... P>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void matrix(
    const small_gemm_args<T>& x, const T* a, const T* b, T* c, std::index_sequence<P...>) noexcept {
    constexpr int W = width<T>, L = M * N;
    using V = vec_t<T, W>;
    V of_a[2];
    load_two<T, M * K>(a, of_a);
    V of_b[2];
    if constexpr (!broadcasts<T>(N)) load_two<T, K * N>(b, of_b);
    V sum{};
    const auto step = [&]<int Q>() __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
        // Lanes past C's take A's element of row 0 and any element of B: their sums are not
        // stored.
        const V column =
            flat::permute<T>(of_a[0], of_a[1], [](int l) { return (l < L ? l / N : 0) * K + Q; });
        V row;
        if constexpr (broadcasts<T>(N))
            row = broadcast_row<T, N>(b + Q * N);
        else
            row = flat::permute<T>(of_b[0], of_b[1], [](int l) { return Q * N + l % N; });
        sum += column * row;
    };
    (step.template operator()<static_cast<int>(P)>(), ...);
    constexpr auto stored = static_cast<mask>((1u << L) - 1);
    if constexpr (Plain)
        store_first<T, L>(c, sum);
    else
        dot::write<T, W, N>(x, c, stored, sum);
}

// Every matrix of the batch (Single: one, for a remembered product), B copied to a dense local
// array where its rows are not dense (once where the batch shares it); the plain product has a
// loop of its own, as the shifted sums'.
template <class T, int M, int K, int N, bool Single>
[[gnu::target(TESSERA_AVX512_TARGET)]] void run(const small_gemm_args<T>& args,
                                                const small_gemm_plan<T>&) noexcept {
    const small_gemm_args<T> x = args;  // as in rows_run
    T dense[K * N];
    dot::each_matrix_in_form<T, N, Single>(
        x, dense,
        [&]<bool Plain>(const T* a, const T* b, T* c)
            __attribute__((always_inline, target(TESSERA_AVX512_TARGET))) {
                matrix<T, M, K, N, Plain>(x, a, b, c, std::make_index_sequence<K>{});
            });
}

// The shapes it takes: two columns or more, C in one vector, A in two, k up to `most_k`, and B in
// two vectors where its rows do not repeat by a broadcast; and of those, where it beats the
// panels and the dot products. Measured on Zen 5, a batch of every such shape (ns a matrix
// against the panels of 6e96751 and the dot products): 1.1-5.4x faster at two rows or more
// (3x5x2 double 3.00 -> 1.46, float 2.89 -> 1.35; 8x4x2 float 6.09 -> 1.33 against the dot
// products), but one row (0.54-1.4x: the panel's one vector is already C's row, and the permutes
// cost more than they save) and rows of 6 or 7 floats that fill more than a vector of B (2x3x6
// and 2x3x7 0.83-0.87x).
inline constexpr int most_k = 8;
template <class T>
constexpr bool pays(int m, int k, int n) noexcept {
    constexpr int W = width<T>;
    const bool fits = n >= 2 && m * n <= W && m * k <= 2 * W && k <= most_k &&
                      (broadcasts<T>(n) || k * n <= 2 * W);
    return fits && m >= 2 && (broadcasts<T>(n) || n < 6 || k * n <= W);
}

// The runs of the products of M rows by k and n (table[k][n], none at 0).
template <class T, bool Single, int M>
constexpr auto plane_of_runs() noexcept {
    return flat::runs_by_shape<T, width<T>>(
        []<int K, int N>() -> flat::entry<T> {
            if constexpr (pays<T>(M, K, N))
                return &run<T, M, K, N, Single>;
            else
                return nullptr;
        },
        std::make_integer_sequence<int, most_k>{});
}
template <class T, bool Single, int... M>
constexpr auto runs_by_rows(std::integer_sequence<int, M...>) noexcept {
    using plane = decltype(plane_of_runs<T, Single, 1>());
    return std::array{plane{}, plane_of_runs<T, Single, M + 1>()...};
}

// The run for a product of these shapes (Single: for a single product), or none.
template <class T, bool Single>
flat::entry<T> run_for(const small_gemm_args<T>& x) noexcept {
    constexpr int most_m = width<T> / 2;
    static constexpr auto table =
        runs_by_rows<T, Single>(std::make_integer_sequence<int, most_m>{});
    if (x.n < 2 || x.n > width<T> || x.a_cs != 1 || x.a_rs != x.k || x.m > most_m || x.k > most_k)
        return nullptr;
    return table[static_cast<std::size_t>(x.m)][static_cast<std::size_t>(x.k)]
                [static_cast<std::size_t>(x.n)];
}

}  // namespace outer

// The run of the slots, the shifted sums, the outer products or the dot products where one of them
// takes the shape (Single: for a single product), else none: the one decision of a batch and a
// single product.
template <class T, bool Single>
[[gnu::always_inline]] inline flat::entry<T> sums_run(const small_gemm_args<T>& x) noexcept {
    if (const auto run = slots::run_for<T, Single>(x)) return run;
    if (const auto run = flat::run_for<T, Single>(x)) return run;
    if (const auto run = outer::run_for<T, Single>(x)) return run;
    if (dot::pays(x)) return dot::run_for<T, Single>(x.m, x.n);
    return nullptr;
}

// How one matrix's row of C is covered: `vectors` vectors, the last a tail of a quarter, half or
// all of the width (`tail` 0, 1, 2) whose columns of C are `tail_lanes`, and the rows of B whose
// tail may be read without a mask.
struct columns_plan {
    int vectors, tail;
    mask tail_lanes;
    std::ptrdiff_t whole_rows;
};
template <class T>
[[gnu::always_inline]] inline columns_plan plan_columns(const small_gemm_args<T>& x) noexcept {
    constexpr int W = width<T>;
    const auto vectors = static_cast<int>((x.n + W - 1) / W);
    const auto left = static_cast<int>(x.n) - (vectors - 1) * W;  // 1 .. W
    const int tail = left <= W / 4 ? 0 : left <= W / 2 ? 1 : 2;
    // The tail reads `past` elements after its row; they are B's own while rows follow to hold
    // them and no gap lies between the rows.
    const std::ptrdiff_t past = (W >> (2 - tail)) - left;
    std::ptrdiff_t whole_rows = 0;
    if (past == 0)
        whole_rows = x.k;
    else if (x.b_rs == x.n)  // all but the last ceil(past / n) rows; one unless n < past
        whole_rows = std::max<std::ptrdiff_t>(0, x.k - (past <= x.n ? 1 : (past + x.n - 1) / x.n));
    return {vectors, tail, (1u << left) - 1, whole_rows};
}

// Every matrix of the batch, cut once for the whole batch: the row's vectors in panels of as
// near equal width as the widest panel allows, and each panel's rows in blocks of as near equal
// height as its largest block allows (20 rows of one vector: two of 10, never 16 + 4), so that
// no block is left with too few accumulators to cover the latency. Each panel runs as one group
// of blocks, or two where the heights differ by one.
template <class T>
[[gnu::target(TESSERA_AVX512_TARGET)]] void batch_planned(const small_gemm_args<T>& x) noexcept {
    constexpr int W = width<T>;
    if (x.m == 0 || x.n == 0) return;  // nothing to write (and no block height to divide by)
    if (const auto run = sums_run<T, false>(x)) return run(x, {});
    const auto m = static_cast<std::size_t>(x.m);
    const columns_plan p = plan_columns(x);
    if (p.vectors <= max_panel_vectors) {
        // One panel of equal blocks (most shapes up to the block heights): the one call the loop
        // below would make, without the loop (a single product of these shapes takes plan_single
        // instead).
        const row_cut cut = row_cuts[static_cast<std::size_t>(p.vectors)][m];
        if (cut.taller == 0)
            return rows_run_for<T>(p.vectors, p.tail, cut.rows)(
                x, {0, 0, cut.blocks, p.tail_lanes, p.whole_rows});
    }
    std::ptrdiff_t column = 0;
    for (const int nv : panel_widths[static_cast<std::size_t>(p.vectors)]) {
        if (nv == 0) break;
        const row_cut cut = row_cuts[static_cast<std::size_t>(nv)][m];
        const bool last = column + nv * W >= x.n;
        const int t = last ? p.tail : 2;
        const mask lanes = last ? p.tail_lanes : (1u << W) - 1;
        const std::ptrdiff_t whole = last ? p.whole_rows : x.k;
        if (cut.taller > 0)
            rows_run_for<T>(nv, t, cut.rows + 1)(x, {column, 0, cut.taller, lanes, whole});
        rows_run_for<T>(nv, t, cut.rows)(
            x, {column, static_cast<std::ptrdiff_t>(cut.taller) * (cut.rows + 1),
                cut.blocks - cut.taller, lanes, whole});
        column += nv * W;
    }
}

template <class T>
[[gnu::target(TESSERA_AVX512_TARGET)]] void run_planned(const small_gemm_args<T>& x,
                                                        const small_gemm_plan<T>&) noexcept {
    batch_planned<T>(x);
}

// A single product's plan: the run for one matrix of the slots, the shifted sums, the outer
// products or the dot products where one of them takes the shape (sums_run); where one panel of
// equal blocks covers the matrix, its product_run with the planning's block count, tail lanes and
// whole rows; else batch_planned (several panels, unequal blocks), which plans on every call. The
// same blocks as a batch, so the same bits.
template <class T>
[[gnu::target(TESSERA_AVX512_TARGET)]] small_gemm_plan<T> plan_single(
    const small_gemm_args<T>& x) noexcept {
    if (x.m == 0 || x.n == 0) return {&run_planned<T>};  // which writes nothing
    if (const auto run = sums_run<T, true>(x)) return {run};
    const columns_plan p = plan_columns(x);
    if (p.vectors <= max_panel_vectors) {
        const auto m = static_cast<std::size_t>(x.m);
        const row_cut cut = row_cuts[static_cast<std::size_t>(p.vectors)][m];
        if (cut.taller == 0)
            return {rows_run_for<T, true>(p.vectors, p.tail, cut.rows), cut.blocks, p.tail_lanes,
                    p.whole_rows};
    }
    return {&run_planned<T>};
}

template <class T>
[[gnu::target(TESSERA_AVX512_TARGET)]] void batch(const small_gemm_args<T>& x) noexcept {
    if (x.count == 1) {
        const small_gemm_plan<T> plan = plan_single<T>(x);
        return plan.run(x, plan);
    }
    batch_planned<T>(x);
}

}  // namespace masked

// Whether a level has fused multiply-adds (block's Fma): AVX2, and the baseline where the build's
// own target has them (TESSERA_ARCH=native, or a -march with FMA).
#if defined(__FMA__)
inline constexpr bool baseline_has_fma = true;
#else
inline constexpr bool baseline_has_fma = false;
#endif
template <kernel_isa I>
inline constexpr bool has_fma = I == kernel_isa::avx2 ||
                                (I == kernel_isa::baseline && baseline_has_fma);

template <kernel_isa I, class T>
[[gnu::always_inline]] inline void batch(const small_gemm_args<T>& x) noexcept {
    if (dots_pay<T, lanes<I, T>>(x)) return dot_batch<has_fma<I>, T, lanes<I, T>>(x);
    const T* a = x.a;
    const T* b = x.b;
    T* c = x.c;
    for (std::size_t i = 0; i < x.count; ++i, a += x.sa, b += x.sb, c += x.sc) {
        one<has_fma<I>, T, lanes<I, T>, block_rows<I>>(x, a, b, c);
        // As in small_kernels::batch_loop_one_by_one: no vectorising across matrices.
        asm("" : "+r"(a), "+r"(b), "+r"(c));
    }
}

// The three compilations, with the target strings of the fixed-size kernels.
template <class T>
[[gnu::target(TESSERA_AVX512_TARGET)]] void batch_avx512(const small_gemm_args<T>& x) noexcept {
    masked::batch<T>(x);
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

namespace small_gemm {
// The plans of the levels without a single-product path: their batch, planned on every call.
template <class T>
void run_avx2(const small_gemm_args<T>& x, const small_gemm_plan<T>&) noexcept {
    batch_avx2<T>(x);
}
template <class T>
void run_baseline(const small_gemm_args<T>& x, const small_gemm_plan<T>&) noexcept {
    batch_baseline<T>(x);
}
}  // namespace small_gemm

template <class T>
small_gemm_plan<T> plan_small_gemm(kernel_isa isa, const small_gemm_args<T>& args) noexcept {
    switch (isa) {
        case kernel_isa::avx512: return small_gemm::masked::plan_single<T>(args);
        case kernel_isa::avx2: return {&small_gemm::run_avx2<T>};
        case kernel_isa::baseline: break;
    }
    return {&small_gemm::run_baseline<T>};
}

}  // namespace tessera::detail
