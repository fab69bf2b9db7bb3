// Must not compile: tessera::log takes floating element types only. The ctest test
// compile_fail.log_of_int builds this file and passes only when the compiler rejects the call
// through the op's element-type constraint (the diagnostic names is_floating and T = int).
#include <tessera/ops/elementwise.hpp>

void log_of_int(tessera::session& s, const tessera::tensor<int>& ints) {
    auto logs = tessera::log(s, ints);
    static_cast<void>(logs);
}
