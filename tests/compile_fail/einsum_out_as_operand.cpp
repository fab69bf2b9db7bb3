// Must not compile cleanly: einsum's out form takes the operands as one list, so a destination
// written as one more argument is an operand of the allocating form, whose result is then
// dropped. The ctest test compile_fail.einsum_out_as_operand builds this file with unused
// results as errors and passes only when the diagnostic shows the out form's spelling.
#include <tessera/ops/einsum.hpp>

void einsum_out_as_operand(tessera::session& s, const tessera::tensor<float>& a,
                           const tessera::tensor<float>& b, tessera::tensor<float>& out) {
    tessera::einsum(s, "ij,jk->ik", a, b, out);
}
