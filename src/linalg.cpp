// Out-of-line error reporting for the batched linear algebra ops (tessera/ops/linalg.hpp): the
// messages are formatted here, and only when something is actually thrown.
#include <tessera/ops/linalg.hpp>
#include <tessera/print.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

namespace tessera::detail {

void throw_linalg_failure(const char* op, linalg_reason reason, std::size_t item, std::size_t items,
                          int info) {
    std::string message;
    switch (reason) {
        case linalg_reason::singular:
            message = fmt::format("{}: item {} of {} is singular (pivot {} is 0)", op, item, items,
                                  info - 1);
            break;
        case linalg_reason::not_positive_definite:
            message = fmt::format(
                "{}: item {} of {} is not positive definite (its leading minor of order {} is not)",
                op, item, items, info);
            break;
        case linalg_reason::no_convergence:
            message = fmt::format("{}: item {} of {} did not converge", op, item, items);
            break;
    }
    throw linalg_error(message, reason, item, items, info);
}

void throw_not_square(const char* op, const char* operand, const shape& s) {
    throw shape_error(fmt::format("{}: {} has shape {}; expected [..., n, n], a stack of square matrices",
                                  op, operand, to_string(s)));
}

void throw_rhs_shape(const char* op, const shape& a, const shape& b) {
    const std::size_t n = a[a.rank() - 1];
    throw shape_error(fmt::format(
        "{}: b has shape {} but a has shape {}; expected b as [..., {}, k] (a vector as [..., {}, 1])",
        op, to_string(b), to_string(a), n, n));
}

}  // namespace tessera::detail
