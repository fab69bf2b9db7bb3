// The matrix-product engines (src/matmul_engine.hpp) for complex<float> and complex<double>; real
// types are compiled in src/matmul_real.cpp, in parallel.
#include "matmul_engine.hpp"

#include <complex>

namespace tessera::detail {

TESSERA_INSTANTIATE_MATMUL(std::complex<float>)
TESSERA_INSTANTIATE_MATMUL(std::complex<double>)

}  // namespace tessera::detail
