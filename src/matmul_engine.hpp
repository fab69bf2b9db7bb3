// src/matmul_engine.hpp - the engines under matmul, batched_matmul, tensordot, dot, vdot and outer
// (declared in tessera/detail/matmul.hpp): operand preparation (copies into workspace blocks only
// when a kernel cannot read the strides), the choice between the compile-time tiny kernels, the
// register-blocked kernel for any small real shape, a plain loop and Eigen's GEMM, and the split
// of the work into items for one inline-or-parallel dispatch per op. Private to the library:
// src/matmul_real.cpp and src/matmul_complex.cpp instantiate it (TESSERA_INSTANTIATE_MATMUL) for
// the four element types. Includes Eigen.
#pragma once

// gemm.hpp includes eigen.hpp, which configures Eigen, so it comes first.
#include "gemm.hpp"
#include "matmul_loops.hpp"

#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/iteration.hpp>
#include <tessera/detail/matmul.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/runtime.hpp>
#include <tessera/detail/small_matmul.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace tessera::detail {

/// Multiply-adds in a product per unit of the backend's grain (one elementwise addition). Eigen's
/// kernel and the tiny kernels run 25-75 multiply-adds per ns on one AVX-512 core against ~13
/// additions per ns for a streaming add, and 4 keeps the default build (SSE2) on the safe side:
/// a product runs inline below about 128k multiply-adds (a 50^3 GEMM).
inline constexpr std::size_t fma_per_work_unit = 4;

/// The smallest tile side a large product is split into; smaller tiles waste Eigen's register
/// blocking (up to 48 rows by 8 columns with AVX-512).
inline constexpr std::size_t min_tile = 64;

/// A batch of fewer large matrices than this is split into tiles, to at most about this many items
/// in all, so that up to that many threads find work. A matrix of at least tiled_from_fma
/// multiply-adds (an 80^3 product, about where a second thread pays) is split in two or more, and
/// into about one tile per tile_fma (a 160^3 product: smaller tiles cost Eigen's kernel efficiency
/// on one thread). Fixed numbers, never derived from the thread count or the grain: a tile is one
/// Eigen GEMM whose blocking, and so the order of its sums, follows the tile's size, so a tiling
/// that followed the threads would give different bits on a different thread count.
inline constexpr std::size_t tiled_items = 64;
inline constexpr std::size_t tiled_from_fma = std::size_t{1} << 19;
inline constexpr std::size_t tile_fma = std::size_t{1} << 22;

/// Returns a * b, saturating at SIZE_MAX.
constexpr std::size_t saturating_mul(std::size_t a, std::size_t b) noexcept {
    std::size_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? static_cast<std::size_t>(-1) : r;
}

/// Returns `s` with `tail` appended (the caller keeps the rank within max_rank).
inline shape with_tail(const shape& s, std::size_t d0, std::size_t d1) noexcept {
    std::array<std::size_t, max_rank> dims{};
    std::size_t r = 0;
    for (const std::size_t d : s.dims()) dims[r++] = d;
    dims[r++] = d0;
    dims[r++] = d1;
    return shape::unchecked(std::span<const std::size_t>(dims.data(), r));
}

/// The matrix part (last two axes) of a view at element offset `offset`. An empty view's data may
/// be null (an operand with k = 0, say): it is never read, and gets no offset.
template <class T>
matrix_ref<T> matrix_at(const tensor_view<T>& v, std::ptrdiff_t offset) noexcept {
    const std::size_t r = v.rank();
    T* const data = v.size() == 0 ? v.data() : v.data() + offset;
    return {data, static_cast<std::ptrdiff_t>(v.extent(r - 2)),
            static_cast<std::ptrdiff_t>(v.extent(r - 1)), v.stride(r - 2), v.stride(r - 1)};
}

/// The thread's pack-buffer slot during a parallel product: oneTBB numbers the threads of an
/// arena 0..max_concurrency-1, and a thread runs one item at a time (Eigen's kernel never waits
/// on oneTBB, so no other item can start on it midway).
inline std::size_t pack_slot(std::size_t slots) noexcept {
    const int slot = arena_thread_index();
    TESSERA_CHECK(slot >= 0 && static_cast<std::size_t>(slot) < slots,
                  "matmul: a parallel product ran on a thread outside the arena");
    return static_cast<std::size_t>(slot);
}

/// How run_products computes each matrix: a fixed-size kernel, the register-blocked kernel for any
/// small real shape, a plain loop, or Eigen's GEMM.
enum class product_path { small, blocked, naive, gemm };

