// batched_linalg_bench.cpp - batched solve (one right-hand side), inverse, cholesky and svd on
// 10,000 matrices of 2x2, 4x4, 8x8 and 32x32, float and double: tessera's out-parameter forms at 1
// thread and at all threads, side by side with a plain single-threaded Eigen loop over the same
// row-major data (fixed-size Eigen types for n <= 8; for 32, dynamic-size decompositions built once
// and reused across items, as a careful Eigen user would write it). `--summary` prints the ratio
// tessera / Eigen loop for every case.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/LU>
#include <Eigen/SVD>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <tessera/backend.hpp>
#include <tessera/ops/linalg.hpp>
#include <tessera/tensor.hpp>

#include "bench_support.hpp"

namespace {

using benchmark::Counter;

constexpr std::size_t batch = 10000;

enum class op { solve, inverse, cholesky, svd };

const char* op_name(op o) {
    switch (o) {
        case op::solve: return "Solve";
        case op::inverse: return "Inverse";
        case op::cholesky: return "Cholesky";
        case op::svd: return "Svd";
    }
    return "?";
}

template <class T>
const char* type_name() {
    return sizeof(T) == 4 ? "f32" : "f64";
}

// Inputs and outputs of one case; made in a setup session, they outlive it.
template <class T>
struct operands {
    tessera::tensor<T> a;   // general (solve, inverse, svd) or SPD (cholesky), [batch, n, n]
    tessera::tensor<T> b;   // [batch, n, 1]
    tessera::tensor<T> x;   // [batch, n, 1]
    tessera::tensor<T> m1;  // [batch, n, n]: inverse, L or U
    tessera::tensor<T> m2;  // [batch, n, n]: V^H
    tessera::tensor<T> sv;  // [batch, n]
};

template <class T>
operands<T> make_operands(op o, std::size_t n) {
    tessera::backend setup{tessera::backend_options{}.with_threads(1)};
    return setup.run([&](tessera::session& s) {
        std::mt19937_64 rng(42);
        std::uniform_real_distribution<T> dist(T(-1), T(1));
        operands<T> d{tessera::empty<T>(s, {batch, n, n}), tessera::empty<T>(s, {batch, n, 1}),
                      tessera::empty<T>(s, {batch, n, 1}), tessera::empty<T>(s, {batch, n, n}),
                      tessera::empty<T>(s, {batch, n, n}), tessera::empty<T>(s, {batch, n})};
        std::vector<T> m(n * n);
        for (std::size_t i = 0; i < batch; ++i) {
            T* a = d.a.data() + i * n * n;
            for (T& v : m) v = dist(rng);
            for (std::size_t r = 0; r < n; ++r)
                for (std::size_t c = 0; c < n; ++c) {
                    if (o == op::cholesky) {  // M M^T + n I
                        T acc = r == c ? static_cast<T>(n) : T(0);
                        for (std::size_t k = 0; k < n; ++k) acc += m[r * n + k] * m[c * n + k];
                        a[r * n + c] = acc;
                    } else {  // M + n I, well conditioned
                        a[r * n + c] = m[r * n + c] + (r == c ? static_cast<T>(n) : T(0));
                    }
                }
        }
        for (T& v : d.b.values()) v = dist(rng);
        return d;
    });
}

// ---- tessera -----------------------------------------------------------------------------------

template <class T>
void run_tessera(tessera::session& s, op o, operands<T>& d) {
    switch (o) {
        case op::solve: tessera::solve(s, d.a, d.b, d.x); break;
        case op::inverse: tessera::inverse(s, d.a, d.m1); break;
        case op::cholesky: tessera::cholesky(s, d.a, d.m1); break;
        case op::svd: tessera::svd(s, d.a, d.m1, d.sv, d.m2); break;
    }
}

template <class T>
void BM_Tessera(benchmark::State& state, op o) {
    const auto n = static_cast<std::size_t>(state.range(0));
    tessera::backend be{tessera::backend_options{}.with_threads(static_cast<int>(state.range(1)))};
    operands<T> d = make_operands<T>(o, n);
    be.run([&](tessera::session& s) { run_tessera(s, o, d); });  // warm the workspace and workers
    const tessera::stats before = be.stats();
    // One session around the timing loop: what is timed is the op itself.
    be.run([&](tessera::session& s) {
        for (auto _ : state) {
            run_tessera(s, o, d);
            benchmark::ClobberMemory();
        }
    });
    const tessera::stats delta = be.stats() - before;
    state.SetItemsProcessed(static_cast<std::int64_t>(batch) * state.iterations());
    state.counters["parallel_dispatches"] =
        Counter(static_cast<double>(delta.parallel_dispatches), Counter::kAvgIterations);
}

// ---- Eigen loops -------------------------------------------------------------------------------

template <class T, int N>
struct eigen_types {
    using matrix = Eigen::Matrix<T, N, N, Eigen::RowMajor>;
    using vector = Eigen::Matrix<T, N, 1>;
};

template <class T, int N>
void eigen_loop(op o, operands<T>& d, Eigen::Index n) {
    using matrix = typename eigen_types<T, N>::matrix;
    using vector = typename eigen_types<T, N>::vector;
    const Eigen::Index nn = n * n;
    const T* a = d.a.data();
    switch (o) {
        case op::solve:
            for (std::size_t i = 0; i < batch; ++i) {
                const Eigen::Map<const matrix> A(a + i * nn, n, n);
                Eigen::Map<vector>(d.x.data() + i * n, n) =
                    A.partialPivLu().solve(Eigen::Map<const vector>(d.b.data() + i * n, n));
            }
            break;
        case op::inverse:
            for (std::size_t i = 0; i < batch; ++i)
                Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) =
                    Eigen::Map<const matrix>(a + i * nn, n, n).inverse();
            break;
        case op::cholesky:
            for (std::size_t i = 0; i < batch; ++i) {
                const Eigen::LLT<matrix> llt(Eigen::Map<const matrix>(a + i * nn, n, n));
                Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) = llt.matrixL();
            }
            break;
        case op::svd:
            for (std::size_t i = 0; i < batch; ++i) {
                const Eigen::JacobiSVD<matrix> svd(Eigen::Map<const matrix>(a + i * nn, n, n),
                                                   Eigen::ComputeFullU | Eigen::ComputeFullV);
                Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) = svd.matrixU();
                Eigen::Map<vector>(d.sv.data() + i * n, n) = svd.singularValues();
                Eigen::Map<matrix>(d.m2.data() + i * nn, n, n) = svd.matrixV().adjoint();
            }
            break;
    }
}

