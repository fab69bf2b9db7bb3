// tessera/detail/small_matmul.hpp - the vocabulary of the batched products of small matrices:
// the kernels with sizes fixed at compile time (m = n = k in {2, 3, 4, 5, 6, 8, 16, 32}, and
// [4,4]x[4,1], [3,3]x[3,1]) and the register-blocked kernel for any real shape up to 64: the
// shapes, the instruction-set levels the kernels are compiled for (AVX-512, AVX2+FMA, the build's
// baseline) and the entry points. The kernels themselves are compiled in the library
// (src/small_matmul_kernels.hpp, src/small_gemm_kernels.hpp) and chosen once per process from the
// CPU.
// Part of ops/matmul.hpp; it includes neither Eigen nor oneTBB.
#pragma once

#include <cstddef>

namespace tessera::detail {

/// The instruction-set levels the tiny-matrix kernels are compiled for.
enum class kernel_isa : unsigned char { baseline = 0, avx2 = 1, avx512 = 2 };
inline constexpr unsigned kernel_isa_count = 3;

/// Returns the best level this CPU (and OS) supports; detected once per process.
kernel_isa host_kernel_isa() noexcept;

/// Returns the name of the kernel variant batched_matmul runs on this machine: "avx512" (AVX-512
/// F/VL/BW/DQ), "avx2" (AVX2 + FMA) or "default" (whatever the build targets; with
/// TESSERA_ARCH=native that is already the host's full vector width).
const char* matmul_kernel_isa() noexcept;

/// Returns the name of a level, as matmul_kernel_isa() spells it.
constexpr const char* kernel_isa_name(kernel_isa isa) noexcept {
    switch (isa) {
        case kernel_isa::avx512: return "avx512";
        case kernel_isa::avx2: return "avx2";
        case kernel_isa::baseline: break;
    }
    return "default";
}

/// The matrix shapes with a compile-time kernel; `none` means "use the general path".
enum class small_size : unsigned char {
    none,
    s2, s3, s4, s5, s6, s8, s16, s32,  // m = k = n
    mv4,                               // [4,4] x [4,1]
    mv3,                               // [3,3] x [3,1]
};
inline constexpr unsigned small_size_count = 11;

/// Classifies a product of [m, k] x [k, n] matrices.
constexpr small_size classify_small(std::size_t m, std::size_t k, std::size_t n) noexcept {
    if (m == k && n == 1) {
        if (m == 4) return small_size::mv4;
        if (m == 3) return small_size::mv3;
        return small_size::none;
    }
    if (m != k || k != n) return small_size::none;
    switch (m) {
        case 2: return small_size::s2;
        case 3: return small_size::s3;
        case 4: return small_size::s4;
        case 5: return small_size::s5;
        case 6: return small_size::s6;
        case 8: return small_size::s8;
        case 16: return small_size::s16;
        case 32: return small_size::s32;
        default: return small_size::none;
    }
}

/// One run of a batch: `count` products c_i = a_i @ b_i of dense row-major matrices, where
/// a_i = a + i*sa (likewise b and c, in elements). sa or sb may be 0 (an operand shared by the
/// whole run); c must not overlap a or b.
template <class T>
struct small_batch_args {
    const T* a;
    std::ptrdiff_t sa;
    const T* b;
    std::ptrdiff_t sb;
    T* c;
    std::ptrdiff_t sc;
    std::size_t count;
};

/// Runs one batch with the kernel of `size` (not none) compiled for `isa`, which the CPU must
/// support (host_kernel_isa() or below). One table look-up per call, none per matrix. Defined in
/// the library for float, double, complex<float> and complex<double>.
template <class T>
void run_small_batch(kernel_isa isa, small_size size, const small_batch_args<T>& args) noexcept;

/// A fixed-size kernel: what run_small_batch calls.
template <class T>
using small_batch_fn = void (*)(const small_batch_args<T>&) noexcept;

/// The kernel run_small_batch(isa, size, ...) calls, to be called again without the look-up.
/// Defined in the library for float and double.
template <class T>
small_batch_fn<T> small_batch_kernel(kernel_isa isa, small_size size) noexcept;

/// The largest m, n and k the register-blocked kernel takes; larger products go to Eigen's GEMM.
inline constexpr std::size_t small_gemm_max = 64;
/// Whether the register-blocked kernel is faster than the fixed-size kernel of `size` at level
/// `isa` for real elements of `bytes` bytes. Measured with small_gemm_bench (AMD EPYC, GCC 12):
/// with AVX2, 1.5-2.1x at 16 and 32 in float and double, 1.2-1.5x at 5 and 6 in double; with
/// AVX-512, about 1.15x at 16 in double and 1.0-1.17x at 32 in both (5 of 6 runs), and 1.09x at
/// [4,4] x [4,1] in double (its shifted sums, 2026-12-05); the fixed-size kernels 1.2-8x faster at
/// every other size. (At 3 in float its outer products measured 1.3-1.5x with A dense, but the
/// choice does not see A's layout, and with A transposed the panels would take it, not measured
/// against the fixed-size kernel on a copy of A.)
/// The fixed-size kernels stay the choice everywhere else and at the baseline level (not
/// measured).
constexpr bool blocked_beats_fixed(kernel_isa isa, small_size size, std::size_t bytes) noexcept {
    if (isa == kernel_isa::avx512)
        return size == small_size::s32 ||
               ((size == small_size::s16 || size == small_size::mv4) && bytes == 8);
    if (isa != kernel_isa::avx2) return false;
    switch (size) {
        case small_size::s16:
        case small_size::s32: return true;
        case small_size::s5:
        case small_size::s6: return bytes == 8;
        default: return false;
    }
}

/// One run of a batch for the register-blocked kernel of any small shape: `count` products
/// c_i = a_i @ b_i (with `accumulate`, c_i = alpha * a_i @ b_i + beta * c_i, and a zero beta does
/// not read c_i) of [m, k] by [k, n] matrices, where a_i = a + i*sa (likewise b and c). A may have
/// any strides; the rows of B and C are contiguous (column stride 1, or one column). sa or sb may
/// be 0 (an operand shared by the run); c must not overlap a or b.
template <class T>
struct small_gemm_args {
    std::ptrdiff_t m, n, k;
    const T* a;
    std::ptrdiff_t a_rs, a_cs, sa;
    const T* b;
    std::ptrdiff_t b_rs, sb;
    T* c;
    std::ptrdiff_t c_rs, sc;
    std::size_t count;
    bool accumulate;
    T alpha, beta;
};

/// Runs one batch with the register-blocked kernel compiled for `isa`, which the CPU must support
/// (host_kernel_isa() or below); m, n and k at most small_gemm_max, k at least 1. Defined in the
/// library for float and double.
template <class T>
void run_small_gemm(kernel_isa isa, const small_gemm_args<T>& args) noexcept;

/// What run_small_gemm decides for a single product of one shape and layout, kept to be called
/// again without deciding it: `run(args, plan)` computes what run_small_gemm(isa, args) does, with
/// the same bits, for any args of that shape and layout (m, n, k, A's strides and whether B's
/// rows are dense; count 1). The block count, tail lanes and rows of B read whole are the
/// planning's, for the entry that takes them; the others ignore them.
template <class T>
struct small_gemm_plan {
    void (*run)(const small_gemm_args<T>& args, const small_gemm_plan& plan) noexcept = nullptr;
    int blocks = 0;
    unsigned tail_lanes = 0;
    std::ptrdiff_t whole_rows = 0;
};

/// Plans the single product `args` (count 1) at level `isa` as run_small_gemm would, without
/// running it. Defined in the library for float and double.
template <class T>
small_gemm_plan<T> plan_small_gemm(kernel_isa isa, const small_gemm_args<T>& args) noexcept;

}  // namespace tessera::detail