/// The path for products of [m, k] by [k, n] matrices; `plain`: c = a @ b, without alpha and
/// beta. One choice for a batch (run_products) and for a single product (matmul_2d), so that
/// both compute the same bits.
template <class T>
[[gnu::always_inline]] inline product_path product_path_for(std::size_t m, std::size_t n,
                                                            std::size_t k, bool plain) noexcept {
    const small_size size = classify_small(m, k, n);
    const bool blocked_fits = std::is_floating_point_v<T> && m <= small_gemm_max &&
                              n <= small_gemm_max && k <= small_gemm_max;
    if (k == 0) return product_path::naive;  // writes beta * c (or zeros)
    if (size != small_size::none && plain &&
        !(blocked_fits && blocked_beats_fixed(host_kernel_isa(), size, sizeof(T))))
        return product_path::small;
    if (blocked_fits) return product_path::blocked;
    if (m + n + k < naive_product_limit) return product_path::naive;
    return product_path::gemm;
}

/// Whether the kernels of `path` read (with `output`, write) matrix `x` in place, `lhs` when it is
/// A: dense row-major matrices for the tiny kernels; contiguous rows of B and C (A any strides)
/// for the blocked kernel; Eigen-readable ones for the GEMM path; any strides for the loop.
template <class T>
[[gnu::always_inline]] inline bool readable_by(product_path path, const matrix_ref<const T>& x,
                                               bool output, bool lhs) noexcept {
    switch (path) {
        case product_path::small:
            return (x.cs == 1 || x.cols == 1) && (x.rs == x.cols || x.rows == 1);
        case product_path::blocked:
            return lhs ||
                   ((x.cs == 1 || x.cols == 1) && (!output || x.rows == 1 || x.rs >= x.cols));
        case product_path::gemm: return layout_of(x, output).order != storage::other;
        case product_path::naive: break;
    }
    return true;
}

