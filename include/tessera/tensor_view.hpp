// tessera/tensor_view.hpp - tessera::tensor_view<T>, a non-owning strided view, and its zero-copy
// transforms (transpose, permute, slice, reshape, broadcast_to, squeeze, unsqueeze, diagonal).
// tensor_view<const T> is the read-only form every op accepts; tensors convert to views implicitly.
#pragma once

#include <tessera/detail/broadcast.hpp>
#include <tessera/detail/check.hpp>
#include <tessera/shape.hpp>

#include <array>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

namespace tessera {

/// Strides in elements, one per axis; negative strides are allowed.
using stride_array = std::array<std::ptrdiff_t, max_rank>;

/// Returns the row-major (C order) strides of `s`.
constexpr stride_array row_major_strides(const shape& s) noexcept {
    stride_array st{};
    // Unsigned, so extents that multiply past the range wrap instead of overflowing (undefined
    // behaviour). Only an empty shape such as [2^40, 2^40, 0] gets that far and still makes a
    // tensor, and its strides never address anything; any other such size fails its byte-count
    // check.
    std::size_t step = 1;
    for (std::size_t i = s.rank(); i-- > 0;) {
        st[i] = static_cast<std::ptrdiff_t>(step);
        step *= s[i] == 0 ? 1 : s[i];
    }
    return st;
}

/// A stop value for tensor_view::slice meaning "as far as the step goes" (either direction).
inline constexpr std::ptrdiff_t slice_end = std::numeric_limits<std::ptrdiff_t>::max();

namespace detail {
[[noreturn]] void throw_axis_out_of_range(const char* op, const any_integer& axis, std::size_t rank);
[[noreturn]] void throw_all_axes_not_accepted(const char* op);
[[noreturn]] void throw_duplicate_axis(const char* op, std::size_t axis);
[[noreturn]] void throw_permutation_size(const char* op, std::size_t given, std::size_t rank);
[[noreturn]] void throw_strides_size(std::size_t given, std::size_t rank);
[[noreturn]] void throw_slice_step_zero();
[[noreturn]] void throw_squeeze_extent(std::size_t axis, std::size_t extent);
[[noreturn]] void throw_select_index(std::size_t axis, std::ptrdiff_t index, std::size_t extent);
[[noreturn]] void throw_reshape_count(const shape& from, const shape& to);
[[noreturn]] void throw_reshape_strides(const shape& from, const shape& to);
[[noreturn]] void throw_diagonal_axes(std::size_t axis);
[[noreturn]] void throw_unsqueeze_rank();

/// Maps a possibly negative axis (-1 is the last) into [0, rank), or throws shape_error.
inline std::size_t normalize_axis(const char* op, std::ptrdiff_t axis, std::size_t rank) {
    const std::ptrdiff_t r = static_cast<std::ptrdiff_t>(rank);
    if (axis < -r || axis >= r) throw_axis_out_of_range(op, axis, rank);
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}
/// The same for an axis of any integer type, as an axis_list holds it.
inline std::size_t normalize_axis(const char* op, const any_integer& axis, std::size_t rank) {
    const std::uintmax_t m = axis.magnitude();
    if (axis.negative() ? m > rank : m >= rank) throw_axis_out_of_range(op, axis, rank);
    return static_cast<std::size_t>(axis.negative() ? rank - m : m);
}

/// Computes the strides of a view of extents `to` over the same elements as (`from`, `strides`)
/// without copying, as NumPy does; returns false when the layout does not allow it.
bool reshape_strides(const shape& from, const stride_array& strides, const shape& to,
                     stride_array& out) noexcept;
/// A braced operand list (`{a, b, c}`, as concat, stack and einsum take) as a span; the list's
/// array lives until the end of the full expression that made it.
template <class T>
std::span<const T> span_of(std::initializer_list<T> in) noexcept {
    return {in.begin(), in.size()};
}
}  // namespace detail

/// A non-owning, strided view of elements of type T (const T for a read-only view).
///
/// Copying a view copies a pointer, a shape and strides; it never allocates. A view does not keep
/// its tensor alive: it is valid while the viewed storage is. Transforms return new views of the
/// same elements and throw shape_error for invalid arguments.
///
///     tessera::tensor_view<const float> v = t;           // from a tensor
///     auto col = v.transpose().slice(0, 1, 2);            // second column, as a [1, rows] view
template <class T>
class tensor_view {
public:
    /// The element type as accessed through the view: const T for a read-only view.
    using element_type = T;
    /// The element type without const or volatile.
    using value_type = std::remove_cv_t<T>;

