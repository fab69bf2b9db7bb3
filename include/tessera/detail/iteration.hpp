// tessera/detail/iteration.hpp - the one iteration space and the one cursor under every strided
// walk: elementwise ops, copies, reductions, and the batch walks of matmul and linear algebra.
// An `iteration<N>` is a shape collapsed for N operands (each with its own strides); a `cursor`
// walks a range [begin, end) of its items in row-major order and yields the operands' element
// offsets, decoding `begin` once and then stepping without divisions.
#pragma once

#include <tessera/detail/broadcast.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

namespace tessera::detail {

/// The iteration space after dropping extent-1 axes and merging axes that every operand walks
/// contiguously: a dense [3, 4] add becomes one loop of 12. Built by collapse (or add_axis for
/// each axis, then close); rank is at least 1 then.
template <std::size_t N>
struct iteration {
    std::size_t rank = 0;
    std::array<std::size_t, max_rank> extents{};
    std::array<stride_array, N> strides{};

    /// The stride of `operand` along the innermost axis.
    std::ptrdiff_t inner_stride(std::size_t operand) const noexcept {
        return strides[operand][rank - 1];
    }
    /// The number of items (the product of the extents).
    std::size_t count() const noexcept {
        std::size_t n = 1;
        for (std::size_t a = 0; a < rank; ++a) n *= extents[a];
        return n;
    }

    /// Appends an axis of `extent` (not 1) on which operand k has stride `st[k]`, merged into the
    /// innermost axis so far when every operand walks the two contiguously.
    void add_axis(std::size_t extent, const std::array<std::ptrdiff_t, N>& st) noexcept {
        bool merge = rank > 0;
        for (std::size_t k = 0; k < N && merge; ++k)
            merge = strides[k][rank - 1] == st[k] * static_cast<std::ptrdiff_t>(extent);
        if (merge) {
            extents[rank - 1] *= extent;
            for (std::size_t k = 0; k < N; ++k) strides[k][rank - 1] = st[k];
        } else {
            extents[rank] = extent;
            for (std::size_t k = 0; k < N; ++k) strides[k][rank] = st[k];
            ++rank;
        }
    }
    /// Ends a collapse of `count` items: with no axis added (a scalar, or extent-1 axes only),
    /// the space becomes one axis of `count` (that is, 1) unit-stride items.
    void close(std::size_t count) noexcept {
        if (rank > 0) return;
        rank = 1;
        extents[0] = count;
        for (std::size_t k = 0; k < N; ++k) strides[k][0] = 1;
    }
};

/// Collapses `s` for N operands with the given strides (one stride per axis of `s` each).
template <std::size_t N>
iteration<N> collapse(const shape& s, const std::array<const stride_array*, N>& strides) noexcept {
    iteration<N> it;
    for (std::size_t axis = 0; axis < s.rank(); ++axis) {
        if (s[axis] == 1) continue;
        std::array<std::ptrdiff_t, N> st;
        for (std::size_t k = 0; k < N; ++k) st[k] = (*strides[k])[axis];
        it.add_axis(s[axis], st);
    }
    it.close(s.count());
    return it;
}

/// The strides of `v`'s batch axes (all but its last `core`) as seen from the broadcast `batch`:
/// zero on an axis `v` broadcasts along (missing, or stretched from extent 1).
template <class T>
stride_array batch_strides(const tensor_view<T>& v, std::size_t core, const shape& batch) noexcept {
    return broadcast_strides(leading_axes(v.shape(), core), v.stride_values(), batch);
}

/// A position in an iteration and the operands' element offsets there. Built at any item (one
/// division per axis), then moved on along the innermost axis: within a row a move only counts,
/// and a carry into the outer axes adds and subtracts strides, so a walk costs no divisions after
/// its start. The iteration must outlive the cursor.
///
///     for (cursor<2> at(it, begin); begin < end;) {   // runs along the innermost axis
///         const std::size_t n = std::min(at.run_left(), end - begin);
///         kernel(at.offset(0), at.offset(1), n);
///         at.advance(n);
///         begin += n;
///     }
template <std::size_t N>
class cursor {
public:
    cursor(const iteration<N>& it, std::size_t item) noexcept : it_(&it) {
        const std::size_t last = it.rank - 1;
        index_[last] = item % it.extents[last];
        item /= it.extents[last];
        for (std::size_t a = last; a-- > 0;) {
            index_[a] = item % it.extents[a];
            item /= it.extents[a];
#pragma GCC unroll 8
            for (std::size_t k = 0; k < N; ++k)
                row_[k] += static_cast<std::ptrdiff_t>(index_[a]) * it.strides[k][a];
        }
    }

