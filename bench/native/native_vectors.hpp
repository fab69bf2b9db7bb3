// bench/native/native_vectors.hpp - what the floors under the benchmarks' targets share
// (lane_floors.cpp, product_floors.cpp), compiled with -march=native: the vector width of the
// level the library's kernels use on this CPU, and one vectorised read of an array. Its
// definitions follow -march: include it only in the tessera_bench_eigen_native library, whose
// files all share one -march and whose symbols are hidden.
#pragma once

#include <cstddef>
#include <cstring>

#include "simd_vector.hpp"

namespace tessera_bench::native {

// The vector width of the level the library picks on this CPU (host_kernel_isa: AVX-512 with
// F/VL/BW/DQ, AVX2 with FMA, else the baseline's 16 bytes).
#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
inline constexpr int vector_bytes = 64;
#elif defined(__AVX2__) && defined(__FMA__)
inline constexpr int vector_bytes = 32;
#else
inline constexpr int vector_bytes = 16;
#endif

/// The sum of the `count` elements at `in`, eight vectors at a time into eight sums, so that the
/// loads and not the additions' latency set the pace (two loads a cycle against additions of
/// three or four cycles); the vectors left after the last eight and the elements after the last
/// vector go into the sums too (the latter through a zeroed vector), so that no chain of scalar
/// additions lengthens the read.
template <class T>
T read_all(const T* in, std::size_t count) {
    constexpr std::size_t w = vector_bytes / sizeof(T);
    constexpr std::size_t sums = 8;
    using V = tessera::detail::vec_t<T, static_cast<int>(w)>;
    V s[sums] = {};
    std::size_t i = 0;
    for (; i + sums * w <= count; i += sums * w)
        for (std::size_t j = 0; j < sums; ++j) {
            V x;
            std::memcpy(&x, in + i + j * w, sizeof(V));
            s[j] += x;
        }
    for (std::size_t j = 0; i + w <= count; i += w, ++j) {
        V x;
        std::memcpy(&x, in + i, sizeof(V));
        s[j] += x;
    }
    V last{};
    std::memcpy(&last, in + i, (count - i) * sizeof(T));
    s[sums - 1] += last;
    for (std::size_t half = sums / 2; half > 0; half /= 2)
        for (std::size_t j = 0; j < half; ++j) s[j] += s[j + half];
    T r = 0;
    for (std::size_t l = 0; l < w; ++l) r += s[0][l];
    return r;
}

}  // namespace tessera_bench::native
