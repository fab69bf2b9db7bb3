// tessera/print.hpp - text output for shapes, views, tensors and stats: tessera::to_string and
// operator<<, tensors laid out like NumPy's str(). This header does not include fmt; to write
// fmt::format("{}", t) include the opt-in tessera/format.hpp instead.
#pragma once

#include <tessera/dtype.hpp>
#include <tessera/shape.hpp>
#include <tessera/stats.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <iosfwd>
#include <string>

namespace tessera {

/// Formats a shape as its extents in brackets, e.g. "[3,4]" ("[]" for rank 0), as error
/// messages do.
std::string to_string(const shape& s);

/// Formats every counter of a snapshot as "name=value" pairs separated by spaces, in the order of
/// the counter list (stats.hpp): "sessions=1 arena_entries=1 inline_entries=0 ...".
std::string to_string(const stats& st);

/// Formats the elements of a view in logical (row-major) order, whatever its strides, like NumPy:
///
///     [[ 1.50 -2.00]
///      [ 0.00  3.25]]      <- a 2x2 float tensor
///
/// - Layout: nested brackets per axis, elements separated by one space, rows on new lines and one
///   blank line more per outer axis; every element is right-aligned to one width so columns
///   line up; rows wrap at 75 characters. Rank 0 prints the bare scalar; an empty view "[]".
/// - Summary: a view of more than 1000 elements shows only the first and last 3 entries of each
///   axis longer than 6, with "..." in between (NumPy's threshold and edgeitems).
/// - float, double: each value is rounded to at most 8 significant digits (shortest round-trip
///   form when that is shorter), then every element is printed with the same number of digits
///   after the point, the fewest that show all of them, so trailing zeros are trimmed for the
///   tensor as a whole ("1." when all values are integral). Scientific notation ("1.5e+08") is
///   used for the whole tensor when a non-zero magnitude is >= 1e8 or < 1e-4, or when the largest
///   is over 1000 times the smallest. Non-finite values print as nan, inf and -inf.
/// - complex: real and imaginary parts are each formatted as above, across the tensor, and joined
///   as "1+2j" / "0.5-1.25j"; integral parts drop the trailing point there.
/// - int32_t, int64_t: decimal. bool: "true" / "false", as C++ spells them.
///
/// Allocates the returned string (and scratch for the shown elements); it is meant for
/// diagnostics, not for hot paths. Defined in the library for the element types of dtype.hpp.
template <element T>
std::string to_string(const tensor_view<const T>& v);

/// Formats a mutable view; see to_string(const tensor_view<const T>&).
template <element T>
std::string to_string(const tensor_view<T>& v) {
    return to_string(tensor_view<const T>(v));
}

/// Formats a tensor; see to_string(const tensor_view<const T>&).
template <element T>
std::string to_string(const tensor<T>& t) {
    return to_string(t.view());
}

/// Writes to_string(s) to `os`.
std::ostream& operator<<(std::ostream& os, const shape& s);

/// Writes to_string(st) to `os`.
std::ostream& operator<<(std::ostream& os, const stats& st);

/// Writes to_string(v) to `os`.
template <element T>
std::ostream& operator<<(std::ostream& os, const tensor_view<const T>& v);

/// Writes to_string(v) to `os`.
template <element T>
std::ostream& operator<<(std::ostream& os, const tensor_view<T>& v) {
    return os << tensor_view<const T>(v);
}

/// Writes to_string(t) to `os`.
template <element T>
std::ostream& operator<<(std::ostream& os, const tensor<T>& t) {
    return os << t.view();
}

}  // namespace tessera
