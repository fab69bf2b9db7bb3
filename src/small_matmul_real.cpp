// The tiny-matrix kernels (src/small_matmul_kernels.hpp) for float and double, each compiled for
// AVX-512, AVX2+FMA and the build's baseline, and the register-blocked kernel for any small shape;
// complex types are in src/small_matmul_complex.cpp.

// GCC's -Wpsabi note about passing the kernels' vectors by value is switched off for this file in
// CMakeLists.txt (a pragma here does not reach it).
#include "small_gemm_kernels.hpp"
#include "small_matmul_kernels.hpp"

namespace tessera::detail {

template void run_small_batch<float>(kernel_isa, small_size, const small_batch_args<float>&) noexcept;
template void run_small_batch<double>(kernel_isa, small_size, const small_batch_args<double>&) noexcept;
template small_batch_fn<float> small_batch_kernel<float>(kernel_isa, small_size) noexcept;
template small_batch_fn<double> small_batch_kernel<double>(kernel_isa, small_size) noexcept;
template void run_small_gemm<float>(kernel_isa, const small_gemm_args<float>&) noexcept;
template void run_small_gemm<double>(kernel_isa, const small_gemm_args<double>&) noexcept;
template small_gemm_plan<float> plan_small_gemm<float>(kernel_isa,
                                                       const small_gemm_args<float>&) noexcept;
template small_gemm_plan<double> plan_small_gemm<double>(kernel_isa,
                                                         const small_gemm_args<double>&) noexcept;

}  // namespace tessera::detail
