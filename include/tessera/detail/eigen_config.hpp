// tessera/detail/eigen_config.hpp - the one place where tessera includes Eigen/Core, configured
// so that Eigen never starts threads of its own. Every tessera file that uses Eigen (the matmul
// headers, eigen.hpp, the linalg sources) includes Eigen through this header first.
#pragma once

// tessera is not compiled with -fopenmp, but a user's translation unit may be. Eigen parallelises
// its GEMM with OpenMP whenever _OPENMP is defined, and Eigen::setNbThreads(1) does not stop it
// from asking OpenMP on the way; tessera's own arena supplies the parallelism (DESIGN.md section
// 6), so OpenMP in Eigen is compiled out here. Should Eigen already have been included with OpenMP
// on, tessera's products are still sequential per tile: they call Eigen's sequential GEMM kernel
// directly (detail/gemm.hpp), never the OpenMP driver around it.
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// GCC 12's AVX-512 intrinsics, which Eigen's kernels use when the build targets AVX-512 (e.g.
// TESSERA_ARCH=native), start from _mm512_undefined_*() and trip a false -Wmaybe-uninitialized
// (GCC bug 105593, fixed in GCC 13). This silences it where <immintrin.h> is first seen here; a
// translation unit that saw it earlier (through oneTBB, say) needs the same pragma up front.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#if !EIGEN_VERSION_AT_LEAST(3, 4, 0)
#error "tessera: Eigen 3.4 or newer is required"
#endif
