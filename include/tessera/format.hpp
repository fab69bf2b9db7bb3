// tessera/format.hpp - fmt::formatter specializations for tessera::shape, tessera::stats,
// tensor_view<T> and tensor<T>. This header includes <fmt/format.h>; it is needed only to format
// them with fmt (fmt::format("{}", t)), and whoever includes it links fmt themselves. The core headers never
// include fmt; tessera/print.hpp offers to_string and operator<< without it.
#pragma once

#include <tessera/dtype.hpp>
#include <tessera/print.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <fmt/format.h>

#include <string_view>
#include <type_traits>

namespace tessera::detail {
/// Formats the text of to_string with the standard string specs (fill, alignment, width), so
/// "{:>12}" right-aligns a shape; the text is the same as to_string's.
template <class V>
struct to_string_formatter : fmt::formatter<std::string_view> {
    template <class FormatContext>
    auto format(const V& value, FormatContext& ctx) const -> decltype(ctx.out()) {
        return fmt::formatter<std::string_view>::format(tessera::to_string(value), ctx);
    }
};
}  // namespace tessera::detail

/// Formats a shape as "[3,4]".
template <>
struct fmt::formatter<tessera::shape> : tessera::detail::to_string_formatter<tessera::shape> {};

/// Formats a stats snapshot as "sessions=1 arena_entries=1 ...".
template <>
struct fmt::formatter<tessera::stats> : tessera::detail::to_string_formatter<tessera::stats> {};

/// Formats a view (mutable or read-only) like tessera::to_string: NumPy-style nested brackets.
template <class T>
    requires tessera::element<std::remove_const_t<T>>
struct fmt::formatter<tessera::tensor_view<T>>
    : tessera::detail::to_string_formatter<tessera::tensor_view<T>> {};

/// Formats a tensor like tessera::to_string: NumPy-style nested brackets.
template <tessera::element T>
struct fmt::formatter<tessera::tensor<T>>
    : tessera::detail::to_string_formatter<tessera::tensor<T>> {};
