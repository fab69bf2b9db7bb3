// tessera/shape.hpp - tessera::shape, the extents of a tensor (rank 0..8, stored inline), and
// tessera::axis_list, the axes an op works on. Both take integers of any type through any_integer.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>

namespace tessera {

/// The largest rank a tensor or view may have.
inline constexpr std::size_t max_rank = 8;

class shape;
class any_integer;

namespace detail {
[[noreturn]] void throw_rank_too_large(std::size_t rank);
[[noreturn]] void throw_count_overflow(std::span<const std::size_t> dims);
[[noreturn]] void throw_negative_extent(std::size_t axis, const any_integer& extent);
}  // namespace detail

/// An integer type whose values are counts or indices: any standard or extended integer type up
/// to the width of std::uintmax_t, but not bool and not a character type (a string is not a
/// list of extents).
template <class I>
concept index_integer =
    std::integral<I> && sizeof(I) <= sizeof(std::uintmax_t) && !std::same_as<I, bool> &&
    !std::same_as<I, char> && !std::same_as<I, signed char> && !std::same_as<I, unsigned char> &&
    !std::same_as<I, wchar_t> && !std::same_as<I, char8_t> && !std::same_as<I, char16_t> &&
    !std::same_as<I, char32_t>;

/// An integer of any index_integer type (int, long, std::size_t, ...), or an unscoped enumerator,
/// kept exactly as sign and magnitude. Shapes and axis lists take their elements as any_integer,
/// so a caller's own integer type works in a braced list or a container, and a negative extent or
/// an out-of-range axis is reported as a shape_error instead of wrapping around.
class any_integer {
public:
    /// Holds 0.
    constexpr any_integer() noexcept = default;
    /// Holds an unscoped enumerator's value (`enum { rows = 3 }`), as a plain integer would.
    template <class E>
        requires std::is_enum_v<E> && std::is_convertible_v<E, std::underlying_type_t<E>> &&
                 index_integer<std::underlying_type_t<E>>
    constexpr any_integer(E value) noexcept  // NOLINT(google-explicit-constructor): by design
        : any_integer(static_cast<std::underlying_type_t<E>>(value)) {}
    /// Holds `value` exactly.
    template <index_integer I>
    constexpr any_integer(I value) noexcept {  // NOLINT(google-explicit-constructor): by design
        if constexpr (std::is_signed_v<I>) {
            negative_ = value < 0;
            // Negate in unsigned arithmetic: well defined for the most negative value too.
            magnitude_ = negative_ ? std::uintmax_t{0} - static_cast<std::uintmax_t>(value)
                                   : static_cast<std::uintmax_t>(value);
        } else {
            magnitude_ = static_cast<std::uintmax_t>(value);
        }
    }

    /// Returns true for a value below zero.
    constexpr bool negative() const noexcept { return negative_; }
    /// Returns |value|.
    constexpr std::uintmax_t magnitude() const noexcept { return magnitude_; }

private:
    std::uintmax_t magnitude_ = 0;
    bool negative_ = false;
};

/// A sized range whose elements are of an index_integer type (std::vector<int>,
/// std::array<std::size_t, N>, std::span<const long>, ...).
template <class R>
concept integer_range = requires(const R& r) {
    { std::size(r) } -> std::convertible_to<std::size_t>;
    std::end(r);
} && index_integer<std::remove_cvref_t<decltype(*std::begin(std::declval<const R&>()))>>;

/// Extents of a dense tensor, rank 0 (a scalar) to max_rank, with the element count precomputed.
/// Never allocates.
class shape {
public:
    /// Builds the rank-0 shape of a scalar (one element).
    constexpr shape() noexcept = default;
    /// Builds a shape from extents of any integer type (`{2, 3}`, `{rows, cols}`); throws
    /// shape_error for a negative extent, a rank above max_rank, or an element count that
    /// overflows std::size_t.
    shape(std::initializer_list<any_integer> dims) {
        if (dims.size() > max_rank) detail::throw_rank_too_large(dims.size());
        std::size_t i = 0;
        for (const any_integer& d : dims) {
            if (d.negative()) detail::throw_negative_extent(i, d);
            dims_[i++] = static_cast<std::size_t>(d.magnitude());
        }
        set_count(dims.size());
    }
    /// Builds a shape from a sized range of extents of any integer type (std::vector<int>,
    /// std::span<const std::size_t>, ...); throws shape_error as above.
    template <integer_range R>
    explicit shape(const R& dims) {
        const std::size_t rank = std::size(dims);
        if (rank > max_rank) detail::throw_rank_too_large(rank);
        std::size_t i = 0;
        for (const auto d : dims) {
            if constexpr (std::is_signed_v<decltype(d)>)
                if (d < 0) detail::throw_negative_extent(i, d);
            dims_[i++] = static_cast<std::size_t>(d);
        }
        set_count(rank);
    }

