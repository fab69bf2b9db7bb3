// tessera/ops/structural.hpp - structural ops: contiguous (a dense row-major copy of any view),
// copy (between any two layouts, with broadcasting), fill, concat and stack.
// Start with tessera::contiguous. Copies whose source walks memory across the destination's rows
// (transposes, permutes) run a cache-blocked transpose; the rest copy row runs (memcpy when both
// sides are unit-stride).
// Every op validates all operands before it writes anything.
#pragma once

#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <span>
#include <type_traits>

namespace tessera {

namespace detail {

[[noreturn]] void throw_join_empty(const char* op);
[[noreturn]] void throw_join_rank(const char* op, std::size_t index, std::size_t rank,
                                  std::size_t first_rank);
[[noreturn]] void throw_join_shape(const char* op, std::size_t index, const shape& got,
                                   const shape& first);
[[noreturn]] void throw_join_extent(const char* op, std::size_t index, const shape& got,
                                    const shape& first, std::size_t axis);
[[noreturn]] void throw_join_overflow(const char* op, std::size_t axis);

/// Edge of the square tiles of the blocked transpose. 32 x 32 elements keep one source and one
/// destination tile (at most 2 x 16 KiB for complex<double>) in L1, and for elements of 4 bytes
/// or more each tile row spans whole cache lines. Measured on the development machine, 32 was
/// as fast as 16 or 64 on ragged sizes and faster than 64 when the row pitch is a power of two
/// (4096 floats), where the rows of a taller tile contend for the same L1 sets.
inline constexpr std::size_t transpose_tile = 32;

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
/// source's fastest axis and `last` the destination's; the other axes form a batch. One dispatch,
/// parallel over tiles when the element count exceeds the backend's grain.
template <class T>
void blocked_copy(session& s, const iteration<2>& it, std::size_t row, T* dst, const T* src) {
    constexpr std::size_t tile = transpose_tile;
    const std::size_t last = it.rank - 1;
    const std::size_t rows = it.extents[row], cols = it.extents[last];
    const std::size_t row_tiles = (rows + tile - 1) / tile, col_tiles = (cols + tile - 1) / tile;
    std::size_t count = rows * cols, batch = 1;
    for (std::size_t a = 0; a < last; ++a)
        if (a != row) batch *= it.extents[a];
    count *= batch;
    const std::size_t tiles = batch * row_tiles * col_tiles;
    // Work is elements, as for the elementwise engine: inline when the whole copy is at most one
    // grain, else chunks of about a grain's worth of tiles.
    const std::size_t grain = session_access::core(s).settings().grain;
    const std::size_t tile_grain =
        count <= grain ? tiles : std::max<std::size_t>(1, grain / (tile * tile));
    const std::ptrdiff_t dst_row = it.strides[0][row], dst_col = it.strides[0][last];
    const std::ptrdiff_t src_row = it.strides[1][row], src_col = it.strides[1][last];
    parallel_range(s, tiles, tile_grain, [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t) {
            std::size_t rest = t;
            const std::size_t c0 = (rest % col_tiles) * tile;
            rest /= col_tiles;
            const std::size_t r0 = (rest % row_tiles) * tile;
            rest /= row_tiles;
            std::ptrdiff_t d_off = static_cast<std::ptrdiff_t>(r0) * dst_row +
                                   static_cast<std::ptrdiff_t>(c0) * dst_col;
            std::ptrdiff_t s_off = static_cast<std::ptrdiff_t>(r0) * src_row +
                                   static_cast<std::ptrdiff_t>(c0) * src_col;
            for (std::size_t a = last; a-- > 0;) {
                if (a == row) continue;
                const auto i = static_cast<std::ptrdiff_t>(rest % it.extents[a]);
                rest /= it.extents[a];
                d_off += i * it.strides[0][a];
                s_off += i * it.strides[1][a];
            }
            copy_tile(dst + d_off, dst_row, dst_col, src + s_off, src_row, src_col,
                      std::min(tile, rows - r0), std::min(tile, cols - c0));
        }
    });
}

/// Calls `run(dst_offset, src_offset, length)` for the runs along the innermost axis that cover
/// elements [begin, end) of a collapsed iteration, in row-major order. Offsets advance
/// incrementally from run to run; only `begin` is decoded with divisions.
template <class Run>
inline void for_each_copy_run(const iteration<2>& it, std::size_t begin, std::size_t end,
                              Run& run) {
    const std::size_t last = it.rank - 1;
    const std::array<std::ptrdiff_t, max_rank>& ds = it.strides[0];
    const std::array<std::ptrdiff_t, max_rank>& ss = it.strides[1];
    std::array<std::size_t, max_rank> index{};
    std::ptrdiff_t d = 0, s = 0;
    std::size_t rest = begin;
    for (std::size_t a = it.rank; a-- > 0;) {
        index[a] = rest % it.extents[a];
        rest /= it.extents[a];
        d += static_cast<std::ptrdiff_t>(index[a]) * ds[a];
        s += static_cast<std::ptrdiff_t>(index[a]) * ss[a];
    }
    for (std::size_t pos = begin; pos < end;) {
        const std::size_t length = std::min(it.extents[last] - index[last], end - pos);
        run(d, s, length);
        pos += length;
        index[last] += length;
        d += static_cast<std::ptrdiff_t>(length) * ds[last];
        s += static_cast<std::ptrdiff_t>(length) * ss[last];
        for (std::size_t a = last; a > 0 && index[a] == it.extents[a]; --a) {
            d += ds[a - 1] - static_cast<std::ptrdiff_t>(it.extents[a]) * ds[a];
            s += ss[a - 1] - static_cast<std::ptrdiff_t>(it.extents[a]) * ss[a];
            index[a] = 0;
            ++index[a - 1];
        }
    }
}

/// Walks a collapsed iteration in one dispatch (parallel over elements above the backend's
/// grain, as the elementwise engine decides) with `kernel(dst_offset, src_offset, length)`.
template <class Kernel>
void walk_runs(session& s, const iteration<2>& it, Kernel kernel) {
    std::size_t count = 1;
    for (std::size_t a = 0; a < it.rank; ++a) count *= it.extents[a];
    const std::size_t grain = std::max<std::size_t>(1, session_access::core(s).settings().grain);
    parallel_range(s, count, grain, [&](std::size_t begin, std::size_t end) {
        for_each_copy_run(it, begin, end, kernel);
    });
}

// The copy kernels, picked once per copy from the innermost strides. A run whose both sides are
// unit-stride is a memcpy: measured on the development machine, 7-12x faster than the
// elementwise engine's strided path for row slices ([4096, 2048] of [4096, 4096] floats, or
// rows of 4 floats), and 10x faster than its dense loop for bool.
template <class T>
void run_copy(session& s, const iteration<2>& it, T* dst, const T* src) {
    static_assert(std::is_trivially_copyable_v<T>, "every tessera element type is");
    const std::ptrdiff_t ds = it.strides[0][it.rank - 1], ss = it.strides[1][it.rank - 1];
    if (ds == 1 && ss == 1) {
        walk_runs(s, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            std::memcpy(dst + d, src + o, n * sizeof(T));
        });
    } else if (ds == 1 && ss == 0) {  // broadcast along the run
        walk_runs(s, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            std::fill_n(dst + d, n, src[o]);
        });
    } else if (ds == 1 && ss == -1) {  // a flip
        walk_runs(s, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            T* out = dst + d;
            const T* in = src + o;
            for (std::size_t j = 0; j < n; ++j) out[j] = in[-static_cast<std::ptrdiff_t>(j)];
        });
    } else {
        walk_runs(s, it, [=](std::ptrdiff_t d, std::ptrdiff_t o, std::size_t n) {
            T* out = dst + d;
            const T* in = src + o;
            for (std::size_t j = 0; j < n; ++j) {
                const auto jj = static_cast<std::ptrdiff_t>(j);
                out[jj * ds] = in[jj * ss];
            }
        });
    }
}