// n = 32: dynamic-size decompositions made once, reused for every item (no per-item allocation).
template <class T>
void eigen_loop_dynamic(op o, operands<T>& d, Eigen::Index n) {
    using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    const Eigen::Index nn = n * n;
    const T* a = d.a.data();
    switch (o) {
        case op::solve: {
            Eigen::PartialPivLU<matrix> lu(n);
            for (std::size_t i = 0; i < batch; ++i) {
                lu.compute(Eigen::Map<const matrix>(a + i * nn, n, n));
                Eigen::Map<vector>(d.x.data() + i * n, n) =
                    lu.solve(Eigen::Map<const vector>(d.b.data() + i * n, n));
            }
            break;
        }
        case op::inverse: {
            Eigen::PartialPivLU<matrix> lu(n);
            for (std::size_t i = 0; i < batch; ++i) {
                lu.compute(Eigen::Map<const matrix>(a + i * nn, n, n));
                Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) = lu.inverse();
            }
            break;
        }
        case op::cholesky: {
            Eigen::LLT<matrix> llt(n);
            for (std::size_t i = 0; i < batch; ++i) {
                llt.compute(Eigen::Map<const matrix>(a + i * nn, n, n));
                Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) = llt.matrixL();
            }
            break;
        }
        case op::svd: {
            Eigen::JacobiSVD<matrix> svd(n, n, Eigen::ComputeFullU | Eigen::ComputeFullV);
            matrix m(n, n);
            for (std::size_t i = 0; i < batch; ++i) {
                m = Eigen::Map<const matrix>(a + i * nn, n, n);
                svd.compute(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
                Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) = svd.matrixU();
                Eigen::Map<vector>(d.sv.data() + i * n, n) = svd.singularValues();
                Eigen::Map<matrix>(d.m2.data() + i * nn, n, n) = svd.matrixV().adjoint();
            }
            break;
        }
    }
}

