// bench/native/product_floors.cpp - floors under small_gemm_bench's products, compiled with
// -march=native as the Eigen loops beside them. Every product of a batch multiplies and adds each
// of its m k n terms, reads its operands and writes its result; each of the three takes some least
// time on the machine, and none of them can be left out, so the longest of the three is a floor
// under any implementation's time:
// - the multiply-adds: the time one vector multiply-add takes at each width (16, 32 and 64
//   bytes), measured on independent chains so that the rate at which they issue, not their
//   latency, sets the pace;
// - the reads: one vectorised read of A and B;
// - the writes: one vectorised write of C.
#include <cstddef>
#include <cstring>

#include "native_vectors.hpp"

namespace {

using tessera_bench::native::read_all;
using tessera_bench::native::vector_bytes;

// The widest vectors of T the library's kernels use on this CPU.
template <class T>
using widest = tessera::detail::vec_t<T, vector_bytes / static_cast<int>(sizeof(T))>;

// `count` elements written at `out`, a vector at a time (of a value the compiler cannot see, so
// that the loop stays a loop of vector stores).
template <class T>
void write_all(T* out, std::size_t count) {
    using V = widest<T>;
    constexpr std::size_t w = sizeof(V) / sizeof(T);
    volatile T seed = T{1};
    const T value = seed;
    const V fill = V{} + value;
    std::size_t i = 0;
    for (; i + w <= count; i += w) std::memcpy(out + i, &fill, sizeof(V));
    for (; i < count; ++i) out[i] = value;
}

// Enough chains to keep every multiply-add unit busy: two or four units of four cycles' latency
// keep eight or sixteen in flight. Sixteen and the two constants fit the 32 vector registers of
// AVX-512 and AArch64; twelve, the sixteen of AVX2.
#if defined(__AVX512F__) || defined(__aarch64__)
constexpr int chain_count = 16;
#else
constexpr int chain_count = 12;
#endif

// Each step is a multiply and an add, which -march=native with FMA contracts into one instruction
// (the file is compiled with -ffp-contract=fast, bench/CMakeLists.txt). Vectors wider than the
// CPU's are compiled as two or four of its own, so they give at most its rate.
template <class T, int Bytes>
T chains(long steps) {
    constexpr int lanes = Bytes / static_cast<int>(sizeof(T));
    using V = tessera::detail::vec_t<T, lanes>;
    constexpr int count = chain_count;
    volatile T seed = T{1};  // unknown to the compiler, so that nothing is folded
    const T s = seed;
    V acc[count];
    for (int i = 0; i < count; ++i) acc[i] = V{} + (s + static_cast<T>(i) / 1024);
    const V mul = V{} + s * static_cast<T>(0.999), add = V{} + s / 1024;
    for (long step = 0; step < steps; ++step)
#pragma GCC unroll 16
        for (int i = 0; i < count; ++i) acc[i] = acc[i] * mul + add;
    V total{};
    for (int i = 0; i < count; ++i) total += acc[i];
    T sum{};
    for (int l = 0; l < lanes; ++l) sum += total[l];  // every lane used: none may be dropped
    return sum;
}

template <class T>
void run(int width_bytes, long steps, double* sink) {
    switch (width_bytes) {
        case 16:
            *sink = static_cast<double>(chains<T, 16>(steps));
            break;
        case 32:
            *sink = static_cast<double>(chains<T, 32>(steps));
            break;
        default:
            *sink = static_cast<double>(chains<T, 64>(steps));
            break;
    }
}

}  // namespace

/// The number of multiply-adds tessera_bench_fma_chains issues per step.
extern "C" __attribute__((visibility("default"))) int tessera_bench_fma_chain_count() {
    return chain_count;
}

/// One read of the `a_count` and `b_count` elements at a and b (`write` false), or one write of the
/// `c_count` elements at c (`write` true), of `bytes`-byte elements (4 or 8).
extern "C" __attribute__((visibility("default"))) void tessera_bench_move_bytes(
    int bytes, bool write, const void* a, std::size_t a_count, const void* b, std::size_t b_count,
    void* c, std::size_t c_count, double* sink) {
    const auto go = [&]<class T>(T) {
        if (write)
            write_all(static_cast<T*>(c), c_count);
        else
            *sink = static_cast<double>(read_all(static_cast<const T*>(a), a_count) +
                                        read_all(static_cast<const T*>(b), b_count));
    };
    if (bytes == 4)
        go(float{});
    else
        go(double{});
}

/// Runs `steps` steps of tessera_bench_fma_chain_count() independent vector multiply-adds of
/// `bytes`-byte elements (4 or 8) at `width_bytes` (16, 32 or 64).
extern "C" __attribute__((visibility("default"))) void tessera_bench_fma_chains(int bytes,
                                                                                int width_bytes,
                                                                                long steps,
                                                                                double* sink) {
    if (bytes == 4)
        run<float>(width_bytes, steps, sink);
    else
        run<double>(width_bytes, steps, sink);
}