    /// The element offset of operand k at this item.
    std::ptrdiff_t offset(std::size_t k) const noexcept {
        const std::size_t last = it_->rank - 1;
        return row_[k] + static_cast<std::ptrdiff_t>(index_[last]) * it_->strides[k][last];
    }
    /// All operands' offsets at this item.
    std::array<std::ptrdiff_t, N> offsets() const noexcept {
        std::array<std::ptrdiff_t, N> off;
#pragma GCC unroll 8
        for (std::size_t k = 0; k < N; ++k) off[k] = offset(k);
        return off;
    }
    /// Items left on the innermost axis from here, this one included.
    std::size_t run_left() const noexcept {
        const std::size_t last = it_->rank - 1;
        return it_->extents[last] - index_[last];
    }
    /// Moves `steps` (at most run_left()) items on.
    void advance(std::size_t steps) noexcept {
        const iteration<N>& it = *it_;
        const std::size_t last = it.rank - 1;
        index_[last] += steps;
        // Offsets are kept per row (innermost index 0), so a move within the row only counts and
        // a finished row adds one outer stride: measured on a transposed 4 x 4 add, updating full
        // offsets on every move cost ~40 instructions per op more than the walkers this replaced.
        if (index_[last] < it.extents[last] || last == 0) return;
        index_[last] = 0;
        for (std::size_t a = last; a-- > 0;) {
#pragma GCC unroll 8
            for (std::size_t k = 0; k < N; ++k) row_[k] += it.strides[k][a];
            if (++index_[a] < it.extents[a] || a == 0) return;
#pragma GCC unroll 8
            for (std::size_t k = 0; k < N; ++k)
                row_[k] -= static_cast<std::ptrdiff_t>(it.extents[a]) * it.strides[k][a];
            index_[a] = 0;
        }
    }

private:
    const iteration<N>* it_;
    std::array<std::size_t, max_rank> index_{};
    std::array<std::ptrdiff_t, N> row_{};  // offsets at the start of the current row
};

/// The operands' offsets at `item` of `it`, decoded from scratch: for a look-up without a walk.
/// Also defined for an iteration of rank 0 (axes added, none left, not closed): one item at 0.
template <std::size_t N>
std::array<std::ptrdiff_t, N> offsets_at(const iteration<N>& it, std::size_t item) noexcept {
    std::array<std::ptrdiff_t, N> off{};
    for (std::size_t a = it.rank; a-- > 0;) {
        const auto i = static_cast<std::ptrdiff_t>(item % it.extents[a]);
        item /= it.extents[a];
#pragma GCC unroll 8
        for (std::size_t k = 0; k < N; ++k) off[k] += i * it.strides[k][a];
    }
    return off;
}

/// Calls `run(offsets, length)` for the runs along the innermost axis that cover items
/// [begin, end) of `it`, in row-major order; offsets[k] is operand k's element offset at the
/// run's first item, and operand k steps by it.inner_stride(k) within the run.
template <std::size_t N, class Run>
inline void for_each_run(const iteration<N>& it, std::size_t begin, std::size_t end, Run&& run) {
    if (it.rank == 1) {  // one run: no cursor
        std::array<std::ptrdiff_t, N> off{};
        for (std::size_t k = 0; k < N; ++k)
            off[k] = static_cast<std::ptrdiff_t>(begin) * it.strides[k][0];
        if (begin < end) run(std::as_const(off), end - begin);
        return;
    }
    cursor<N> at(it, begin);
    for (std::size_t pos = begin; pos < end;) {
        const std::size_t length = std::min(at.run_left(), end - pos);
        run(at.offsets(), length);
        at.advance(length);
        pos += length;
    }
}

/// Calls `fn(item, offsets)` for items [begin, end) of `it` in row-major order, offsets[k] being
/// operand k's element offset; stops early when `fn` returns false.
template <std::size_t N, class Fn>
inline void for_each_item(const iteration<N>& it, std::size_t begin, std::size_t end, Fn&& fn) {
    cursor<N> at(it, begin);
    for (std::size_t item = begin; item < end; ++item) {
        if (!fn(item, at.offsets())) return;
        at.advance(1);
    }
}

}  // namespace tessera::detail
