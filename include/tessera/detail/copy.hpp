// tessera/detail/copy.hpp - the one copy engine, under the structural ops (contiguous, copy, fill,
// concat, stack), the product engines' operand copies (matmul, tensordot, einsum) and the Eigen
// bridge: axes ordered for the destination, collapsed, then a cache-blocked transpose when the
// source walks memory across the destination's rows, else row runs (memcpy when both sides are
// unit-stride). Operands come validated; nothing here throws.
#pragma once

#include <tessera/detail/iteration.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

namespace tessera::detail {

/// Edge of the square tiles of the blocked transpose. 32 x 32 elements keep one source and one
/// destination tile (at most 2 x 16 KiB for complex<double>) in L1, and for elements of 4 bytes
/// or more each tile row spans whole cache lines. Measured on the development machine, 32 was
/// as fast as 16 or 64 on ragged sizes and faster than 64 when the row pitch is a power of two
/// (4096 floats), where the rows of a taller tile contend for the same L1 sets.
inline constexpr std::size_t transpose_tile = 32;

/// How a copy runs its items: on the session (one dispatch, inline or parallel by the backend's
/// grain) or on the calling thread with no dispatch counted (for engines that copy operands as
/// part of their own dispatch).
struct session_dispatch {
    session& s;
    std::size_t grain() const noexcept {
        return std::max<std::size_t>(1, session_access::core(s).settings().grain);
    }
    template <class Body>
    void operator()(std::size_t n, std::size_t grain, const Body& body) const {
        parallel_range(s, n, grain, body);
    }
};
struct inline_dispatch {
    std::size_t grain() const noexcept { return std::numeric_limits<std::size_t>::max(); }
    template <class Body>
    void operator()(std::size_t n, std::size_t, const Body& body) const {
        body(std::size_t{0}, n);
    }
};

/// Axes of a (destination, source) pair of one shape, reordered for copying.
struct copy_axes {
    shape extents;
    stride_array dst{};
    stride_array src{};
};

// A copy may visit elements in any order, so the axes are sorted by the destination's stride
// magnitude (largest first; ties by the source's) and extent-1 axes dropped. A copy between two
// equally transposed layouts then collapses into one dense run, and the destination's fastest
// axis is always the innermost loop.
inline copy_axes order_for_copy(const shape& s, const stride_array& dst,
                                const stride_array& src) noexcept {
    std::array<std::size_t, max_rank> axes{};
    std::size_t rank = 0;
    for (std::size_t i = 0; i < s.rank(); ++i)
        if (s[i] != 1) axes[rank++] = i;
    auto magnitude = [](std::ptrdiff_t x) { return x < 0 ? -x : x; };
    auto before = [&](std::size_t a, std::size_t b) {
        const std::ptrdiff_t da = magnitude(dst[a]), db = magnitude(dst[b]);
        if (da != db) return da > db;
        return magnitude(src[a]) > magnitude(src[b]);
    };
    for (std::size_t i = 1; i < rank; ++i)  // insertion sort: rank <= 8, and stable
        for (std::size_t j = i; j > 0 && before(axes[j], axes[j - 1]); --j)
            std::swap(axes[j], axes[j - 1]);
    copy_axes out;
    std::array<std::size_t, max_rank> dims{};
    for (std::size_t i = 0; i < rank; ++i) {
        dims[i] = s[axes[i]];
        out.dst[i] = dst[axes[i]];
        out.src[i] = src[axes[i]];
    }
    out.extents = shape::unchecked(std::span<const std::size_t>(dims.data(), rank));
    return out;
}

/// The (destination, source) iteration of a copy: axes ordered by order_for_copy, collapsed.
inline iteration<2> copy_iteration(const shape& s, const stride_array& dst,
                                   const stride_array& src) noexcept {
    const copy_axes ax = order_for_copy(s, dst, src);
    return collapse<2>(ax.extents, {&ax.dst, &ax.src});
}

/// Copies one tile: rows walk the source's fast axis, columns the destination's.
template <class T>
inline void copy_tile(T* dst, std::ptrdiff_t dst_row, std::ptrdiff_t dst_col, const T* src,
                      std::ptrdiff_t src_row, std::ptrdiff_t src_col, std::size_t rows,
                      std::size_t cols) noexcept {
    if (dst_col == 1 && src_row == 1) {  // the plain transpose: unit strides known to the compiler
        for (std::size_t i = 0; i < rows; ++i) {
            T* d = dst + static_cast<std::ptrdiff_t>(i) * dst_row;
            const T* s = src + i;
            for (std::size_t j = 0; j < cols; ++j)
                d[j] = s[static_cast<std::ptrdiff_t>(j) * src_col];
        }
        return;
    }
    for (std::size_t i = 0; i < rows; ++i) {
        T* d = dst + static_cast<std::ptrdiff_t>(i) * dst_row;
        const T* s = src + static_cast<std::ptrdiff_t>(i) * src_row;
        for (std::size_t j = 0; j < cols; ++j) {
            const auto jj = static_cast<std::ptrdiff_t>(j);
            d[jj * dst_col] = s[jj * src_col];
        }
    }
}

/// The blocked transpose over collapsed axes: tiles of the (row, last) plane, where `row` is the
/// source's fastest axis and `last` the destination's; the other axes form a batch, walked with
/// a cursor. One dispatch, parallel over tiles when the element count exceeds the grain.
template <class T, class Dispatch>
void blocked_copy(const Dispatch& dispatch, const iteration<2>& it, std::size_t row, T* dst,
                  const T* src) {
    constexpr std::size_t tile = transpose_tile;
    const std::size_t last = it.rank - 1;
    const std::size_t rows = it.extents[row], cols = it.extents[last];
    const std::size_t row_tiles = (rows + tile - 1) / tile, col_tiles = (cols + tile - 1) / tile;
    const std::size_t plane_tiles = row_tiles * col_tiles;
    const std::size_t count = it.count();
    const std::size_t tiles = count / (rows * cols) * plane_tiles;
    // Work is elements, as for the elementwise engine: inline when the whole copy is at most one
    // grain, else chunks of about a grain's worth of tiles.
    const std::size_t grain = dispatch.grain();
    const std::size_t tile_grain =
        count <= grain ? tiles : std::max<std::size_t>(1, grain / (tile * tile));
    const std::ptrdiff_t dst_row = it.strides[0][row], dst_col = it.strides[0][last];
    const std::ptrdiff_t src_row = it.strides[1][row], src_col = it.strides[1][last];
    // Tile `in_plane` of the plane whose first elements are at dst + d, src + s.
    const auto copy_at = [&](std::size_t in_plane, std::ptrdiff_t d, std::ptrdiff_t s) {
        const std::size_t r0 = in_plane / col_tiles * tile, c0 = in_plane % col_tiles * tile;
        d += static_cast<std::ptrdiff_t>(r0) * dst_row + static_cast<std::ptrdiff_t>(c0) * dst_col;
        s += static_cast<std::ptrdiff_t>(r0) * src_row + static_cast<std::ptrdiff_t>(c0) * src_col;
        copy_tile(dst + d, dst_row, dst_col, src + s, src_row, src_col, std::min(tile, rows - r0),
                  std::min(tile, cols - c0));
    };
    if (it.rank == 2) {  // one plane: no batch to walk
        dispatch(tiles, tile_grain, [&](std::size_t begin, std::size_t end) {
            for (std::size_t t = begin; t < end; ++t) copy_at(t, 0, 0);
        });
        return;
    }
    iteration<2> batch;  // the axes other than `row` and `last`, walked with a cursor
    for (std::size_t a = 0; a < last; ++a)
        if (a != row) batch.add_axis(it.extents[a], {it.strides[0][a], it.strides[1][a]});
    batch.close(1);
    dispatch(tiles, tile_grain, [&](std::size_t begin, std::size_t end) {
        cursor<2> at(batch, begin / plane_tiles);
        for (std::size_t t = begin; t < end; ++t) {
            const std::size_t in_plane = t % plane_tiles;
            if (in_plane == 0 && t != begin) at.advance(1);
            copy_at(in_plane, at.offset(0), at.offset(1));
        }
    });
}

/// Walks a collapsed (destination, source) iteration in one dispatch (parallel over elements
/// above the grain, as the elementwise engine decides) with `kernel(dst_offset, src_offset,
/// length)` per run along the innermost axis.
template <class Dispatch, class Kernel>
void walk_runs(const Dispatch& dispatch, const iteration<2>& it, Kernel kernel) {
    dispatch(it.count(), dispatch.grain(), [&](std::size_t begin, std::size_t end) {
        for_each_run(it, begin, end,
                     [&](const std::array<std::ptrdiff_t, 2>& off, std::size_t n) {
                         kernel(off[0], off[1], n);
                     });
    });
}

// The copy kernels, picked once per copy from the innermost strides. A run whose both sides are
// unit-stride is a memcpy: measured on the development machine, 7-12x faster than the
// elementwise engine's strided path for row slices ([4096, 2048] of [4096, 4096] floats, or
// rows of 4 floats), and 10x faster than its dense loop for bool.
template <class T, class Dispatch>
void run_copy(const Dispatch& dispatch, const iteration<2>& it, T* dst, const T* src) {
    static_assert(std::is_trivially_copyable_v<T>, "every tessera element type is");
    const std::ptrdiff_t ds = it.inner_stride(0), ss = it.inner_stride(1);
    if (ds == 1 && ss == 1) {
        walk_runs(dispatch, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            std::memcpy(dst + d, src + o, n * sizeof(T));
        });
    } else if (ds == 1 && ss == 0) {  // broadcast along the run
        walk_runs(dispatch, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            std::fill_n(dst + d, n, src[o]);
        });
    } else if (ds == 1 && ss == -1) {  // a flip
        walk_runs(dispatch, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            T* out = dst + d;
            const T* in = src + o;
            for (std::size_t j = 0; j < n; ++j) out[j] = in[-static_cast<std::ptrdiff_t>(j)];
        });
    } else {
        walk_runs(dispatch, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            T* out = dst + d;
            const T* in = src + o;
            for (std::size_t j = 0; j < n; ++j) {
                const auto jj = static_cast<std::ptrdiff_t>(j);
                out[jj * ds] = in[jj * ss];
            }
        });
    }
}

