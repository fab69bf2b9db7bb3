// The reductions of int32 and int64 (the engine in tessera/detail/reduce_runner.hpp), compiled
// here once instead of in every file that calls them.
#define TESSERA_DEFINE_REDUCTIONS  // keeps the instantiation macros of reduce_runner.hpp
#include <tessera/detail/reduce_runner.hpp>

#include <cstdint>

namespace tessera::detail::reductions {

TESSERA_REAL_REDUCTIONS(, std::int32_t)
TESSERA_REAL_REDUCTIONS(, std::int64_t)

}  // namespace tessera::detail::reductions
