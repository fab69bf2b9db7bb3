// tessera/detail/linalg_lanes.hpp - the switch between the two paths of the batched linear algebra
// ops (tessera/ops/linalg.hpp) on real matrices of size 2 to 8: the SIMD-across-batch kernels
// (one matrix per vector lane, a block of linalg_lane_width() matrices per instruction; the
// default) and the per-matrix kernels. Tests and benchmarks flip it to compare the two and to run
// every instruction-set level the CPU supports; applications have no reason to. Not included by
// tessera.hpp.
#pragma once

#include <tessera/detail/small_matmul.hpp>

#include <cstddef>

namespace tessera::detail {

/// Runs later batched ops on the SIMD-across-batch kernels compiled for `isa` (lowered to what
/// this CPU supports), or, with `on` false, on the per-matrix kernels. The default is on at
/// host_kernel_isa(). Not meant to be flipped while ops run on other threads.
void set_linalg_lanes(bool on, kernel_isa isa = host_kernel_isa()) noexcept;

/// Whether the SIMD-across-batch kernels are on.
bool linalg_lanes() noexcept;

/// Matrices per block of the SIMD-across-batch kernels now chosen, for elements of `element_size`
/// bytes (4 or 8): 16 or 8 with AVX-512, 8 or 4 with AVX2, 4 or 2 otherwise.
int linalg_lane_width(std::size_t element_size) noexcept;

}  // namespace tessera::detail