/// Copies `src` into `dst` (same shape, at least one element, `src` not exactly `dst`) with the
/// blocked transpose or row runs, as the strides decide.
template <class T, class Dispatch>
void copy_with(const Dispatch& dispatch, const tensor_view<T>& dst,
               const tensor_view<const T>& src) {
    const iteration<2> it =
        copy_iteration(dst.shape(), dst.stride_values(), src.stride_values());
    if (it.rank >= 2) {
        // The source's fastest axis (smallest non-zero stride) other than the innermost one: when
        // it beats the innermost source stride, reading along the destination's rows would jump
        // through memory, and a tiled transpose reads and writes whole cache lines instead.
        const std::size_t last = it.rank - 1;
        auto magnitude = [](std::ptrdiff_t x) { return x < 0 ? -x : x; };
        std::size_t row = last;
        for (std::size_t a = 0; a < last; ++a) {
            const std::ptrdiff_t m = magnitude(it.strides[1][a]);
            if (m != 0 && (row == last || m < magnitude(it.strides[1][row]))) row = a;
        }
        if (row != last && magnitude(it.strides[1][row]) < magnitude(it.strides[1][last])) {
            blocked_copy(dispatch, it, row, dst.data(), src.data());
            return;
        }
    }
    run_copy(dispatch, it, dst.data(), src.data());
}