    /// Builds a shape whose rank and element count the caller already knows to be valid (a
    /// permutation or a narrowing of a valid shape); no checks.
    static constexpr shape unchecked(std::span<const std::size_t> dims) noexcept {
        shape s;
        s.rank_ = dims.size();
        s.count_ = 1;
        for (std::size_t i = 0; i < s.rank_; ++i) {
            s.dims_[i] = dims[i];
            s.count_ *= dims[i];
        }
        return s;
    }

    /// Returns a copy with extent `n` on `axis`; `n` must not exceed the current extent.
    constexpr shape narrowed(std::size_t axis, std::size_t n) const noexcept {
        shape s = *this;
        s.dims_[axis] = n;
        s.count_ = 1;
        for (std::size_t i = 0; i < rank_; ++i) s.count_ *= s.dims_[i];
        return s;
    }

    /// Returns the rank-1 shape [n].
    static constexpr shape of_length(std::size_t n) noexcept {
        shape s;
        s.dims_[0] = n;
        s.rank_ = 1;
        s.count_ = n;
        return s;
    }

    /// Returns the number of axes, 0 (a scalar) to max_rank.
    constexpr std::size_t rank() const noexcept { return rank_; }
    /// Returns the element count (1 for rank 0, 0 if any extent is 0).
    constexpr std::size_t count() const noexcept { return count_; }
    /// Returns the extent of `axis`; `axis` must be below rank() (unchecked).
    constexpr std::size_t operator[](std::size_t axis) const noexcept { return dims_[axis]; }
    /// Returns the rank() extents; the span points into this shape and lives as long as it does.
    std::span<const std::size_t> dims() const noexcept { return {dims_.data(), rank_}; }

    /// Returns true when both shapes have the same rank and the same extent on every axis.
    friend constexpr bool operator==(const shape& a, const shape& b) noexcept {
        if (a.rank_ != b.rank_) return false;
        for (std::size_t i = 0; i < a.rank_; ++i)
            if (a.dims_[i] != b.dims_[i]) return false;
        return true;
    }

private:
    // Sets rank_ and count_ from the first `rank` extents. A product that overflowed is still valid
    // when a later extent is zero: the count is 0.
    void set_count(std::size_t rank) {
        rank_ = rank;
        std::size_t count = 1;
        bool overflow = false, zero = false;
        for (std::size_t i = 0; i < rank_; ++i) {
            overflow |= __builtin_mul_overflow(count, dims_[i], &count);
            zero |= dims_[i] == 0;
        }
        if (overflow && !zero) detail::throw_count_overflow(dims());
        count_ = overflow ? 0 : count;
    }