    /// Builds an empty view of shape [0].
    constexpr tensor_view() noexcept : shape_(shape::of_length(0)) {}
    /// Views `data` as a dense row-major array of `shape`.
    constexpr tensor_view(T* data, const tessera::shape& shape) noexcept
        : data_(data), shape_(shape), strides_(row_major_strides(shape)) {}
    /// Views `data` with explicit strides in elements; throws shape_error if the stride count is
    /// not the rank.
    tensor_view(T* data, const tessera::shape& shape, std::span<const std::ptrdiff_t> strides)
        : data_(data), shape_(shape) {
        if (strides.size() != shape.rank()) detail::throw_strides_size(strides.size(), shape.rank());
        for (std::size_t i = 0; i < strides.size(); ++i) strides_[i] = strides[i];
    }
    /// Views `data` with explicit strides in elements, given as a list; throws shape_error if the
    /// stride count is not the rank.
    tensor_view(T* data, const tessera::shape& shape, std::initializer_list<std::ptrdiff_t> strides)
        : tensor_view(data, shape, std::span<const std::ptrdiff_t>(strides.begin(), strides.size())) {}
    /// Views a contiguous span as a rank-1 tensor.
    template <class U, std::size_t N>
        requires std::is_convertible_v<U (*)[], T (*)[]>
    constexpr tensor_view(std::span<U, N> values) noexcept
        : tensor_view(values.data(), shape::of_length(values.size())) {}
    /// A mutable view converts to a read-only one.
    template <class U>
        requires(std::is_same_v<const U, T> && !std::is_const_v<U>)
    constexpr tensor_view(const tensor_view<U>& v) noexcept
        : data_(v.data()), shape_(v.shape()), strides_(v.stride_values()) {}

    /// Returns the address of the element at index (0, ..., 0); with negative strides it is not
    /// the lowest address. Not to be dereferenced when size() is 0 (it may then be null).
    constexpr T* data() const noexcept { return data_; }
    /// Returns the extents.
    constexpr const tessera::shape& shape() const noexcept { return shape_; }
    /// Returns the number of axes, 0 to max_rank.
    constexpr std::size_t rank() const noexcept { return shape_.rank(); }
    /// Returns the element count of the shape (1 for rank 0, 0 if any extent is 0); a broadcast
    /// element is counted once per position it appears at.
    constexpr std::size_t size() const noexcept { return shape_.count(); }
    /// Returns the extent of `axis`; `axis` must be below rank() (unchecked).
    constexpr std::size_t extent(std::size_t axis) const noexcept { return shape_[axis]; }
    /// Returns the stride of `axis` in elements (may be 0 or negative); `axis` must be below
    /// rank() (unchecked).
    constexpr std::ptrdiff_t stride(std::size_t axis) const noexcept { return strides_[axis]; }
    /// Returns the rank() strides in elements; the span points into this view and is valid while
    /// the view object lives.
    std::span<const std::ptrdiff_t> strides() const noexcept { return {strides_.data(), rank()}; }
    /// Returns all max_rank stride slots by reference; slots at and past rank() carry no meaning.
    constexpr const stride_array& stride_values() const noexcept { return strides_; }

    /// Returns true when the elements are dense and row-major (extent-1 axes may have any stride).
    constexpr bool is_contiguous() const noexcept {
        if (size() == 0) return true;
        std::ptrdiff_t expected = 1;
        for (std::size_t i = rank(); i-- > 0;) {
            if (shape_[i] == 1) continue;
            if (strides_[i] != expected) return false;
            expected *= static_cast<std::ptrdiff_t>(shape_[i]);
        }
        return true;
    }

    /// Returns the element at the given indices (one per axis; checked in debug builds only).
    template <class... Index>
        requires(std::is_integral_v<Index> && ...)
    constexpr T& operator()(Index... index) const noexcept {
        TESSERA_ASSERT(sizeof...(Index) == rank(), "tensor_view: wrong number of indices");
        const std::size_t indices[] = {static_cast<std::size_t>(index)..., 0};
        std::ptrdiff_t offset = 0;
        for (std::size_t axis = 0; axis < sizeof...(Index); ++axis) {
            TESSERA_ASSERT(indices[axis] < shape_[axis], "tensor_view: index out of range");
            offset += static_cast<std::ptrdiff_t>(indices[axis]) * strides_[axis];
        }
        return data_[offset];
    }

