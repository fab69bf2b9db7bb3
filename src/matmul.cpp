// Out-of-line parts of the matrix products: the error messages (formatted here only), the
// one-time choice of the tiny-matrix kernel variant, and the kernels themselves, compiled once
// into the library for the four element types.

// GCC's -Wpsabi note about passing the kernels' vectors by value is switched off for this file in
// CMakeLists.txt (a pragma here does not reach it).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics (reached through Eigen's kernels when the build targets AVX-512,
// e.g. TESSERA_ARCH=native) start from _mm512_undefined_*() and trip a false -Wmaybe-uninitialized
// (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <tessera/detail/small_matmul.hpp>
#include <tessera/error.hpp>
#include <tessera/shape.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <complex>
#include <cstddef>
#include <string>

namespace tessera::detail {
namespace {

std::string text(const shape& s) { return fmt::format("[{}]", fmt::join(s.dims(), ",")); }

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

template void run_small_batch<float>(kernel_isa, small_size, const small_batch_args<float>&) noexcept;
template void run_small_batch<double>(kernel_isa, small_size, const small_batch_args<double>&) noexcept;
template void run_small_batch<std::complex<float>>(kernel_isa, small_size,
                                                   const small_batch_args<std::complex<float>>&) noexcept;
template void run_small_batch<std::complex<double>>(kernel_isa, small_size,
                                                    const small_batch_args<std::complex<double>>&) noexcept;

void throw_matmul_rank(const char* op, const char* operand, const shape& s, std::size_t rank, bool exact) {
    throw shape_error(fmt::format("{}: {} must have rank {}{} but has shape {}", op, operand,
                                  exact ? "" : ">= ", rank, text(s)));
}

void throw_matmul_inner(const char* op, const shape& a, const shape& b) {
    throw shape_error(fmt::format("{}: the inner dimensions of a {} and b {} differ", op, text(a), text(b)));
}

void throw_matmul_batch(const char* op, const shape& a, const shape& b) {
    throw shape_error(
        fmt::format("{}: the batch dimensions of a {} and b {} do not broadcast", op, text(a), text(b)));
}

void throw_matmul_alias(const char* op, const char* operand) {
    throw alias_error(fmt::format(
        "{}: out overlaps {}; a matrix product cannot write over its own inputs", op, operand));
}

void throw_tensordot_axis_count(std::size_t given_a, std::size_t given_b) {
    throw shape_error(fmt::format(
        "tensordot: {} axes given for a and {} for b; they must pair up, at most one per axis",
        given_a, given_b));
}

void throw_tensordot_extent(std::size_t axis_a, std::size_t axis_b, const shape& a, const shape& b) {
    throw shape_error(fmt::format("tensordot: axis {} of a {} and axis {} of b {} differ in extent",
                                  axis_a, text(a), axis_b, text(b)));
}

void throw_result_rank(const char* op, std::size_t rank) {
    throw shape_error(
        fmt::format("{}: the result would have rank {}, above the maximum rank {}", op, rank, max_rank));
}

void throw_vdot_size(const char* op, const shape& a, const shape& b) {
    throw shape_error(fmt::format("{}: a {} has {} elements but b {} has {}", op, text(a), a.count(),
                                  text(b), b.count()));
}

}  // namespace tessera::detail
