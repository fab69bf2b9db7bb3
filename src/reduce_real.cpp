// The reductions of float and double (the engine in tessera/detail/reduce_runner.hpp), compiled
// here once instead of in every file that calls them.
#define TESSERA_DEFINE_REDUCTIONS  // keeps the instantiation macros of reduce_runner.hpp
#include <tessera/detail/reduce_runner.hpp>

namespace tessera::detail::reductions {

TESSERA_REAL_REDUCTIONS(, float)
TESSERA_REAL_REDUCTIONS(, double)

}  // namespace tessera::detail::reductions