/// Copies `src` into `dst` (same shape, already validated: no partial overlap, `dst` writable).
/// One dispatch (inline or parallel) unless there is nothing to do: no elements, or `src` is
/// exactly `dst`.
template <class T>
void copy_unchecked(session& s, const tensor_view<T>& dst, const tensor_view<const T>& src) {
    if (dst.size() == 0 || same_elements(dst, src)) return;
    copy_with(session_dispatch{s}, dst, src);
}

/// Copies `src` into `dst` (same shape, validated) on the calling thread, counting no dispatch:
/// for engines that copy operands inside a dispatch of their own.
template <class T>
void copy_inline(const tensor_view<T>& dst, const tensor_view<const T>& src) noexcept {
    if (dst.size() == 0 || same_elements(dst, src)) return;
    if (dst.is_contiguous() && src.is_contiguous()) {
        std::memcpy(dst.data(), src.data(), dst.size() * sizeof(T));
        return;
    }
    copy_with(inline_dispatch{}, dst, src);
}

/// Returns a dense row-major copy of `v` in a block from the session's workspace, copied on the
/// calling thread with no dispatch counted (see copy_inline).
template <class T>
tensor<T> contiguous_copy(session& s, const tensor_view<const T>& v) {
    tensor<T> t = empty<T>(s, v.shape());
    copy_inline<T>(t.view(), v);
    return t;
}

}  // namespace tessera::detail
