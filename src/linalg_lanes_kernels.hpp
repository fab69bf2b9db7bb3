// src/linalg_lanes_kernels.hpp - SIMD-across-batch kernels of the batched linear algebra ops on
// real matrices of size 2 to 8: W matrices at a time (W = the vector width in elements), element
// (i, j) of matrix l in lane l of vector (i, j), so that every instruction works on W matrices and
// the factorisations are straight-line vector code. Pivot choices differ per matrix, so row swaps
// are per-lane selects.
//
// A block kernel (two side by side for the Jacobi kernels at n = 3: lane_blocks) reads its W items
// into lanes (one vector load per element when the items are interleaved in memory, shuffles when
// they are dense and consecutive: W x W transposes, or split_items for items smaller than a
// vector; one element at a time otherwise), computes, writes back every lane whose item it could
// finish. It returns the lanes it could not: a zero or subnormal pivot, a determinant out of the
// normal range, a non-positive Cholesky pivot; for the Jacobi kernels (eigh, svd at n = 2, 3) a
// NaN, infinite or all-subnormal item, an item still rotating after max_sweeps, and the cases
// listed at svd_block. Those items are redone by the per-matrix kernels (src/linalg_*.cpp), which
// decide the failure code and every edge case exactly as they do alone; their outputs are left
// untouched by the block, so that an item computed in place still has its input.
//
// Compiled three times (AVX-512, AVX2 + FMA, the build's baseline) by target attributes, like the
// tiny-matrix products, and picked once per process by host_kernel_isa(). Private to the library:
// src/linalg_lanes.cpp instantiates it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "linalg_lanes.hpp"
#include "simd_vector.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera::detail {
namespace lanes {

// Every helper here, lambdas included, is always inlined: a helper carries no target attribute,
// so one left out of line is compiled for the build's baseline (a 512-bit vector in pieces of
// 128), and a vector passed to it by value crosses two calling conventions. (The Jacobi sweeps'
// lambdas were out of line until 2026-12-02.) The one exception is positive_lanes' AVX-512 and
// AVX2 overloads, which carry their clone's target and take their vector by reference.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// The vectors below never cross a non-inlined call, so the ABI note is noise.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// ---- vectors ----------------------------------------------------------------------------------

template <class V>
using elem_t = std::remove_cvref_t<decltype(V{}[0])>;
template <class V>
inline constexpr int lane_count = static_cast<int>(sizeof(V) / sizeof(elem_t<V>));
/// What comparing two V gives: a vector of same-sized integers, all ones where true.
template <class V>
using mask_t = decltype(V{} < V{});

template <class V>
[[gnu::always_inline]] inline V splat(elem_t<V> x) noexcept {
    return V{} + x;
}

template <class V>
[[gnu::always_inline]] inline V vabs(V x) noexcept {
    return x < elem_t<V>(0) ? -x : x;
}

/// Square root per lane. A loop over the lanes, which GCC and clang turn into one vector square
/// root of the enclosing function's target since src/linalg_lanes.cpp is compiled without errno
/// for math functions (-fno-math-errno in CMakeLists.txt; with errno each lane is a call). r
/// starts as x, not undefined: writing one lane of a vector reads the others, which GCC at -O1
/// (the thread-sanitizer build) reported as maybe uninitialized. Built whole from the lanes' roots
/// instead (one initializer), the vector kept GCC from unrolling Cholesky's column loop (1.3-2x
/// slower at n = 3-5); starting from x changes the Release code of 15 of the file's 305
/// functions by a few register moves, and batched_linalg_bench measured no difference.
template <class V>
[[gnu::always_inline]] inline V vsqrt(V x) noexcept {
    V r = x;
    for (int l = 0; l < static_cast<int>(sizeof(V) / sizeof(x[0])); ++l) {
        if constexpr (std::is_same_v<elem_t<V>, float>) r[l] = __builtin_sqrtf(x[l]);
        else r[l] = __builtin_sqrt(x[l]);
    }
    return r;
}

/// Conditions are kept as flag vectors (1 where set, else 0, or sums of such) made by one select
/// on one comparison each and combined by addition, never as comparison masks combined with & or
/// |, nor as selects nested in selects (which GCC folds into such a combination): the helpers here
/// carry no target attribute (but positive_lanes' overloads), so GCC (12) lowers a combination of
/// 64-byte masks before they are inlined into a kernel, lane by lane, a scalar comparison each,
/// and the AVX-512 clone ran at half the AVX2 clone's speed for it. For the same reason a vector
/// built by selects of constants and compared again later (LU's pivot row and permutation) goes
/// through `opaque` first: seen through once -O3 unrolls the loops, "row == 1" of
/// "l2 ? 2 : l1 ? 1 : 0" folds into "l1 & ~l2" (3 x 3 solve and inverse in double ran 1.8-2.1x
/// slower for it).

/// The largest lane of x in lane 0: x against x turned by H lanes, then by H / 2, ..., 1.
template <int H, class V, std::size_t... L>
[[gnu::always_inline]] inline V fold_max(V x, std::index_sequence<L...> lanes) noexcept {
    if constexpr (H == 0) {
        return x;
    } else {
        constexpr int W = static_cast<int>(sizeof...(L));
        const V turned = __builtin_shufflevector(x, x, static_cast<int>((L + H) % W)...);
        return fold_max<H / 2>(turned > x ? turned : x, lanes);
    }
}

/// The lanes of x above zero (a NaN lane is not), as bits: bit l for lane l. On x86 a comparison
/// into a mask register (AVX-512) or a comparison and a movemask (AVX2, SSE2), by the overloads
/// below, each for the vectors of one clone (their width and element type say which); elsewhere a
/// fold by shuffles, then a loop over the lanes. The fold is a chain of 2 log2(W) dependent
/// instructions in every block (flag_bits): det at 2 x 2 to 4 x 4, and inverse, solve and cholesky
/// at 2 x 2, ran up to 1.3x slower per item with it in the AVX-512 clone. The AVX-512 and AVX2
/// overloads carry their clone's target and are inline, not always_inline: GCC inlines an
/// always_inline function's callees into it first, and flag_bits has no target, so that would be
/// an error; as they are, optimised builds inline them once flag_bits sits in a kernel of their
/// target (the Release objects keep no call to them; at -O0 neither GCC nor clang inlines them).
/// They take x by reference, so that no 256- or 512-bit vector is passed by value between
/// functions of different targets, whose calling conventions may differ (clang warns of it).
template <class V>
[[gnu::always_inline]] inline std::uint32_t positive_lanes(const V& x) noexcept {
    using T = elem_t<V>;
    constexpr int W = lane_count<V>;
    // 0 or 1 first, so that a NaN lane cannot hide the others from the comparisons of the fold.
    const V set = x > T(0) ? splat<V>(T(1)) : V{};
    if (!(fold_max<W / 2>(set, std::make_index_sequence<W>{})[0] > 0)) return 0;
    std::uint32_t bits = 0;
    for (int l = 0; l < W; ++l)
        if (set[l] != 0) bits |= std::uint32_t{1} << l;
    return bits;
}
#if defined(__x86_64__) || defined(__i386__)
[[gnu::target(TESSERA_AVX512_TARGET)]] inline std::uint32_t positive_lanes(
    const vec_t<float, 16>& x) noexcept {
    return _mm512_cmp_ps_mask(__m512(x), _mm512_setzero_ps(), _CMP_GT_OQ);
}
[[gnu::target(TESSERA_AVX512_TARGET)]] inline std::uint32_t positive_lanes(
    const vec_t<double, 8>& x) noexcept {
    return _mm512_cmp_pd_mask(__m512d(x), _mm512_setzero_pd(), _CMP_GT_OQ);
}
[[gnu::target("avx2,fma")]] inline std::uint32_t positive_lanes(const vec_t<float, 8>& x) noexcept {
    return static_cast<std::uint32_t>(
        _mm256_movemask_ps(_mm256_cmp_ps(__m256(x), _mm256_setzero_ps(), _CMP_GT_OQ)));
}
[[gnu::target("avx2,fma")]] inline std::uint32_t positive_lanes(
    const vec_t<double, 4>& x) noexcept {
    return static_cast<std::uint32_t>(
        _mm256_movemask_pd(_mm256_cmp_pd(__m256d(x), _mm256_setzero_pd(), _CMP_GT_OQ)));
}
#if defined(__SSE2__)
[[gnu::always_inline]] inline std::uint32_t positive_lanes(const vec_t<float, 4>& x) noexcept {
    return static_cast<std::uint32_t>(_mm_movemask_ps(_mm_cmpgt_ps(__m128(x), _mm_setzero_ps())));
}
[[gnu::always_inline]] inline std::uint32_t positive_lanes(const vec_t<double, 2>& x) noexcept {
    return static_cast<std::uint32_t>(_mm_movemask_pd(_mm_cmpgt_pd(__m128d(x), _mm_setzero_pd())));
}
#endif
#endif

/// The bits of lanes 0..count - 1 (count <= 32).
constexpr std::uint32_t low_bits(int count) noexcept {
    return count >= 32 ? ~std::uint32_t{0} : (std::uint32_t{1} << count) - 1;
}

/// The lanes below `count` whose flag is set, as bits. None set, the usual case, returns a
/// constant 0 at once, with which GCC lays out the rest of the block as before positive_lanes
/// (bits & low_bits alone: cholesky 4x4 double 1.2-1.3x slower per item, det 2x2 float 1.2x).
template <class V>
[[gnu::always_inline]] inline std::uint32_t flag_bits(V flags, int count) noexcept {
    const std::uint32_t bits = positive_lanes(flags);
    if (bits == 0) return 0;
    return bits & low_bits(count);
}

/// The items of block b (of W) among the `count` of a call.
template <int W>
constexpr int block_count(int count, int b) noexcept {
    const int left = count - b * W;
    return left < 0 ? 0 : left < W ? left : W;
}

/// Above zero per lane where x is zero, subnormal, infinite or NaN (a NaN fails both comparisons),
/// else 0: where the closed forms may not divide by a determinant (as usable_det in
/// src/linalg_lu.cpp).
template <class V>
[[gnu::always_inline]] inline V unusable(V x) noexcept {
    using T = elem_t<V>;
    const V one = splat<V>(T(1));
    const V a = vabs(x);
    return (a >= std::numeric_limits<T>::min() ? V{} : one) +
           (a <= std::numeric_limits<T>::max() ? V{} : one);
}

// ---- moving W matrices into lanes and back ----------------------------------------------------

// Stage Bit of a W x W transpose: swaps bit Bit of the row index with bit Bit of the lane index,
// rows i and i | Bit at a time. After the log2(W) stages row i lane j holds what row j lane i did.
template <int W, int Bit, bool Upper, class V, std::size_t... L>
[[gnu::always_inline]] inline V transpose_step(V lo, V hi, std::index_sequence<L...>) noexcept {
    if constexpr (!Upper)
        return __builtin_shufflevector(
            lo, hi,
            ((L & Bit) ? static_cast<int>(W + (L & ~std::size_t{Bit})) : static_cast<int>(L))...);
    else
        return __builtin_shufflevector(
            lo, hi, ((L & Bit) ? static_cast<int>(W + L) : static_cast<int>(L | Bit))...);
}

template <int W, int Bit = 1, class V>
[[gnu::always_inline]] inline void transpose(V (&r)[W]) noexcept {
    if constexpr (Bit < W) {
        V t[W];
#pragma GCC unroll 16
        for (int i = 0; i < W; ++i) {
            if (i & Bit) continue;
            t[i] = transpose_step<W, Bit, false>(r[i], r[i | Bit], std::make_index_sequence<W>{});
            t[i | Bit] =
                transpose_step<W, Bit, true>(r[i], r[i | Bit], std::make_index_sequence<W>{});
        }
#pragma GCC unroll 16
        for (int i = 0; i < W; ++i) r[i] = t[i];
        transpose<W, Bit * 2>(r);
    }
}

enum class layout : unsigned char {
    gather,       // anything: element by element
    interleaved,  // item l at item 0 + l: element (i, j) of the W items is one vector
    dense,        // item l at item 0 + l R C, each row-major and contiguous: shuffles
};

// Dense items with E < W elements (2 x 2 matrices, right-hand sides of 2 to 7 elements, 3 x 3
// floats in 16 lanes) are E vectors holding W consecutive items, and split_items leaves element e
// of the W items in vector e (join_items undoes it), by the factors of E:
// - E prime: element e of the W items lies in every one of the E vectors (W > E consecutive
//   elements hold each residue of E), so vector e out is a chain of E - 1 two-vector shuffles, each
//   bringing in the lanes of one more vector: E (E - 1) shuffles (E = 2: the even and odd lanes).
// - E = P Q, P its smallest prime factor: every run of P vectors is W items of P elements (P
//   divides the item), whose split (a prime's chains) sorts the block's elements by their residue
//   s modulo P into P streams of Q vectors; stream s holds, item by item, elements s, P + s, 2 P +
//   s, ..., that is items of Q elements, split in turn. Shuffles: E times the sum of (p - 1) over
//   the prime factors p of E (3 x 3 floats: 36, where one chain of E - 1 per element took 72;
//   powers of two: E log2(E), the even/odd unzip stages).
// The element-by-element path moved E W scalars through memory instead.

/// Where lane L of output vector J reads: (input vector, lane). Splitting, output J is element J
/// of the items, and item L's is flat element L E + J of the block; joining, output J holds the
/// block's flat elements J W + L, element (J W + L) % E of item (J W + L) / E.
template <int E, std::size_t W, bool Split>
constexpr std::pair<std::size_t, std::size_t> chain_source(std::size_t J, std::size_t L) noexcept {
    if constexpr (Split) return {(L * E + J) / W, (L * E + J) % W};
    else return {(J * W + L) % E, (J * W + L) / E};
}

/// Step K >= 1 of output vector J: the lanes that read input vector K take it from v; the others
/// keep acc, which is input vector 0 itself at K = 1.
template <int E, int J, int K, bool Split, class V, std::size_t... L>
[[gnu::always_inline]] inline V chain_step(V acc, V v, std::index_sequence<L...>) noexcept {
    constexpr std::size_t W = sizeof...(L);
    constexpr auto at = [](std::size_t lane) { return chain_source<E, W, Split>(J, lane); };
    return __builtin_shufflevector(
        acc, v,
        static_cast<int>(at(L).first == K ? W + at(L).second : K == 1 ? at(L).second : L)...);
}

/// Output vector J of a chain of E - 1 steps over the vectors r.
template <int E, int J, bool Split, int K = 1, class V>
[[gnu::always_inline]] inline V chain(const V (&r)[E], V acc) noexcept {
    if constexpr (K == E) {
        return acc;
    } else {
        const auto lanes = std::make_index_sequence<lane_count<V>>{};
        return chain<E, J, Split, K + 1>(r, chain_step<E, J, K, Split>(acc, r[K], lanes));
    }
}

template <int E, bool Split, int J = 0, class V>
[[gnu::always_inline]] inline void chains(const V (&r)[E], V (&out)[E]) noexcept {
    if constexpr (J < E) {
        out[J] = chain<E, J, Split>(r, r[0]);
        chains<E, Split, J + 1>(r, out);
    }
}

/// The smallest prime factor of n >= 2.
constexpr int smallest_factor(int n) noexcept {
    for (int p = 2; p * p <= n; ++p)
        if (n % p == 0) return p;
    return n;
}

/// r: E < W vectors of W consecutive items of E elements in; vector e holds element e of each
/// item out.
template <int E, class V>
[[gnu::always_inline]] inline void split_items(V (&r)[E]) noexcept {
    static_assert(E < lane_count<V>);
    if constexpr (E > 1) {
        constexpr int P = smallest_factor(E), Q = E / P;
        if constexpr (Q == 1) {
            V out[E];
            chains<E, true>(r, out);
            for (int e = 0; e < E; ++e) r[e] = out[e];
        } else {
            V streams[P][Q];
            for (int c = 0; c < Q; ++c) {
                V run[P];
                for (int s = 0; s < P; ++s) run[s] = r[c * P + s];
                split_items<P>(run);
                for (int s = 0; s < P; ++s) streams[s][c] = run[s];
            }
            for (int s = 0; s < P; ++s) {
                split_items<Q>(streams[s]);
                for (int t = 0; t < Q; ++t) r[t * P + s] = streams[s][t];
            }
        }
    }
}

/// The inverse of split_items.
template <int E, class V>
[[gnu::always_inline]] inline void join_items(V (&r)[E]) noexcept {
    static_assert(E < lane_count<V>);
    if constexpr (E > 1) {
        constexpr int P = smallest_factor(E), Q = E / P;
        if constexpr (Q == 1) {
            V out[E];
            chains<E, false>(r, out);
            for (int e = 0; e < E; ++e) r[e] = out[e];
        } else {
            V streams[P][Q];
            for (int s = 0; s < P; ++s) {
                for (int t = 0; t < Q; ++t) streams[s][t] = r[t * P + s];
                join_items<Q>(streams[s]);
            }
            for (int c = 0; c < Q; ++c) {
                V run[P];
                for (int s = 0; s < P; ++s) run[s] = streams[s][c];
                join_items<P>(run);
                for (int s = 0; s < P; ++s) r[c * P + s] = run[s];
            }
        }
    }
}

/// The W items of one operand in a block: where the first starts, the run's step between
/// consecutive items, and how many of the W are there.
template <int W, class U>
struct lane_items {
    U* first;
    std::ptrdiff_t step;
    int count;

