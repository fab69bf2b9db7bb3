// src/linalg_lanes.hpp - the vocabulary of the SIMD-across-batch kernels of the batched linear
// algebra ops on real matrices of size 2 to 8 (src/linalg_lanes_kernels.hpp): a block of W items
// (W = the vector width in elements), their operands, and the look-up of a block kernel. The
// batch walk (src/linalg_batch.hpp) fills blocks and redoes the items a block hands back with the
// per-matrix kernels. Private to the library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

/// One [n, m] matrix (or [n] vector, cs unused; or scalar, both unused) of an operand: base
/// pointer and strides; the batch offsets of its items come separately.
template <class T>
struct operand {
    T* data = nullptr;
    std::ptrdiff_t rs = 0;
    std::ptrdiff_t cs = 0;
};

/// A run of items that lie at a constant step from each other in every operand (a stretch of the
/// batch's innermost axis), and the operands of the op, in the op's order (inverse: a, x; solve:
/// a, b, x; cholesky: a, l; lu: a, lu, piv; det: a, d; slogdet: a, sign, logabs).
template <class T>
struct lane_run {
    std::size_t count = 0;  // items in the run
    std::ptrdiff_t k = 0;   // solve: right-hand sides per item
    operand<T> op[3];
    operand<std::int64_t> piv;        // lu's pivots (operand 2)
    std::ptrdiff_t start[3] = {};     // element offset of the run's first item, per operand
    std::ptrdiff_t step[3] = {};      // and from one item to the next
};

/// The ops with block kernels.
enum class lane_op : unsigned char { inverse, solve, cholesky, lu, det, slogdet };
inline constexpr unsigned lane_op_count = 6;
inline constexpr int min_lane_n = 2;
inline constexpr int max_lane_n = 8;

/// Runs an op on the items of `run` from `at` on, W at a time. Returns 0, with `at` = run.count,
/// when all are done; or stops after a block with items it hands back to the per-matrix kernel
/// and returns them as bits (bit l: item at + l), with `at` at that block's first item.
template <class T>
using lane_fn = std::uint32_t (*)(const lane_run<T>& run, std::size_t& at) noexcept;

/// The block kernel of `op` for n x n matrices on this CPU, or nullptr when there is none (n
/// outside 2..8) or the SIMD-across-batch kernels are switched off; `lanes` is set to W.
template <class T>
lane_fn<T> find_lane_kernel(lane_op op, std::size_t n, int& lanes) noexcept;

}  // namespace tessera::detail
