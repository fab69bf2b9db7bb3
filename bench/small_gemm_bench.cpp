// small_gemm_bench.cpp - batched products of small matrices of every shape (square 2..64 and
// rectangular), one thread, batches that fill half of L2: tessera's batched_matmul against an
// Eigen fixed-size product loop compiled for the build's target, the same loop compiled with
// -march=native (the widest instructions tessera's kernels use here), and libxsmm's JIT kernels
// when CMake found libxsmm, on the same data in the same run; also one matmul call per matrix
// against the batched time plus the per-op cost, and a floor under every implementation's time
// (the batch's multiply-adds, its reads or its writes, whichever takes longest), measured in the
// same run. `--summary` prints the table.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <tessera/backend.hpp>
#include <tessera/detail/small_matmul.hpp>
#include <tessera/ops/elementwise.hpp>
#include <tessera/ops/matmul.hpp>
#include <tessera/tensor.hpp>

#if defined(TESSERA_BENCH_LIBXSMM)
#include <libxsmm.h>
#endif

#include "bench_support.hpp"
#include "small_shapes.hpp"

extern "C" bool tessera_bench_eigen_native(int bytes, int m, int k, int n, const void* a,
                                           const void* b, void* c, std::size_t batch);
extern "C" const char* tessera_bench_eigen_native_simd();
// The floors under the products, compiled the same way (bench/native/product_floors.cpp).
extern "C" int tessera_bench_fma_chain_count();
extern "C" void tessera_bench_fma_chains(int bytes, int width_bytes, long steps, double* sink);
extern "C" void tessera_bench_move_bytes(int bytes, bool write, const void* a, std::size_t a_count,
                                         const void* b, std::size_t b_count, void* c,
                                         std::size_t c_count, double* sink);

