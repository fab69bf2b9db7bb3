// tessera/tensor.hpp - tessera::tensor<T>, an owning, move-only, dense row-major array whose
// storage comes from a session's workspace, and its makers: empty, zeros, full, arange and from
// (uniform and normal are in random.hpp, dense copies in ops/structural.hpp: contiguous).
#pragma once

#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>

namespace tessera {

namespace detail {
[[noreturn]] void throw_bytes_overflow(const char* op, std::size_t count, std::size_t element_size);
[[noreturn]] void throw_from_size(std::size_t given, const shape& s);
[[noreturn]] void throw_ragged(std::size_t row, std::size_t got, std::size_t expected);
[[noreturn]] void throw_arange_step();
}  // namespace detail

template <element T>
class tensor;
template <element T>
tensor<T> empty(session& s, const shape& shape);

/// An owning, move-only, dense row-major tensor of rank 0 to 8.
///
/// Its block is borrowed from the workspace of the session that made it. When the tensor is
/// destroyed the block goes to the workspace of the calling thread's innermost session (if that
/// session is on the same backend), to the backend's shared pool (elsewhere), or to the heap (if
/// the backend is gone): a tensor may safely outlive its session and its backend. It converts
/// implicitly to tensor_view<T> and tensor_view<const T>, which is how ops take it.
///
///     auto t = tessera::zeros<float>(s, {2, 3});
///     t(1, 2) = 5.0f;
///     tessera::tensor_view<const float> v = t.view().transpose();
template <element T>
class tensor {
public:
    /// The element type.
    using value_type = T;

    /// Builds a tensor of shape [0] that owns nothing.
    tensor() noexcept = default;
    /// Takes over `other`'s block and shape; `other` is left empty, of shape [0]. Never allocates.
    tensor(tensor&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)),
          shape_(std::exchange(other.shape_, shape::of_length(0))) {}
    /// Gives back this tensor's block (as the destructor does), then takes over `other`'s block
    /// and shape; `other` is left empty, of shape [0]. Self-assignment does nothing.
    tensor& operator=(tensor&& other) noexcept {
        if (this != &other) {
            release();
            data_ = std::exchange(other.data_, nullptr);
            shape_ = std::exchange(other.shape_, shape::of_length(0));
        }
        return *this;
    }
    tensor(const tensor&) = delete;
    tensor& operator=(const tensor&) = delete;
    /// Gives the block back: to the workspace of the calling thread's innermost session if it
    /// belongs to the block's backend, else to that backend's shared pool, or to the heap if the
    /// backend is gone or the block was allocated over the pool's cap. Any thread may do this.
    ~tensor() { release(); }

    /// Returns the extents ([0] for a moved-from or default-built tensor).
    const tessera::shape& shape() const noexcept { return shape_; }
    /// Returns the number of axes (1 for a moved-from or default-built tensor).
    std::size_t rank() const noexcept { return shape_.rank(); }
    /// Returns the element count (0 for a moved-from or default-built tensor).
    std::size_t size() const noexcept { return shape_.count(); }
    /// Returns the extent of `axis`; `axis` must be below rank() (unchecked).
    std::size_t extent(std::size_t axis) const noexcept { return shape_[axis]; }
    /// Returns the first of size() contiguous row-major elements, or nullptr when size() is 0;
    /// valid while the tensor lives and is not moved from.
    T* data() noexcept { return data_; }
    /// Returns the first of size() contiguous row-major elements, read-only, or nullptr when
    /// size() is 0; valid while the tensor lives and is not moved from.
    const T* data() const noexcept { return data_; }
    /// Returns the elements in row-major order; valid while the tensor lives.
    std::span<T> values() noexcept { return {data_, size()}; }
    /// Returns the elements read-only, in row-major order; valid while the tensor lives.
    std::span<const T> values() const noexcept { return {data_, size()}; }

