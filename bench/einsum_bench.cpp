// einsum_bench.cpp - what einsum costs on top of the arithmetic, in the same run as its baselines:
// 1. `ij,jk->ik` at 2x2, 8x8 and 64x64: cold (a spec never seen: parse + plan), warm (cached
//    plan), prepared (einsum_plan), each against tessera::matmul of the same data in a session;
// 2. a matrix-product-state inner product (length 32, physical dimension 2, bond dimension 4, 16,
//    64), contracted site by site with one 3-operand einsum per site in one session, on a
//    multi-thread and on the one-thread backend, against the same sequence written with Eigen;
// 3. a 3-operand and a 5-operand contraction: the planned order against left to right.
// `--summary` prints the contract table.
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
#include <tessera/ops/einsum.hpp>
#include <tessera/ops/matmul.hpp>
#include <tessera/random.hpp>
#include <tessera/tensor.hpp>
#include <vector>

#include "bench_support.hpp"

namespace {

using benchmark::Counter;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera_bench::thread_counts;

tessera::backend make_backend(std::int64_t threads) {
    return tessera::backend{tessera::backend_options{}.with_threads(static_cast<int>(threads))};
}

void report_cache(benchmark::State& state, const tessera::stats& d) {
    state.counters["plan_misses"] = Counter(static_cast<double>(d.plan_cache_misses), Counter::kAvgIterations);
    state.counters["pool_misses"] = Counter(static_cast<double>(d.pool_misses), Counter::kAvgIterations);
}

// --- 1. ij,jk->ik against matmul ---------------------------------------------------------------

enum class form { matmul, matmul_into, cold, warm, warm_into, prepared };

template <form F>
void BM_Product(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    tessera::backend be = make_backend(state.range(1));
    // Distinct specs for the cold case: `xy,yz->xz` over letter triples, more than the backend's
    // and the workspace's caches hold, so every call parses and plans.
    std::vector<std::string> specs;
    if constexpr (F == form::cold) {
        const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        for (char x : letters)
            for (char y : letters)
                for (char z : letters)
                    if (x != y && y != z && x != z && specs.size() < 4096)
                        specs.push_back(fmt::format("{}{},{}{}->{}{}", x, y, y, z, x, z));
    }
    const tessera::stats before = be.stats();
    be.run([&](session& s) {
        const tensor<double> a = tessera::uniform<double>(s, {n, n}, -1, 1, 1);
        const tensor<double> b = tessera::uniform<double>(s, {n, n}, -1, 1, 2);
        tensor<double> c = tessera::zeros<double>(s, {n, n});
        const auto plan = tessera::prepare<double>(s, "ij,jk->ik", a.shape(), b.shape());
        std::size_t next = 0;
        for (auto _ : state) {
            if constexpr (F == form::matmul) {
                benchmark::DoNotOptimize(tessera::matmul(s, a, b).data());
            } else if constexpr (F == form::matmul_into) {
                tessera::matmul(s, a, b, c);
            } else if constexpr (F == form::cold) {
                benchmark::DoNotOptimize(tessera::einsum(s, specs[next], a, b).data());
                next = next + 1 == specs.size() ? 0 : next + 1;
            } else if constexpr (F == form::warm) {
                benchmark::DoNotOptimize(tessera::einsum(s, "ij,jk->ik", a, b).data());
            } else if constexpr (F == form::warm_into) {
                tessera::einsum(s, "ij,jk->ik", {a, b}, c);
            } else {
                benchmark::DoNotOptimize(plan(s, a, b).data());
            }
            benchmark::ClobberMemory();
        }
    });
    report_cache(state, be.stats() - before);
}

constexpr std::int64_t product_sizes[] = {2, 8, 64};

void product_args(benchmark::internal::Benchmark* b) {
    for (std::int64_t n : product_sizes) b->Args({n, thread_counts().back()});
    b->MinTime(0.05)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Product, form::matmul)->Name("BM_Matmul_Session")->Apply(product_args);
BENCHMARK_TEMPLATE(BM_Product, form::matmul_into)->Name("BM_MatmulInto_Session")->Apply(product_args);
BENCHMARK_TEMPLATE(BM_Product, form::cold)->Name("BM_Einsum_Cold")->Apply(product_args);
BENCHMARK_TEMPLATE(BM_Product, form::warm)->Name("BM_Einsum_Warm")->Apply(product_args);
BENCHMARK_TEMPLATE(BM_Product, form::warm_into)->Name("BM_EinsumInto_Warm")->Apply(product_args);
BENCHMARK_TEMPLATE(BM_Product, form::prepared)->Name("BM_Einsum_Prepared")->Apply(product_args);

// --- 2. matrix-product-state inner product -------------------------------------------------------

constexpr std::size_t mps_length = 32;
constexpr std::size_t physical = 2;

/// Site i of a random MPS with bond dimension chi: [left, physical, right], 1 at both ends.
shape site_shape(std::size_t i, std::size_t chi) {
    return {i == 0 ? 1 : chi, physical, i + 1 == mps_length ? 1 : chi};
}

void BM_Mps_Tessera(benchmark::State& state) {
    const auto chi = static_cast<std::size_t>(state.range(0));
    tessera::backend be = make_backend(state.range(1));
    double overlap = 0;
    const tessera::stats before = be.stats();
    be.run([&](session& s) {
        std::vector<tensor<double>> a, b;
        for (std::size_t i = 0; i < mps_length; ++i) {
            a.push_back(tessera::uniform<double>(s, site_shape(i, chi), -1, 1, 2 * i + 1));
            b.push_back(tessera::uniform<double>(s, site_shape(i, chi), -1, 1, 2 * i + 2));
        }
        for (auto _ : state) {
            tensor<double> env = tessera::full<double>(s, {1, 1}, 1.0);
            for (std::size_t i = 0; i < mps_length; ++i) env = tessera::einsum(s, "ab,apc,bpd->cd", env, a[i], b[i]);
            overlap = env.data()[0];
            benchmark::DoNotOptimize(overlap);
        }
    });
    report_cache(state, be.stats() - before);
}

void BM_Mps_Eigen(benchmark::State& state) {
    using matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using map = Eigen::Map<matrix>;
    using const_map = Eigen::Map<const matrix>;
    const auto chi = static_cast<Eigen::Index>(state.range(0));
    std::vector<matrix> a, b;  // site i as [left, physical * right], row-major
    for (std::size_t i = 0; i < mps_length; ++i) {
        const Eigen::Index left = i == 0 ? 1 : chi, right = i + 1 == mps_length ? 1 : chi;
        a.push_back(matrix::Random(left, physical * right));
        b.push_back(matrix::Random(left, physical * right));
    }
    // Preallocated buffers: the environment E [left_a, left_b] and T = E^T A [left_b, physical * right].
    std::vector<double> env(static_cast<std::size_t>(chi * chi)), next(env.size()),
        t(static_cast<std::size_t>(chi * physical * chi));
    for (auto _ : state) {
        Eigen::Index left = 1;
        env[0] = 1;
        for (std::size_t i = 0; i < mps_length; ++i) {
            const Eigen::Index right = i + 1 == mps_length ? 1 : chi;
            const const_map e(env.data(), left, left);
            map tm(t.data(), left, physical * right);
            tm.noalias() = e.transpose() * a[i];  // T[b, (p c)] = sum_a E[a, b] A[a, (p c)]
            // E'[c, d] = sum_(b p) T[(b p), c] B[(b p), d]
            const const_map t2(t.data(), left * physical, right);
            const const_map b2(b[i].data(), left * physical, right);
            map en(next.data(), right, right);
            en.noalias() = t2.transpose() * b2;
            std::swap(env, next);
            left = right;
        }
        benchmark::DoNotOptimize(env[0]);
        benchmark::ClobberMemory();
    }
}

constexpr std::int64_t bond_dimensions[] = {4, 16, 64};

void mps_threads(benchmark::internal::Benchmark* b) {
    std::vector<std::int64_t> threads = {1};
    if (thread_counts().back() > 1) threads.push_back(thread_counts().back());
    for (std::int64_t chi : bond_dimensions)
        for (std::int64_t t : threads) b->Args({chi, t});
    b->MinTime(0.1)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}
void mps_baseline(benchmark::internal::Benchmark* b) {
    for (std::int64_t chi : bond_dimensions) b->Arg(chi);
    b->MinTime(0.1)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}

BENCHMARK(BM_Mps_Tessera)->Apply(mps_threads);
BENCHMARK(BM_Mps_Eigen)->Apply(mps_baseline);

// --- 3. planned order against left to right --------------------------------------------------------

/// `ij,jk,k->i` at 256: from the right it is two matrix-vector products; left to right, a GEMM first.
/// `apc,bpd,ab,cqe,dqf->ef` at bond dimension 32: two MPS sites with the environment listed third,
/// so that left to right first forms a bond^4 intermediate.
template <bool Planned>
void run_network(benchmark::State& state, const char* spec, std::vector<shape> shapes) {
    tessera::backend be = make_backend(thread_counts().back());
    be.run([&](session& s) {
        std::vector<tensor<double>> ops;
        for (std::size_t i = 0; i < shapes.size(); ++i) ops.push_back(tessera::uniform<double>(s, shapes[i], -1, 1, i + 1));
        // Operand 0 with 1, then the running result (always last) with the next operand (always first).
        std::vector<tessera::einsum_step> left_to_right{{0, 1}};
        for (std::size_t i = 2; i < shapes.size(); ++i) left_to_right.push_back({0, shapes.size() - i});
        const auto plan = [&] {
            if (shapes.size() == 3)
                return Planned ? tessera::prepare<double>(s, spec, shapes[0], shapes[1], shapes[2])
                               : tessera::prepare<double>(s, spec, left_to_right, shapes[0], shapes[1], shapes[2]);
            return Planned ? tessera::prepare<double>(s, spec, shapes[0], shapes[1], shapes[2], shapes[3], shapes[4])
                           : tessera::prepare<double>(s, spec, left_to_right, shapes[0], shapes[1], shapes[2], shapes[3],
                                                      shapes[4]);
        }();
        state.counters["flops"] = plan.flops();
        for (auto _ : state) {
            if (shapes.size() == 3)
                benchmark::DoNotOptimize(plan(s, ops[0], ops[1], ops[2]).data());
            else
                benchmark::DoNotOptimize(plan(s, ops[0], ops[1], ops[2], ops[3], ops[4]).data());
            benchmark::ClobberMemory();
        }
    });
}

constexpr std::size_t chain_n = 256;
constexpr std::size_t network_bond = 32;

template <bool Planned>
void BM_Chain3(benchmark::State& state) {
    run_network<Planned>(state, "ij,jk,k->i", {{chain_n, chain_n}, {chain_n, chain_n}, {chain_n}});
}
template <bool Planned>
void BM_Network5(benchmark::State& state) {
    const std::size_t x = network_bond;
    run_network<Planned>(state, "apc,bpd,ab,cqe,dqf->ef",
                         {{x, physical, x}, {x, physical, x}, {x, x}, {x, physical, x}, {x, physical, x}});
}

void network_args(benchmark::internal::Benchmark* b) {
    b->MinTime(0.1)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Chain3, true)->Name("BM_Chain3_Planned")->Apply(network_args);
BENCHMARK_TEMPLATE(BM_Chain3, false)->Name("BM_Chain3_LeftToRight")->Apply(network_args);
BENCHMARK_TEMPLATE(BM_Network5, true)->Name("BM_Network5_Planned")->Apply(network_args);
BENCHMARK_TEMPLATE(BM_Network5, false)->Name("BM_Network5_LeftToRight")->Apply(network_args);

// --- the contract table ---------------------------------------------------------------------

void print_summary(const tessera_bench::results& r) {
    using tessera_bench::goal;
    using tessera_bench::median_ns;
    tessera_bench::summary_table table;
    const std::int64_t machine = thread_counts().back();
    for (const std::int64_t n : product_sizes) {
        const std::string args = fmt::format("{}/{}", n, machine);
        const auto matmul = median_ns(r, "BM_Matmul_Session/" + args);
        table.add(fmt::format("ij,jk->ik {0}x{0} warm einsum (vs matmul, both allocating)", n),
                  median_ns(r, "BM_Einsum_Warm/" + args), matmul, n == 2 ? goal::ratio_at_most : goal::info, 3);
        table.add(fmt::format("ij,jk->ik {0}x{0} einsum out form (vs matmul out form)", n),
                  median_ns(r, "BM_EinsumInto_Warm/" + args), median_ns(r, "BM_MatmulInto_Session/" + args), goal::info);
        table.add(fmt::format("ij,jk->ik {0}x{0} prepared plan (vs matmul)", n), median_ns(r, "BM_Einsum_Prepared/" + args),
                  matmul, goal::info);
        table.add(fmt::format("ij,jk->ik {0}x{0} cold: parse + plan (vs matmul)", n), median_ns(r, "BM_Einsum_Cold/" + args),
                  matmul, goal::info);
    }
    std::vector<std::int64_t> threads = {1};
    if (machine > 1) threads.push_back(machine);
    for (const std::int64_t chi : bond_dimensions)
        for (const std::int64_t t : threads)
            table.add(fmt::format("MPS inner product, chi {}, {} thr (vs Eigen sequence)", chi, t),
                      median_ns(r, fmt::format("BM_Mps_Tessera/{}/{}", chi, t)),
                      median_ns(r, fmt::format("BM_Mps_Eigen/{}", chi)),
                      chi == 4 || chi == 64 ? goal::ratio_at_most : goal::info, chi == 4 ? 2.0 : 1.2);
    table.add("ij,jk,k->i at 256: planned speedup over left to right", median_ns(r, "BM_Chain3_Planned"),
              median_ns(r, "BM_Chain3_LeftToRight"), goal::speedup_at_least, 1);
    table.add("apc,bpd,ab,cqe,dqf->ef at bond 32: planned speedup over left to right",
              median_ns(r, "BM_Network5_Planned"), median_ns(r, "BM_Network5_LeftToRight"), goal::speedup_at_least, 1);
    fmt::print("einsum: targets from the einsum issue, medians of 3 runs, double; MPS rows compare the time of a\n"
               "whole 32-site contraction (per site: divide by 32)\n\n");
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) { return tessera_bench::run_benchmarks(argc, argv, print_summary); }
