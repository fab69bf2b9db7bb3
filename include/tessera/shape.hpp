// tessera/shape.hpp - tessera::shape, the extents of a tensor: rank 0..8, stored inline.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>

namespace tessera {

/// The largest rank a tensor or view may have.
inline constexpr std::size_t max_rank = 8;

class shape;

namespace detail {
[[noreturn]] void throw_rank_too_large(std::size_t rank);
[[noreturn]] void throw_count_overflow(std::span<const std::size_t> dims);
}  // namespace detail

/// Extents of a dense tensor, rank 0 (a scalar) to max_rank, with the element count precomputed.
/// Never allocates.
class shape {
public:
    /// Builds the rank-0 shape of a scalar (one element).
    constexpr shape() noexcept = default;
    /// Builds a shape from extents; throws shape_error if the rank exceeds max_rank or the element
    /// count overflows std::size_t.
    shape(std::initializer_list<std::size_t> dims) : shape(std::span(dims.begin(), dims.size())) {}
    /// Builds a shape from extents; throws shape_error as above.
    explicit shape(std::span<const std::size_t> dims) {
        if (dims.size() > max_rank) detail::throw_rank_too_large(dims.size());
        rank_ = dims.size();
        std::size_t count = 1;
        bool overflow = false;
        for (std::size_t i = 0; i < rank_; ++i) {
            dims_[i] = dims[i];
            overflow |= __builtin_mul_overflow(count, dims[i], &count);
        }
        if (overflow && count_zero_free(dims)) detail::throw_count_overflow(dims);
        count_ = overflow ? 0 : count;
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
    // A product that overflowed is still valid when a later extent is zero: the count is 0.
    static constexpr bool count_zero_free(std::span<const std::size_t> dims) noexcept {
        for (std::size_t d : dims)
            if (d == 0) return false;
        return true;
    }

    std::array<std::size_t, max_rank> dims_{};
    std::size_t rank_ = 0;
    std::size_t count_ = 1;
};

}  // namespace tessera
