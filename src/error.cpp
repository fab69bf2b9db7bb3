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

void throw_broadcast_mismatch(const char* op, const shape& a, const shape& b) {
    throw shape_error(fmt::format("{}: shapes {} and {} do not broadcast", op, to_string(a),
                                  to_string(b)));
}

void throw_partial_overlap(const char* op, std::size_t input) {
    throw alias_error(fmt::format(
        "{}: out overlaps input {} without being the same view; in-place use must pass the very "
        "same elements",
        op, input));
}

void throw_broadcast_output(const char* op) {
    throw alias_error(fmt::format(
        "{}: out repeats elements (an axis with stride 0); it cannot be written", op));
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

void throw_out_shape(const char* op, const shape& out, const shape& expected) {
    throw shape_error(fmt::format("{}: out has shape {} but the result has shape {}", op,
                                  to_string(out), to_string(expected)));
}

void throw_reduction_out_shape(const char* op, const shape& out, const shape& expected,
                               const shape& expected_keepdims) {
    throw shape_error(fmt::format("{}: out has shape {} but the result has shape {} (or {} with "
                                  "the reduced axes kept)",
                                  op, to_string(out), to_string(expected),
                                  to_string(expected_keepdims)));
}

}  // namespace tessera::detail
