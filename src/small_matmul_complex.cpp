// The tiny-matrix kernels (src/small_matmul_kernels.hpp) for complex<float> and complex<double>:
// Eigen's fixed-size products, compiled for the build's target only (see small_kernels::pick).

// GCC's -Wpsabi note about passing the kernels' vectors by value is switched off for this file in
// CMakeLists.txt (a pragma here does not reach it).
#include "small_matmul_kernels.hpp"

#include <complex>

namespace tessera::detail {

template void run_small_batch<std::complex<float>>(kernel_isa, small_size,
                                                   const small_batch_args<std::complex<float>>&) noexcept;
template void run_small_batch<std::complex<double>>(kernel_isa, small_size,
                                                    const small_batch_args<std::complex<double>>&) noexcept;

}  // namespace tessera::detail
