// Must not compile: einsum does not promote float to double. The ctest test
// compile_fail.einsum_mixed_types builds this file and passes only when the compiler rejects the
// call with einsum's own diagnostic ("every operand must have the same element type").
#include <tessera/ops/einsum.hpp>

void einsum_of_mixed_types(tessera::session& s, const tessera::tensor<float>& a, const tessera::tensor<double>& b) {
    auto c = tessera::einsum(s, "ij,jk->ik", a, b);
    static_cast<void>(c);
}