    /// Where the item of lane l starts; lanes at or past `count` repeat the last item.
    [[gnu::always_inline]] U* item(int l) const noexcept {
        return first + (l < count ? l : count - 1) * step;
    }
};

/// How the R x C matrices (strides rs, cs) of a block lie in memory.
template <int W, int R, int C, class U>
[[gnu::always_inline]] inline layout layout_of(const lane_items<W, U>& x, std::ptrdiff_t rs,
                                               std::ptrdiff_t cs) noexcept {
    if (x.count < W) return layout::gather;
    if (x.step == 1) return layout::interleaved;
    constexpr int E = R * C;
    if (x.step == E && (C == 1 || cs == 1) && (R == 1 || rs == C))
        return layout::dense;
    return layout::gather;
}

// Items of E = k W + 1 elements (3 x 3 doubles in 8 lanes, 7 x 7 floats in 16, ...): W of them
// are k W W + W elements, and item l's last element, at flat position l E + E - 1 = (l + 1) k W +
// l, is lane l of the vector at (l + 1) k W. So the last elements move by plain loads and blends
// (read_last) or plain stores (write_last), where a second W x W transpose of each item's last W
// elements took log2(W) W shuffles for them.

/// Element E - 1 of the W items of E = k W + 1 elements from p on, item l's in lane l.
template <int E, int W, class V, class T, std::size_t... L>
[[gnu::always_inline]] inline V read_last(T* p, std::index_sequence<L...>) noexcept {
    constexpr int k = E / W;
    V last;
    std::memcpy(&last, p + k * W, sizeof(V));
    const auto blend = [&]<std::size_t I>(std::integral_constant<std::size_t, I>)
                           __attribute__((always_inline)) {
        if constexpr (I > 0) {
            V v;
            std::memcpy(&v, p + static_cast<std::ptrdiff_t>(I + 1) * k * W, sizeof(V));
            last = __builtin_shufflevector(last, v, static_cast<int>(L == I ? W + L : L)...);
        }
    };
    (blend(std::integral_constant<std::size_t, L>{}), ...);
    return last;
}

/// Writes lane l of `last` as element E - 1 of item l of the W items of E = k W + 1 elements from
/// p on. Its other lanes land on other elements of the W items (never on a last element), so the
/// caller writes those afterwards.
template <int E, int W, class V, class T>
[[gnu::always_inline]] inline void write_last(V last, T* p) noexcept {
    constexpr int k = E / W;
#pragma GCC unroll 16
    for (int l = 0; l < W; ++l) std::memcpy(p + (l + 1) * k * W, &last, sizeof(V));
}

/// Reads the R x C matrices of x (strides rs, cs) into m: m[i C + j] lane l is element (i, j) of
/// matrix l.
template <int W, int R, int C, class T, class V>
[[gnu::always_inline]] inline void load(V (&m)[R * C], const lane_items<W, T>& x, std::ptrdiff_t rs,
                                        std::ptrdiff_t cs) noexcept {
    constexpr int E = R * C;
    T* const p = x.first;
    switch (layout_of<W, R, C>(x, rs, cs)) {
        case layout::interleaved:
#pragma GCC unroll 64
            for (int i = 0; i < R; ++i)
#pragma GCC unroll 64
                for (int j = 0; j < C; ++j)
                    std::memcpy(&m[i * C + j], p + i * rs + j * cs, sizeof(V));
            return;
        case layout::dense:
            if constexpr (E < W) {
#pragma GCC unroll 16
                for (int k = 0; k < E; ++k) std::memcpy(&m[k], p + k * W, sizeof(V));
                split_items<E>(m);
                return;
            } else {
                constexpr int whole = E / W * W;  // the elements of whole chunks
                V r[W];
#pragma GCC unroll 8
                for (int c = 0; c < whole; c += W) {
#pragma GCC unroll 16
                    for (int l = 0; l < W; ++l) std::memcpy(&r[l], p + l * E + c, sizeof(V));
                    transpose<W>(r);
#pragma GCC unroll 16
                    for (int e = 0; e < W; ++e) m[c + e] = r[e];
                }
                if constexpr (E % W == 1) {
                    m[E - 1] = read_last<E, W, V>(p, std::make_index_sequence<W>{});
                } else if constexpr (E % W > 1) {  // the last W elements, overlapping
#pragma GCC unroll 16
                    for (int l = 0; l < W; ++l)
                        std::memcpy(&r[l], p + l * E + E - W, sizeof(V));
                    transpose<W>(r);
#pragma GCC unroll 16
                    for (int e = W - E % W; e < W; ++e) m[E - W + e] = r[e];  // rows not read yet
                }
                return;
            }
        case layout::gather: break;
    }
    using U = std::remove_const_t<T>;
    // Plain loops: unrolled, this path alone was most of the kernels' code.
    U s[E][W];
#pragma GCC unroll 1
    for (int l = 0; l < W; ++l)
#pragma GCC unroll 1
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 1
            for (int j = 0; j < C; ++j) s[i * C + j][l] = x.item(l)[i * rs + j * cs];
    // Vector by vector: a copy of the whole array would keep m in memory on every path.
#pragma GCC unroll 64
    for (int e = 0; e < E; ++e) std::memcpy(&m[e], &s[e][0], sizeof(V));
}

/// Writes m (as load reads it) to the matrices of x, skipping the items in `skip`.
template <int W, int R, int C, class T, class V>
[[gnu::always_inline]] inline void store(const V (&m)[R * C], const lane_items<W, T>& x,
                                         std::uint32_t skip, std::ptrdiff_t rs,
                                         std::ptrdiff_t cs) noexcept {
    constexpr int E = R * C;
    T* const p = x.first;
    const int count = x.count;
    switch (skip != 0 ? layout::gather : layout_of<W, R, C>(x, rs, cs)) {
        case layout::interleaved:
#pragma GCC unroll 64
            for (int i = 0; i < R; ++i)
#pragma GCC unroll 64
                for (int j = 0; j < C; ++j)
                    std::memcpy(p + i * rs + j * cs, &m[i * C + j], sizeof(V));
            return;
        case layout::dense:
            if constexpr (E < W) {
                V r[E];
#pragma GCC unroll 16
                for (int e = 0; e < E; ++e) r[e] = m[e];
                join_items<E>(r);
#pragma GCC unroll 16
                for (int k = 0; k < E; ++k) std::memcpy(p + k * W, &r[k], sizeof(V));
                return;
            } else {
                constexpr int whole = E / W * W;  // the elements of whole chunks
                if constexpr (E % W == 1) write_last<E, W>(m[E - 1], p);  // first: see it
                V r[W];
#pragma GCC unroll 8
                for (int c = 0; c < whole; c += W) {
#pragma GCC unroll 16
                    for (int e = 0; e < W; ++e) r[e] = m[c + e];
                    transpose<W>(r);
#pragma GCC unroll 16
                    for (int l = 0; l < W; ++l) std::memcpy(p + l * E + c, &r[l], sizeof(V));
                }
                if constexpr (E % W > 1) {  // the last W elements, overlapping
#pragma GCC unroll 16
                    for (int e = 0; e < W; ++e) r[e] = m[E - W + e];
                    transpose<W>(r);
#pragma GCC unroll 16
                    for (int l = 0; l < W; ++l)
                        std::memcpy(p + l * E + E - W, &r[l], sizeof(V));
                }
                return;
            }
        case layout::gather: break;
    }
    T s[E][W];
#pragma GCC unroll 64
    for (int e = 0; e < E; ++e) std::memcpy(&s[e][0], &m[e], sizeof(V));
#pragma GCC unroll 1
    for (int l = 0; l < count; ++l) {
        if (skip & (std::uint32_t{1} << l)) continue;
#pragma GCC unroll 1
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 1
            for (int j = 0; j < C; ++j) x.item(l)[i * rs + j * cs] = s[i * C + j][l];
    }
}

/// Operand k's items at..at + count of run r (count <= W).
template <int W, class T, class U>
[[gnu::always_inline]] inline lane_items<W, U> items(const lane_run<T>& r, int k,
                                                     const operand<U>& o, std::size_t at,
                                                     int count) noexcept {
    const std::ptrdiff_t step = r.step[k];
    return {o.data + r.start[k] + static_cast<std::ptrdiff_t>(at) * step, step, count};
}

/// a * b rounded on its own, never fused into a following addition: exactly singular matrices must
/// give an exact zero (a d - b c = 0 for proportional rows in the closed forms, a zero pivot in
/// LU), as on the per-matrix path, which a fused multiply-add of one rounded and one exact product
/// does not give. The substitutions, which decide nothing, keep their fused operations. In the
/// Jacobi kernels one product of every sum of two goes through mul, so that the other is the one
/// fused: GCC fuses whichever it meets first, and the two blocks a Jacobi kernel runs side by side
/// met them in different orders (items came out with other bits in the second block).
template <class V>
[[gnu::always_inline]] inline V mul(V a, V b) noexcept {
    return opaque(a * b);
}

/// The 2 x 2 minor a d - b c.
template <class V>
[[gnu::always_inline]] inline V minor2(V a, V d, V b, V c) noexcept {
    return mul(a, d) - mul(b, c);
}

/// The 2 x 2 minor of rows i, j and columns p, q of the 4 x 4 matrices in e.
template <class V>
[[gnu::always_inline]] inline V minor4(const V (&e)[16], int i, int j, int p, int q) noexcept {
    return minor2(e[i * 4 + p], e[j * 4 + q], e[j * 4 + p], e[i * 4 + q]);
}

// ---- factorisations ---------------------------------------------------------------------------

/// LU with partial pivoting of the N x N matrices in a (in place: unit L below the diagonal, U on
/// and above), as LAPACK's getf2 and Eigen's PartialPivLU: the largest magnitude in the column
/// (the first of equals) is the pivot, whole rows are swapped. perm[i] is the original row now at
/// row i (as floating-point values), sign the permutation's sign, inv_diag U's reciprocal diagonal
/// (for the substitutions, which may round once more than a division).
/// Returns the flags of the lanes with a pivot below the smallest normal number.
template <int N, class V>
[[gnu::always_inline]] inline V factor_lu(V (&a)[N * N], V (&perm)[N], V& sign,
                                          V (&inv_diag)[N]) noexcept {
    using T = elem_t<V>;
    V bad{};
    for (int i = 0; i < N; ++i) perm[i] = splat<V>(T(i));
    sign = splat<V>(T(1));
    for (int k = 0; k < N; ++k) {
        V best = vabs(a[k * N + k]);
        V row = splat<V>(T(k));
        for (int i = k + 1; i < N; ++i) {
            const V v = vabs(a[i * N + k]);
            const mask_t<V> larger = v > best;
            best = larger ? v : best;
            row = larger ? splat<V>(T(i)) : row;
        }
        row = opaque(row);  // compared below, once per row (see the rule above fold_max)
        for (int i = k + 1; i < N; ++i) {
            const mask_t<V> swap = row == T(i);
            for (int j = 0; j < N; ++j) {
                const V top = a[k * N + j];
                a[k * N + j] = swap ? a[i * N + j] : top;
                a[i * N + j] = swap ? top : a[i * N + j];
            }
            const V top = perm[k];
            perm[k] = swap ? perm[i] : top;
            perm[i] = swap ? top : perm[i];
        }
        sign = row != T(k) ? -sign : sign;
        bad += best < std::numeric_limits<T>::min() ? splat<V>(T(1)) : V{};
        inv_diag[k] = T(1) / a[k * N + k];
        for (int i = k + 1; i < N; ++i) {
            // Divided, not multiplied by inv_diag: a row equal to the pivot row must give exactly
            // 1, so that its remainder cancels to the exact zero pivot of a singular matrix.
            const V l = a[i * N + k] / a[k * N + k];
            a[i * N + k] = l;
            // The product rounded alone (mul), as without FMA: fused, a row that is an inexact
            // multiple of the pivot row (3 x it) would leave ~1e-16 instead of an exact zero pivot.
            for (int j = k + 1; j < N; ++j) a[i * N + j] -= mul(l, a[k * N + j]);
        }
    }
    for (int i = 0; i < N; ++i) perm[i] = opaque(perm[i]);  // compared by permute and invert
    return bad;
}

/// Solves L U x = y in place (y already permuted).
template <int N, class V>
[[gnu::always_inline]] inline void lu_substitute(const V (&a)[N * N], const V (&inv_diag)[N],
                                                 V (&y)[N]) noexcept {
    for (int i = 1; i < N; ++i)
        for (int j = 0; j < i; ++j) y[i] -= a[i * N + j] * y[j];
    for (int i = N - 1; i >= 0; --i) {
        for (int j = i + 1; j < N; ++j) y[i] -= a[i * N + j] * y[j];
        y[i] *= inv_diag[i];
    }
}

/// y = P b per lane: y[i] = b[perm[i]].
template <int N, class V>
[[gnu::always_inline]] inline void permute(const V (&perm)[N], const V (&b)[N],
                                           V (&y)[N]) noexcept {
    using T = elem_t<V>;
    for (int i = 0; i < N; ++i) {
        V v = b[0];
        for (int r = 1; r < N; ++r) v = perm[i] == T(r) ? b[r] : v;
        y[i] = v;
    }
}

/// Pair i < j of the six pairs of four rows, in the order 01, 02, 03, 12, 13, 23.
constexpr int row_pair(int i, int j) noexcept {
    return i == 0 ? j - 1 : i == 1 ? j + 1 : 5;
}

/// The three rows of four other than row i, in order.
struct other_rows {
    int a, b, c;
};
constexpr other_rows rows_besides(int i) noexcept {
    return {i == 0 ? 1 : 0, i <= 1 ? 2 : 1, i == 3 ? 2 : 3};
}

/// The 2 x 2 minors of columns p and q of the 4 x 4 matrices in e over every pair of rows.
template <class V>
[[gnu::always_inline]] inline void pair_minors(const V (&e)[16], int p, int q,
                                               V (&out)[6]) noexcept {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
        for (int j = i + 1; j < 4; ++j) out[row_pair(i, j)] = minor4(e, i, j, p, q);
}

/// The determinants of the 4 x 4 matrices in e as Eigen's 4 x 4 determinant computes them: d gets
/// the 2 x 2 minors of columns 0 and 1 over every pair of rows (row_pair), m3[i] the 3 x 3 minor of
/// columns 0 to 2 without row i (column 2 against d), and the determinant is m3 against column 3.
/// The inverse reuses both (closed_inverse).
template <class V>
[[gnu::always_inline]] inline V det4(const V (&e)[16], V (&d)[6], V (&m3)[4]) noexcept {
    pair_minors(e, 0, 1, d);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        const auto [a, b, c] = rows_besides(i);
        m3[i] = mul(e[a * 4 + 2], d[row_pair(b, c)]) +
                (mul(-e[b * 4 + 2], d[row_pair(a, c)]) + mul(e[c * 4 + 2], d[row_pair(a, b)]));
    }
    return (mul(-e[3], m3[0]) + mul(e[7], m3[1])) + (mul(-e[11], m3[2]) + mul(e[15], m3[3]));
}