/// c = a @ b for every matrix of the batch (accumulate: c = alpha * a @ b + beta * c).
///
/// Preconditions (checked by the caller): a is [..., m, k], b is [..., k, n] with batch axes that
/// broadcast to c's, c is [batch..., m, n], writable, disjoint from a and b. Copies a, b (whole,
/// before broadcasting) into workspace blocks only when the path cannot read their strides, and
/// computes into a workspace block when it cannot write c's. One dispatch (inline or parallel).
template <class T>
void run_products(session& s, const tensor_view<const T>& a_in, const tensor_view<const T>& b_in,
                  const tensor_view<T>& c, bool accumulate, T alpha, T beta) {
    tensor_view<const T> a = a_in, b = b_in;
    const std::size_t r = c.rank();
    const std::size_t m = c.extent(r - 2), n = c.extent(r - 1), k = a.extent(a.rank() - 1);
    const shape batch = leading_axes(c.shape(), 2);
    const std::size_t count = batch.count();
    if (count == 0 || m == 0 || n == 0) return;
    if (!accumulate) {
        alpha = T{1};
        beta = T{0};
    }
    const bool plain = plain_product(accumulate, alpha, beta);

    const small_size size = classify_small(m, k, n);
    const product_path path = product_path_for<T>(m, n, k, plain);
    const auto usable = [&](const auto& v, bool output, bool lhs = false) {
        return readable_by<T>(path, matrix_at<const T>(v, 0), output, lhs);
    };
    tensor<T> a_copy, b_copy, c_temp;
    if (!usable(a, false, true)) {
        a_copy = contiguous_copy<T>(s, a);
        a = a_copy.view();
    }
    if (!usable(b, false)) {
        b_copy = contiguous_copy<T>(s, b);
        b = b_copy.view();
    }
    tensor_view<T> cw = c;
    if (!usable(c, true)) {
        c_temp = empty<T>(s, c.shape());
        cw = c_temp.view();
        if (beta != T{0}) copy_inline<T>(cw, c);
    }
    const tensor_view<const T> ab = broadcast_unchecked(a, with_tail(batch, m, k));
    const tensor_view<const T> bb = broadcast_unchecked(b, with_tail(batch, k, n));
    const stride_array sa = batch_strides(ab, 2, batch), sb = batch_strides(bb, 2, batch),
                       sc = batch_strides(cw, 2, batch);
    const iteration<3> batch_it = collapse<3>(batch, {&sa, &sb, &sc});

    // Items: matrices, or tiles of matrices when a few large products must share the threads. The
    // tiling is a function of the shapes alone (see tiled_items), so every thread count and grain
    // computes the same tiles, and the same bits.
    std::size_t tiles_m = 1, tiles_n = 1;
    const std::size_t fma = saturating_mul(saturating_mul(m, n), k);
    if (path == product_path::gemm && count < tiled_items && fma >= tiled_from_fma) {
        const std::size_t want = std::min((tiled_items + count - 1) / count,
                                          std::max<std::size_t>(2, fma / tile_fma));
        while (tiles_m * tiles_n * 2 <= want) {
            const std::size_t tm = (m + tiles_m - 1) / tiles_m, tn = (n + tiles_n - 1) / tiles_n;
            if (tm >= tn && tm >= 2 * min_tile)
                tiles_m *= 2;
            else if (tn >= 2 * min_tile)
                tiles_n *= 2;
            else if (tm >= 2 * min_tile)
                tiles_m *= 2;
            else
                break;
        }
    }
    // Tile sides rounded up to 16 rows/columns (whole micro-panels of Eigen's kernel).
    const auto side = [](std::size_t extent, std::size_t parts) {
        const std::size_t t = (extent + parts - 1) / parts;
        return parts == 1 ? extent : (t + 15) / 16 * 16;
    };
    const std::size_t tm = side(m, tiles_m), tn = side(n, tiles_n);
    tiles_m = (m + tm - 1) / tm;
    tiles_n = (n + tn - 1) / tn;
    const std::size_t tiles = tiles_m * tiles_n;
    const std::size_t items = saturating_mul(count, tiles);
    const std::size_t item_units =
        std::max<std::size_t>(1, saturating_mul(saturating_mul(tm, tn), std::max<std::size_t>(k, 1)) /
                                     fma_per_work_unit);
    const std::size_t grain = std::max<std::size_t>(1, session_access::core(s).settings().grain);
    const std::size_t grain_items = std::max<std::size_t>(1, grain / item_units);
    const bool parallel = session_access::may_fan_out(s) && items > grain_items;

    // Eigen's pack buffers: one per arena thread when items run in parallel, from the workspace.
    gemm_blocking blocking;
    std::size_t slots = 0;
    tensor<T> packs;
    eigen_layout la, lb, lc;
    if (path == product_path::gemm) {
        la = layout_of(matrix_at<const T>(ab, 0), false);
        lb = layout_of(matrix_at<const T>(bb, 0), false);
        lc = layout_of(matrix_at<T>(cw, 0), true);
        blocking = gemm_blocking_for<T>(static_cast<std::ptrdiff_t>(tm), static_cast<std::ptrdiff_t>(tn),
                                        static_cast<std::ptrdiff_t>(k), lc.order);
        slots = parallel ? static_cast<std::size_t>(session_access::core(s).arena_slots()) : 1;
        packs = empty<T>(
            s, shape::of_length((slots * blocking.bytes + sizeof(T) - 1) / sizeof(T)));
    }
    const kernel_isa isa = path == product_path::small || path == product_path::blocked
                               ? host_kernel_isa()
                               : kernel_isa::baseline;

    parallel_range(s, items, grain_items, [&](std::size_t begin, std::size_t end) {
        if (path == product_path::small) {
            cursor<3> at(batch_it, begin);
            for (std::size_t i = begin; i < end;) {
                const std::size_t len = std::min(at.run_left(), end - i);
                run_small_batch<T>(isa, size,
                                   {ab.data() + at.offset(0), batch_it.inner_stride(0),
                                    bb.data() + at.offset(1), batch_it.inner_stride(1),
                                    cw.data() + at.offset(2), batch_it.inner_stride(2), len});
                at.advance(len);
                i += len;
            }
            return;
        }
        if constexpr (std::is_floating_point_v<T>) {
            if (path == product_path::blocked) {
                const matrix_ref<const T> am = matrix_at<const T>(ab, 0);
                const matrix_ref<const T> bm = matrix_at<const T>(bb, 0);
                const matrix_ref<T> cm = matrix_at<T>(cw, 0);
                cursor<3> at(batch_it, begin);
                for (std::size_t i = begin; i < end;) {
                    const std::size_t len = std::min(at.run_left(), end - i);
                    run_small_gemm<T>(
                        isa, {cm.rows, cm.cols, am.cols, ab.data() + at.offset(0), am.rs, am.cs,
                              batch_it.inner_stride(0), bb.data() + at.offset(1), bm.rs,
                              batch_it.inner_stride(1), cw.data() + at.offset(2), cm.rs,
                              batch_it.inner_stride(2), len, accumulate, alpha, beta});
                    at.advance(len);
                    i += len;
                }
                return;
            }
        }
        void* pack = nullptr;
        if (path == product_path::gemm)
            pack = reinterpret_cast<char*>(packs.data()) + (parallel ? pack_slot(slots) : 0) * blocking.bytes;
        std::size_t current = begin / tiles;
        cursor<3> at(batch_it, current);
        for (std::size_t item = begin; item < end; ++item) {
            if (item / tiles != current) {
                at.advance(1);
                current = item / tiles;
            }
            const matrix_ref<const T> am = matrix_at<const T>(ab, at.offset(0));
            const matrix_ref<const T> bm = matrix_at<const T>(bb, at.offset(1));
            const matrix_ref<T> cm = matrix_at<T>(cw, at.offset(2));
            if (path == product_path::naive) {
                naive_product<T>(am, bm, cm, true, alpha, beta);
                continue;
            }
            const std::size_t tile = item % tiles;
            const auto i0 = static_cast<std::ptrdiff_t>(tile / tiles_n * tm);
            const auto j0 = static_cast<std::ptrdiff_t>(tile % tiles_n * tn);
            const std::ptrdiff_t rows = std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(tm), cm.rows - i0);
            const std::ptrdiff_t cols = std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(tn), cm.cols - j0);
            const matrix_ref<T> ct = cm.block(i0, j0, rows, cols);
            scale_matrix(ct, beta);
            gemm_accumulate<T>(am.block(i0, 0, rows, am.cols), la, bm.block(0, j0, bm.rows, cols), lb, ct,
                               lc, alpha, blocking, pack);
        }
    });
    if (c_temp.data() != nullptr) copy_inline<T>(c, c_temp.view());
}

