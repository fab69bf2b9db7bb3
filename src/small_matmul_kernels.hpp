// src/small_matmul_kernels.hpp - the kernels behind run_small_batch (tessera/detail/small_matmul.hpp):
// batched products of tiny matrices with sizes fixed at compile time, compiled three times
// (AVX-512, AVX2+FMA, the build's baseline) and picked from a table by the level
// host_kernel_isa() detected. Private to the library: src/small_matmul.cpp instantiates them for
// the four element types. Includes Eigen (its fixed-size product is one of the kernel families).
#pragma once

// eigen.hpp configures Eigen, so it comes before anything that may include Eigen.
#include <tessera/eigen.hpp>
#include <tessera/detail/small_matmul.hpp>
#include <tessera/dtype.hpp>

#include "simd_vector.hpp"

#include <immintrin.h>

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tessera::detail {

namespace small_kernels {

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// The generic vectors below never cross a non-inlined call, so the ABI note is noise.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

constexpr int pow2_at_least(int n) noexcept {
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

using detail::vec_t;

// Lane l of the result is lane src(l) of the concatenation (lo, hi): a compile-time shuffle.
// `Src` is a captureless lambda, called on a default-constructed object so that its results are
// constant expressions (__builtin_shufflevector, in GCC 12 and clang, takes constant indices).
template <class T, int Lanes, class Src, std::size_t... L>
[[gnu::always_inline]] inline vec_t<T, Lanes> permute2(vec_t<T, Lanes> lo, vec_t<T, Lanes> hi, Src,
                                                       std::index_sequence<L...>) noexcept {
    return __builtin_shufflevector(lo, hi, Src{}(static_cast<int>(L))...);
}

// "rows": each row of C is a vector of NP lanes (N rounded up to a power of two) accumulated as
// C[i,:] += A[i,p] * B[p,:], R rows at a time so that the accumulators stay in registers
// (Budget bytes of them). Fixed trip counts everywhere, so GCC emits straight-line vector code
// at the clone's width. Padded rows (N = 3, 5, 6) never touch memory outside the matrices:
// rows of B that would run past its end are read as B's last NP elements and shifted, and the
// last row of C is written as C's last NP elements assembled from the last two rows.
template <class T, int M, int K, int N, int Budget>
struct rows_kernel {
    static constexpr int NP = pow2_at_least(N);
    using V = vec_t<T, NP>;
    static constexpr int row_bytes = NP * static_cast<int>(sizeof(T));
    static constexpr int R0 = Budget / row_bytes < 1 ? 1 : Budget / row_bytes;
    static constexpr int R = (R0 >= M || NP != N) ? M : (M % R0 == 0 ? R0 : 1);
    static_assert(NP <= K * N && (NP == N || (M >= 2 && NP < 2 * N)));

    template <int P>
    [[gnu::always_inline]] static V b_row(const T* __restrict b) noexcept {
        V v;
        if constexpr (P * N + NP <= K * N) {
            std::memcpy(&v, b + P * N, sizeof(V));
            return v;
        } else {
            constexpr int shift = P * N + NP - K * N;
            std::memcpy(&v, b + K * N - NP, sizeof(V));
            return permute2<T, NP>(
                v, v, [](int l) { return l + shift < NP ? l + shift : l; },
                std::make_index_sequence<NP>{});
        }
    }

    template <int... P>
    [[gnu::always_inline]] static void block(const T* __restrict a, const T* __restrict b,
                                             T* __restrict c, int i0,
                                             std::integer_sequence<int, P...>) noexcept {
        V acc[R];
        const auto step = [&]<int Q>(std::integral_constant<int, Q>) __attribute__((always_inline)) {
            const V bq = b_row<Q>(b);
#pragma GCC unroll 64
            for (int r = 0; r < R; ++r) {
                if constexpr (Q == 0)
                    acc[r] = a[(i0 + r) * K] * bq;
                else
                    acc[r] += a[(i0 + r) * K + Q] * bq;
            }
        };
        (step(std::integral_constant<int, P>{}), ...);
#pragma GCC unroll 64
        for (int r = 0; r < R; ++r) {
            const int i = i0 + r;
            if (NP == N || i < M - 1) {
                // A padded row spills into row i + 1, which is written after it.
                std::memcpy(c + i * N, &acc[r], sizeof(V));
            } else {
                constexpr int first = M * N - NP;
                const V tail = permute2<T, NP>(
                    acc[r - 1], acc[r],
                    [](int l) {
                        const int e = first + l;
                        return e < (M - 1) * N ? e - (M - 2) * N : NP + e - (M - 1) * N;
                    },
                    std::make_index_sequence<NP>{});
                std::memcpy(c + first, &tail, sizeof(V));
            }
        }
    }

    [[gnu::always_inline]] static void one(const T* __restrict a, const T* __restrict b,
                                           T* __restrict c) noexcept {
        for (int i0 = 0; i0 < M; i0 += R) block(a, b, c, i0, std::make_integer_sequence<int, K>{});
    }
};

// "slp": the whole product as scalar statements with fixed trip counts, fully unrolled, which
// GCC's straight-line vectoriser packs into vectors; best where a whole matrix is a few vectors
// (4x4, 8x8 floats) or for matrix-vector products, and packed2's one-at-a-time fallback.
template <class T, int M, int K, int N>
struct slp_kernel {
    [[gnu::always_inline]] static void one(const T* __restrict a, const T* __restrict b,
                                           T* __restrict c) noexcept {
        T acc[M][N];
#pragma GCC unroll 64
        for (int r = 0; r < M; ++r)
#pragma GCC unroll 64
            for (int j = 0; j < N; ++j) acc[r][j] = a[r * K] * b[j];
#pragma GCC unroll 64
        for (int p = 1; p < K; ++p) {
#pragma GCC unroll 64
            for (int r = 0; r < M; ++r) {
                const T x = a[r * K + p];
#pragma GCC unroll 64
                for (int j = 0; j < N; ++j) acc[r][j] += x * b[p * N + j];
            }
        }
#pragma GCC unroll 64
        for (int r = 0; r < M; ++r)
#pragma GCC unroll 64
            for (int j = 0; j < N; ++j) c[r * N + j] = acc[r][j];
    }
};

// "packed2": 2x2 products, G at a time in one vector of 4G lanes: with A = [a00 a01 a10 a11] and
// B alike, C = [a00 a00 a10 a10] * [b00 b01 b00 b01] + [a01 a01 a11 a11] * [b10 b11 b10 b11],
// four shuffles that stay within each matrix's 4 lanes (in-lane permutes) and two multiplies per
// G matrices. Needs dense batches (or a shared B); batch_loop runs the rest one at a time.
template <class T, int G>
struct packed2_kernel {
    static constexpr int L = 4 * G;
    using V = vec_t<T, L>;

    // Each group of 4 lanes (one 2x2 matrix) of the result takes lanes P0..P3 of the same group
    // of x. Always inline: a vector returned by a function compiled for the baseline target into
    // an AVX-512 caller would cross an ABI boundary (unoptimised builds do call).
    template <int P0, int P1, int P2, int P3, std::size_t... Lane>
    [[gnu::always_inline]] static V spread(const V& x, std::index_sequence<Lane...>) noexcept {
        return __builtin_shufflevector(x, x, static_cast<int>(Lane) / 4 * 4 +
                                                 (Lane % 4 == 0   ? P0
                                                  : Lane % 4 == 1 ? P1
                                                  : Lane % 4 == 2 ? P2
                                                                  : P3)...);
    }

    [[gnu::always_inline]] static V product(const V& a, const V& b) noexcept {
        constexpr auto lanes = std::make_index_sequence<L>{};
        return spread<0, 0, 2, 2>(a, lanes) * spread<0, 1, 0, 1>(b, lanes) +
               spread<1, 1, 3, 3>(a, lanes) * spread<2, 3, 2, 3>(b, lanes);
    }
    /// G products of dense matrices (or one shared B, already replicated into `b`).
    [[gnu::always_inline]] static void group(const T* __restrict a, const V& b, T* __restrict c) noexcept {
        V va;
        std::memcpy(&va, a, sizeof(V));
        const V vc = product(va, b);
        std::memcpy(c, &vc, sizeof(V));
    }
};

// "eigen": Eigen's fixed-size product on maps, for the few shapes and levels where it measured
// faster than the two above, and for complex types.
// "row_sums": 4x4 by 4x1 float products at the AVX-512 level, where A fills one vector: A times
// b repeated once a row, each row's four products summed by two swaps within the row and two
// additions, C[i] = (p[i,0] + p[i,2]) + (p[i,1] + p[i,3]) (lane 0 of each row, which is stored;
// the others hold the same sum but for a NaN's payload), and the four sums gathered by one
// permute. Measured on Zen 5, batched: 4.4x faster than the slp kernel, which assembled each
// column of A from scattered elements, and 1.5x faster than a transpose of A followed by a
// multiply-add a column.
// It carries the AVX-512 target (one intrinsic), so batch_avx512 calls it directly: clang
// rejects it inlined through the levels' shared loops, which have no target.
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void row_sums_batch(
    const small_batch_args<float>& x) noexcept {
    using V = vec_t<float, 16>;
    const float* a = x.a;
    const float* b = x.b;
    float* c = x.c;
    // Local copies: the stores into C could otherwise alias them.
    const std::ptrdiff_t sa = x.sa, sb = x.sb, sc = x.sc;
    const std::size_t count = x.count;
    // Two matrices an iteration: with one a loop, a build that changed only code elsewhere placed
    // the loop where it ran 1.7x slower on Zen 5 (5.9-6.0 against 3.3-3.4 us a batch); unrolled,
    // 3.3-3.4 in that build.
#pragma GCC unroll 2
    for (std::size_t i = 0; i < count; ++i, a += sa, b += sb, c += sc) {
        V p;
        std::memcpy(&p, a, sizeof(V));
        // The maskz form: GCC 12's unmasked one warns of an uninitialised operand.
        p *= reinterpret_cast<V>(_mm512_maskz_broadcast_f32x4(0xffff, _mm_loadu_ps(b)));
        p += __builtin_shufflevector(p, p, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
        p += __builtin_shufflevector(p, p, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
        const vec_t<float, 4> sums = __builtin_shufflevector(p, p, 0, 4, 8, 12);
        std::memcpy(c, &sums, sizeof(sums));
        asm("" : "+r"(a), "+r"(b), "+r"(c));  // as in batch_loop_one_by_one
    }
}

template <class T, int M, int K, int N>
struct eigen_kernel {
    // A row-major matrix with one column is not a valid Eigen type; the layouts coincide.
    template <int Rows, int Cols>
    using matrix = Eigen::Matrix<T, Rows, Cols, (Cols == 1 ? Eigen::ColMajor : Eigen::RowMajor)>;
    // Computed into a local and copied out: Eigen chooses how to vectorise the assignment from
    // the destination's address at run time, and with it the order of the sums, so writing
    // through a map into C would give bits that depend on where C lies. (Copying A and B into
    // locals as well cost 4x4 by 4x1 2.6x its time, and no test has shown their addresses to
    // matter.)
    [[gnu::always_inline]] static void one(const T* a, const T* b, T* c) noexcept {
        const matrix<M, N> r = Eigen::Map<const matrix<M, K>>(a) * Eigen::Map<const matrix<K, N>>(b);
        std::memcpy(c, r.data(), sizeof(T) * M * N);
    }
};

enum class family { rows, slp, eigen, packed2, row_sums };

// Which kernel each level runs for each shape: measured on an AMD Zen 5 (AVX-512) with GCC 12,
// each level against the other two families and Eigen's fixed-size product compiled for the
// same level, batches that fit in L2. Where two families were within noise, the simpler wins.
template <kernel_isa I, class T, int M, int K, int N>
constexpr family family_for() noexcept {
    if constexpr (is_complex_v<T>) {
        return family::eigen;
    } else {
        constexpr bool dbl = sizeof(T) == 8;
        constexpr bool base = I == kernel_isa::baseline;
        if constexpr (N == 1) {
            if constexpr (I == kernel_isa::avx512 && !dbl && M == 4 && K == 4)
                return family::row_sums;
            return (M == 3 || (I == kernel_isa::avx512 && !dbl)) ? family::slp : family::eigen;
        } else if constexpr (M == 2) {
            return dbl && base ? family::rows : family::packed2;
        } else if constexpr (M == 3) {
            return dbl && base ? family::slp : family::rows;
        } else if constexpr (M == 4) {
            return family::slp;
        } else if constexpr (M == 5) {
            return I == kernel_isa::avx512 || (I == kernel_isa::avx2 && !dbl) ? family::rows
                                                                               : family::eigen;
        } else if constexpr (M == 6) {
            return base || (dbl && I == kernel_isa::avx2) ? family::slp : family::rows;
        } else if constexpr (M == 8) {
            return base || (!dbl && I == kernel_isa::avx512) ? family::slp : family::rows;
        } else if constexpr (M == 32) {
            return dbl && base ? family::eigen : family::rows;
        } else {
            return family::rows;
        }
    }
}

// Accumulator bytes a level keeps in registers: half of 32 zmm, 8 of 16 ymm, 8 of 16 xmm.
template <kernel_isa I>
inline constexpr int register_budget = I == kernel_isa::avx512 ? 1024 : I == kernel_isa::avx2 ? 256 : 128;

// The kernel for one matrix at a time (packed2 runs its leftovers as slp).
template <kernel_isa I, class T, int M, int K, int N>
using kernel_for = std::conditional_t<
    family_for<I, T, M, K, N>() == family::rows, rows_kernel<T, M, K, N, register_budget<I>>,
    std::conditional_t<family_for<I, T, M, K, N>() == family::eigen, eigen_kernel<T, M, K, N>,
                       slp_kernel<T, M, K, N>>>;

// 2x2 matrices per vector for packed2: a zmm, a ymm or an xmm of them.
template <kernel_isa I, class T>
inline constexpr int packed_group =
    std::max<int>(1, (I == kernel_isa::avx512 ? 64 : I == kernel_isa::avx2 ? 32 : 16) /
                         (4 * static_cast<int>(sizeof(T))));

// One matrix at a time. A shared B (sb == 0) gets its own loop so that its rows are loaded once.
template <kernel_isa I, class T, int M, int K, int N>
[[gnu::always_inline]] inline void batch_loop_one_by_one(const small_batch_args<T>& x) noexcept {
    static_assert(family_for<I, T, M, K, N>() != family::row_sums, "batch_avx512 runs row_sums");
    using kernel = kernel_for<I, T, M, K, N>;
    const T* a = x.a;
    T* c = x.c;
    // The empty asm hides the pointers' progression from GCC's loop vectoriser: vectorising across
    // matrices with run-time strides, it gathers and scatters element by element (measured 2-10x
    // slower with -march=native). The kernels vectorise within each matrix instead.
    if (x.sb == 0) {
        const T* const b = x.b;
        for (std::size_t i = 0; i < x.count; ++i, a += x.sa, c += x.sc) {
            kernel::one(a, b, c);
            asm("" : "+r"(a), "+r"(c));
        }
    } else {
        const T* b = x.b;
        for (std::size_t i = 0; i < x.count; ++i, a += x.sa, b += x.sb, c += x.sc) {
            kernel::one(a, b, c);
            asm("" : "+r"(a), "+r"(b), "+r"(c));
        }
    }
}

// The per-call loop over the matrices of one run.
template <kernel_isa I, class T, int M, int K, int N>
[[gnu::always_inline]] inline void batch_loop(const small_batch_args<T>& x) noexcept {
    std::size_t done = 0;
    if constexpr (family_for<I, T, M, K, N>() == family::packed2) {
        constexpr int group = packed_group<I, T>;
        using packed = packed2_kernel<T, group>;
        if (x.sa == 4 && x.sc == 4 && (x.sb == 4 || x.sb == 0)) {
            const T* a = x.a;
            const T* b = x.b;
            T* c = x.c;
            typename packed::V vb{};
            if (x.sb == 0)
                for (int g = 0; g < packed::L; g += 4) std::memcpy(reinterpret_cast<T*>(&vb) + g, b, 4 * sizeof(T));
            for (; done + group <= x.count; done += group, a += packed::L, c += packed::L) {
                if (x.sb != 0) {
                    std::memcpy(&vb, b, sizeof(vb));
                    b += packed::L;
                }
                packed::group(a, vb, c);
            }
        }
        if (done == x.count) return;
    }
    const auto at = static_cast<std::ptrdiff_t>(done);
    batch_loop_one_by_one<I, T, M, K, N>(
        {x.a + at * x.sa, x.sa, x.b + at * x.sb, x.sb, x.c + at * x.sc, x.sc, x.count - done});
}

// The three compilations of each loop. Target attributes (not target_clones) because each level
// also picks its own kernel family and register budget; the choice among them is made once per
// process by host_kernel_isa(), so there is no ifunc resolver to go wrong in a static library.
// TESSERA_AVX512_TARGET is in src/simd_vector.hpp.
template <class T, int M, int K, int N>
[[gnu::target(TESSERA_AVX512_TARGET)]] void batch_avx512(
    const small_batch_args<T>& x) noexcept {
    if constexpr (family_for<kernel_isa::avx512, T, M, K, N>() == family::row_sums)
        row_sums_batch(x);
    else
        batch_loop<kernel_isa::avx512, T, M, K, N>(x);
}
template <class T, int M, int K, int N>
[[gnu::target("avx2,fma")]] void batch_avx2(const small_batch_args<T>& x) noexcept {
    batch_loop<kernel_isa::avx2, T, M, K, N>(x);
}
template <class T, int M, int K, int N>
void batch_baseline(const small_batch_args<T>& x) noexcept {
    batch_loop<kernel_isa::baseline, T, M, K, N>(x);
}

template <class T, int M, int K, int N>
constexpr small_batch_fn<T> pick(kernel_isa isa) noexcept {
    if constexpr (is_complex_v<T>) {
        // Eigen's complex kernels are chosen by the build's flags, not by a target attribute.
        static_cast<void>(isa);
        return &batch_baseline<T, M, K, N>;
    } else {
        switch (isa) {
            case kernel_isa::avx512: return &batch_avx512<T, M, K, N>;
            case kernel_isa::avx2: return &batch_avx2<T, M, K, N>;
            case kernel_isa::baseline: break;
        }
        return &batch_baseline<T, M, K, N>;
    }
}

template <class T>
struct batch_table {
    small_batch_fn<T> fn[kernel_isa_count][small_size_count];

    constexpr batch_table() noexcept : fn{} {
        for (unsigned i = 0; i < kernel_isa_count; ++i) {
            const auto isa = static_cast<kernel_isa>(i);
            small_batch_fn<T>* row = fn[i];
            row[static_cast<unsigned>(small_size::none)] = nullptr;
            row[static_cast<unsigned>(small_size::s2)] = pick<T, 2, 2, 2>(isa);
            row[static_cast<unsigned>(small_size::s3)] = pick<T, 3, 3, 3>(isa);
            row[static_cast<unsigned>(small_size::s4)] = pick<T, 4, 4, 4>(isa);
            row[static_cast<unsigned>(small_size::s5)] = pick<T, 5, 5, 5>(isa);
            row[static_cast<unsigned>(small_size::s6)] = pick<T, 6, 6, 6>(isa);
            row[static_cast<unsigned>(small_size::s8)] = pick<T, 8, 8, 8>(isa);
            row[static_cast<unsigned>(small_size::s16)] = pick<T, 16, 16, 16>(isa);
            row[static_cast<unsigned>(small_size::s32)] = pick<T, 32, 32, 32>(isa);
            row[static_cast<unsigned>(small_size::mv4)] = pick<T, 4, 4, 1>(isa);
            row[static_cast<unsigned>(small_size::mv3)] = pick<T, 3, 3, 1>(isa);
        }
    }
};

template <class T>
inline constexpr batch_table<T> table{};

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace small_kernels

template <class T>
small_batch_fn<T> small_batch_kernel(kernel_isa isa, small_size size) noexcept {
    return small_kernels::table<T>.fn[static_cast<unsigned>(isa)][static_cast<unsigned>(size)];
}

template <class T>
void run_small_batch(kernel_isa isa, small_size size, const small_batch_args<T>& args) noexcept {
    small_batch_kernel<T>(isa, size)(args);
}

}  // namespace tessera::detail