/// The determinants of the 2 x 2 to 4 x 4 matrices in e, as the per-matrix det computes them:
/// closed_det in src/linalg_lu.cpp up to 3 x 3, Eigen's 4 x 4 expansion by 2 x 2 minors at 4 x 4,
/// with the same products and sums in the same order (so the same bits in builds without FMA
/// contraction, the default; with -march=native Eigen's scalar code fuses some of them).
template <int N, class V>
[[gnu::always_inline]] inline V closed_det(const V (&e)[N * N]) noexcept {
    if constexpr (N == 2) {
        return minor2(e[0], e[3], e[1], e[2]);
    } else if constexpr (N == 3) {
        return mul(e[0], minor2(e[4], e[8], e[5], e[7])) +
               mul(e[1], minor2(e[5], e[6], e[3], e[8])) +
               mul(e[2], minor2(e[3], e[7], e[4], e[6]));
    } else {
        static_assert(N == 4);
        V d[6], m3[4];
        return det4(e, d, m3);
    }
}

/// The inverses (adjugate over determinant) of the 2 x 2 to 4 x 4 matrices in e, by the per-matrix
/// path's algorithm: closed_inverse in src/linalg_lu.cpp up to 3 x 3 (bit for bit in builds without
/// FMA contraction), and at 4 x 4 the cofactor expansion by 2 x 2 minors (Eigen's 4 x 4 inverse
/// arranges the same expansion differently). So the same accuracy on ill-conditioned items (up to
/// 19 n kappa epsilon at 3 x 3 and 117 at 4 x 4 measured, where LU stays below n kappa epsilon, but
/// 2-2.4x faster than LU here), and the same determinant (closed_det, the per-matrix det) decides
/// which lanes go back to the per-matrix path. Returns the flags of the lanes whose determinant is
/// not usable.
template <int N, class V>
[[gnu::always_inline]] inline V closed_inverse(const V (&e)[N * N], V (&r)[N * N]) noexcept {
    using T = elem_t<V>;
    [[maybe_unused]] V d[6], m3[4];  // 4 x 4: the determinant's minors, reused by the cofactors
    V det;
    if constexpr (N == 4)
        det = det4(e, d, m3);
    else
        det = closed_det<N>(e);
    const V s = T(1) / det;
    if constexpr (N == 2) {
        r[0] = e[3] * s;
        r[1] = -e[1] * s;
        r[2] = -e[2] * s;
        r[3] = e[0] * s;
    } else if constexpr (N == 3) {
        r[0] = minor2(e[4], e[8], e[5], e[7]) * s;
        r[1] = minor2(e[2], e[7], e[1], e[8]) * s;
        r[2] = minor2(e[1], e[5], e[2], e[4]) * s;
        r[3] = minor2(e[5], e[6], e[3], e[8]) * s;
        r[4] = minor2(e[0], e[8], e[2], e[6]) * s;
        r[5] = minor2(e[2], e[3], e[0], e[5]) * s;
        r[6] = minor2(e[3], e[7], e[4], e[6]) * s;
        r[7] = minor2(e[1], e[6], e[0], e[7]) * s;
        r[8] = minor2(e[0], e[4], e[1], e[3]) * s;
    } else {
        static_assert(N == 4);
        // Cofactor (i, j) is (-1)^(i + j) times the 3 x 3 minor without row i and column j. For
        // j = 0 or 1 that minor keeps columns 2 and 3 and is expanded along its other column
        // against their 2 x 2 minors (h); for j = 2, along column 3 against the 2 x 2 minors of
        // columns 0 and 1 (d, the determinant's); for j = 3 it is the determinant's m3. So 12
        // minors and 12 cofactor sums, where minors of rows 0, 1 and 2, 3 took 18 and 16 (15%
        // fewer instructions, 4-8% faster per item).
        V h[6];
        pair_minors(e, 2, 3, h);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
            const auto [a, b, c] = rows_besides(i);
            const int bc = row_pair(b, c), ac = row_pair(a, c), ab = row_pair(a, b);
            // Entry (j, i) of the inverse is cofactor (i, j). A cofactor's sum decides nothing
            // (the determinant, its products unfused, decides the lanes handed back), so for
            // j < 3 it is one product and two multiply-adds where three products and two
            // additions took 5-10% longer; minus a minor takes the same products in the other
            // order, not a negation: the same bits but for the sign of an exact zero. Column 3
            // takes the determinant's m3 (products unfused), minus one as 0 - m3.
#pragma GCC unroll 3
            for (int j = 0; j < 3; ++j) {
                const int k = j == 0 ? 1 : j == 1 ? 0 : 3;  // the column kept
                const V(&m)[6] = j == 2 ? d : h;
                const V x = e[a * 4 + k], y = e[b * 4 + k], z = e[c * 4 + k];
                r[j * 4 + i] = (i + j) % 2 == 0 ? (z * m[ab] + (x * m[bc] - mul(y, m[ac]))) * s
                                                : ((mul(y, m[ac]) - x * m[bc]) - z * m[ab]) * s;
            }
            r[12 + i] = (i % 2 == 1 ? m3[i] : V{} - m3[i]) * s;
        }
    }
    return unusable(det);
}

