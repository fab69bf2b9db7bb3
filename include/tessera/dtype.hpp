// tessera/dtype.hpp - the element types tessera supports and the concepts ops use to accept them.
// float, double, std::complex<float>, std::complex<double>, std::int32_t and std::int64_t are the
// numeric types; bool is the mask type that comparisons produce and `where` consumes.
#pragma once

#include <complex>
#include <concepts>
#include <cstdint>
#include <type_traits>

namespace tessera {

/// True when T is a std::complex specialisation (complex<float>, complex<double>), else false;
/// cv-qualified types are not stripped.
template <class T>
inline constexpr bool is_complex_v = false;
template <class T>
inline constexpr bool is_complex_v<std::complex<T>> = true;

/// A numeric element type: float, double, complex<float>, complex<double>, int32_t, int64_t.
template <class T>
concept numeric =
    std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, std::complex<float>> ||
    std::same_as<T, std::complex<double>> || std::same_as<T, std::int32_t> ||
    std::same_as<T, std::int64_t>;

/// Any type a tensor may hold: a numeric type or bool (masks).
template <class T>
concept element = numeric<T> || std::same_as<T, bool>;

/// A numeric type with an ordering: float, double, int32_t, int64_t.
template <class T>
concept real_numeric = numeric<T> && !is_complex_v<T>;

/// A floating-point type, real or complex: what exp, log, sqrt and friends accept.
template <class T>
concept floating = std::same_as<T, float> || std::same_as<T, double> || is_complex_v<T>;

/// A real floating-point type: float or double.
template <class T>
concept real_floating = std::same_as<T, float> || std::same_as<T, double>;

/// A complex type: complex<float> or complex<double>.
template <class T>
concept complex_numeric = numeric<T> && is_complex_v<T>;

/// The real type underlying T (float for complex<float>, T itself for real types).
template <class T>
struct real_type {
    using type = T;
};
template <class T>
struct real_type<std::complex<T>> {
    using type = T;
};
/// The real type underlying T: float for complex<float>, double for complex<double>, T itself
/// for every other type (bool and the integer types included).
template <class T>
using real_type_t = typename real_type<T>::type;

}  // namespace tessera