    /// Reverses the axes (a matrix transpose for rank 2).
    tensor_view transpose() const noexcept {
        std::array<std::size_t, max_rank> axes{};
        for (std::size_t i = 0; i < rank(); ++i) axes[i] = rank() - 1 - i;
        return permuted(axes);
    }
    /// Swaps two axes (negative axes count from the end).
    tensor_view transpose(std::ptrdiff_t axis1, std::ptrdiff_t axis2) const {
        const std::size_t a = detail::normalize_axis("transpose", axis1, rank());
        const std::size_t b = detail::normalize_axis("transpose", axis2, rank());
        std::array<std::size_t, max_rank> axes{};
        for (std::size_t i = 0; i < rank(); ++i) axes[i] = i;
        std::swap(axes[a], axes[b]);
        return permuted(axes);
    }
    /// Reorders the axes: axis i of the result is axis `axes[i]` of this view (negative axes count
    /// from the end; `{1, 0}`, or a std::vector of any integer type). Throws shape_error unless
    /// `axes` names every axis exactly once (tessera::all_axes is not a permutation).
    tensor_view permute(const axis_list& axes) const {
        if (axes.all()) detail::throw_all_axes_not_accepted("permute");
        if (axes.given() != rank()) detail::throw_permutation_size("permute", axes.given(), rank());
        std::array<bool, max_rank> seen{};
        std::array<std::size_t, max_rank> normalized{};
        for (std::size_t i = 0; i < rank(); ++i) {
            const std::size_t a = detail::normalize_axis("permute", axes.values()[i], rank());
            if (seen[a]) detail::throw_duplicate_axis("permute", a);
            seen[a] = true;
            normalized[i] = a;
        }
        return permuted(normalized);
    }

    /// Keeps elements start, start+step, ... before stop along `axis`, with Python semantics:
    /// negative start/stop count from the end, out-of-range values clamp, a negative step walks
    /// backwards, and `slice_end` means "to the end in the step's direction". step 0 throws.
    tensor_view slice(std::ptrdiff_t axis, std::ptrdiff_t start, std::ptrdiff_t stop = slice_end,
                      std::ptrdiff_t step = 1) const {
        const std::size_t a = detail::normalize_axis("slice", axis, rank());
        if (step == 0) detail::throw_slice_step_zero();
        const auto n = static_cast<std::ptrdiff_t>(shape_[a]);
        auto clamp = [n](std::ptrdiff_t i, std::ptrdiff_t lo, std::ptrdiff_t hi) {
            if (i < 0) i = i < -n ? lo : i + n;  // -n-1 and below clamp to the low end
            return i < lo ? lo : (i > hi ? hi : i);
        };
        std::ptrdiff_t length = 0;
        if (step > 0) {
            start = clamp(start, 0, n);
            stop = stop == slice_end ? n : clamp(stop, 0, n);
            length = stop > start ? (stop - start - 1) / step + 1 : 0;  // no overflow for any step
        } else {
            start = start == slice_end ? n - 1 : clamp(start, -1, n - 1);
            stop = stop == slice_end ? -1 : clamp(stop, -1, n - 1);
            length = start > stop
                         ? static_cast<std::ptrdiff_t>(static_cast<std::size_t>(start - stop - 1) /
                                                       (static_cast<std::size_t>(-(step + 1)) + 1)) +
                               1
                         : 0;
        }
        tensor_view v = *this;
        v.shape_ = shape_.narrowed(a, static_cast<std::size_t>(length));
        // Only a view with elements moves its pointer: an empty one's data may be null.
        if (v.size() != 0) v.data_ = data_ + start * strides_[a];
        if (length > 1) v.strides_[a] = strides_[a] * step;  // a lone element needs no stride
        return v;
    }
    /// Reverses the order of elements along `axis`.
    tensor_view flip(std::ptrdiff_t axis) const {
        const std::size_t a = detail::normalize_axis("flip", axis, rank());
        return slice(static_cast<std::ptrdiff_t>(a), slice_end, slice_end, -1);
    }

    /// Views the same elements with another shape of equal element count. Throws shape_error if
    /// the counts differ, or if the strides do not allow it without a copy (use contiguous()).
    tensor_view reshape(const tessera::shape& to) const {
        if (to.count() != size()) detail::throw_reshape_count(shape_, to);
        tensor_view v = *this;
        v.shape_ = to;
        if (!detail::reshape_strides(shape_, strides_, to, v.strides_))
            detail::throw_reshape_strides(shape_, to);
        return v;
    }

    /// Views this as `to` with NumPy broadcasting: size-1 and missing leading axes repeat with
    /// stride 0. Throws shape_error if the shapes are incompatible.
    tensor_view broadcast_to(const tessera::shape& to) const {
        if (!detail::broadcasts_to(shape_, to)) detail::throw_broadcast("broadcast_to", shape_, to);
        tensor_view v = *this;
        v.shape_ = to;
        v.strides_ = detail::broadcast_strides(shape_, strides_, to);
        return v;
    }

