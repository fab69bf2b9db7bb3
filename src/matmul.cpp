// Out-of-line parts of the matrix products that need no kernel: the error messages (formatted here
// only) and the one-time choice of the tiny-matrix kernel variant. The engines are compiled in
// src/matmul_real.cpp and src/matmul_complex.cpp, the tiny-matrix kernels in
// src/small_matmul_real.cpp and src/small_matmul_complex.cpp.

#include <tessera/detail/small_matmul.hpp>
#include <tessera/error.hpp>
#include <tessera/print.hpp>
#include <tessera/shape.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <string>

namespace tessera::detail {
namespace {

kernel_isa detect_kernel_isa() noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    // libgcc's checks include the OS's consent (XGETBV) to save the wider registers.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
        return kernel_isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kernel_isa::avx2;
#endif
    return kernel_isa::baseline;
}

}  // namespace

kernel_isa host_kernel_isa() noexcept {
    static const kernel_isa isa = detect_kernel_isa();
    return isa;
}

const char* matmul_kernel_isa() noexcept { return kernel_isa_name(host_kernel_isa()); }

void throw_matmul_rank(const char* op, const char* operand, const shape& s, std::size_t rank, bool exact) {
    throw shape_error(fmt::format("{}: {} must have rank {}{} but has shape {}", op, operand,
                                  exact ? "" : ">= ", rank, to_string(s)));
}

void throw_matmul_inner(const char* op, const shape& a, const shape& b) {
    throw shape_error(fmt::format("{}: the inner dimensions of a {} and b {} differ", op, to_string(a), to_string(b)));
}

void throw_tensordot_axis_count(std::size_t given_a, std::size_t given_b) {
    throw shape_error(fmt::format(
        "tensordot: {} axes given for a and {} for b; they must pair up, at most one per axis",
        given_a, given_b));
}

void throw_tensordot_extent(std::size_t axis_a, std::size_t axis_b, const shape& a, const shape& b) {
    throw shape_error(fmt::format("tensordot: axis {} of a {} and axis {} of b {} differ in extent",
                                  axis_a, to_string(a), axis_b, to_string(b)));
}

void throw_result_rank(const char* op, std::size_t rank) {
    throw shape_error(
        fmt::format("{}: the result would have rank {}, above the maximum rank {}", op, rank, max_rank));
}

void throw_vdot_size(const char* op, const shape& a, const shape& b) {
    throw shape_error(fmt::format("{}: a {} has {} elements but b {} has {}", op, to_string(a), a.count(),
                                  to_string(b), b.count()));
}

}  // namespace tessera::detail