    /// Returns a view of all elements; valid while the tensor lives and is not moved from.
    tensor_view<T> view() noexcept { return {data_, shape_}; }
    /// Returns a read-only view of all elements; valid while the tensor lives and is not moved
    /// from.
    tensor_view<const T> view() const noexcept { return {data_, shape_}; }
    /// Converts to a view of all elements, as view() does (same lifetime).
    operator tensor_view<T>() noexcept { return view(); }
    /// Converts to a read-only view of all elements, as view() const does (same lifetime).
    operator tensor_view<const T>() const noexcept { return view(); }

    /// Returns the element at the given indices (one per axis; checked in debug builds only).
    template <class... Index>
        requires(std::is_integral_v<Index> && ...)
    T& operator()(Index... index) noexcept {
        return view()(index...);
    }
    /// Returns the element at the given indices, read-only (one index per axis, each below its
    /// extent; checked in debug builds only).
    template <class... Index>
        requires(std::is_integral_v<Index> && ...)
    const T& operator()(Index... index) const noexcept {
        return view()(index...);
    }

    /// Returns this tensor with new extents of the same element count, taking over its block: no
    /// copy, no allocation (`std::move(t).reshape({rows, cols})`, or
    /// `auto scalar = tessera::sum(s, a, {0, 1}, tessera::keepdims).reshape({})`). Throws
    /// shape_error naming both shapes when the counts differ, and then leaves this tensor
    /// unchanged.
    tensor reshape(const tessera::shape& to) && {
        if (to.count() != size()) detail::throw_reshape_count(shape_, to);
        tensor t(std::move(*this));
        t.shape_ = to;
        return t;
    }

private:
    template <element U>
    friend tensor<U> empty(session&, const tessera::shape&);

    void release() noexcept {
        if (data_ != nullptr) detail::release_block(data_);
        data_ = nullptr;
    }

    T* data_ = nullptr;
    tessera::shape shape_ = shape::of_length(0);
};

/// Returns an uninitialised tensor of `shape`, borrowed from the session's workspace; the one
/// way to allocate a tensor (the other makers and every op's allocating form go through it).
/// Throws allocation_error when the byte count overflows or the block cannot be allocated.
template <element T>
tensor<T> empty(session& s, const shape& shape) {
    detail::check_session(s);
    tensor<T> t;
    const std::size_t n = shape.count();
    if (n != 0) {
        if (n > static_cast<std::size_t>(-1) / sizeof(T))
            detail::throw_bytes_overflow("empty", n, sizeof(T));
        t.data_ = static_cast<T*>(detail::session_access::allocate(s, n * sizeof(T)));
    }
    t.shape_ = shape;
    return t;
}

/// Returns a tensor of `shape` filled with `value`.
template <element T>
tensor<T> full(session& s, const shape& shape, T value) {
    tensor<T> t = empty<T>(s, shape);
    std::fill_n(t.data(), t.size(), value);
    return t;
}

/// Returns a tensor of `shape` filled with zeros.
template <element T>
tensor<T> zeros(session& s, const shape& shape) {
    return full<T>(s, shape, T{});
}

/// Returns the rank-1 tensor [start, start + step, ...) of the values before `stop`.
/// Throws shape_error if `step` is 0.
template <real_numeric T>
tensor<T> arange(session& s, T start, T stop, T step = T{1}) {
    if (step == T{0}) detail::throw_arange_step();
    const double span =
        (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step);
    const double steps = span > 0 ? std::ceil(span) : 0.0;
    const auto n = static_cast<std::size_t>(steps);
    tensor<T> t = empty<T>(s, shape::of_length(n));
    for (std::size_t i = 0; i < n; ++i)
        t.data()[i] = static_cast<T>(start + static_cast<T>(i) * step);
    return t;
}

/// Returns a rank-1 tensor holding a copy of `values`.
template <element T>
tensor<T> from(session& s, std::initializer_list<T> values) {
    tensor<T> t = empty<T>(s, shape::of_length(values.size()));
    std::copy(values.begin(), values.end(), t.data());
    return t;
}