/// The inverses of the N x N matrices in a (destroyed): the closed forms up to 4 x 4, else LU with
/// partial pivoting and one substitution per column of the identity. Returns the flags of the
/// lanes to redo.
template <int N, class V>
[[gnu::always_inline]] inline V invert(V (&a)[N * N], V (&x)[N * N]) noexcept {
    using T = elem_t<V>;
    if constexpr (N <= 4) {
        return closed_inverse<N>(a, x);
    } else {
        V perm[N], sign, inv_diag[N];
        const V bad = factor_lu<N>(a, perm, sign, inv_diag);
        for (int j = 0; j < N; ++j) {
            V y[N];
            for (int i = 0; i < N; ++i) y[i] = perm[i] == T(j) ? splat<V>(T(1)) : V{};
            lu_substitute<N>(a, inv_diag, y);
            for (int i = 0; i < N; ++i) x[i * N + j] = y[i];
        }
        return bad;
    }
}

/// The determinants of the N x N matrices in a (destroyed where LU runs): closed_det up to
/// Closed x Closed, as the per-matrix path (det 4, slogdet 3), else the product of LU's pivots.
/// `bad` gets a positive flag in the lanes whose determinant, or for LU any partial product of the
/// pivots, is not usable (zero, subnormal, beyond the range or NaN): a product that left the range
/// on the way is wrong even where it comes back. The per-matrix path decides those with its scaled
/// pivot product.
template <int N, int Closed, class V>
[[gnu::always_inline]] inline V determinant(V (&a)[N * N], V& bad) noexcept {
    V det;
    if constexpr (N <= Closed) {
        det = closed_det<N>(a);
        bad = unusable(det);
    } else {
        V perm[N], inv_diag[N];
        factor_lu<N>(a, perm, det, inv_diag);
        bad = V{};
        for (int k = 0; k < N; ++k) {
            det *= a[k * N + k];
            bad += unusable(det);
        }
    }
    return det;
}