namespace {

using benchmark::Counter;
using tessera_bench::small_shape;
using tessera_bench::small_shapes;

// Matrices whose three operands fill half of L2.
template <class T>
std::size_t batch_for(const small_shape& z) {
    const auto per_matrix =
        static_cast<std::size_t>(z.m * z.k + z.k * z.n + z.m * z.n) * sizeof(T);
    return std::max<std::size_t>(1, tessera_bench::l2_bytes() / 2 / per_matrix);
}

template <class T>
const char* type_name() {
    return sizeof(T) == 4 ? "f32" : "f64";
}

std::string shape_label(const small_shape& z) {
    return fmt::format("{}x{}x{}", z.m, z.k, z.n);
}

template <class T>
std::string bench_name(const char* what, const small_shape& z) {
    return fmt::format("BM_SmallGemm_{}_{}/{}", what, type_name<T>(), shape_label(z));
}

template <class T>
struct operands {
    tessera::tensor<T> a, b, c;
};

template <class T>
operands<T> make_operands(const small_shape& z, std::size_t batch) {
    tessera::backend be{tessera::backend_options{}.with_threads(1)};
    return be.run([&](tessera::session& s) {
        const auto u = [](int v) { return static_cast<std::size_t>(v); };
        operands<T> x{tessera::empty<T>(s, {batch, u(z.m), u(z.k)}),
                      tessera::empty<T>(s, {batch, u(z.k), u(z.n)}),
                      tessera::zeros<T>(s, {batch, u(z.m), u(z.n)})};
        std::minstd_rand rng(42);
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (T& v : x.a.values()) v = static_cast<T>(dist(rng));
        for (T& v : x.b.values()) v = static_cast<T>(dist(rng));
        return x;
    });
}

void report(benchmark::State& state, const small_shape& z, std::size_t batch) {
    const double flops = 2.0 * z.m * z.k * z.n * static_cast<double>(batch);
    state.counters["FLOP/s"] =
        Counter(flops * static_cast<double>(state.iterations()), Counter::kIsRate);
}

template <class T>
void bm_tessera(benchmark::State& state, small_shape z) {
    const std::size_t batch = batch_for<T>(z);
    operands<T> x = make_operands<T>(z, batch);
    tessera::backend be{tessera::backend_options{}.with_threads(1)};
    be.run([&](tessera::session& s) {
        for (auto _ : state) {
            tessera::batched_matmul(s, x.a, x.b, x.c);
            benchmark::ClobberMemory();
        }
    });
    report(state, z, batch);
    state.SetLabel(tessera::detail::matmul_kernel_isa());
}

// The same products as one matmul call per matrix on 2-D views, in one session: what a caller
// pays who does not batch (each call validates and dispatches on its own).
template <class T>
void bm_per_matrix(benchmark::State& state, small_shape z) {
    const std::size_t batch = batch_for<T>(z);
    operands<T> x = make_operands<T>(z, batch);
    const auto u = [](int v) { return static_cast<std::size_t>(v); };
    const tessera::shape sa{u(z.m), u(z.k)}, sb{u(z.k), u(z.n)}, sc{u(z.m), u(z.n)};
    const std::size_t na = sa.count(), nb = sb.count(), nc = sc.count();
    tessera::backend be{tessera::backend_options{}.with_threads(1)};
    be.run([&](tessera::session& s) {
        for (auto _ : state) {
            for (std::size_t i = 0; i < batch; ++i)
                tessera::matmul(s, tessera::tensor_view<const T>(x.a.data() + i * na, sa),
                                tessera::tensor_view<const T>(x.b.data() + i * nb, sb),
                                tessera::tensor_view<T>(x.c.data() + i * nc, sc));
            benchmark::ClobberMemory();
        }
    });
    report(state, z, batch);
}

// The per-op cost dispatch_grid_bench measures: 1000 out-form adds of 8 floats in one session
// (checks, dispatch and eight additions each).
inline constexpr int op_cost_calls = 1000;
void bm_op_cost(benchmark::State& state) {
    tessera::backend be{tessera::backend_options{}.with_threads(1)};
    be.run([&](tessera::session& s) {
        const tessera::tensor<float> x = tessera::full<float>(s, {8}, 1.0f);
        tessera::tensor<float> out = tessera::zeros<float>(s, {8});
        for (auto _ : state) {
            for (int i = 0; i < op_cost_calls; ++i) tessera::add(s, x, x, out);
            benchmark::ClobberMemory();
        }
    });
}

// The register-blocked kernel alone, whatever batched_matmul would pick for the shape: where a
// fixed-size kernel exists, this row shows which of the two is faster.
template <class T>
void bm_blocked(benchmark::State& state, small_shape z) {
    const std::size_t batch = batch_for<T>(z);
    operands<T> x = make_operands<T>(z, batch);
    const tessera::detail::small_gemm_args<T> args{
        z.m,      z.n, z.k, x.a.data(), z.k, 1, z.m * z.k, x.b.data(), z.n, z.k * z.n,
        x.c.data(), z.n, z.m * z.n, batch, false, T{1}, T{0}};
    const tessera::detail::kernel_isa isa = tessera::detail::host_kernel_isa();
    for (auto _ : state) {
        tessera::detail::run_small_gemm<T>(isa, args);
        benchmark::ClobberMemory();
    }
    report(state, z, batch);
}

// Chains of vector multiply-adds at each width, for the floor under the products (a width wider
// than the CPU's runs as two or four of its vectors, no faster).
inline constexpr long fma_steps = 20000;
inline constexpr int fma_widths[] = {16, 32, 64};

template <class T>
std::string fma_name(int width_bytes) {
    return fmt::format("BM_SmallGemm_FmaChains_{}/{}bit", type_name<T>(), width_bytes * 8);
}

template <class T>
void bm_fma_chains(benchmark::State& state, int width_bytes) {
    double sink = 0;
    for (auto _ : state) {
        tessera_bench_fma_chains(static_cast<int>(sizeof(T)), width_bytes, fma_steps, &sink);
        benchmark::DoNotOptimize(sink);
    }
}

// One read of the batch's A and B, or one write of its C, at the widest vectors.
template <class T>
void bm_move(benchmark::State& state, small_shape z, bool write) {
    const std::size_t batch = batch_for<T>(z);
    operands<T> x = make_operands<T>(z, batch);
    double sink = 0;
    for (auto _ : state) {
        tessera_bench_move_bytes(static_cast<int>(sizeof(T)), write, x.a.data(), x.a.size(),
                                 x.b.data(), x.b.size(), x.c.data(), x.c.size(), &sink);
        benchmark::DoNotOptimize(sink);
        benchmark::ClobberMemory();
    }
}

// The floor under one batch's time, the longest of three things every implementation does: its
// m k n multiply-adds a matrix at the most lanes a nanosecond any width gave; one read of A and B;
// one write of C (bench/native/product_floors.cpp). Each from its fastest run.
struct product_floor {
    double ns;
    const char* part;  // the one of the three that takes longest
};

template <class T>
std::optional<product_floor> floor_of(const tessera_bench::results& r, const small_shape& z) {
    std::optional<double> lanes_per_ns;
    for (const int width : fma_widths) {
        const std::optional<double> chains = tessera_bench::min_ns(r, fma_name<T>(width));
        if (!chains) continue;
        const double fmas = static_cast<double>(fma_steps) * tessera_bench_fma_chain_count();
        const double rate = fmas * (width / static_cast<double>(sizeof(T))) / *chains;
        if (!lanes_per_ns || rate > *lanes_per_ns) lanes_per_ns = rate;
    }
    const std::optional<double> read = tessera_bench::min_ns(r, bench_name<T>("Read", z));
    const std::optional<double> write = tessera_bench::min_ns(r, bench_name<T>("Write", z));
    if (!lanes_per_ns || !read || !write) return std::nullopt;
    const double terms =
        static_cast<double>(z.m) * z.k * z.n * static_cast<double>(batch_for<T>(z));
    product_floor floor{terms / *lanes_per_ns, "multiply-adds"};
    if (*read > floor.ns) floor = {*read, "reads"};
    if (*write > floor.ns) floor = {*write, "writes"};
    return floor;
}

template <class T>
void bm_eigen(benchmark::State& state, small_shape z, bool native) {
    const std::size_t batch = batch_for<T>(z);
    operands<T> x = make_operands<T>(z, batch);
    for (auto _ : state) {
        const bool ran =
            native ? tessera_bench_eigen_native(sizeof(T), z.m, z.k, z.n, x.a.data(), x.b.data(),
                                                x.c.data(), batch)
                   : tessera_bench::eigen_fixed_product<T>(z.m, z.k, z.n, x.a.data(), x.b.data(),
                                                           x.c.data(), batch);
        if (!ran) {
            state.SkipWithError("no Eigen loop for this shape");
            return;
        }
        benchmark::ClobberMemory();
    }
    report(state, z, batch);
}

#if defined(TESSERA_BENCH_LIBXSMM)
// libxsmm's kernels are column-major: the row-major C = A B is the column-major C^T = B^T A^T,
// an n x m by m... product with B as the first operand.
template <class T>
void bm_libxsmm(benchmark::State& state, small_shape z) {
    const std::size_t batch = batch_for<T>(z);
    operands<T> x = make_operands<T>(z, batch);
    const T alpha{1}, beta{0};
    const int flags = LIBXSMM_GEMM_FLAGS('N', 'N');
    using kernel_t = std::conditional_t<sizeof(T) == 4, libxsmm_smmfunction, libxsmm_dmmfunction>;
    kernel_t kernel = nullptr;
    if constexpr (sizeof(T) == 4)
        kernel = libxsmm_smmdispatch(z.n, z.m, z.k, nullptr, nullptr, nullptr, &alpha, &beta,
                                     &flags, nullptr);
    else
        kernel = libxsmm_dmmdispatch(z.n, z.m, z.k, nullptr, nullptr, nullptr, &alpha, &beta,
                                     &flags, nullptr);
    if (kernel == nullptr) {
        state.SkipWithError("libxsmm has no kernel for this shape");
        return;
    }
    const auto sa = static_cast<std::size_t>(z.m * z.k), sb = static_cast<std::size_t>(z.k * z.n),
               sc = static_cast<std::size_t>(z.m * z.n);
    for (auto _ : state) {
        for (std::size_t i = 0; i < batch; ++i)
            kernel(x.b.data() + i * sb, x.a.data() + i * sa, x.c.data() + i * sc);
        benchmark::ClobberMemory();
    }
    report(state, z, batch);
}
#endif

template <class T>
void register_type() {
    const auto setup = [](benchmark::internal::Benchmark* b) {
        b->MinTime(0.05)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
    };
    // A floor takes its fastest run: noise only slows a run down.
    const auto floor_setup = [&setup](benchmark::internal::Benchmark* b) {
        setup(b);
        b->ComputeStatistics("min", tessera_bench::min_statistic);
    };
    for (const int width : fma_widths)
        floor_setup(benchmark::RegisterBenchmark(
            fma_name<T>(width).c_str(),
            [width](benchmark::State& st) { bm_fma_chains<T>(st, width); }));
    for (const small_shape& z : small_shapes) {
        setup(benchmark::RegisterBenchmark(bench_name<T>("Tessera", z).c_str(),
                                           [z](benchmark::State& st) { bm_tessera<T>(st, z); }));
        setup(benchmark::RegisterBenchmark(bench_name<T>("PerMatrix", z).c_str(),
                                           [z](benchmark::State& st) { bm_per_matrix<T>(st, z); }));
        setup(benchmark::RegisterBenchmark(bench_name<T>("Blocked", z).c_str(),
                                           [z](benchmark::State& st) { bm_blocked<T>(st, z); }));
        floor_setup(benchmark::RegisterBenchmark(
            bench_name<T>("Read", z).c_str(),
            [z](benchmark::State& st) { bm_move<T>(st, z, false); }));
        floor_setup(benchmark::RegisterBenchmark(
            bench_name<T>("Write", z).c_str(),
            [z](benchmark::State& st) { bm_move<T>(st, z, true); }));
        setup(benchmark::RegisterBenchmark(
            bench_name<T>("EigenFixed", z).c_str(),
            [z](benchmark::State& st) { bm_eigen<T>(st, z, false); }));
        setup(benchmark::RegisterBenchmark(
            bench_name<T>("EigenNative", z).c_str(),
            [z](benchmark::State& st) { bm_eigen<T>(st, z, true); }));
#if defined(TESSERA_BENCH_LIBXSMM)
        setup(benchmark::RegisterBenchmark(bench_name<T>("Libxsmm", z).c_str(),
                                           [z](benchmark::State& st) { bm_libxsmm<T>(st, z); }));
#endif
    }
}

template <class T>
void summary_rows(const tessera_bench::results& r, tessera_bench::summary_table& table) {
    using tessera_bench::goal;
    for (const small_shape& z : small_shapes) {
        const std::string tessera = bench_name<T>("Tessera", z);
        const bool tiny = z.m <= 8 && z.k <= 8 && z.n <= 8;
#if defined(TESSERA_BENCH_LIBXSMM)
        table.add(fmt::format("{} {:>8} L2, 1 thread: vs libxsmm", type_name<T>(), shape_label(z)),
                  tessera_bench::median_ns(r, tessera),
                  tessera_bench::median_ns(r, bench_name<T>("Libxsmm", z)),
                  goal::speedup_at_least, 1.0);
#endif
        const std::optional<product_floor> bound = floor_of<T>(r, z);
        const std::optional<double> floor =
            bound ? std::optional<double>(bound->ns) : std::nullopt;
        table.add(fmt::format("{} {:>8} L2, 1 thread: vs the floor ({})", type_name<T>(),
                              shape_label(z), bound ? bound->part : "not measured"),
                  tessera_bench::median_ns(r, tessera), floor, goal::info);
#if defined(TESSERA_BENCH_LIBXSMM)
        table.add(fmt::format("{} {:>8} L2, 1 thread: libxsmm's time vs the floor", type_name<T>(),
                              shape_label(z)),
                  tessera_bench::median_ns(r, bench_name<T>("Libxsmm", z)), floor, goal::info);
#endif
        const std::optional<double> eigen =
            tessera_bench::median_ns(r, bench_name<T>("EigenNative", z));
        table.add(fmt::format("{} {:>8} L2, 1 thread: vs Eigen -march=native", type_name<T>(),
                              shape_label(z)),
                  tessera_bench::median_ns(r, tessera), eigen,
                  tiny ? goal::speedup_at_least : goal::info, 2.0);
        if (tiny) {
            // Below 1, the target asks for less time than the floor: no implementation meets it.
            table.add(fmt::format("{} {:>8} L2, 1 thread: the 2x target's time vs the floor",
                                  type_name<T>(), shape_label(z)),
                      eigen ? std::optional<double>(*eigen / 2) : std::nullopt, floor, goal::info);
        }
        table.add(fmt::format("{} {:>8} L2, 1 thread: vs Eigen default target", type_name<T>(),
                              shape_label(z)),
                  tessera_bench::median_ns(r, tessera),
                  tessera_bench::median_ns(r, bench_name<T>("EigenFixed", z)), goal::info);
        // One matmul per matrix against the batched time plus one op's cost per matrix.
        const std::optional<double> batched = tessera_bench::median_ns(r, tessera);
        const std::optional<double> op = tessera_bench::median_ns(r, "BM_SmallGemm_OpCost");
        std::optional<double> batched_plus_ops;
        if (batched && op)
            batched_plus_ops = *batched + static_cast<double>(batch_for<T>(z)) * *op / op_cost_calls;
        table.add(fmt::format("{} {:>8} L2: a matmul per matrix vs batched + per-op cost",
                              type_name<T>(), shape_label(z)),
                  tessera_bench::median_ns(r, bench_name<T>("PerMatrix", z)), batched_plus_ops,
                  goal::ratio_at_most, 1.5);
        table.add(fmt::format("{} {:>8} L2, 1 thread: blocked kernel alone vs batched_matmul",
                              type_name<T>(), shape_label(z)),
                  tessera_bench::median_ns(r, bench_name<T>("Blocked", z)),
                  tessera_bench::median_ns(r, tessera), goal::info);
    }
}

void print_summary(const tessera_bench::results& r) {
    tessera_bench::summary_table table;
    summary_rows<float>(r, table);
    summary_rows<double>(r, table);
    fmt::print("small products of every shape: kernel variant {}, medians of 3 runs; a target "
               "row's ratio is the baseline's time over tessera's (info rows: tessera's over the "
               "baseline's); the floor is the longest of the batch's m k n multiply-adds a "
               "matrix at the most lanes a nanosecond that chains of vector multiply-adds gave, "
               "one read of its A and B, and one write of its C, each the fastest of its three "
               "runs in this run, the longest named in its first row (the row naming libxsmm's "
               "time has it in tessera's column){}\n\n",
               tessera::detail::matmul_kernel_isa(),
#if defined(TESSERA_BENCH_LIBXSMM)
               ""
#else
               "; libxsmm not found at configure time, its rows are left out"
#endif
    );
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::RegisterBenchmark("BM_SmallGemm_OpCost", bm_op_cost)
        ->MinTime(0.05)
        ->Repetitions(3)
        ->ReportAggregatesOnly(true)
        ->UseRealTime();
    register_type<float>();
    register_type<double>();
#if defined(TESSERA_BENCH_LIBXSMM)
    libxsmm_init();
#endif
    std::fprintf(stderr, "matmul kernel variant: %s; Eigen SIMD: %s (native loops: %s)\n",
                 tessera::detail::matmul_kernel_isa(), Eigen::SimdInstructionSetsInUse(),
                 tessera_bench_eigen_native_simd());
    return tessera_bench::run_benchmarks(argc, argv, print_summary);
}
