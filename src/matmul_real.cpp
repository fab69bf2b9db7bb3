// The matrix-product engines (src/matmul_engine.hpp) for float and double; complex types are
// compiled in src/matmul_complex.cpp, in parallel.
#include "matmul_engine.hpp"

namespace tessera::detail {

TESSERA_INSTANTIATE_MATMUL(float)
TESSERA_INSTANTIATE_MATMUL(double)

}  // namespace tessera::detail
