// The reductions of complex<float> and complex<double> (the engine in
// tessera/detail/reduce_runner.hpp), compiled here once instead of in every file that calls them.
#define TESSERA_DEFINE_REDUCTIONS  // keeps the instantiation macros of reduce_runner.hpp
#include <tessera/detail/reduce_runner.hpp>

#include <complex>

namespace tessera::detail::reductions {

TESSERA_NUMERIC_REDUCTIONS(, std::complex<float>)
TESSERA_NUMERIC_REDUCTIONS(, std::complex<double>)

}  // namespace tessera::detail::reductions
