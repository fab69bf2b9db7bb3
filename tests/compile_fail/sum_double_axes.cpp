// Must not compile: axes are integers. The ctest test compile_fail.sum_double_axes builds this
// file and passes only when the compiler rejects the list with axis_list's own message.
#include <tessera/ops/reduce.hpp>

#include <vector>

tessera::tensor<float> sum_double_axes(tessera::session& s, const tessera::tensor<float>& a) {
    return tessera::sum(s, a, std::vector<double>{0, 1});
}
