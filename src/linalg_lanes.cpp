// The SIMD-across-batch kernels of src/linalg_lanes.hpp, compiled for each instruction-set level
// and element type, the tables that pick them, and the switch of tessera/detail/linalg_lanes.hpp.
#include "linalg_lanes_kernels.hpp"

#include <tessera/detail/linalg_lanes.hpp>

#include <algorithm>
#include <atomic>

namespace tessera::detail {
namespace {

// The level of the kernels in use, -1 for the per-matrix path, or -2 for host_kernel_isa() (the
// default; a constant initialiser cannot ask the CPU).
std::atomic<int> lanes_level{-2};

int current_level() noexcept {
    const int level = lanes_level.load(std::memory_order_relaxed);
    return level == -2 ? static_cast<int>(host_kernel_isa()) : level;
}

// W = the level's register width over the element size.
#if defined(__x86_64__) || defined(__i386__)
template <lane_op Op, class T, int N>
[[gnu::target(TESSERA_AVX512_TARGET)]] std::uint32_t block_avx512(const lane_run<T>& r,
                                                                  std::size_t& at) noexcept {
    return lanes::run_blocks<Op, 64 / sizeof(T), N>(r, at);
}
template <lane_op Op, class T, int N>
[[gnu::target("avx2,fma")]] std::uint32_t block_avx2(const lane_run<T>& r,
                                                     std::size_t& at) noexcept {
    return lanes::run_blocks<Op, 32 / sizeof(T), N>(r, at);
}
#endif
template <lane_op Op, class T, int N>
std::uint32_t block_baseline(const lane_run<T>& r, std::size_t& at) noexcept {
    return lanes::run_blocks<Op, 16 / sizeof(T), N>(r, at);
}

constexpr int width(kernel_isa isa, std::size_t element_size) noexcept {
    const std::size_t bytes = isa == kernel_isa::avx512 ? 64 : isa == kernel_isa::avx2 ? 32 : 16;
    return static_cast<int>(bytes / element_size);
}

template <class T, lane_op Op, int N>
constexpr lane_fn<T> pick(kernel_isa isa) noexcept {
    if constexpr (is_jacobi(Op) && N > max_jacobi_lane_n) {
        return nullptr;
    } else {
        switch (isa) {
#if defined(__x86_64__) || defined(__i386__)
            case kernel_isa::avx512: return &block_avx512<Op, T, N>;
            case kernel_isa::avx2: return &block_avx2<Op, T, N>;
#else
            case kernel_isa::avx512:
            case kernel_isa::avx2:
#endif
            case kernel_isa::baseline: break;
        }
        return &block_baseline<Op, T, N>;
    }
}

constexpr int lane_sizes = max_lane_n - min_lane_n + 1;

template <class T>
struct lane_table {
    lane_fn<T> fn[kernel_isa_count][lane_op_count][lane_sizes];

    template <lane_op Op, int... I>
    constexpr void fill(kernel_isa isa, std::integer_sequence<int, I...>) noexcept {
        ((fn[static_cast<unsigned>(isa)][static_cast<unsigned>(Op)][I] =
              pick<T, Op, min_lane_n + I>(isa)),
         ...);
    }

    constexpr lane_table() noexcept : fn{} {
        for (unsigned i = 0; i < kernel_isa_count; ++i) {
            const auto isa = static_cast<kernel_isa>(i);
            const auto sizes = std::make_integer_sequence<int, lane_sizes>{};
            fill<lane_op::inverse>(isa, sizes);
            fill<lane_op::solve>(isa, sizes);
            fill<lane_op::cholesky>(isa, sizes);
            fill<lane_op::lu>(isa, sizes);
            fill<lane_op::det>(isa, sizes);
            fill<lane_op::slogdet>(isa, sizes);
            fill<lane_op::eigh>(isa, sizes);
            fill<lane_op::eigvalsh>(isa, sizes);
            fill<lane_op::svd>(isa, sizes);
            fill<lane_op::svdvals>(isa, sizes);
        }
    }
};

template <class T>
constinit const lane_table<T> table{};

}  // namespace

void set_linalg_lanes(bool on, kernel_isa isa) noexcept {
    const auto level =
        std::min(static_cast<unsigned>(isa), static_cast<unsigned>(host_kernel_isa()));
    lanes_level.store(on ? static_cast<int>(level) : -1, std::memory_order_relaxed);
}

bool linalg_lanes() noexcept { return current_level() >= 0; }

int linalg_lane_width(std::size_t element_size) noexcept {
    const int level = current_level();
    return width(static_cast<kernel_isa>(level < 0 ? static_cast<int>(host_kernel_isa()) : level),
                 element_size);
}

template <class T>
lane_fn<T> find_lane_kernel(lane_op op, std::size_t n, int& lanes) noexcept {
    const int level = current_level();
    if (n < min_lane_n || n > max_lane_n || level < 0) return nullptr;
    const auto isa = static_cast<kernel_isa>(level);
    lanes = width(isa, sizeof(T)) * lane_blocks(op, n);
    return table<T>.fn[static_cast<unsigned>(isa)][static_cast<unsigned>(op)][n - min_lane_n];
}

template lane_fn<float> find_lane_kernel<float>(lane_op, std::size_t, int&) noexcept;
template lane_fn<double> find_lane_kernel<double>(lane_op, std::size_t, int&) noexcept;

}  // namespace tessera::detail