/// A matrix as a rank-2 view with its strides.
template <class T>
tensor_view<T> matrix_view(const matrix_ref<T>& x) {
    const shape extents{static_cast<std::size_t>(x.rows), static_cast<std::size_t>(x.cols)};
    return tensor_view<T>(x.data, extents, {x.rs, x.cs});
}

/// matmul_2d for a product its workspace does not remember: 2x2, 3x3 and 4x4 inline, other small
/// real ones straight to their kernel (remembered for the next), the rest through run_products.
/// Out of line, so that a remembered product's call keeps a small frame.
template <class T>
[[gnu::noinline]] void product_2d(session& s, const matrix_ref<const T>& x,
                                  const matrix_ref<const T>& y, const matrix_ref<T>& z,
                                  bool accumulate, T alpha, T beta) {
    const std::ptrdiff_t m = x.rows, k = x.cols, n = y.cols;
    if (m == n && n == k && m >= 2 && m <= 4) {
        ++session_access::counters(s).inline_dispatches;
        const auto run = [&]<int N>() {
            if (accumulate)
                tiny_square_any<N, true>(x, y, z, alpha, beta);
            else
                tiny_square_any<N, false>(x, y, z, alpha, beta);
        };
        if (m == 2)
            run.template operator()<2>();
        else if (m == 3)
            run.template operator()<3>();
        else
            run.template operator()<4>();
        return;
    }
    if constexpr (std::is_floating_point_v<T>) {
        // One small product whose strides the kernels read as they are: straight to the kernel,
        // without the batch machinery of run_products (broadcast, batch walk, items), which
        // costs several times the product itself at these sizes. run_products' own choice of
        // path and layout rules, so the same kernel and the same bits, and one inline dispatch
        // as it would count; everything else stays with run_products. The kernel, and what the
        // register-blocked kernel's planning decides, depend on the shape, the strides and
        // whether alpha and beta are plain alone: the workspace remembers them for the next
        // product like this one (run_if_remembered).
        const bool plain = plain_product(accumulate, alpha, beta);
        const auto um = static_cast<std::size_t>(m), un = static_cast<std::size_t>(n),
                   uk = static_cast<std::size_t>(k);
        const product_path path = product_path_for<T>(um, un, uk, plain);
        if (m >= 1 && n >= 1 && (path == product_path::small || path == product_path::blocked) &&
            readable_by<T>(path, x, false, true) && readable_by<T>(path, y, false, false) &&
            readable_by<T>(path, z, true, false)) {
            product_slot<T>& slot =
                session_access::workspace_of(s).products->template slot<T>(m, n, k);
            const kernel_isa isa = host_kernel_isa();
            if (path == product_path::small) {
                slot.fixed = small_batch_kernel<T>(isa, classify_small(um, uk, un));
            } else {
                slot.fixed = nullptr;
                slot.gemm = plan_small_gemm<T>(isa, {m, n, k, x.data, x.rs, x.cs, 0, y.data, y.rs,
                                                     0, z.data, z.rs, 0, 1, accumulate, alpha,
                                                     beta});
            }
            slot.key = key_of(x, y, z, plain);
            run_if_remembered<T>(s, x, y, z, accumulate, alpha, beta);  // counts the dispatch
            return;
        }
    }
    run_products<T>(s, matrix_view(x), matrix_view(y), matrix_view(z), accumulate, alpha, beta);
}