    /// Returns the elements at position `index` along `axis`, with that axis removed (NumPy's
    /// a[i] for axis 0): select(0, i) of a [batch, 4, 4] stack is its i-th 4 x 4 matrix. A
    /// negative index counts from the end; one outside the extent throws shape_error.
    tensor_view select(std::ptrdiff_t axis, std::ptrdiff_t index) const {
        const std::size_t a = detail::normalize_axis("select", axis, rank());
        const auto n = static_cast<std::ptrdiff_t>(shape_[a]);
        const std::ptrdiff_t i = index < 0 ? index + n : index;
        if (i < 0 || i >= n) detail::throw_select_index(a, index, shape_[a]);
        tensor_view v = without_axis(a);
        if (v.size() != 0) v.data_ = data_ + i * strides_[a];  // an empty view's data may be null
        return v;
    }

    /// Removes `axis`, which must have extent 1.
    tensor_view squeeze(std::ptrdiff_t axis) const {
        const std::size_t a = detail::normalize_axis("squeeze", axis, rank());
        if (shape_[a] != 1) detail::throw_squeeze_extent(a, shape_[a]);
        return without_axis(a);
    }
    /// Removes every axis of extent 1.
    tensor_view squeeze() const noexcept {
        tensor_view v = *this;
        for (std::size_t i = rank(); i-- > 0;)
            if (shape_[i] == 1) v = v.without_axis(i);
        return v;
    }
    /// Inserts an axis of extent 1 before position `axis` (in [-rank-1, rank]; -1 appends).
    tensor_view unsqueeze(std::ptrdiff_t axis) const {
        if (rank() == max_rank) detail::throw_unsqueeze_rank();
        const std::size_t a = detail::normalize_axis("unsqueeze", axis, rank() + 1);
        std::array<std::size_t, max_rank> dims{};
        stride_array st{};
        for (std::size_t i = 0, j = 0; i <= rank(); ++i) {
            if (i == a) {
                dims[i] = 1;
                st[i] = 0;
            } else {
                dims[i] = shape_[j];
                st[i] = strides_[j++];
            }
        }
        tensor_view v = *this;
        v.shape_ = shape::unchecked(std::span<const std::size_t>(dims.data(), rank() + 1));
        v.strides_ = st;
        return v;
    }

    /// Returns the diagonal of axes `axis1` and `axis2` as a new last axis of extent
    /// min(extent1, extent2), as NumPy's diagonal does.
    tensor_view diagonal(std::ptrdiff_t axis1 = 0, std::ptrdiff_t axis2 = 1) const {
        const std::size_t a = detail::normalize_axis("diagonal", axis1, rank());
        const std::size_t b = detail::normalize_axis("diagonal", axis2, rank());
        if (a == b) detail::throw_diagonal_axes(a);
        const std::size_t n = shape_[a] < shape_[b] ? shape_[a] : shape_[b];
        const std::ptrdiff_t diagonal_stride = strides_[a] + strides_[b];
        std::array<std::size_t, max_rank> dims{};
        stride_array st{};
        std::size_t j = 0;
        for (std::size_t i = 0; i < rank(); ++i) {
            if (i == a || i == b) continue;
            dims[j] = shape_[i];
            st[j++] = strides_[i];
        }
        dims[j] = n;
        st[j++] = diagonal_stride;
        tensor_view v = *this;
        v.shape_ = shape::unchecked(std::span<const std::size_t>(dims.data(), j));
        v.strides_ = st;
        return v;
    }

private:
    // Axis i of the result is axis axes[i] of this view; `axes` is a valid permutation.
    tensor_view permuted(const std::array<std::size_t, max_rank>& axes) const noexcept {
        std::array<std::size_t, max_rank> dims{};
        tensor_view v = *this;
        for (std::size_t i = 0; i < rank(); ++i) {
            dims[i] = shape_[axes[i]];
            v.strides_[i] = strides_[axes[i]];
        }
        v.shape_ = shape::unchecked(std::span<const std::size_t>(dims.data(), rank()));
        return v;
    }

    tensor_view without_axis(std::size_t a) const noexcept {
        std::array<std::size_t, max_rank> dims{};
        stride_array st{};
        for (std::size_t i = 0, j = 0; i < rank(); ++i) {
            if (i == a) continue;
            dims[j] = shape_[i];
            st[j++] = strides_[i];
        }
        tensor_view v = *this;
        v.shape_ = shape::unchecked(std::span<const std::size_t>(dims.data(), rank() - 1));
        v.strides_ = st;
        return v;
    }

    T* data_ = nullptr;
    tessera::shape shape_;
    stride_array strides_{};
};

/// Deduces tensor_view<U> from std::span<U, N>: a span of const elements gives a read-only view.
template <class U, std::size_t N>
tensor_view(std::span<U, N>) -> tensor_view<U>;

}  // namespace tessera