template <class T>
void BM_EigenLoop(benchmark::State& state, op o) {
    const auto n = static_cast<Eigen::Index>(state.range(0));
    operands<T> d = make_operands<T>(o, static_cast<std::size_t>(n));
    const auto body = [&] {
        switch (n) {
            case 2: eigen_loop<T, 2>(o, d, n); break;
            case 4: eigen_loop<T, 4>(o, d, n); break;
            case 8: eigen_loop<T, 8>(o, d, n); break;
            default: eigen_loop_dynamic<T>(o, d, n); break;
        }
    };
    body();  // warm, as for tessera
    for (auto _ : state) {
        body();
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(batch) * state.iterations());
}

// ---- registration --------------------------------------------------------------------------

const std::int64_t sizes[] = {2, 4, 8, 32};
constexpr op ops[] = {op::solve, op::inverse, op::cholesky, op::svd};

std::int64_t all_threads() { return tessera_bench::thread_counts(1).back(); }

std::string tessera_name(op o, const char* type) {
    return fmt::format("BM_{}_Tessera_{}", op_name(o), type);
}
std::string eigen_name(op o, const char* type) {
    return fmt::format("BM_{}_EigenLoop_{}", op_name(o), type);
}

// Every run is short and repeated three times; the summary uses the medians.
void repeated(benchmark::internal::Benchmark* b) {
    b->MinTime(0.05)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

template <class T>
void register_type() {
    for (op o : ops) {
        auto* t = benchmark::RegisterBenchmark(tessera_name(o, type_name<T>()).c_str(),
                                               [o](benchmark::State& st) { BM_Tessera<T>(st, o); });
        auto* e = benchmark::RegisterBenchmark(eigen_name(o, type_name<T>()).c_str(),
                                               [o](benchmark::State& st) { BM_EigenLoop<T>(st, o); });
        for (std::int64_t n : sizes) {
            t->Args({n, 1});
            if (all_threads() > 1) t->Args({n, all_threads()});
            e->Args({n});
        }
        repeated(t);
        repeated(e);
    }
}

// ---- the summary ---------------------------------------------------------------------------

void print_summary(const tessera_bench::results& r) {
    using tessera_bench::goal;
    using tessera_bench::median_ns;
    tessera_bench::summary_table table;
    const std::int64_t threads = all_threads();
    for (const char* type : {"f32", "f64"})
        for (op o : ops)
            for (std::int64_t n : sizes) {
                const std::optional<double> eigen = median_ns(r, fmt::format("{}/{}", eigen_name(o, type), n));
                table.add(fmt::format("{} {}x{} {}, 1 thread", op_name(o), n, n, type),
                          median_ns(r, fmt::format("{}/{}/1", tessera_name(o, type), n)), eigen,
                          goal::info);
                if (threads > 1)
                    table.add(fmt::format("{} {}x{} {}, {} threads", op_name(o), n, n, type, threads),
                              median_ns(r, fmt::format("{}/{}/{}", tessera_name(o, type), n, threads)),
                              eigen, goal::info);
            }
    fmt::print("batched linalg, {} matrices per op: tessera vs a single-threaded Eigen loop "
               "(ratio = tessera / Eigen; below 1 is faster), medians of 3 runs\n\n",
               batch);
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    register_type<float>();
    register_type<double>();
    return tessera_bench::run_benchmarks(argc, argv, print_summary);
}