template <class T>
void matmul_2d(session& s, const matrix_ref<const T>& x, const matrix_ref<const T>& y,
               const matrix_ref<T>& z, bool accumulate, T alpha, T beta) {
    if (run_if_remembered<T>(s, in_registers(x), in_registers(y), in_registers(z), accumulate,
                             alpha, beta))
        return;
    product_2d<T>(s, x, y, z, accumulate, alpha, beta);
}

/// Views `v` as [rows, cols] without copying when its strides allow, else as a dense copy kept
/// alive in `keep`.
template <class T>
tensor_view<const T> as_matrix(session& s, const tensor_view<const T>& v, std::size_t rows,
                               std::size_t cols, tensor<T>& keep) {
    const shape to{rows, cols};
    stride_array st{};
    if (reshape_strides(v.shape(), v.stride_values(), to, st))
        return tensor_view<const T>(v.data(), to, std::span<const std::ptrdiff_t>(st.data(), 2));
    keep = contiguous_copy<T>(s, v);
    return tensor_view<const T>(keep.data(), to);
}

template <class T>
tensor_view<const T> permuted(const tensor_view<const T>& v, const std::array<std::size_t, max_rank>& perm) {
    return v.permute(std::span<const std::size_t>(perm.data(), v.rank()));
}

/// out = tensordot(a, b) for a planned contraction; `out` has the result shape.
template <class T>
void run_contraction(session& s, const contraction& p, const tensor_view<const T>& a,
                     const tensor_view<const T>& b, const tensor_view<T>& out) {
    tensor<T> a_keep, b_keep, out_temp;
    const tensor_view<const T> am = as_matrix<T>(s, permuted<T>(a, p.perm_a), p.m, p.k, a_keep);
    const tensor_view<const T> bm = as_matrix<T>(s, permuted<T>(b, p.perm_b), p.k, p.n, b_keep);
    const shape to{p.m, p.n};
    stride_array st{};
    if (reshape_strides(out.shape(), out.stride_values(), to, st)) {
        const tensor_view<T> om(out.data(), to, std::span<const std::ptrdiff_t>(st.data(), 2));
        matmul_2d<T>(s, matrix_of(am), matrix_of(bm), matrix_of(om), false, T{1}, T{0});
        return;
    }
    out_temp = empty<T>(s, to);
    matmul_2d<T>(s, matrix_of(am), matrix_of(bm), matrix_of(out_temp), false, T{1}, T{0});
    copy_inline<T>(out, tensor_view<const T>(out_temp.data(), out.shape()));
}

/// A flat [n] view of `v`'s elements in row-major order: `v` itself when it has rank 1, a
/// reshaped view when its strides allow, else a dense copy kept in `keep`.
template <class T>
tensor_view<const T> flattened(session& s, const tensor_view<const T>& v, tensor<T>& keep) {
    if (v.rank() == 1) return v;
    const shape to = shape::of_length(v.size());
    stride_array st{};
    if (reshape_strides(v.shape(), v.stride_values(), to, st))
        return tensor_view<const T>(v.data(), to, std::span<const std::ptrdiff_t>(st.data(), 1));
    keep = contiguous_copy<T>(s, v);
    return tensor_view<const T>(keep.data(), to);
}

