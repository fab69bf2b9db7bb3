// tessera/detail/broadcast.hpp - NumPy broadcasting of shapes, written once: the broadcast shape
// of operands (elementwise ops), of the batch axes of matrix operands (matmul, linalg), whether one
// shape broadcasts to another (copy, broadcast_to), and the strides of a view seen broadcast.
// Shapes only, so that tensor_view.hpp can use it; tessera/detail/validate.hpp builds on it.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <tessera/detail/check.hpp>
#include <tessera/shape.hpp>

namespace tessera::detail {

/// Throws shape_error "op: shapes [..] and [..] do not broadcast", or for `core` > 0 (the batch
/// axes of matrix operands) "op: the batch axes of a [..] and b [..] do not broadcast".
[[noreturn]] void throw_broadcast_mismatch(const char* op, const shape& a, const shape& b,
                                           std::size_t core);
/// Throws shape_error "op: shape [..] does not broadcast to [..]".
[[noreturn]] void throw_broadcast(const char* op, const shape& from, const shape& to);

/// broadcast_extents' result when the shapes do not broadcast.
inline constexpr std::size_t no_broadcast = max_rank + 1;

/// NumPy's rule: aligns the leading axes of `a` and `b` (each without its last `core` axes) at
/// the right, pads the shorter with extent 1, and requires each pair to be equal or to hold a 1.
/// Writes the broadcast extents to `dims` and returns their count, or returns no_broadcast.
/// Requires core <= the rank of both.
inline std::size_t broadcast_extents(const shape& a, const shape& b, std::size_t core,
                                     std::array<std::size_t, max_rank>& dims) noexcept {
    TESSERA_ASSERT(core <= a.rank() && core <= b.rank(), "broadcast: core axes beyond the rank");
    const std::size_t ra = a.rank() - core, rb = b.rank() - core;
    const std::size_t rank = ra > rb ? ra : rb;
    for (std::size_t i = 0; i < rank; ++i) {
        const std::size_t x = i < rank - ra ? 1 : a[i - (rank - ra)];
        const std::size_t y = i < rank - rb ? 1 : b[i - (rank - rb)];
        if (x != y && x != 1 && y != 1) return no_broadcast;
        dims[i] = x == 1 ? y : x;
    }
    return rank;
}

/// Returns the broadcast of `a` and `b` without their last `core` axes (0: the whole shapes; 2:
/// the batch of [..., m, k] and [..., k, n] matrix operands), or throws shape_error naming `op`
/// and both shapes. Requires core <= the rank of both.
inline shape broadcast_shapes(const char* op, const shape& a, const shape& b,
                              std::size_t core = 0) {
    if (core == 0 && a == b) return a;
    std::array<std::size_t, max_rank> dims{};
    const std::size_t rank = broadcast_extents(a, b, core, dims);
    if (rank == no_broadcast) [[unlikely]]
        throw_broadcast_mismatch(op, a, b, core);
    return shape(std::span<const std::size_t>(dims.data(), rank));  // checks the count
}

/// Returns the broadcast of all `shapes` (the first one for a single operand); a mismatch names
/// the broadcast so far and the first shape that does not fit it.
template <class... Shapes>
shape broadcast_all([[maybe_unused]] const char* op, const shape& first, const Shapes&... rest) {
    shape result = first;
    ((result = broadcast_shapes(op, result, rest)), ...);
    return result;
}

/// Returns true when `from` broadcasts to `to`: the broadcast of the two is `to` itself.
inline bool broadcasts_to(const shape& from, const shape& to) noexcept {
    if (from.rank() > to.rank()) return false;
    std::array<std::size_t, max_rank> dims{};
    if (broadcast_extents(from, to, 0, dims) == no_broadcast) return false;
    for (std::size_t i = 0; i < to.rank(); ++i)
        if (dims[i] != to[i]) return false;
    return true;
}

/// The strides of a view of shape `from` with `strides` seen broadcast to `to` (a valid
/// broadcast: broadcasts_to(from, to), or `from` a batch that broadcasts to `to`): a stretched or
/// added axis gets stride 0, the others keep theirs. Only the first from.rank() strides are read.
inline std::array<std::ptrdiff_t, max_rank> broadcast_strides(
    const shape& from, const std::array<std::ptrdiff_t, max_rank>& strides,
    const shape& to) noexcept {
    std::array<std::ptrdiff_t, max_rank> st{};
    const std::size_t lead = to.rank() - from.rank();
    for (std::size_t i = lead; i < to.rank(); ++i)
        st[i] = from[i - lead] == to[i] ? strides[i - lead] : 0;
    return st;
}

/// Returns the first rank - core extents of `s` (the batch of an [..., n, n] operand for 2).
inline shape leading_axes(const shape& s, std::size_t core) noexcept {
    return shape::unchecked(s.dims().first(s.rank() - core));
}

/// Returns `batch` followed by `core` (checked: the count may overflow after broadcasting).
inline shape batch_and(const shape& batch, std::initializer_list<std::size_t> core) {
    std::array<std::size_t, max_rank + 2> dims{};
    std::size_t r = 0;
    for (std::size_t d : batch.dims()) dims[r++] = d;
    for (std::size_t d : core) dims[r++] = d;
    return shape(std::span<const std::size_t>(dims.data(), r));
}

}  // namespace tessera::detail