/// Returns a rank-2 tensor from nested rows, e.g. from<float>(s, {{1, 2}, {3, 4}}).
/// Throws shape_error if the rows differ in length.
template <element T>
tensor<T> from(session& s, std::initializer_list<std::initializer_list<T>> rows) {
    const std::size_t cols = rows.size() == 0 ? 0 : rows.begin()->size();
    std::size_t r = 0;
    for (const auto& row : rows) {
        if (row.size() != cols) detail::throw_ragged(r, row.size(), cols);
        ++r;
    }
    tensor<T> t = empty<T>(s, {rows.size(), cols});
    T* out = t.data();
    for (const auto& row : rows) out = std::copy(row.begin(), row.end(), out);
    return t;
}

/// Returns a tensor of `shape` holding a copy of `values` (row-major); throws shape_error if
/// the sizes differ.
template <element T>
tensor<T> from(session& s, const shape& shape, std::span<const T> values) {
    if (values.size() != shape.count()) detail::throw_from_size(values.size(), shape);
    tensor<T> t = empty<T>(s, shape);
    std::copy(values.begin(), values.end(), t.data());
    return t;
}

}  // namespace tessera

namespace tessera {

namespace detail {
template <class V>
struct tensor_traits {
    static constexpr bool is_tensor = false;
};
template <class T>
struct tensor_traits<tensor<T>> {
    static constexpr bool is_tensor = true;
    using value_type = T;
};
template <class T>
struct tensor_traits<tensor_view<T>> {
    static constexpr bool is_tensor = true;
    using value_type = std::remove_const_t<T>;
};
}  // namespace detail

/// A tensor<T> or a tensor_view<T> / tensor_view<const T>: what ops accept as inputs.
template <class V>
concept tensor_like = detail::tensor_traits<std::remove_cvref_t<V>>::is_tensor;

/// The element type of a tensor_like type.
template <tensor_like V>
using value_of_t = typename detail::tensor_traits<std::remove_cvref_t<V>>::value_type;

/// Returns a read-only view of a tensor or view.
template <tensor_like V>
tensor_view<const value_of_t<V>> as_view(const V& v) noexcept {
    return tensor_view<const value_of_t<V>>(v);
}

namespace detail {
// What an op may write, by the type a forwarding reference deduces: a tensor lvalue, or a view of
// mutable elements in any value category. A const tensor, a temporary tensor (whose result would
// be lost) and a view of const elements are not writable.
template <class O>
struct writable_traits {
    static constexpr bool is_writable = false;
};
template <class T>
struct writable_traits<tensor<T>&> {
    static constexpr bool is_writable = true;
    using value_type = T;
};
template <class T>
struct writable_traits<tensor_view<T>> {
    static constexpr bool is_writable = !std::is_const_v<T>;
    using value_type = std::remove_const_t<T>;
};
template <class T>
struct writable_traits<tensor_view<T>&> : writable_traits<tensor_view<T>> {};
template <class T>
struct writable_traits<const tensor_view<T>&> : writable_traits<tensor_view<T>> {};
}  // namespace detail

/// What an op's out-parameter accepts when the element type comes from the destination (fill,
/// the out form of matmul): a tensor<T> lvalue or a tensor_view<T> of mutable elements, taken by
/// forwarding reference (`template <writable_tensor O> void f(..., O&& out)`).
template <class O>
concept writable_tensor = detail::writable_traits<O>::is_writable;

/// The element type of a writable_tensor.
template <writable_tensor O>
using writable_value_t = typename detail::writable_traits<O>::value_type;

/// Returns a mutable view of a writable tensor: a tensor's view(), or the view itself.
template <writable_tensor O>
tensor_view<writable_value_t<O>> as_writable_view(O&& out) noexcept {
    return tensor_view<writable_value_t<O>>(out);
}

}  // namespace tessera