// ---- symmetric eigenproblems and singular values: Jacobi rotations ------------------------------
//
// Conditions are flag vectors here too (see the rule above fold_max), and a rotation needs them
// once per pair and sweep.

/// Sweeps over every pair (n = 3) after which a lane that still needs a rotation is handed back.
/// Jacobi converges quadratically: 3 or 4 sweeps in float and double on random matrices.
inline constexpr int max_sweeps = 12;

/// The power of two at or below |x| (x normal): x with its sign and mantissa bits cleared.
template <class V>
[[gnu::always_inline]] inline V pow2_floor(V x) noexcept {
    using T = elem_t<V>;
    using M = mask_t<V>;
    using I = elem_t<M>;
    constexpr int mantissa = std::numeric_limits<T>::digits - 1;
    constexpr I exponent =
        static_cast<I>(((I{1} << (sizeof(T) * 8 - 1 - mantissa)) - 1) << mantissa);
    M bits;
    std::memcpy(&bits, &x, sizeof(V));
    bits &= exponent;
    std::memcpy(&x, &bits, sizeof(V));
    return x;
}

/// Scales the E entries of m so that the largest magnitude of each lane lies in [1, 2) (in [1, 4)
/// from 1 / min up, so that the scale's reciprocal stays normal), by a power of two (exact unless
/// an entry falls below the normal range, so a diagonal matrix keeps its bits); returns that
/// power. Lanes with a NaN or an infinity, or whose largest magnitude is subnormal, get the flag
/// `bad` and are zeroed, so that they are done at once (they are handed back); an all-zero lane
/// keeps scale 1.
template <int E, class V>
[[gnu::always_inline]] inline V scale_down(V (&m)[E], V& bad) noexcept {
    using T = elem_t<V>;
    const V one = splat<V>(T(1));
    V largest = vabs(m[0]);
    V nan = m[0] != m[0] ? one : V{};
    for (int e = 1; e < E; ++e) {
        const V x = vabs(m[e]);
        largest = x > largest ? x : largest;
        nan += x != x ? one : V{};
    }
    // Bad: NaN, infinite or subnormal; an exactly zero lane is not (single selects added, as the
    // rule above fold_max says).
    const V below_normal = largest >= std::numeric_limits<T>::min() ? V{} : one;
    bad = nan + (largest <= std::numeric_limits<T>::max() ? V{} : one) + below_normal -
          (largest == T(0) ? one : V{});
    constexpr T cap = T(1) / std::numeric_limits<T>::min();  // 2^126 or 2^1022
    const V floor2 = pow2_floor(largest);
    const V capped = floor2 > cap ? splat<V>(cap) : floor2;
    // Zero and subnormal lanes keep 1 (bad lanes are zeroed and handed back whatever it is).
    const V scale = largest >= std::numeric_limits<T>::min() ? capped : one;
    const V inv = T(1) / scale;  // a power of two too: exact
    for (int e = 0; e < E; ++e) m[e] = bad > T(0) ? V{} : m[e] * inv;
    return scale;
}

/// The rotation [c s; -s c] that diagonalises the symmetric 2 x 2 [x z; z y] (t = s / c), or
/// the identity in the lanes where `need` is not above zero.
template <class V>
struct rotation {
    V c, s, t;
};

/// With d = y - x and h = sqrt(d^2 + 4 z^2): t = 2 z sign(d) / (|d| + h), the root of smaller
/// magnitude of t^2 + 2 zeta t - 1 = 0 (zeta = d / 2 z) as in the classical tan(theta), and
/// c = 1 / sqrt(1 + t^2), s = t c; since (|d| + h)^2 + 4 z^2 = 2 h (|d| + h), one division
/// q = 1 / (2 h (|d| + h)) gives all three: c = (|d| + h) sqrt(q), s = 2 z sign(d) sqrt(q),
/// t = 2 z sign(d) 2 h q. Two square roots and one division per rotation (the division and
/// square root unit is what a rotation waits on). The callers rotate only where z^2 is above the
/// smallest normal number, so q cannot overflow; the matrices are scaled (largest entry in
/// [1, 2)), so nothing else can.
template <class V>
[[gnu::always_inline]] inline rotation<V> jacobi_rotation(V x, V y, V z, V need) noexcept {
    using T = elem_t<V>;
    const V d = y - x;
    const V num = d < T(0) ? -(z + z) : z + z;
    const V h = vsqrt(mul(d, d) + num * num);
    const V den = vabs(d) + h;
    const V q = T(1) / ((h + h) * den);
    const V root = vsqrt(q);
    return {need > T(0) ? den * root : splat<V>(T(1)), need > T(0) ? num * root : V{},
            need > T(0) ? num * (h + h) * q : V{}};
}

/// Applies the rotation to columns p and q of the N x N m where `need` is above zero: column p
/// becomes c p - s q, column q becomes s p + c q. Elsewhere the columns keep their bits (the
/// identity rotation would turn -0 into +0 in 0 x + 1 y).
template <int N, class V>
[[gnu::always_inline]] inline void rotate_columns(V (&m)[N * N], int p, int q,
                                                  const rotation<V>& g, V need) noexcept {
    using T = elem_t<V>;
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) {
        const V x = m[r * N + p], y = m[r * N + q];
        m[r * N + p] = need > T(0) ? g.c * x - mul(g.s, y) : x;
        m[r * N + q] = need > T(0) ? g.s * x + mul(g.c, y) : y;
    }
}

