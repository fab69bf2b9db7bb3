// Out-of-line throw helpers: the only place that formats error messages, so templates stay small
// and nothing is formatted unless something is actually thrown. fmt is used here only.
#include <tessera/error.hpp>
#include <tessera/print.hpp>
#include <tessera/shape.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <span>

namespace tessera::detail {

void throw_rank_too_large(std::size_t rank) {
    throw shape_error(fmt::format("shape: rank {} exceeds the maximum rank {}", rank, max_rank));
}

void throw_negative_extent(std::size_t axis, const any_integer& extent) {
    throw shape_error(fmt::format("shape: extent -{} of axis {} is negative", extent.magnitude(), axis));
}

void throw_count_overflow(std::span<const std::size_t> dims) {
    throw shape_error(
        fmt::format("shape: the element count of {} overflows std::size_t", fmt::format("[{}]", fmt::join(dims, ","))));
}

void throw_block_too_large(std::size_t bytes) {
    throw allocation_error(
        fmt::format("allocate: {} bytes exceeds the largest block the pool can serve", bytes));
}

void throw_bytes_overflow(const char* op, std::size_t count, std::size_t element_size) {
    throw allocation_error(fmt::format("{}: {} elements of {} bytes overflow std::size_t", op,
                                       count, element_size));
}

void throw_from_size(std::size_t given, const shape& s) {
    throw shape_error(fmt::format("from: {} values given for shape {} ({} elements)", given,
                                  to_string(s), s.count()));
}

void throw_ragged(std::size_t row, std::size_t got, std::size_t expected) {
    throw shape_error(
        fmt::format("from: row {} has {} values but row 0 has {}", row, got, expected));
}

void throw_arange_step() { throw shape_error("arange: step must not be 0"); }

}  // namespace tessera::detail
