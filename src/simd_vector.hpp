// src/simd_vector.hpp - the portable SIMD vectors of the library's kernels: GCC's vector extension
// (also in clang), whose arithmetic, comparisons and selects compile to whatever instructions the
// enclosing function targets. Private to the library.
#pragma once

namespace tessera::detail {

template <class T, int Lanes>
struct vec_of {
    typedef T type __attribute__((vector_size(Lanes * sizeof(T))));
};
/// Lanes elements of T in one vector.
template <class T, int Lanes>
using vec_t = typename vec_of<T, Lanes>::type;

/// v, which the optimiser may not see through: it must exist, computed, in a register.
template <class V>
[[gnu::always_inline]] inline V opaque(V v) noexcept {
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
    // clang checks the operand's size against the function's own target, before inlining into
    // the kernels' AVX2 and AVX-512 clones: wider vectors go through memory there, and so do
    // narrower ones and scalars, some of which its register allocator rejected in the
    // small-product kernels.
    if constexpr (sizeof(V) == 16)
        asm("" : "+v"(v));
    else
        asm("" : "+m"(v));
#elif defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    asm("" : "+v"(v));  // "v": any vector register, zmm16-31 included where there are 32
#elif defined(__GNUC__) && defined(__aarch64__)
    asm("" : "+w"(v));  // "w": any SIMD register
#elif defined(__GNUC__)
    asm("" : "+m"(v));  // elsewhere through memory: slower, but still seen by nothing
#endif
    return v;
}

}  // namespace tessera::detail

// The target attribute of the AVX-512 compilations of the kernels: AVX-512 F/VL/BW/DQ (the level
// host_kernel_isa() calls avx512), preferring 512-bit vectors, which GCC would otherwise split.
#if defined(__clang__)
// clang has no prefer-vector-width target feature (and would ignore the whole attribute).
#define TESSERA_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq"
#else
#define TESSERA_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512"
#endif