/// Runs sweep(active) over B blocks until no lane's unfinished(b) (the largest `need` over its
/// pairs in block b) is above zero, at most max_sweeps times; stuck[b] gets the flags of block b's
/// lanes left unfinished. active[b] is 1 in the lanes whose unfinished(b) was above zero before
/// the sweep, else 0, and the sweep rotates only those: a lane finished on its own stops there,
/// whatever its neighbours (in its block or the other) still need, so its result does not depend
/// on them. (Deciding per pair alone was not enough: about 1 in 4,000 3 x 3 svd items, finished
/// by unfinished()'s test, still had a pair rotated in a later sweep beside an unfinished
/// neighbour, and came out differently alone.) At N = 2 one sweep, one rotation, is all there is:
/// eigh's sets the one pair to exactly zero, and svd_block finishes svd's.
template <int N, int B, class V, class Unfinished, class Sweep>
[[gnu::always_inline]] inline void sweeps_until_done(const Unfinished& unfinished,
                                                     const Sweep& sweep, V (&stuck)[B]) noexcept {
    using T = elem_t<V>;
    const V one = splat<V>(T(1));
    V active[B];
    if constexpr (N == 2) {
        for (V& x : active) x = one;
        sweep(active);
        for (V& x : stuck) x = V{};
    } else {
#pragma GCC unroll 1
        for (int k = 0; k < max_sweeps; ++k) {
            V any{};
#pragma GCC unroll 2
            for (int b = 0; b < B; ++b) {
                active[b] = unfinished(b) > T(0) ? one : V{};
                any += active[b];
            }
            if (positive_lanes(any) == 0) {
                for (V& x : stuck) x = V{};
                return;
            }
            sweep(active);
        }
#pragma GCC unroll 2
        for (int b = 0; b < B; ++b) stuck[b] = unfinished(b) > T(0) ? one : V{};
    }
}

/// Cyclic Jacobi on the symmetric N x N matrices in a (scaled, both halves filled): afterwards
/// the diagonal holds the eigenvalues (unsorted) and, when Vectors, v (the identity on entry)
/// the eigenvectors as columns. A pair is rotated while |a_pq| > epsilon max(|a_pp|, |a_qq|) and
/// a_pq^2 is normal, and its entry is then set to exactly zero: eigenvalues accurate to epsilon
/// times the matrix's norm (as Eigen's), not better for tiny ones. B blocks side by side (see
/// lane_blocks); stuck[b] gets the flags of block b's lanes that still need a rotation after
/// max_sweeps.
template <int N, bool Vectors, int B, class V>
[[gnu::always_inline]] inline void jacobi_eigen(V (&as)[B][N * N], V (&vs)[B][N * N],
                                                V (&stuck)[B]) noexcept {
    using T = elem_t<V>;
    constexpr T eps2 = std::numeric_limits<T>::epsilon() * std::numeric_limits<T>::epsilon();
    // Above zero where the pair needs a rotation. Squares: no square root, and an entry whose
    // square is not normal is negligible beside the scaled matrix's largest, at least 1.
    const auto need = [&](int b, int p, int q) __attribute__((always_inline)) {
        const V(&a)[N * N] = as[b];
        const V xx = a[p * N + p] * a[p * N + p], yy = a[q * N + q] * a[q * N + q];
        V limit = eps2 * (xx > yy ? xx : yy);
        limit = limit > std::numeric_limits<T>::min() ? limit
                                                       : splat<V>(std::numeric_limits<T>::min());
        return a[p * N + q] * a[p * N + q] - limit;
    };
    const auto unfinished = [&](int b) __attribute__((always_inline)) {
        V most = need(b, 0, 1);
#pragma GCC unroll 8
        for (int p = 0; p < N - 1; ++p)
#pragma GCC unroll 8
            for (int q = p + 1; q < N; ++q) {
                const V x = need(b, p, q);
                most = x > most ? x : most;
            }
        return most;
    };
    // Rotates pair (p, q) of block b in the lanes where `active` and the pair's need say so.
    const auto rotate_pair = [&](int b, int p, int q, const V& active)
                                 __attribute__((always_inline)) {
        V(&a)[N * N] = as[b];
        const V x = a[p * N + p], y = a[q * N + q], z = a[p * N + q];
        const V rotate = need(b, p, q) * active;
        const rotation<V> g = jacobi_rotation(x, y, z, rotate);
        // Only where the pair needs it: elsewhere every entry keeps its bits, -0 too.
        a[p * N + p] = rotate > T(0) ? x - g.t * z : x;
        a[q * N + q] = rotate > T(0) ? y + g.t * z : y;
        a[p * N + q] = a[q * N + p] = rotate > T(0) ? V{} : z;
#pragma GCC unroll 8
        for (int r = 0; r < N; ++r) {
            if (r == p || r == q) continue;
            const V rp = a[r * N + p], rq = a[r * N + q];
            a[r * N + p] = a[p * N + r] = rotate > T(0) ? g.c * rp - mul(g.s, rq) : rp;
            a[r * N + q] = a[q * N + r] = rotate > T(0) ? g.s * rp + mul(g.c, rq) : rq;
        }
        if constexpr (Vectors) rotate_columns<N>(vs[b], p, q, g, rotate);
    };
    // Pair by pair, the blocks' rotations side by side (their chains overlap).
    const auto sweep = [&](const V (&active)[B]) __attribute__((always_inline)) {
#pragma GCC unroll 8
        for (int p = 0; p < N - 1; ++p)
#pragma GCC unroll 8
            for (int q = p + 1; q < N; ++q)
#pragma GCC unroll 2
                for (int b = 0; b < B; ++b) rotate_pair(b, p, q, active[b]);
    };
    sweeps_until_done<N>(unfinished, sweep, stuck);
}

/// One-sided Jacobi (Hestenes) on the N x N matrices in a (scaled): rotates pairs of columns
/// while |a_p . a_q| > N epsilon |a_p| |a_q| (the rounding of the dot products is about that)
/// and (a_p . a_q)^2 is normal, accumulating the rotations in v (the identity on entry) when
/// Vectors; then a = U diag(sigma) with sigma the column norms, and A = a V^T. B blocks side by
/// side, as jacobi_eigen; stuck[b] gets the flags of block b's lanes that still need a rotation
/// after max_sweeps.
template <int N, bool Vectors, int B, class V>
[[gnu::always_inline]] inline void jacobi_svd(V (&as)[B][N * N], V (&vs)[B][N * N],
                                              V (&stuck)[B]) noexcept {
    using T = elem_t<V>;
    constexpr T eps = std::numeric_limits<T>::epsilon();
    constexpr T tol2 = T(N * N) * eps * eps;
    // The pair's Gram matrix [x z; z y]; returns the need for a rotation, as jacobi_eigen's.
    const auto gram = [&](int b, int p, int q, V& x, V& y, V& z) __attribute__((always_inline)) {
        const V(&a)[N * N] = as[b];
        x = mul(a[p], a[p]);
        y = mul(a[q], a[q]);
        z = mul(a[p], a[q]);
#pragma GCC unroll 8
        for (int r = 1; r < N; ++r) {
            x += a[r * N + p] * a[r * N + p];
            y += a[r * N + q] * a[r * N + q];
            z += a[r * N + p] * a[r * N + q];
        }
        V limit = tol2 * (x * y);
        limit = limit > std::numeric_limits<T>::min() ? limit
                                                       : splat<V>(std::numeric_limits<T>::min());
        return z * z - limit;
    };
    const auto unfinished = [&](int b) __attribute__((always_inline)) {
        V x, y, z;
        V most = gram(b, 0, 1, x, y, z);
#pragma GCC unroll 8
        for (int p = 0; p < N - 1; ++p)
#pragma GCC unroll 8
            for (int q = p + 1; q < N; ++q) {
                const V e = gram(b, p, q, x, y, z);
                most = e > most ? e : most;
            }
        return most;
    };
    const auto rotate_pair = [&](int b, int p, int q, const V& active)
                                 __attribute__((always_inline)) {
        V x, y, z;
        const V rotate = gram(b, p, q, x, y, z) * active;
        const rotation<V> g = jacobi_rotation(x, y, z, rotate);
        rotate_columns<N>(as[b], p, q, g, rotate);
        if constexpr (Vectors) rotate_columns<N>(vs[b], p, q, g, rotate);
    };
    const auto sweep = [&](const V (&active)[B]) __attribute__((always_inline)) {
#pragma GCC unroll 8
        for (int p = 0; p < N - 1; ++p)
#pragma GCC unroll 8
            for (int q = p + 1; q < N; ++q)
#pragma GCC unroll 2
                for (int b = 0; b < B; ++b) rotate_pair(b, p, q, active[b]);
    };
    sweeps_until_done<N>(unfinished, sweep, stuck);
}

/// Sorts each lane's keys (ascending, or descending when Descending) with compare-exchanges,
/// carrying the columns of the N x N m and m2 (either may be null) along; equal keys keep their
/// order.
template <int N, bool Descending, class V>
[[gnu::always_inline]] inline void sort_columns(V (&key)[N], std::type_identity_t<V>* m,
                                                std::type_identity_t<V>* m2) noexcept {
    const auto exchange = [&](int i, int j) __attribute__((always_inline)) {
        const V ki = key[i], kj = key[j];
        const auto swap = [&](V x, V y) __attribute__((always_inline)) {
            if constexpr (Descending) return kj > ki ? y : x;
            else return kj < ki ? y : x;
        };
        key[i] = swap(ki, kj);
        key[j] = swap(kj, ki);
        for (V* x : {m, m2}) {
            if (x == nullptr) continue;
#pragma GCC unroll 8
            for (int r = 0; r < N; ++r) {
                const V xi = x[r * N + i], xj = x[r * N + j];
                x[r * N + i] = swap(xi, xj);
                x[r * N + j] = swap(xj, xi);
            }
        }
    };
    static_assert(N == 2 || N == 3);
    exchange(0, 1);
    if constexpr (N == 3) {
        exchange(1, 2);
        exchange(0, 1);
    }
}

