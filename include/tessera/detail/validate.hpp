// tessera/detail/validate.hpp - the checks every op runs before it writes anything: the session's
// thread at entry (check_session, in session.hpp), an out's shape and that it repeats no element
// (check_out), and how an out may overlap another operand (check_in_place, check_disjoint). One
// argument order throughout: op, then each operand's name before its view. The checks are inline
// compares; the messages are formatted only when thrown, by out-of-line helpers (src/validate.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <tessera/detail/broadcast.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor_view.hpp>

namespace tessera::detail {

/// An operand as an error message names it: "a", "out", or, with an index, "input 2".
struct operand_name {
    static constexpr std::size_t no_index = static_cast<std::size_t>(-1);

    constexpr operand_name(const char* n) noexcept : name(n) {}  // NOLINT: implicit from a name
    constexpr operand_name(const char* n, std::size_t i) noexcept : name(n), index(i) {}

    const char* name;
    std::size_t index = no_index;
};

/// Throws shape_error "op: out has shape [..] but the result has shape [..]".
[[noreturn]] void throw_out_shape(const char* op, operand_name out, const shape& got,
                                  const shape& expected);
/// As above for a reduction, whose out may also have the shape with the reduced axes kept:
/// "... but the result has shape [..] (or [..] with the reduced axes kept)".
[[noreturn]] void throw_out_shape(const char* op, operand_name out, const shape& got,
                                  const shape& expected, const shape& expected_keepdims);
/// Throws alias_error "op: out repeats elements (an axis with stride 0); it cannot be written".
[[noreturn]] void throw_repeated_out(const char* op, operand_name out);
/// Throws alias_error "op: x overlaps y" followed by why: for an op that may run in place,
/// "without being the same view; in-place use must pass the very same elements", else "; the two
/// must not share any element".
[[noreturn]] void throw_overlap(const char* op, operand_name x, operand_name y,
                                bool in_place_allowed);

/// Throws alias_error when `out` repeats elements (an axis with stride 0 and extent > 1).
template <class O>
void check_writable(const char* op, operand_name name, const tensor_view<O>& out) {
    for (std::size_t i = 0; i < out.rank(); ++i)
        if (out.stride(i) == 0 && out.extent(i) > 1) [[unlikely]]
            throw_repeated_out(op, name);
}

/// Checks an out-parameter: it has the `expected` shape and is writable.
template <class O>
void check_out(const char* op, operand_name name, const tensor_view<O>& out,
               const shape& expected) {
    if (!(out.shape() == expected)) [[unlikely]]
        throw_out_shape(op, name, out.shape(), expected);
    check_writable(op, name, out);
}

/// The bytes a view can touch, [lo, hi); empty for a view with no elements.
struct byte_range {
    std::uintptr_t lo = 0, hi = 0;
};
template <class T>
byte_range bytes_of(const tensor_view<T>& v) noexcept {
    if (v.size() == 0) return {};
    std::ptrdiff_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < v.rank(); ++i) {
        const std::ptrdiff_t span = v.stride(i) * static_cast<std::ptrdiff_t>(v.extent(i) - 1);
        (span < 0 ? lo : hi) += span;
    }
    const auto base = reinterpret_cast<std::uintptr_t>(v.data());
    return {base + static_cast<std::uintptr_t>(lo * static_cast<std::ptrdiff_t>(sizeof(T))),
            base + static_cast<std::uintptr_t>((hi + 1) * static_cast<std::ptrdiff_t>(sizeof(T)))};
}

/// True when two byte ranges share a byte.
inline bool ranges_overlap(const byte_range& a, const byte_range& b) noexcept {
    return a.lo < b.hi && b.lo < a.hi;
}

/// True when `a` and `b` are exactly the same elements in the same order: equal start, element
/// size and shape, and equal strides on every axis with more than one element (an extent-1
/// axis's stride is never used, and entries past the rank carry no meaning).
template <class A, class B>
bool same_elements(const tensor_view<A>& a, const tensor_view<B>& b) noexcept {
    if (static_cast<const void*>(a.data()) != static_cast<const void*>(b.data()) ||
        sizeof(A) != sizeof(B) || !(a.shape() == b.shape()))
        return false;
    for (std::size_t i = 0; i < a.rank(); ++i)
        if (a.extent(i) > 1 && a.stride(i) != b.stride(i)) return false;
    return true;
}

/// Throws alias_error when `out` overlaps `in` without being exactly the same elements: the rule
/// of ops that may run in place (elementwise, reductions, copies, linalg outs of an input's shape).
template <class O, class I>
void check_in_place(const char* op, operand_name out_name, const tensor_view<O>& out,
                    operand_name in_name, const tensor_view<I>& in) {
    if (ranges_overlap(bytes_of(out), bytes_of(in)) && !same_elements(out, in)) [[unlikely]]
        throw_overlap(op, out_name, in_name, true);
}

/// Throws alias_error when `x` and `y` share any byte, even as the very same view: the rule of
/// ops that read inputs after they start writing (matrix products) and between two outs.
template <class X, class Y>
void check_disjoint(const char* op, operand_name x_name, const tensor_view<X>& x,
                    operand_name y_name, const tensor_view<Y>& y) {
    if (ranges_overlap(bytes_of(x), bytes_of(y))) [[unlikely]]
        throw_overlap(op, x_name, y_name, false);
}

/// Views `v` broadcast to `to`, which must be a valid broadcast of its shape (checked before).
template <class T>
tensor_view<T> broadcast_unchecked(const tensor_view<T>& v, const shape& to) noexcept {
    if (v.shape() == to) return v;
    const std::array<std::ptrdiff_t, max_rank> st =
        broadcast_strides(v.shape(), v.stride_values(), to);
    return tensor_view<T>(v.data(), to, std::span<const std::ptrdiff_t>(st.data(), to.rank()));
}

}  // namespace tessera::detail
