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

/// The most operands of an op with block kernels (svd's a, u, s, vh).
inline constexpr int max_lane_operands = 4;

/// A run of items that lie at a constant step from each other in every operand (a stretch of the
/// batch's innermost axis), and the operands of the op, in the op's order (inverse: a, x; solve:
/// a, b, x; cholesky: a, l; lu: a, lu, piv; det: a, d; slogdet: a, sign, logabs; eigh: a, w, v;
/// eigvalsh: a, w; svd: a, u, s, vh; svdvals: a, s).
template <class T>
struct lane_run {
    std::size_t count = 0;  // items in the run
    std::ptrdiff_t k = 0;   // solve: right-hand sides per item
    operand<T> op[max_lane_operands];
    operand<std::int64_t> piv;  // lu's pivots (operand 2)
    std::ptrdiff_t start[max_lane_operands] = {};  // element offset of the run's first item
    std::ptrdiff_t step[max_lane_operands] = {};   // and from one item to the next
};

/// The ops with block kernels: the factorisations for n = 2..8, the Jacobi ones (eigh, eigvalsh,
/// svd, svdvals) for n = 2 and 3.
enum class lane_op : unsigned char {
    inverse, solve, cholesky, lu, det, slogdet, eigh, eigvalsh, svd, svdvals
};
inline constexpr unsigned lane_op_count = 10;
inline constexpr int min_lane_n = 2;
inline constexpr int max_lane_n = 8;
inline constexpr int max_jacobi_lane_n = 3;

constexpr bool is_jacobi(lane_op op) noexcept {
    return op == lane_op::eigh || op == lane_op::eigvalsh || op == lane_op::svd ||
           op == lane_op::svdvals;
}

/// Blocks of W items a kernel of `op` on n x n matrices runs side by side: 2 for the Jacobi ops at
/// n = 3, whose rotations are one chain of square roots and divisions per block, so that a second
/// block's chain runs in the first one's waits (3 x 3 eigh and svd 1.5-1.6x faster per item
/// with AVX-512); else 1.
constexpr int lane_blocks(lane_op op, std::size_t n) noexcept {
    return is_jacobi(op) && n == 3 ? 2 : 1;
}

/// Runs an op on the items of `run` from `at` on, lane_blocks(op, n) W at a time. Returns 0, with
/// `at` = run.count, when all are done; or stops after a call with items it hands back to the
/// per-matrix kernel and returns them as bits (bit l: item at + l), with `at` at that call's first
/// item.
template <class T>
using lane_fn = std::uint32_t (*)(const lane_run<T>& run, std::size_t& at) noexcept;

/// The block kernel of `op` for n x n matrices on this CPU, or nullptr when there is none (n
/// outside 2..8, or above 3 for the Jacobi ops) or the SIMD-across-batch kernels are switched
/// off; `lanes` is set to the items of one call, lane_blocks(op, n) W.
template <class T>
lane_fn<T> find_lane_kernel(lane_op op, std::size_t n, int& lanes) noexcept;

}  // namespace tessera::detail