template <int N, class V>
[[gnu::always_inline]] inline void set_identity(V (&m)[N * N]) noexcept {
    using T = elem_t<V>;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) m[i * N + j] = splat<V>(T(i == j ? 1 : 0));
}

// ---- the block kernels --------------------------------------------------------------------------

template <int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t inverse_block(const lane_run<T>& r, std::size_t at,
                                                         int count) noexcept {
    using V = vec_t<T, W>;
    const auto pa = items<W>(r, 0, r.op[0], at, count);
    const auto px = items<W>(r, 1, r.op[1], at, count);
    V a[N * N], x[N * N];
    load<W, N, N>(a, pa, r.op[0].rs, r.op[0].cs);
    const std::uint32_t redo = flag_bits(invert<N>(a, x), count);
    store<W, N, N>(x, px, redo, r.op[1].rs, r.op[1].cs);
    return redo;
}

template <int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t solve_block(const lane_run<T>& r, std::size_t at,
                                                         int count) noexcept {
    using V = vec_t<T, W>;
    const auto pa = items<W>(r, 0, r.op[0], at, count);
    const auto pb = items<W>(r, 1, r.op[1], at, count);
    const auto px = items<W>(r, 2, r.op[2], at, count);
    V a[N * N];
    load<W, N, N>(a, pa, r.op[0].rs, r.op[0].cs);
    // N = 2: x = A^-1 b with the closed-form inverse, as the per-matrix path; else LU, within
    // n kappa epsilon where the 3 x 3 and 4 x 4 closed forms reach 19 and 117 (closed_inverse).
    V inv[N * N], perm[N], sign, inv_diag[N];
    std::uint32_t redo;
    if constexpr (N == 2) redo = flag_bits(closed_inverse<2>(a, inv), count);
    else redo = flag_bits(factor_lu<N>(a, perm, sign, inv_diag), count);
    if (redo == low_bits(count)) return redo;
    // One right-hand side at a time; b may be exactly x, and each column is read before written.
    for (std::ptrdiff_t j = 0; j < r.k; ++j) {
        auto qb = pb;
        auto qx = px;
        qb.first += j * r.op[1].cs;
        qx.first += j * r.op[2].cs;
        V y[N], z[N];
        load<W, N, 1>(y, qb, r.op[1].rs, 1);
        if constexpr (N == 2) {
            for (int i = 0; i < N; ++i) {
                V acc = inv[i * N] * y[0];
                for (int c = 1; c < N; ++c) acc += inv[i * N + c] * y[c];
                z[i] = acc;
            }
        } else {
            permute<N>(perm, y, z);
            lu_substitute<N>(a, inv_diag, z);
        }
        store<W, N, 1>(z, qx, redo, r.op[2].rs, 1);
    }
    return redo;
}

template <int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t cholesky_block(const lane_run<T>& r, std::size_t at,
                                                         int count) noexcept {
    using V = vec_t<T, W>;
    const auto pa = items<W>(r, 0, r.op[0], at, count);
    const auto pl = items<W>(r, 1, r.op[1], at, count);
    V m[N * N];
    load<W, N, N>(m, pa, r.op[0].rs, r.op[0].cs);
    // As cholesky_lower_inplace in src/linalg_cholesky_qr.cpp, reading only the lower triangle.
    V bad{};
    for (int k = 0; k < N; ++k) {
        V x = m[k * N + k];
        for (int j = 0; j < k; ++j) x -= mul(m[k * N + j], m[k * N + j]);  // unfused, as LU
        // NaN is not caught here (as LAPACK's potrf); it propagates.
        bad += x <= T(0) ? splat<V>(T(1)) : V{};
        const V d = vsqrt(x);
        m[k * N + k] = d;
        const V inv_d = T(1) / d;
        for (int i = k + 1; i < N; ++i) {
            V v = m[i * N + k];
            for (int j = 0; j < k; ++j) v -= mul(m[i * N + j], m[k * N + j]);
            m[i * N + k] = v * inv_d;
        }
    }
    for (int i = 0; i < N; ++i)
        for (int j = i + 1; j < N; ++j) m[i * N + j] = V{};
    const std::uint32_t redo = flag_bits(bad, count);
    store<W, N, N>(m, pl, redo, r.op[1].rs, r.op[1].cs);
    return redo;
}

template <int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t lu_block(const lane_run<T>& r, std::size_t at,
                                                         int count) noexcept {
    using V = vec_t<T, W>;
    const auto pa = items<W>(r, 0, r.op[0], at, count);
    const auto plu = items<W>(r, 1, r.op[1], at, count);
    const auto pp = items<W>(r, 2, r.piv, at, count);
    V a[N * N], perm[N], sign, inv_diag[N];
    load<W, N, N>(a, pa, r.op[0].rs, r.op[0].cs);
    const std::uint32_t redo = flag_bits(factor_lu<N>(a, perm, sign, inv_diag), count);
    store<W, N, N>(a, plu, redo, r.op[1].rs, r.op[1].cs);
    for (int l = 0; l < count; ++l) {
        if (redo & (std::uint32_t{1} << l)) continue;
        for (int i = 0; i < N; ++i)
            pp.item(l)[i * r.piv.rs] = static_cast<std::int64_t>(perm[i][l]);
    }
    return redo;
}

/// The determinants of the block's items (closed forms up to Closed x Closed); `redo` gets the
/// items to hand back.
template <int W, int N, int Closed, class T>
[[gnu::always_inline]] inline vec_t<T, W> block_determinants(const lane_run<T>& r, std::size_t at,
                                                             int count,
                                                             std::uint32_t& redo) noexcept {
    using V = vec_t<T, W>;
    V a[N * N];
    load<W, N, N>(a, items<W>(r, 0, r.op[0], at, count), r.op[0].rs, r.op[0].cs);
    V bad;
    const V det = determinant<N, Closed>(a, bad);
    redo = flag_bits(bad, count);
    return det;
}

template <int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t det_block(const lane_run<T>& r, std::size_t at,
                                                         int count) noexcept {
    using V = vec_t<T, W>;
    std::uint32_t redo;
    const V out[1] = {block_determinants<W, N, 4>(r, at, count, redo)};
    store<W, 1, 1>(out, items<W>(r, 1, r.op[1], at, count), redo, 0, 0);
    return redo;
}

template <int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t slogdet_block(const lane_run<T>& r, std::size_t at,
                                                         int count) noexcept {
    std::uint32_t redo;
    const vec_t<T, W> det = block_determinants<W, N, 3>(r, at, count, redo);
    // One logarithm per item, in scalar code: a usable determinant is normal and finite, so its
    // logarithm is exact to rounding; the others are redone through the pivots' logarithms.
    const auto ps = items<W>(r, 1, r.op[1], at, count);
    const auto pl = items<W>(r, 2, r.op[2], at, count);
    for (int l = 0; l < count; ++l) {
        if (redo & (std::uint32_t{1} << l)) continue;
        const T d = det[l];
        *ps.item(l) = d < T(0) ? T(-1) : T(1);
        *pl.item(l) = std::log(d < T(0) ? -d : d);
    }
    return redo;
}

/// Reads block b's N x N matrices of operand 0 into a; a block without items gets zero matrices,
/// which a Jacobi kernel finishes at once.
template <int W, int N, class T, class V>
[[gnu::always_inline]] inline void load_block(V (&a)[N * N], const lane_run<T>& r, std::size_t at,
                                              int count, int b) noexcept {
    const int c = block_count<W>(count, b);
    if (c == 0) {
        for (V& x : a) x = V{};
        return;
    }
    load<W, N, N>(a, items<W>(r, 0, r.op[0], at + static_cast<std::size_t>(b * W), c), r.op[0].rs,
                  r.op[0].cs);
}

/// Calls f(b, first, c, skip) for each of the B blocks of a call that has items: `first` its first
/// item, `c` how many it has, `skip` the bits of `redo` (the call's) that are its own.
template <int W, int B, class F>
[[gnu::always_inline]] inline void for_each_block(std::size_t at, int count, std::uint32_t redo,
                                                  const F& f) noexcept {
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b) {
        const int c = block_count<W>(count, b);
        if (c > 0) f(b, at + static_cast<std::size_t>(b * W), c, redo >> (b * W) & low_bits(W));
    }
}