    std::array<std::size_t, max_rank> dims_{};
    std::size_t rank_ = 0;
    std::size_t count_ = 1;
};

/// Selects every axis: `tessera::sum(s, a, tessera::all_axes, tessera::keepdims)`.
struct all_axes_t {
    explicit constexpr all_axes_t() = default;
};
/// Selects every axis (reductions).
inline constexpr all_axes_t all_axes{};

/// Asks a reduction to keep its reduced axes as extent-1 axes, as NumPy's keepdims=True.
struct keepdims_t {
    explicit constexpr keepdims_t() = default;
};
/// Keeps the reduced axes: `tessera::sum(s, a, {0, -1}, tessera::keepdims)`.
inline constexpr keepdims_t keepdims{};

namespace detail {
/// A value or a sized range of values that are numbers but not index_integers (1.5, true, 'a',
/// std::vector<double>): what axis_list rejects with a message of its own.
template <class A>
concept non_integer_axes =
    !index_integer<A> && !integer_range<A> &&
    (std::is_arithmetic_v<A> || requires(const A& r) {
        { std::size(r) } -> std::convertible_to<std::size_t>;
        requires std::is_arithmetic_v<std::remove_cvref_t<decltype(*std::begin(r))>>;
    });

template <class>
inline constexpr bool dependent_false = false;
}  // namespace detail

/// The axes an op works on: a braced list (`{0, -1}`), one axis (`1`), a sized range of any
/// integer type (std::vector<int>, std::array<std::size_t, N>, std::span<const long>), or
/// tessera::all_axes where an op takes it (reductions). Axes of any other number type (a float,
/// bool or character, or a range of them) do not compile, with a message that says so.
///
/// Negative axes count from the end. Holds a copy of up to max_rank axes; never allocates and
/// never throws: the op that receives the list checks it (in range, distinct, at most max_rank,
/// all_axes accepted) and throws shape_error naming itself.
class axis_list {
public:
    /// Holds the listed axes (`{0, -1}`; `{}` is an empty list).
    constexpr axis_list(std::initializer_list<any_integer> axes) noexcept : given_(axes.size()) {
        std::size_t i = 0;
        for (const any_integer& a : axes)
            if (i < max_rank) axes_[i++] = a;
    }
    /// Holds a copy of the axes of a sized range of integers.
    template <integer_range R>
    constexpr axis_list(const R& axes) noexcept : given_(std::size(axes)) {
        std::size_t i = 0;
        for (const auto a : axes)
            if (i < max_rank) axes_[i++] = any_integer(a);
    }
    /// Holds one axis.
    template <index_integer I>
    constexpr axis_list(I axis) noexcept : given_(1) {
        axes_[0] = any_integer(axis);
    }
    /// Selects every axis (tessera::all_axes); for a rank-0 input that is the one element.
    constexpr axis_list(all_axes_t) noexcept : all_(true) {}
    /// Rejects axes that are not integers, at compile time, instead of leaving the caller a list
    /// of near-miss overloads.
    template <detail::non_integer_axes A>
    axis_list(const A&) noexcept {
        static_assert(detail::dependent_false<A>,
                      "tessera: axes must be integers (int, long, std::size_t, ...) or a range "
                      "of them; a floating-point, bool or character value is not an axis");
    }
    /// The same for a braced list of non-integers (`{0.0, 1.0}`).
    template <class A>
        requires(!index_integer<A> && std::is_arithmetic_v<A>)
    axis_list(std::initializer_list<A>) noexcept {
        static_assert(detail::dependent_false<A>,
                      "tessera: axes must be integers (int, long, std::size_t, ...) or a range "
                      "of them; a floating-point, bool or character value is not an axis");
    }

    /// Returns true for tessera::all_axes.
    constexpr bool all() const noexcept { return all_; }
    /// Returns how many axes were given (may exceed max_rank; only the first max_rank are kept).
    constexpr std::size_t given() const noexcept { return given_; }
    /// Returns the axes kept (the first min(given(), max_rank)), as the caller wrote them.
    constexpr std::span<const any_integer> values() const noexcept {
        return {axes_.data(), given_ < max_rank ? given_ : max_rank};
    }

private:
    std::array<any_integer, max_rank> axes_{};
    std::size_t given_ = 0;
    bool all_ = false;
};

}  // namespace tessera
