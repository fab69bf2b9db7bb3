// Out-of-line throw helpers of the shared checks (tessera/detail/broadcast.hpp and
// tessera/detail/validate.hpp): every op's broadcast, out-shape, writable and overlap errors are
// formatted here, in one format, and only when something is thrown.
#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <tessera/detail/validate.hpp>
#include <tessera/error.hpp>
#include <tessera/print.hpp>
#include <tessera/shape.hpp>

namespace tessera::detail {
namespace {

std::string name_of(operand_name x) {
    return x.index == operand_name::no_index ? std::string(x.name)
                                             : fmt::format("{} {}", x.name, x.index);
}

}  // namespace

void throw_broadcast_mismatch(const char* op, const shape& a, const shape& b, std::size_t core) {
    if (core == 0)
        throw shape_error(
            fmt::format("{}: shapes {} and {} do not broadcast", op, to_string(a), to_string(b)));
    throw shape_error(fmt::format("{}: the batch axes of a {} and b {} do not broadcast", op,
                                  to_string(a), to_string(b)));
}

void throw_broadcast(const char* op, const shape& from, const shape& to) {
    throw shape_error(
        fmt::format("{}: shape {} does not broadcast to {}", op, to_string(from), to_string(to)));
}

void throw_out_shape(const char* op, operand_name out, const shape& got, const shape& expected) {
    throw shape_error(fmt::format("{}: {} has shape {} but the result has shape {}", op,
                                  name_of(out), to_string(got), to_string(expected)));
}

void throw_out_shape(const char* op, operand_name out, const shape& got, const shape& expected,
                     const shape& expected_keepdims) {
    throw shape_error(fmt::format(
        "{}: {} has shape {} but the result has shape {} (or {} with the reduced "
        "axes kept)",
        op, name_of(out), to_string(got), to_string(expected), to_string(expected_keepdims)));
}

void throw_repeated_out(const char* op, operand_name out) {
    throw alias_error(fmt::format(
        "{}: {} repeats elements (an axis with stride 0); it cannot be written", op, name_of(out)));
}

void throw_overlap(const char* op, operand_name x, operand_name y, bool in_place_allowed) {
    if (in_place_allowed)
        throw alias_error(
            fmt::format("{}: {} overlaps {} without being the same view; in-place use must pass "
                        "the very same elements",
                        op, name_of(x), name_of(y)));
    throw alias_error(fmt::format("{}: {} overlaps {}; the two must not share any element", op,
                                  name_of(x), name_of(y)));
}

}  // namespace tessera::detail