/// Copies `src` into `dst` (same shape, already validated: no partial overlap, `dst` writable).
/// One dispatch (inline or parallel) unless there is nothing to do: no elements, or `src` is
/// exactly `dst`.
template <class T>
void copy_unchecked(session& s, const tensor_view<T>& dst, const tensor_view<const T>& src) {
    if (dst.size() == 0 || same_elements(dst, src)) return;
    const copy_axes ax = order_for_copy(dst.shape(), dst.stride_values(), src.stride_values());
    const iteration<2> it = collapse<2>(ax.extents, {&ax.dst, &ax.src});
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
            blocked_copy(s, it, row, dst.data(), src.data());
            return;
        }
    }
    run_copy(s, it, dst.data(), src.data());
}

/// Validates a copy of `src` into `dst`: `src` broadcasts to `dst`'s shape, `dst` repeats no
/// element, and the two do not overlap unless they are exactly the same elements.
template <class T>
tensor_view<const T> check_copy(const char* op, const tensor_view<T>& dst,
                                const tensor_view<const T>& src) {
    if (!broadcasts_to(src.shape(), dst.shape())) throw_broadcast(op, src.shape(), dst.shape());
    check_writable(op, "out", dst);
    const tensor_view<const T> b = broadcast_unchecked(src, dst.shape());
    check_in_place(op, "out", dst, operand_name("input", 0), b);
    return b;
}

