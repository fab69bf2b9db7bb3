// src/gemm.hpp - Eigen's sequential GEMM kernel as tessera's matrix products call it: how the
// kernel can address a strided matrix, its cache blocking, and the call itself with pack buffers
// that tessera provides (so a warm session never reaches the heap). Private to the library
// (src/matmul_engine.hpp); includes Eigen.
#pragma once

// eigen.hpp configures Eigen, so it comes before anything that may include Eigen.
#include <tessera/eigen.hpp>
#include <tessera/detail/matmul.hpp>

#include <algorithm>
#include <cstddef>

namespace tessera::detail {

/// How Eigen's GEMM kernel can address a matrix.
enum class storage : unsigned char { row_major, col_major, other };

/// A matrix as Eigen's kernel sees it: storage order and leading dimension.
struct eigen_layout {
    storage order = storage::other;
    std::ptrdiff_t ld = 0;
};

/// Returns the layout under which Eigen's kernel can read (or, with `output`, write) `x`: unit
/// stride along one axis and a positive leading dimension (for an output, one that keeps the
/// rows or columns apart). Extent-1 axes may have any stride. `other` means "copy it first".
template <class T>
eigen_layout layout_of(const matrix_ref<T>& x, bool output) noexcept {
    const std::ptrdiff_t rows = std::max<std::ptrdiff_t>(x.rows, 1);
    const std::ptrdiff_t cols = std::max<std::ptrdiff_t>(x.cols, 1);
    if (x.cs == 1 || cols == 1) {
        const std::ptrdiff_t ld = rows == 1 ? cols : x.rs;
        if (ld >= (output ? cols : 1)) return {storage::row_major, ld};
    }
    if (x.rs == 1 || rows == 1) {
        const std::ptrdiff_t ld = cols == 1 ? rows : x.cs;
        if (ld >= (output ? rows : 1)) return {storage::col_major, ld};
    }
    return {};
}

/// The cache blocking of Eigen's kernel for one product, and the pack-buffer bytes it needs.
struct gemm_blocking {
    std::ptrdiff_t kc = 0, mc = 0, nc = 0;
    std::size_t offset_b = 0;  ///< bytes from the buffer's start to the packed rhs
    std::size_t bytes = 0;     ///< total bytes, a multiple of 64
};

/// Returns Eigen's own blocking for an m x n x k product whose result is stored `c_order`.
/// A buffer sized for one product also serves every smaller one (Eigen clamps to the sizes).
template <class T>
gemm_blocking gemm_blocking_for(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k,
                                storage c_order) noexcept {
    gemm_blocking g;
    // Eigen's kernel writes a column-major result; a row-major one is computed as its transpose.
    g.mc = c_order == storage::row_major ? n : m;
    g.nc = c_order == storage::row_major ? m : n;
    g.kc = k;
    Eigen::internal::computeProductBlockingSizes<T, T, 1>(g.kc, g.mc, g.nc, Eigen::Index{1});
    const auto round64 = [](std::size_t bytes) { return (bytes + 63) / 64 * 64; };
    // The packing routines store whole (aligned) packets, so each panel starts on 64 bytes.
    g.offset_b = round64(static_cast<std::size_t>(g.kc * g.mc) * sizeof(T));
    g.bytes = g.offset_b + round64(static_cast<std::size_t>(g.kc * g.nc) * sizeof(T));
    return g;
}

namespace gemm_impl {

// Eigen's blocking object with pack buffers that tessera owns; Eigen allocates nothing then.
template <class T>
class borrowed_blocking : public Eigen::internal::level3_blocking<T, T> {
public:
    borrowed_blocking(const gemm_blocking& g, void* buffer) noexcept {
        this->m_kc = g.kc;
        this->m_mc = g.mc;
        this->m_nc = g.nc;
        this->m_blockA = static_cast<T*>(buffer);
        this->m_blockB = reinterpret_cast<T*>(static_cast<char*>(buffer) + g.offset_b);
    }
};

constexpr int eigen_order(storage s) noexcept {
    return s == storage::row_major ? Eigen::RowMajor : Eigen::ColMajor;
}

template <class T, int LhsOrder, int RhsOrder>
void run(std::ptrdiff_t rows, std::ptrdiff_t cols, std::ptrdiff_t depth, const T* lhs,
         std::ptrdiff_t ld_lhs, const T* rhs, std::ptrdiff_t ld_rhs, T* res, std::ptrdiff_t ld_res,
         T alpha, borrowed_blocking<T>& blocking) {
    // The sequential kernel: no GemmParallelInfo, so no OpenMP whatever the flags.
    Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, LhsOrder, false, T, RhsOrder,
                                                   false, Eigen::ColMajor, 1>::run(
        rows, cols, depth, lhs, ld_lhs, rhs, ld_rhs, res, 1, ld_res, alpha, blocking, nullptr);
}

}  // namespace gemm_impl

/// c += alpha * a @ b on the calling thread, with Eigen's blocked kernel. All three layouts must
/// be Eigen-compatible (not `other`); `g` must come from gemm_blocking_for with c's order and
/// sizes at least these; `buffer` holds g.bytes bytes, 64-byte aligned. Allocates nothing.
template <class T>
void gemm_accumulate(const matrix_ref<const T>& a, eigen_layout la, const matrix_ref<const T>& b,
                     eigen_layout lb, const matrix_ref<T>& c, eigen_layout lc, T alpha,
                     const gemm_blocking& g, void* buffer) {
    using gemm_impl::eigen_order;
    gemm_impl::borrowed_blocking<T> blocking(g, buffer);
    const std::ptrdiff_t m = c.rows, n = c.cols, k = a.cols;
    // Column-major result: C = A B. Row-major result: C^T = B^T A^T, where the transpose of a
    // row-major matrix is the same memory read column-major.
    const bool transpose = lc.order == storage::row_major;
    const T* lhs = transpose ? b.data : a.data;
    const T* rhs = transpose ? a.data : b.data;
    const std::ptrdiff_t ld_lhs = transpose ? lb.ld : la.ld;
    const std::ptrdiff_t ld_rhs = transpose ? la.ld : lb.ld;
    const auto flip = [transpose](storage s) {
        return !transpose ? s : s == storage::row_major ? storage::col_major : storage::row_major;
    };
    const int lhs_order = eigen_order(flip(transpose ? lb.order : la.order));
    const int rhs_order = eigen_order(flip(transpose ? la.order : lb.order));
    const std::ptrdiff_t rows = transpose ? n : m, cols = transpose ? m : n;
    constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
    if (lhs_order == C && rhs_order == C)
        gemm_impl::run<T, C, C>(rows, cols, k, lhs, ld_lhs, rhs, ld_rhs, c.data, lc.ld, alpha, blocking);
    else if (lhs_order == C)
        gemm_impl::run<T, C, R>(rows, cols, k, lhs, ld_lhs, rhs, ld_rhs, c.data, lc.ld, alpha, blocking);
    else if (rhs_order == C)
        gemm_impl::run<T, R, C>(rows, cols, k, lhs, ld_lhs, rhs, ld_rhs, c.data, lc.ld, alpha, blocking);
    else
        gemm_impl::run<T, R, R>(rows, cols, k, lhs, ld_lhs, rhs, ld_rhs, c.data, lc.ld, alpha, blocking);
}

}  // namespace tessera::detail
