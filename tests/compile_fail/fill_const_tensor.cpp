// Must not compile: fill's out-parameter is a writable_tensor, and a const tensor is not one. The
// ctest test compile_fail.fill_const_tensor builds this file and passes only when the compiler
// rejects the call through that concept (the diagnostic names writable_tensor).
#include <tessera/ops/structural.hpp>

void fill_const_tensor(tessera::session& s, const tessera::tensor<float>& t) {
    tessera::fill(s, 1.0f, t);
}