/// eigh (Vectors) and eigvalsh: operands a, w, v (eigh) or a, w (eigvalsh). Only a's lower
/// triangle is read, as on the per-matrix path; eigenvalues ascending, as Eigen gives them.
/// lane_blocks(eigh, N) blocks of W items side by side.
template <int W, int N, bool Vectors, class T>
[[gnu::always_inline]] inline std::uint32_t eigh_block(const lane_run<T>& r, std::size_t at,
                                                       int count) noexcept {
    using V = vec_t<T, W>;
    constexpr int B = lane_blocks(lane_op::eigh, N);
    V a[B][N * N], v[B][N * N], w[B][N], scale[B], bad[B], stuck[B];
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b) {
        load_block<W, N>(a[b], r, at, count, b);
        for (int i = 0; i < N; ++i)
            for (int j = i + 1; j < N; ++j) a[b][i * N + j] = a[b][j * N + i];
        scale[b] = scale_down<N * N>(a[b], bad[b]);
        if constexpr (Vectors) set_identity<N>(v[b]);
    }
    jacobi_eigen<N, Vectors>(a, v, stuck);
    std::uint32_t redo = 0;
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b) {
        for (int i = 0; i < N; ++i) w[b][i] = a[b][i * N + i] * scale[b];
        sort_columns<N, false>(w[b], Vectors ? v[b] : nullptr, nullptr);
        redo |= flag_bits(bad[b] + stuck[b], block_count<W>(count, b)) << (b * W);
    }
    if (redo == low_bits(count)) return redo;
    for_each_block<W, B>(at, count, redo, [&](int b, std::size_t first, int c, std::uint32_t skip)
                                              __attribute__((always_inline)) {
        store<W, N, 1>(w[b], items<W>(r, 1, r.op[1], first, c), skip, r.op[1].rs, 1);
        if constexpr (Vectors)
            store<W, N, N>(v[b], items<W>(r, 2, r.op[2], first, c), skip, r.op[2].rs,
                           r.op[2].cs);
    });
    return redo;
}

/// svd after the rotations, one block: sigma gets the singular values (descending, scaled back),
/// a the columns of U (when Vectors, columns of V in v carried along by the sort); bad gets the
/// lanes svd_block hands back.
template <int N, bool Vectors, class V>
[[gnu::always_inline]] inline void finish_svd(V (&a)[N * N], V (&v)[N * N], V (&sigma)[N],
                                              V scale, V& bad) noexcept {
    using T = elem_t<V>;
    for (int j = 0; j < N; ++j) {  // squared column norms first: sorted, then rooted
        V x = mul(a[j], a[j]);
        for (int i = 1; i < N; ++i) x += a[i * N + j] * a[i * N + j];
        // svd at N = 3 hands back a column too short for the relative orthogonality test: with
        // N^2 epsilon^2 |a_p|^2 |a_q|^2 below the smallest normal number, jacobi_svd's absolute
        // floor decides instead, and U's columns need not be orthogonal.
        if constexpr (Vectors && N > 2) {
            constexpr T eps = std::numeric_limits<T>::epsilon();
            constexpr T scale2 = T(N * N) * eps * eps;
            bad += x * x * scale2 < std::numeric_limits<T>::min() ? splat<V>(T(1)) : V{};
        }
        sigma[j] = x;
    }
    sort_columns<N, true>(sigma, a, Vectors ? v : nullptr);
    for (int j = 0; j < (N == 2 ? 1 : N); ++j) sigma[j] = vsqrt(sigma[j]);
    if constexpr (N == 2) {
        // The one rotation leaves a_0 . a_1 at the rounding of the column updates, about
        // epsilon |a_0|^2 (a_0 the larger column now): too much for a_1 / |a_1| to be orthogonal
        // to a_0 / |a_0| when a_1 is much smaller. a_0's direction is accurate, so U is a_0's
        // unit vector and that vector turned by 90 degrees, and the smaller singular value is
        // a_1's length along the second (the part along the first, ~epsilon |A|, is a backward
        // error of that size). |a_0| >= |A|_F / sqrt(2) >= 1 / sqrt(2) unless A = 0.
        if constexpr (Vectors) bad += sigma[0] == T(0) ? splat<V>(T(1)) : V{};
        const V inv = sigma[0] == T(0) ? V{} : T(1) / sigma[0];
        const V u00 = a[0] * inv, u10 = a[2] * inv;
        const V along = u00 * a[3] - mul(u10, a[1]);  // a_1 . (-u10, u00)
        // At most sigma[0]: with equal singular values the projection can exceed it by an ulp.
        const V size = along < T(0) ? -along : along;
        sigma[1] = size > sigma[0] ? sigma[0] : size;
        a[0] = u00;
        a[2] = u10;
        a[1] = along < T(0) ? u10 : -u10;
        a[3] = along < T(0) ? -u00 : u00;
    } else if constexpr (Vectors) {
        for (int j = 0; j < N; ++j) {
            const V inv = T(1) / sigma[j];
            for (int i = 0; i < N; ++i) a[i * N + j] *= inv;
        }
    }
    for (int j = 0; j < N; ++j) sigma[j] *= scale;
}

/// svd (Vectors) and svdvals: operands a, u, s, vh (svd) or a, s (svdvals); singular values
/// descending. At N = 3 svd also hands back the lanes with a singular value too small for its
/// column of U to be kept orthogonal to the others (below (min / 9 epsilon^2)^(1/4) of the scaled
/// matrix: about 5e-70 in double, 5e-7 in float; nearly rank-deficient items, left to the
/// per-matrix path); at N = 2 only A = 0.
template <int W, int N, bool Vectors, class T>
[[gnu::always_inline]] inline std::uint32_t svd_block(const lane_run<T>& r, std::size_t at,
                                                      int count) noexcept {
    using V = vec_t<T, W>;
    constexpr int B = lane_blocks(lane_op::svd, N);
    V a[B][N * N], v[B][N * N], scale[B], bad[B], stuck[B];
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b) {
        load_block<W, N>(a[b], r, at, count, b);
        scale[b] = scale_down<N * N>(a[b], bad[b]);
        if constexpr (Vectors) set_identity<N>(v[b]);
    }
    jacobi_svd<N, Vectors>(a, v, stuck);
    std::uint32_t redo = 0;
    V sigma[B][N];
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b) {
        bad[b] += stuck[b];
        finish_svd<N, Vectors>(a[b], v[b], sigma[b], scale[b], bad[b]);
        redo |= flag_bits(bad[b], block_count<W>(count, b)) << (b * W);
    }
    if (redo == low_bits(count)) return redo;
    constexpr int s_op = Vectors ? 2 : 1;
    for_each_block<W, B>(at, count, redo, [&](int b, std::size_t first, int c, std::uint32_t skip)
                                              __attribute__((always_inline)) {
        store<W, N, 1>(sigma[b], items<W>(r, s_op, r.op[s_op], first, c), skip, r.op[s_op].rs, 1);
        if constexpr (Vectors) {
            store<W, N, N>(a[b], items<W>(r, 1, r.op[1], first, c), skip, r.op[1].rs, r.op[1].cs);
            V vh[N * N];  // V^T: row j of vh is column j of V
            for (int i = 0; i < N; ++i)
                for (int j = 0; j < N; ++j) vh[i * N + j] = v[b][j * N + i];
            store<W, N, N>(vh, items<W>(r, 3, r.op[3], first, c), skip, r.op[3].rs, r.op[3].cs);
        }
    });
    return redo;
}

template <lane_op Op, int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t run_block(const lane_run<T>& r, std::size_t at,
                                                      int count) noexcept {
    if constexpr (Op == lane_op::inverse) return inverse_block<W, N>(r, at, count);
    else if constexpr (Op == lane_op::solve) return solve_block<W, N>(r, at, count);
    else if constexpr (Op == lane_op::cholesky) return cholesky_block<W, N>(r, at, count);
    else if constexpr (Op == lane_op::lu) return lu_block<W, N>(r, at, count);
    else if constexpr (Op == lane_op::det) return det_block<W, N>(r, at, count);
    else if constexpr (Op == lane_op::slogdet) return slogdet_block<W, N>(r, at, count);
    else if constexpr (Op == lane_op::eigh) return eigh_block<W, N, true>(r, at, count);
    else if constexpr (Op == lane_op::eigvalsh) return eigh_block<W, N, false>(r, at, count);
    else if constexpr (Op == lane_op::svd) return svd_block<W, N, true>(r, at, count);
    else return svd_block<W, N, false>(r, at, count);
}

/// The lane_fn of src/linalg_lanes.hpp: the run's blocks from `at` on, lane_blocks(Op, N) at a
/// time, until one hands items back.
template <lane_op Op, int W, int N, class T>
[[gnu::always_inline]] inline std::uint32_t run_blocks(const lane_run<T>& r,
                                                       std::size_t& at) noexcept {
    constexpr int items_per_call = W * lane_blocks(Op, N);
    static_assert(items_per_call <= 32, "the bits of a call's items are a std::uint32_t");
    // A local index: the blocks' stores may write anything as far as the compiler knows, `at`
    // included, which it then stored and reloaded once per block.
    for (std::size_t i = at; i < r.count; i += items_per_call) {
        const std::size_t left = r.count - i;
        const int count = left < items_per_call ? static_cast<int>(left) : items_per_call;
        if (const std::uint32_t redo = run_block<Op, W, N>(r, i, count)) {
            at = i;
            return redo;
        }
    }
    at = r.count;
    return 0;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace lanes
}  // namespace tessera::detail
