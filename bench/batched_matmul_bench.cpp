// batched_matmul_bench.cpp - batches of n x n products (n = 2..64, float and double): tessera's
// batched_matmul at 1 thread and all threads against Eigen's fixed-size product in a loop (the
// contract's baseline, DESIGN.md section 4), Eigen's dynamic-size product in a loop, and one
// tessera session per matrix, on the same data in the same run. Batches either fit in L2 or are
// large (100,000 matrices, capped at ~160 MB of operands). `--summary` prints the contract table.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 bug 105593: a false -Wmaybe-uninitialized inside its AVX-512 intrinsics, which Eigen's
// GEMM reaches in an AVX-512 build (TESSERA_ARCH=native); see tessera/eigen.hpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <tessera/backend.hpp>
#include <tessera/ops/matmul.hpp>
#include <tessera/tensor.hpp>
#include <vector>

#include "bench_support.hpp"

namespace {

using benchmark::Counter;

const std::vector<int> sizes = {2, 3, 4, 8, 16, 32, 64};
constexpr std::size_t large_batch = 100000;
constexpr std::size_t large_batch_bytes = std::size_t{160} << 20;

// Matrices whose three operands (a, b, c) fill half of L2, and the large batch.
template <class T>
std::size_t batch_for(int n, bool large) {
    const std::size_t per_matrix = 3 * static_cast<std::size_t>(n * n) * sizeof(T);
    if (large) return std::min(large_batch, large_batch_bytes / per_matrix);
    return std::max<std::size_t>(1, tessera_bench::l2_bytes() / 2 / per_matrix);
}

template <class T>
const char* type_name() {
    return sizeof(T) == 4 ? "f32" : "f64";
}

std::string batch_label(bool large) { return large ? "large" : "L2"; }

template <class T>
std::string bench_name(const char* what, int n, bool large, int threads = 0) {
    std::string name = fmt::format("BM_Batched_{}_{}/n{}/{}", what, type_name<T>(), n, batch_label(large));
    if (threads > 0) name += fmt::format("/t{}", threads);
    return name;
}

// Operands in tessera tensors (64-byte aligned blocks), made in a setup session: tensors outlive
// it. Every benchmark below reads the same kind of memory.
template <class T>
struct operands {
    tessera::tensor<T> a, b, c;
};

// Consecutive benchmarks of one (type, n, batch) share their operands: filling 160 MB per
// benchmark would cost more than the timing. A tensor may outlive the backend that made it.
template <class T>
operands<T>& shared_operands(int n, std::size_t batch) {
    static operands<T> cached;
    static int cached_n = 0;
    static std::size_t cached_batch = 0;
    if (cached_n != n || cached_batch != batch) {
        cached = operands<T>{};  // give the previous blocks back first
        tessera::backend be{tessera::backend_options{}.with_threads(1)};
        cached = be.run([&](tessera::session& s) {
            const tessera::shape sh{batch, static_cast<std::size_t>(n), static_cast<std::size_t>(n)};
            operands<T> x{tessera::empty<T>(s, sh), tessera::empty<T>(s, sh), tessera::zeros<T>(s, sh)};
            std::minstd_rand rng(42);
            std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
            for (T& v : x.a.values()) v = static_cast<T>(dist(rng));
            for (T& v : x.b.values()) v = static_cast<T>(dist(rng));
            return x;
        });
        cached_n = n;
        cached_batch = batch;
    }
    return cached;
}

void report(benchmark::State& state, int n, std::size_t batch) {
    const double iterations = static_cast<double>(state.iterations());
    const double flops = 2.0 * n * n * n * static_cast<double>(batch);
    state.counters["FLOP/s"] = Counter(flops * iterations, Counter::kIsRate);
    state.counters["matrices/s"] = Counter(static_cast<double>(batch) * iterations, Counter::kIsRate);
}

template <class T>
void bm_tessera(benchmark::State& state, int n, bool large, int threads) {
    tessera::backend be{tessera::backend_options{}.with_threads(threads)};
    const std::size_t batch = batch_for<T>(n, large);
    operands<T>& x = shared_operands<T>(n, batch);
    const tessera::stats before = be.stats();
    be.run([&](tessera::session& s) {
        for (auto _ : state) {
            tessera::batched_matmul(s, x.a, x.b, x.c);
            benchmark::ClobberMemory();
        }
    });
    const tessera::stats d = be.stats() - before;
    report(state, n, batch);
    state.counters["parallel_dispatches"] =
        Counter(static_cast<double>(d.parallel_dispatches), Counter::kAvgIterations);
    state.SetLabel(tessera::detail::matmul_kernel_isa());
}

// The baseline: Eigen's fixed-size product, Eigen::Matrix<T, N, N>, in a loop.
template <class T, int N>
void eigen_fixed_loop(const T* a, const T* b, T* c, std::size_t batch) {
    using matrix = Eigen::Matrix<T, N, N>;
    for (std::size_t i = 0; i < batch; ++i) {
        const std::size_t at = i * N * N;
        Eigen::Map<matrix>(c + at).noalias() = Eigen::Map<const matrix>(a + at) * Eigen::Map<const matrix>(b + at);
    }
}

template <class T>
void eigen_fixed(int n, const T* a, const T* b, T* c, std::size_t batch) {
    switch (n) {
        case 2: eigen_fixed_loop<T, 2>(a, b, c, batch); break;
        case 3: eigen_fixed_loop<T, 3>(a, b, c, batch); break;
        case 4: eigen_fixed_loop<T, 4>(a, b, c, batch); break;
        case 8: eigen_fixed_loop<T, 8>(a, b, c, batch); break;
        case 16: eigen_fixed_loop<T, 16>(a, b, c, batch); break;
        case 32: eigen_fixed_loop<T, 32>(a, b, c, batch); break;
        case 64: eigen_fixed_loop<T, 64>(a, b, c, batch); break;
        default: std::abort();
    }
}

template <class T>
void bm_eigen_fixed(benchmark::State& state, int n, bool large) {
    const std::size_t batch = batch_for<T>(n, large);
    operands<T>& x = shared_operands<T>(n, batch);
    for (auto _ : state) {
        eigen_fixed<T>(n, x.a.data(), x.b.data(), x.c.data(), batch);
        benchmark::ClobberMemory();
    }
    report(state, n, batch);
}

template <class T>
void bm_eigen_dynamic(benchmark::State& state, int n, bool large) {
    const std::size_t batch = batch_for<T>(n, large);
    operands<T>& x = shared_operands<T>(n, batch);
    using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
    const auto nn = static_cast<std::size_t>(n * n);
    for (auto _ : state) {
        for (std::size_t i = 0; i < batch; ++i) {
            Eigen::Map<matrix>(x.c.data() + i * nn, n, n).noalias() =
                Eigen::Map<const matrix>(x.a.data() + i * nn, n, n) * Eigen::Map<const matrix>(x.b.data() + i * nn, n, n);
        }
        benchmark::ClobberMemory();
    }
    report(state, n, batch);
}

// What a caller pays who opens a session for every product instead of batching.
template <class T>
void bm_session_per_matrix(benchmark::State& state, int n, int threads) {
    tessera::backend be{tessera::backend_options{}.with_threads(threads)};
    const std::size_t batch = batch_for<T>(n, false);
    operands<T>& x = shared_operands<T>(n, batch);
    const auto nn = static_cast<std::size_t>(n * n);
    const tessera::shape sh{static_cast<std::size_t>(n), static_cast<std::size_t>(n)};
    for (auto _ : state) {
        for (std::size_t i = 0; i < batch; ++i) {
            be.run([&](tessera::session& s) {
                tessera::matmul(s, tessera::tensor_view<const T>(x.a.data() + i * nn, sh),
                                tessera::tensor_view<const T>(x.b.data() + i * nn, sh),
                                tessera::tensor_view<T>(x.c.data() + i * nn, sh));
            });
        }
        benchmark::ClobberMemory();
    }
    report(state, n, batch);
}

template <class T>
void register_type() {
    const int machine = static_cast<int>(tessera_bench::thread_counts().back());
    for (const int n : sizes) {
        for (const bool large : {false, true}) {
            // The contract rows (L2, 1 thread) get three repetitions; the summary uses medians.
            const int reps = large ? 1 : 3;
            const double min_time = large ? 0.1 : 0.05;
            const auto setup = [&](benchmark::internal::Benchmark* b) {
                b->MinTime(min_time)->Repetitions(reps)->ReportAggregatesOnly(reps > 1)->UseRealTime();
            };
            setup(benchmark::RegisterBenchmark(bench_name<T>("Tessera", n, large, 1).c_str(),
                                               [n, large](benchmark::State& st) { bm_tessera<T>(st, n, large, 1); }));
            if (machine > 1)
                setup(benchmark::RegisterBenchmark(
                    bench_name<T>("Tessera", n, large, machine).c_str(),
                    [n, large, machine](benchmark::State& st) { bm_tessera<T>(st, n, large, machine); }));
            setup(benchmark::RegisterBenchmark(bench_name<T>("EigenFixed", n, large).c_str(),
                                               [n, large](benchmark::State& st) { bm_eigen_fixed<T>(st, n, large); }));
            setup(benchmark::RegisterBenchmark(bench_name<T>("EigenDynamic", n, large).c_str(),
                                               [n, large](benchmark::State& st) { bm_eigen_dynamic<T>(st, n, large); }));
        }
        benchmark::RegisterBenchmark(bench_name<T>("SessionPerMatrix", n, false, machine).c_str(),
                                     [n, machine](benchmark::State& st) { bm_session_per_matrix<T>(st, n, machine); })
            ->MinTime(0.05)
            ->UseRealTime();
    }
}

std::optional<double> ratio_row_ns(const tessera_bench::results& r, const std::string& name) {
    return tessera_bench::median_ns(r, name);
}

template <class T>
void summary_rows(const tessera_bench::results& r, tessera_bench::summary_table& table) {
    using tessera_bench::goal;
    const int machine = static_cast<int>(tessera_bench::thread_counts().back());
    for (const int n : sizes) {
        if (n > 32) continue;
        const std::size_t batch = batch_for<T>(n, false);
        table.add(fmt::format("{} n={:<2} L2 batch {:>6}, 1 thread: vs Eigen fixed", type_name<T>(), n, batch),
                  ratio_row_ns(r, bench_name<T>("Tessera", n, false, 1)),
                  ratio_row_ns(r, bench_name<T>("EigenFixed", n, false)), goal::speedup_at_least, n == 8 ? 2.0 : 1.0);
    }
    for (const int n : sizes) {
        const std::size_t batch = batch_for<T>(n, true);
        table.add(fmt::format("{} n={:<2} batch {:>6}, 1 thread: vs Eigen fixed", type_name<T>(), n, batch),
                  ratio_row_ns(r, bench_name<T>("Tessera", n, true, 1)),
                  ratio_row_ns(r, bench_name<T>("EigenFixed", n, true)), goal::info);
        if (machine > 1)
            table.add(fmt::format("{} n={:<2} batch {:>6}, {} threads vs 1 thread", type_name<T>(), n, batch, machine),
                      ratio_row_ns(r, bench_name<T>("Tessera", n, true, machine)),
                      ratio_row_ns(r, bench_name<T>("Tessera", n, true, 1)), goal::info);
    }
    for (const int n : {4, 64})
        table.add(fmt::format("{} n={:<2} L2: session per matrix vs one batched op", type_name<T>(), n),
                  ratio_row_ns(r, bench_name<T>("SessionPerMatrix", n, false, machine)),
                  ratio_row_ns(r, bench_name<T>("Tessera", n, false, machine)), goal::info);
    for (const int n : {4, 64})
        table.add(fmt::format("{} n={:<2} L2: Eigen dynamic vs Eigen fixed", type_name<T>(), n),
                  ratio_row_ns(r, bench_name<T>("EigenDynamic", n, false)),
                  ratio_row_ns(r, bench_name<T>("EigenFixed", n, false)), goal::info);
}

void print_summary(const tessera_bench::results& r) {
    tessera_bench::summary_table table;
    summary_rows<float>(r, table);
    summary_rows<double>(r, table);
    fmt::print("batched matmul: performance contract (DESIGN.md section 4), kernel variant {}, "
               "L2 rows are medians of 3 runs; a ratio is Eigen's time over tessera's (info rows: "
               "the first column's time over the second's)\n\n",
               tessera::detail::matmul_kernel_isa());
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    register_type<float>();
    register_type<double>();
    std::fprintf(stderr, "matmul kernel variant: %s (Eigen SIMD: %s)\n", tessera::detail::matmul_kernel_isa(),
                 Eigen::SimdInstructionSetsInUse());
    return tessera_bench::run_benchmarks(argc, argv, print_summary);
}