/// Validates the operands of concat (`stack` false) or stack and returns the result's shape;
/// `axis` is normalised into `norm`.
template <class T>
shape join_shape(const char* op, bool stack, std::span<const tensor_view<const T>> in,
                 std::ptrdiff_t axis, std::size_t& norm) {
    if (in.empty()) throw_join_empty(op);
    const shape& first = in[0].shape();
    const std::size_t rank = first.rank();
    std::array<std::size_t, max_rank> dims{};
    if (stack) {
        if (rank == max_rank) throw_rank_too_large(rank + 1);
        norm = normalize_axis(op, axis, rank + 1);
        for (std::size_t i = 1; i < in.size(); ++i) {
            if (in[i].rank() != rank) throw_join_rank(op, i, in[i].rank(), rank);
            if (!(in[i].shape() == first)) throw_join_shape(op, i, in[i].shape(), first);
        }
        for (std::size_t i = 0, j = 0; i <= rank; ++i) dims[i] = i == norm ? in.size() : first[j++];
        return shape(std::span<const std::size_t>(dims.data(), rank + 1));
    }
    norm = normalize_axis(op, axis, rank);
    std::size_t total = first[norm];
    for (std::size_t i = 1; i < in.size(); ++i) {
        const shape& s = in[i].shape();
        if (s.rank() != rank) throw_join_rank(op, i, s.rank(), rank);
        for (std::size_t a = 0; a < rank; ++a)
            if (a != norm && s[a] != first[a]) throw_join_extent(op, i, s, first, norm);
        if (__builtin_add_overflow(total, s[norm], &total)) throw_join_overflow(op, norm);
    }
    for (std::size_t a = 0; a < rank; ++a) dims[a] = a == norm ? total : first[a];
    return shape(std::span<const std::size_t>(dims.data(), rank));
}

/// Validates `out` against the result shape and every input: right shape, no repeated
/// elements, no overlap with an input (beyond an input that is exactly `out`).
template <class T>
void check_join_out(const char* op, std::span<const tensor_view<const T>> in,
                    const shape& result, const tensor_view<T>& out) {
    check_out(op, "out", out, result);
    for (std::size_t i = 0; i < in.size(); ++i) check_in_place(op, "out", out, operand_name("input", i), in[i]);
}

/// Copies each input into its part of `out` (validated): one copy, so at most one dispatch,
/// per input with elements.
template <class T>
void join_run(session& s, bool stack, std::span<const tensor_view<const T>> in, std::size_t axis,
              const tensor_view<T>& out) {
    const auto a = static_cast<std::ptrdiff_t>(axis);
    std::ptrdiff_t offset = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (stack) {
            const auto k = static_cast<std::ptrdiff_t>(i);
            copy_unchecked(s, out.slice(a, k, k + 1).squeeze(a), in[i]);
        } else {
            const auto n = static_cast<std::ptrdiff_t>(in[i].extent(axis));
            copy_unchecked(s, out.slice(a, offset, offset + n), in[i]);
            offset += n;
        }
    }
}

template <class T>
tensor<T> join_new(session& s, const char* op, bool stack,
                   std::span<const tensor_view<const T>> in, std::ptrdiff_t axis) {
    check_session(s);
    std::size_t norm = 0;
    const shape result = join_shape(op, stack, in, axis, norm);
    tensor<T> out = empty<T>(s, result);
    join_run(s, stack, in, norm, out.view());
    return out;
}

template <class T>
void join_into(session& s, const char* op, bool stack, std::span<const tensor_view<const T>> in,
               std::ptrdiff_t axis, const tensor_view<T>& out) {
    check_session(s);
    std::size_t norm = 0;
    const shape result = join_shape(op, stack, in, axis, norm);
    check_join_out(op, in, result, out);
    join_run(s, stack, in, norm, out);
}

}  // namespace detail

/// Returns a dense row-major copy of `v` (any strides: transposed, sliced, flipped, broadcast).
///
/// Always copies, also when `v` is already contiguous; allocates the result from the session's
/// workspace. Transposed layouts run a cache-blocked transpose. One dispatch: inline when the
/// element count is at most the backend's grain, else in parallel on the arena.
template <tensor_like V, class T = value_of_t<V>>
    requires element<T>
tensor<T> contiguous(session& s, const V& v) {
    const tensor_view<const T> src = as_view(v);
    tensor<T> out = empty<T>(s, src.shape());  // checks the session's thread
    detail::copy_unchecked(s, out.view(), src);
    return out;
}

/// Copies `src` into `dst`, which may have any layout; `src` broadcasts to `dst`'s shape, as
/// NumPy's copyto does.
///
/// Throws shape_error if `src` does not broadcast to `dst`, alias_error if `dst` repeats
/// elements (a stride-0 axis) or overlaps `src` without being exactly the same elements; nothing
/// is written then. Exactly aliased operands are a no-op. Never allocates; one dispatch (none
/// when there is nothing to copy).
template <tensor_like S, class T = value_of_t<S>>
    requires element<T>