/// sum(f(a_i) * b_i) over two flat views of equal length, f = conj for vdot: blocks of a size that
/// depends on the length alone, summed in a fixed order, so the result depends on neither the
/// thread count nor the grain.
template <bool Conjugate, class T>
T flat_dot(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b) {
    const std::size_t n = a.size();
    const std::ptrdiff_t sa = a.stride(0), sb = b.stride(0);
    const auto partial = [&](std::size_t begin, std::size_t end) {
        // Four accumulators break the add chain; the order is fixed by the element index.
        T acc[4] = {};
        std::size_t i = begin;
        for (; i + 4 <= end; i += 4)
            for (std::size_t j = 0; j < 4; ++j) {
                const auto at = static_cast<std::ptrdiff_t>(i + j);
                T x = a.data()[at * sa];
                if constexpr (Conjugate && is_complex_v<T>) x = std::conj(x);
                acc[j] += x * b.data()[at * sb];
            }
        for (; i < end; ++i) {
            const auto at = static_cast<std::ptrdiff_t>(i);
            T x = a.data()[at * sa];
            if constexpr (Conjugate && is_complex_v<T>) x = std::conj(x);
            acc[0] += x * b.data()[at * sb];
        }
        return (acc[0] + acc[1]) + (acc[2] + acc[3]);
    };
    // Blocks of a size fixed by n alone (never by the grain or the threads), summed in order: the
    // same bits whether they run inline or spread over the threads.
    constexpr std::size_t block_size = std::size_t{1} << 14;
    constexpr std::size_t max_blocks = 256;
    const std::size_t blocks = std::clamp<std::size_t>(n / block_size, 1, max_blocks);
    if (blocks == 1) {
        ++session_access::counters(s).inline_dispatches;
        return partial(0, n);
    }
    const std::size_t grain = std::max<std::size_t>(1, session_access::core(s).settings().grain);
    std::array<T, max_blocks> sums{};
    const std::size_t grain_blocks = std::max<std::size_t>(1, grain / (n / blocks));
    parallel_range(s, blocks, grain_blocks, [&](std::size_t begin, std::size_t end) {
        for (std::size_t blk = begin; blk < end; ++blk) sums[blk] = partial(blk * n / blocks, (blk + 1) * n / blocks);
    });
    T total{};
    for (std::size_t blk = 0; blk < blocks; ++blk) total += sums[blk];
    return total;
}

template <class T>
T run_vdot(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b) {
    tensor<T> a_keep, b_keep;
    return flat_dot<true, T>(s, flattened<T>(s, a, a_keep), flattened<T>(s, b, b_keep));
}

/// out[i, j] = a[i] * b[j] for flat views a [na], b [nb] and a checked out [na, nb].
template <class T>
void outer_flat(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b,
               const tensor_view<T>& out) {
    const std::size_t na = a.size(), nb = b.size();
    if (na == 0 || nb == 0) return;
    const std::size_t grain = std::max<std::size_t>(1, session_access::core(s).settings().grain);
    const std::ptrdiff_t sa = a.stride(0), sb = b.stride(0), r0 = out.stride(0), r1 = out.stride(1);
    parallel_range(s, na, std::max<std::size_t>(1, grain / nb), [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            const T x = a.data()[static_cast<std::ptrdiff_t>(i) * sa];
            T* row = out.data() + static_cast<std::ptrdiff_t>(i) * r0;
            if (r1 == 1 && sb == 1) {
                const T* __restrict src = b.data();
                T* __restrict dst = row;
                for (std::size_t j = 0; j < nb; ++j) dst[j] = x * src[j];
            } else {
                for (std::size_t j = 0; j < nb; ++j) {
                    const auto at = static_cast<std::ptrdiff_t>(j);
                    row[at * r1] = x * b.data()[at * sb];
                }
            }
        }
    });
}

template <class T>
void run_outer(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b,
               const tensor_view<T>& out) {
    tensor<T> a_keep, b_keep;
    outer_flat<T>(s, flattened<T>(s, a, a_keep), flattened<T>(s, b, b_keep), out);
}

}  // namespace tessera::detail

// The explicit instantiations of the engines declared in tessera/detail/matmul.hpp for one
// element type, used inside namespace tessera::detail.
#define TESSERA_INSTANTIATE_MATMUL(T)                                                              \
    template void matmul_2d<T>(session&, const matrix_ref<const T>&, const matrix_ref<const T>&,   \
                               const matrix_ref<T>&, bool, T, T);                                  \
    template void run_products<T>(session&, const tensor_view<const T>&,                           \
                                  const tensor_view<const T>&, const tensor_view<T>&, bool, T, T); \
    template void run_contraction<T>(session&, const contraction&, const tensor_view<const T>&,    \
                                     const tensor_view<const T>&, const tensor_view<T>&);          \
    template T flat_dot<false, T>(session&, const tensor_view<const T>&,                           \
                                  const tensor_view<const T>&);                                    \
    template T run_vdot<T>(session&, const tensor_view<const T>&, const tensor_view<const T>&);    \
    template void run_outer<T>(session&, const tensor_view<const T>&, const tensor_view<const T>&, \
                               const tensor_view<T>&);
