// matmul_bench.cpp - 2-D matrix products: the per-op cost of tiny products (2x2, 4x4) in a session,
// out-parameter form, against Eigen's fixed-size product, and square float GEMM (256..2048) at 1
// thread and all threads against Eigen's single-threaded GEMM on the same data, in the same run
// (DESIGN.md section 4). `--summary` prints the contract table.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 bug 105593: a false -Wmaybe-uninitialized inside its AVX-512 intrinsics, which Eigen's
// GEMM reaches in an AVX-512 build (TESSERA_ARCH=native); see tessera/eigen.hpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tessera/backend.hpp>
#include <tessera/ops/matmul.hpp>
#include <tessera/random.hpp>
#include <tessera/tensor.hpp>
#include <vector>

#include "bench_support.hpp"

namespace {

using benchmark::Counter;
using tessera_bench::thread_counts;

tessera::backend make_backend(std::int64_t threads) {
    return tessera::backend{tessera::backend_options{}.with_threads(static_cast<int>(threads))};
}

// --- tiny products: one op per iteration inside one session ---------------------------------

template <int N>
void BM_Tiny_Session(benchmark::State& state) {
    tessera::backend be = make_backend(state.range(0));
    const tessera::shape sh{N, N};
    const tessera::stats before = be.stats();
    be.run([&](tessera::session& s) {
        const tessera::tensor<float> a = tessera::uniform<float>(s, sh, -1, 1, 1);
        const tessera::tensor<float> b = tessera::uniform<float>(s, sh, -1, 1, 2);
        tessera::tensor<float> c = tessera::zeros<float>(s, sh);
        for (auto _ : state) {
            tessera::matmul(s, a, b, c);
            benchmark::ClobberMemory();  // each product is written, not folded into the next
        }
    });
    const tessera::stats d = be.stats() - before;
    state.counters["parallel_dispatches"] = Counter(static_cast<double>(d.parallel_dispatches), Counter::kAvgIterations);
}

template <int N>
void BM_Tiny_EigenFixed(benchmark::State& state) {
    using matrix = Eigen::Matrix<float, N, N>;
    matrix a = matrix::Random(), b = matrix::Random(), c;
    for (auto _ : state) {
        // Opaque operands: the product is computed every time, as the op's is.
        benchmark::DoNotOptimize(a.data());
        benchmark::DoNotOptimize(b.data());
        c.noalias() = a * b;
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
}

// --- square GEMM ------------------------------------------------------------------------------

struct square {
    tessera::tensor<float> a, b, c;
};

square make_square(tessera::backend& be, std::size_t n) {
    return be.run([n](tessera::session& s) {
        const tessera::shape sh{n, n};
        return square{tessera::uniform<float>(s, sh, -1, 1, 1), tessera::uniform<float>(s, sh, -1, 1, 2),
                      tessera::zeros<float>(s, sh)};
    });
}

void report_flops(benchmark::State& state, std::size_t n) {
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    state.counters["FLOP/s"] = Counter(flops * static_cast<double>(state.iterations()), Counter::kIsRate);
}

void BM_Gemm_Tessera(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    tessera::backend be = make_backend(state.range(1));
    square x = make_square(be, n);
    const tessera::stats before = be.stats();
    be.run([&](tessera::session& s) {
        for (auto _ : state) {
            tessera::matmul(s, x.a, x.b, x.c);
            benchmark::ClobberMemory();
        }
    });
    const tessera::stats d = be.stats() - before;
    report_flops(state, n);
    state.counters["parallel_dispatches"] = Counter(static_cast<double>(d.parallel_dispatches), Counter::kAvgIterations);
}

// Eigen's GEMM on the same (row-major) data, single-threaded: Eigen is not built with OpenMP here.
void BM_Gemm_Eigen1(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    tessera::backend be = make_backend(1);
    square x = make_square(be, n);
    using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const auto en = static_cast<Eigen::Index>(n);
    Eigen::Map<const matrix> a(x.a.data(), en, en), b(x.b.data(), en, en);
    Eigen::Map<matrix> c(x.c.data(), en, en);
    for (auto _ : state) {
        c.noalias() = a * b;
        benchmark::ClobberMemory();
    }
    report_flops(state, n);
}

const std::vector<std::int64_t> gemm_sizes = {256, 512, 1024, 2048};

void tiny_threads(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({thread_counts(1)})->MinTime(0.05)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}
void tiny_baseline(benchmark::internal::Benchmark* b) {
    b->MinTime(0.05)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}
void gemm_threads(benchmark::internal::Benchmark* b) {
    std::vector<std::int64_t> threads = {1};
    if (thread_counts().back() > 1) threads.push_back(thread_counts().back());
    b->ArgsProduct({gemm_sizes, threads})->MinTime(0.3)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}
void gemm_baseline(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({gemm_sizes})->MinTime(0.3)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Tiny_Session, 2)->Apply(tiny_threads);
BENCHMARK_TEMPLATE(BM_Tiny_EigenFixed, 2)->Apply(tiny_baseline);
BENCHMARK_TEMPLATE(BM_Tiny_Session, 4)->Apply(tiny_threads);
BENCHMARK_TEMPLATE(BM_Tiny_EigenFixed, 4)->Apply(tiny_baseline);
BENCHMARK(BM_Gemm_Tessera)->Apply(gemm_threads);
BENCHMARK(BM_Gemm_Eigen1)->Apply(gemm_baseline);

// --- the contract table ---------------------------------------------------------------------

void print_summary(const tessera_bench::results& r) {
    using tessera_bench::goal;
    using tessera_bench::median_ns;
    tessera_bench::summary_table table;
    for (const std::int64_t t : thread_counts(1)) {
        table.add(fmt::format("2x2 matmul per op, session, {} thr (vs Eigen fixed 2x2)", t),
                  median_ns(r, fmt::format("BM_Tiny_Session<2>/{}", t)), median_ns(r, "BM_Tiny_EigenFixed<2>"),
                  goal::ratio_at_most, 15);
        table.add(fmt::format("4x4 matmul per op, session, {} thr (vs Eigen fixed 4x4)", t),
                  median_ns(r, fmt::format("BM_Tiny_Session<4>/{}", t)), median_ns(r, "BM_Tiny_EigenFixed<4>"),
                  goal::info);
    }
    const std::int64_t machine = thread_counts().back();
    for (const std::int64_t n : gemm_sizes) {
        const auto eigen = median_ns(r, fmt::format("BM_Gemm_Eigen1/{}", n));
        table.add(fmt::format("GEMM {}, 1 thread (time vs Eigen 1 thread)", n),
                  median_ns(r, fmt::format("BM_Gemm_Tessera/{}/1", n)), eigen, goal::info);
        if (machine > 1) {
            table.add(n == 1024 ? fmt::format("GEMM {}, {} threads: speedup over Eigen 1 thread", n, machine)
                                : fmt::format("GEMM {}, {} threads (time vs Eigen 1 thread)", n, machine),
                      median_ns(r, fmt::format("BM_Gemm_Tessera/{}/{}", n, machine)), eigen,
                      n == 1024 ? goal::speedup_at_least : goal::info,
                      0.85 * static_cast<double>(machine));
        }
    }
    fmt::print("matmul: performance contract (DESIGN.md section 4), medians of 3 runs; GEMM rows are "
               "float; info rows show tessera's time over the baseline's\n\n");
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) { return tessera_bench::run_benchmarks(argc, argv, print_summary); }