void copy(session& s, const S& src, const tensor_view<std::type_identity_t<T>>& dst) {
    detail::check_session(s);
    const tensor_view<const T> from = detail::check_copy("copy", dst, as_view(src));
    detail::copy_unchecked(s, dst, from);
}

/// Writes `value` into every element of `out`: a tensor, or a view of any layout.
///
/// Throws alias_error if `out` repeats elements (a stride-0 axis). Never allocates; one dispatch
/// (none when `out` is empty).
template <writable_tensor O, class T = writable_value_t<O>>
void fill(session& s, std::type_identity_t<T> value, O&& out) {
    detail::check_session(s);
    const tensor_view<T> dst = as_writable_view(out);
    detail::check_writable("fill", "out", dst);
    if (dst.size() == 0) return;
    const stride_array none{};
    const detail::copy_axes ax = detail::order_for_copy(dst.shape(), dst.stride_values(), none);
    const detail::iteration<2> it = detail::collapse<2>(ax.extents, {&ax.dst, &ax.src});
    T* const d = dst.data();
    if (const std::ptrdiff_t step = it.strides[0][it.rank - 1]; step == 1) {
        detail::walk_runs(s, it, [=](std::ptrdiff_t o, std::ptrdiff_t, std::size_t n) {
            std::fill_n(d + o, n, value);
        });
    } else {
        detail::walk_runs(s, it, [=](std::ptrdiff_t o, std::ptrdiff_t, std::size_t n) {
            for (std::size_t j = 0; j < n; ++j)
                d[o + static_cast<std::ptrdiff_t>(j) * step] = value;
        });
    }
}

/// Returns the inputs joined along `axis` (negative counts from the end), as NumPy's
/// concatenate does: all inputs have the same rank and agree on every other extent.
///
/// Throws shape_error for an empty list, a rank or extent mismatch, or an axis out of range.
/// Allocates the result; one dispatch per input with elements. With a braced list of tensors,
/// name the element type: `tessera::concat<float>(s, {a, b}, 1)`.
template <element T>
tensor<T> concat(session& s, std::span<const tensor_view<const T>> inputs,
                 std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "concat", false, inputs, axis);
}
/// Returns the braced-list inputs joined along `axis`, as the span overload does (same errors);
/// name the element type when the list holds tensors: `tessera::concat<float>(s, {a, b}, 1)`.
template <element T>
tensor<T> concat(session& s, std::initializer_list<tensor_view<const T>> inputs,
                 std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "concat", false, detail::span_of(inputs), axis);
}
/// Writes the inputs joined along `axis` into `out`; never allocates. Besides the errors above,
/// throws shape_error if `out` has the wrong shape and alias_error if it repeats elements or
/// overlaps an input; nothing is written then.
template <element T>
void concat(session& s, std::span<const tensor_view<const T>> inputs, std::ptrdiff_t axis,
            const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "concat", false, inputs, axis, out);
}
/// Writes the braced-list inputs joined along `axis` into `out`, as the span overload does (same
/// errors, checked before any write); never allocates. Name the element type for tensors.
template <element T>
void concat(session& s, std::initializer_list<tensor_view<const T>> inputs, std::ptrdiff_t axis,
            const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "concat", false, detail::span_of(inputs), axis, out);
}

/// Returns the inputs, which all have one shape, stacked along a new axis at position `axis`
/// (in [-rank-1, rank]; -1 appends), as NumPy's stack does.
///
/// Throws shape_error for an empty list, differing shapes, an axis out of range, or a result
/// rank above max_rank. Allocates the result; one dispatch per input with elements.
template <element T>
tensor<T> stack(session& s, std::span<const tensor_view<const T>> inputs,
                std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "stack", true, inputs, axis);
}
/// Returns the braced-list inputs stacked along a new axis, as the span overload does (same
/// errors); name the element type when the list holds tensors: `tessera::stack<float>(s, {a, b})`.
template <element T>
tensor<T> stack(session& s, std::initializer_list<tensor_view<const T>> inputs,
                std::ptrdiff_t axis = 0) {
    return detail::join_new(s, "stack", true, detail::span_of(inputs), axis);
}
/// Writes the inputs stacked along a new axis into `out`; never allocates. Errors as for the
/// out-parameter form of concat.
template <element T>
void stack(session& s, std::span<const tensor_view<const T>> inputs, std::ptrdiff_t axis,
           const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "stack", true, inputs, axis, out);
}
/// Writes the braced-list inputs stacked along a new axis into `out`, as the span overload does
/// (same errors, checked before any write); never allocates. Name the element type for tensors.
template <element T>
void stack(session& s, std::initializer_list<tensor_view<const T>> inputs, std::ptrdiff_t axis,
           const tensor_view<std::type_identity_t<T>>& out) {
    detail::join_into(s, "stack", true, detail::span_of(inputs), axis, out);
}

}  // namespace tessera
