// Out-of-line throw helpers of the structural ops (concat, stack) and of the Eigen bridge
// (as_eigen): the messages are formatted here, only when something is thrown.
#include <tessera/error.hpp>
#include <tessera/print.hpp>
#include <tessera/shape.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <string>

namespace tessera::detail {
void throw_join_empty(const char* op) {
    throw shape_error(fmt::format("{}: no inputs given; at least one is needed", op));
}

void throw_join_rank(const char* op, std::size_t index, std::size_t rank, std::size_t first_rank) {
    throw shape_error(fmt::format("{}: input {} has rank {} but input 0 has rank {}", op, index,
                                  rank, first_rank));
}

void throw_join_shape(const char* op, std::size_t index, const shape& got, const shape& first) {
    throw shape_error(fmt::format("{}: input {} has shape {} but input 0 has shape {}; all must "
                                  "have the same shape",
                                  op, index, to_string(got), to_string(first)));
}

void throw_join_extent(const char* op, std::size_t index, const shape& got, const shape& first,
                       std::size_t axis) {
    throw shape_error(fmt::format("{}: input {} has shape {} but input 0 has shape {}; they may "
                                  "differ only on axis {}",
                                  op, index, to_string(got), to_string(first), axis));
}

void throw_join_overflow(const char* op, std::size_t axis) {
    throw shape_error(
        fmt::format("{}: the joined extent of axis {} overflows std::size_t", op, axis));
}

void throw_eigen_rank(const char* op, std::size_t rank, const char* accepted) {
    throw shape_error(fmt::format("{}: a view of rank {} cannot be mapped; {} takes rank {}", op,
                                  rank, op, accepted));
}

void throw_eigen_negative_stride(const char* op, std::size_t axis, std::ptrdiff_t stride) {
    throw shape_error(fmt::format(
        "{}: axis {} has the negative stride {}, which Eigen maps do not support; make the view "
        "contiguous first (tessera::contiguous)",
        op, axis, stride));
}

}  // namespace tessera::detail
