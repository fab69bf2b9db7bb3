// eigen_native.cpp - the Eigen fixed-size loops of small_shapes.hpp (products) and
// linalg_loops.hpp (solve, inverse, cholesky, det, svd, eigh) compiled with -march=native, in a
// shared library of its own with hidden symbols: linked into the benchmarks beside the templates
// compiled for the build's target, they would be one definition with two bodies, and the linker
// would keep either.
#include "linalg_loops.hpp"
#include "small_shapes.hpp"

#include <cstddef>
#include <utility>

extern "C" __attribute__((visibility("default"))) bool tessera_bench_eigen_native(
    int bytes, int m, int k, int n, const void* a, const void* b, void* c, std::size_t batch) {
    if (bytes == 4)
        return tessera_bench::eigen_fixed_product<float>(m, k, n, static_cast<const float*>(a),
                                                         static_cast<const float*>(b),
                                                         static_cast<float*>(c), batch);
    return tessera_bench::eigen_fixed_product<double>(m, k, n, static_cast<const double*>(a),
                                                      static_cast<const double*>(b),
                                                      static_cast<double*>(c), batch);
}

extern "C" __attribute__((visibility("default"))) const char* tessera_bench_eigen_native_simd() {
    return Eigen::SimdInstructionSetsInUse();
}

extern "C" __attribute__((visibility("default"))) bool tessera_bench_eigen_native_linalg(
    int bytes, int op, int n, const void* a, const void* b, void* out, void* out2, void* out3,
    std::size_t batch) {
    const auto o = static_cast<tessera_bench::linalg_op>(op);
    if (bytes == 4)
        return tessera_bench::eigen_linalg<float>(
            o, n, static_cast<const float*>(a), static_cast<const float*>(b),
            static_cast<float*>(out), static_cast<float*>(out2), static_cast<float*>(out3), batch);
    return tessera_bench::eigen_linalg<double>(
        o, n, static_cast<const double*>(a), static_cast<const double*>(b),
        static_cast<double*>(out), static_cast<double*>(out2), static_cast<double*>(out3), batch);
}
