// batched_linalg_bench.cpp - batched solve (one right-hand side), inverse, cholesky and det on
// 10,000 matrices of every size 2..8 and 32, and svd and eigh at 2, 3, 4, 8 and 32, float and
// double: tessera's out-parameter forms at 1 thread and at all threads, and at 1 thread on its
// per-matrix path (the SIMD-across-batch kernels switched off) and, for the factorisations, on
// batches stored interleaved ([n, n, batch]), n <= 8, side by side with single-threaded Eigen
// loops over the same row-major data: fixed-size Eigen types for n <= 8 (bench/support/
// linalg_loops.hpp) compiled for the build's target and with -march=native (the target of
// tessera's widest kernels here); for 32, dynamic-size decompositions built once and reused
// across items, as a careful Eigen user would write it. `--summary` prints tessera's time against
// each baseline, with the targets for the SIMD-across-batch kernels against the native Eigen loop.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/LU>
#include <Eigen/SVD>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include <tessera/backend.hpp>
#include <tessera/detail/linalg_lanes.hpp>
#include <tessera/ops/linalg.hpp>
#include <tessera/ops/structural.hpp>
#include <tessera/tensor.hpp>

#include "bench_support.hpp"
#include "linalg_loops.hpp"

// The same loops compiled with -march=native (bench/native/eigen_native.cpp).
extern "C" bool tessera_bench_eigen_native_linalg(int bytes, int op, int n, const void* a,
                                                  const void* b, void* out, void* out2,
                                                  void* out3, std::size_t batch);
// Floors under the targets, compiled the same way (bench/native/lane_floors.cpp).
extern "C" bool tessera_bench_lane_floor(int bytes, int what, int n, const void* in, void* out,
                                         std::size_t batch);

namespace {

using benchmark::Counter;

constexpr std::size_t batch = 10000;

enum class op { solve, inverse, cholesky, det, svd, eigh };

/// svd and eigh: no interleaved variant, sizes 2, 3, 4, 8 (and 32).
bool is_decomposition(op o) { return o == op::svd || o == op::eigh; }

const char* op_name(op o) {
    switch (o) {
        case op::solve: return "Solve";
        case op::inverse: return "Inverse";
        case op::cholesky: return "Cholesky";
        case op::det: return "Det";
        case op::svd: return "Svd";
        case op::eigh: return "Eigh";
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
    tessera::tensor<T> a;   // general (solve, inverse, det, svd), SPD (cholesky) or symmetric
                            // (eigh), [batch, n, n]
    tessera::tensor<T> b;   // [batch, n, 1]
    tessera::tensor<T> x;   // [batch, n, 1]
    tessera::tensor<T> m1;  // [batch, n, n]: inverse, L, U or eigh's V
    tessera::tensor<T> m2;  // [batch, n, n]: V^H
    tessera::tensor<T> sv;  // [batch, n]: singular values or eigenvalues
    tessera::tensor<T> d;   // [batch]: det
};

template <class T>
operands<T> make_operands(op o, std::size_t n) {
    tessera::backend setup{tessera::backend_options{}.with_threads(1)};
    return setup.run([&](tessera::session& s) {
        std::mt19937_64 rng(42);
        std::uniform_real_distribution<T> dist(T(-1), T(1));
        operands<T> d{tessera::empty<T>(s, {batch, n, n}), tessera::empty<T>(s, {batch, n, 1}),
                      tessera::empty<T>(s, {batch, n, 1}), tessera::empty<T>(s, {batch, n, n}),
                      tessera::empty<T>(s, {batch, n, n}), tessera::empty<T>(s, {batch, n}),
                      tessera::empty<T>(s, {batch})};
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
                    } else if (o == op::eigh) {  // M + M^T
                        a[r * n + c] = m[r * n + c] + m[c * n + r];
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

/// How tessera runs: its SIMD-across-batch kernels on the usual [batch, n, n] tensors, the same
/// on tensors stored [n, n, batch] (passed as [batch, n, n] views with batch stride 1), or its
/// per-matrix kernels.
enum class path { lanes, interleaved, per_matrix };

/// The [batch, r, c] view of an operand stored [batch, r, c] or, interleaved, [r, c, batch].
template <class T>
tessera::tensor_view<T> batch_view(tessera::tensor<T>& t, bool interleaved) {
    return interleaved ? t.view().permute({2, 0, 1}) : t.view();
}

template <class T>
void run_tessera(tessera::session& s, op o, operands<T>& d, bool interleaved) {
    const auto a = batch_view(d.a, interleaved);
    const auto m1 = batch_view(d.m1, interleaved);
    switch (o) {
        case op::solve: tessera::solve(s, a, batch_view(d.b, interleaved), batch_view(d.x, interleaved)); break;
        case op::inverse: tessera::inverse(s, a, m1); break;
        case op::cholesky: tessera::cholesky(s, a, m1); break;
        case op::det: tessera::det(s, a, d.d); break;
        case op::svd: tessera::svd(s, a, m1, d.sv, d.m2); break;
        case op::eigh: tessera::eigh(s, a, d.sv, m1); break;
    }
}

/// Restores a, b, x and m1 as [r, c, batch] tensors with the same [batch, r, c] values.
template <class T>
void interleave(operands<T>& d) {
    tessera::backend setup{tessera::backend_options{}.with_threads(1)};
    setup.run([&](tessera::session& s) {
        for (tessera::tensor<T>* t : {&d.a, &d.b, &d.x, &d.m1}) {
            auto stored = tessera::empty<T>(s, {t->extent(1), t->extent(2), batch});
            tessera::copy(s, t->view().permute({1, 2, 0}), stored.view());
            *t = std::move(stored);
        }
    });
}

template <class T>
void BM_Tessera(benchmark::State& state, op o, path how) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const bool interleaved = how == path::interleaved;
    tessera::detail::set_linalg_lanes(how != path::per_matrix);
    tessera::backend be{tessera::backend_options{}.with_threads(static_cast<int>(state.range(1)))};
    operands<T> d = make_operands<T>(o, n);
    if (interleaved) interleave(d);
    be.run([&](tessera::session& s) { run_tessera(s, o, d, interleaved); });  // warm up
    const tessera::stats before = be.stats();
    // One session around the timing loop: what is timed is the op itself.
    be.run([&](tessera::session& s) {
        for (auto _ : state) {
            run_tessera(s, o, d, interleaved);
            benchmark::ClobberMemory();
        }
    });
    const tessera::stats delta = be.stats() - before;
    tessera::detail::set_linalg_lanes(true);
    state.SetItemsProcessed(static_cast<std::int64_t>(batch) * state.iterations());
    state.counters["parallel_dispatches"] =
        Counter(static_cast<double>(delta.parallel_dispatches), Counter::kAvgIterations);
}

// ---- Eigen loops -------------------------------------------------------------------------------

tessera_bench::linalg_op loop_op(op o) {
    switch (o) {
        case op::solve: return tessera_bench::linalg_op::solve;
        case op::inverse: return tessera_bench::linalg_op::inverse;
        case op::cholesky: return tessera_bench::linalg_op::cholesky;
        case op::det: return tessera_bench::linalg_op::det;
        case op::svd: return tessera_bench::linalg_op::svd;
        case op::eigh: return tessera_bench::linalg_op::eigh;
    }
    return tessera_bench::linalg_op::det;
}

/// The outputs of the shared loops: x, the n x n result (or svd's U, eigh's V) or det; svd's
/// singular values or eigh's eigenvalues; svd's V^H.
template <class T>
T* loop_out(op o, operands<T>& d) {
    return o == op::solve ? d.x.data() : o == op::det ? d.d.data() : d.m1.data();
}

// n = 32: dynamic-size decompositions made once, reused for every item (no per-item allocation).
template <class T>
void eigen_loop_dynamic(op o, operands<T>& d, Eigen::Index n) {
    using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    const Eigen::Index nn = n * n;
    const T* a = d.a.data();
    switch (o) {
        case op::solve:
        case op::inverse:
        case op::det: {
            Eigen::PartialPivLU<matrix> lu(n);
            for (std::size_t i = 0; i < batch; ++i) {
                lu.compute(Eigen::Map<const matrix>(a + i * nn, n, n));
                if (o == op::solve)
                    Eigen::Map<vector>(d.x.data() + i * n, n) =
                        lu.solve(Eigen::Map<const vector>(d.b.data() + i * n, n));
                else if (o == op::inverse)
                    Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) = lu.inverse();
                else
                    d.d.data()[i] = lu.determinant();
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
        case op::eigh: {
            Eigen::SelfAdjointEigenSolver<matrix> es(n);
            matrix m(n, n);
            for (std::size_t i = 0; i < batch; ++i) {
                m = Eigen::Map<const matrix>(a + i * nn, n, n);
                es.compute(m);
                Eigen::Map<matrix>(d.m1.data() + i * nn, n, n) = es.eigenvectors();
                Eigen::Map<vector>(d.sv.data() + i * n, n) = es.eigenvalues();
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

/// The Eigen loop at the build's target, or with `native` the same fixed-size loop compiled with
/// -march=native (n <= 8 only).
template <class T>
void BM_EigenLoop(benchmark::State& state, op o, bool native) {
    const auto n = static_cast<int>(state.range(0));
    operands<T> d = make_operands<T>(o, static_cast<std::size_t>(n));
    const auto body = [&] {
        const bool done =
            native ? tessera_bench_eigen_native_linalg(static_cast<int>(sizeof(T)),
                                                      static_cast<int>(loop_op(o)), n, d.a.data(),
                                                      d.b.data(), loop_out(o, d), d.sv.data(),
                                                      d.m2.data(), batch)
                   : tessera_bench::eigen_linalg<T>(loop_op(o), n, d.a.data(), d.b.data(),
                                                    loop_out(o, d), d.sv.data(), d.m2.data(), batch);
        if (!done) eigen_loop_dynamic<T>(o, d, n);
    };
    body();  // warm, as for tessera
    for (auto _ : state) {
        body();
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(batch) * state.iterations());
}

// ---- floors under the targets ----------------------------------------------------------------

/// What a target of inverse or det at n <= 4 cannot beat: the batch's bytes alone (det reads its
/// input, inverse reads it and writes as much) and the SIMD-across-batch kernels' movement alone
/// (dense items into lanes; inverse also back).
enum class floor_kind { read, copy, into_lanes, into_lanes_and_back };

template <class T>
void BM_Floor(benchmark::State& state, floor_kind what) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::vector<T> in(batch * n * n, T(1)), out(batch * n * n);
    for (auto _ : state) {
        if (!tessera_bench_lane_floor(static_cast<int>(sizeof(T)), static_cast<int>(what),
                                      static_cast<int>(n), in.data(), out.data(), batch)) {
            state.SkipWithError("no floor for this size");
            return;
        }
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
}

const char* floor_name(floor_kind what) {
    switch (what) {
        case floor_kind::read: return "FloorRead";
        case floor_kind::copy: return "FloorCopy";
        case floor_kind::into_lanes: return "FloorIntoLanes";
        case floor_kind::into_lanes_and_back: return "FloorIntoLanesAndBack";
    }
    return "?";
}

constexpr floor_kind floors[] = {floor_kind::read, floor_kind::copy, floor_kind::into_lanes,
                                 floor_kind::into_lanes_and_back};

// ---- registration --------------------------------------------------------------------------

constexpr op ops[] = {op::solve, op::inverse, op::cholesky, op::det, op::svd, op::eigh};

/// Sizes per op: every n in 2..8 (the SIMD-across-batch kernels) and 32; svd and eigh 2, 3 (their
/// SIMD-across-batch kernels), 4, 8 and 32.
std::vector<std::int64_t> sizes(op o) {
    if (is_decomposition(o)) return {2, 3, 4, 8, 32};
    return {2, 3, 4, 5, 6, 7, 8, 32};
}

std::int64_t all_threads() { return tessera_bench::thread_counts(1).back(); }

std::string bench_name(op o, const char* variant, const char* type) {
    return fmt::format("BM_{}_{}_{}", op_name(o), variant, type);
}

// Every run is short and repeated three times; the summary uses the medians.
void repeated(benchmark::internal::Benchmark* b) {
    b->MinTime(0.05)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

template <class T>
void register_type() {
    const char* type = type_name<T>();
    for (op o : ops) {
        auto* t = benchmark::RegisterBenchmark(bench_name(o, "Tessera", type).c_str(),
                                               [o](benchmark::State& st) { BM_Tessera<T>(st, o, path::lanes); });
        auto* e = benchmark::RegisterBenchmark(bench_name(o, "EigenLoop", type).c_str(),
                                               [o](benchmark::State& st) { BM_EigenLoop<T>(st, o, false); });
        for (std::int64_t n : sizes(o)) {
            t->Args({n, 1});
            if (all_threads() > 1) t->Args({n, all_threads()});
            e->Args({n});
        }
        repeated(t);
        repeated(e);
        auto* p = benchmark::RegisterBenchmark(bench_name(o, "PerMatrix", type).c_str(),
                                               [o](benchmark::State& st) { BM_Tessera<T>(st, o, path::per_matrix); });
        auto* v = benchmark::RegisterBenchmark(bench_name(o, "EigenNative", type).c_str(),
                                               [o](benchmark::State& st) { BM_EigenLoop<T>(st, o, true); });
        for (std::int64_t n : sizes(o)) {
            if (n > 8) continue;
            p->Args({n, 1});
            v->Args({n});
        }
        repeated(p);
        repeated(v);
        if (is_decomposition(o)) continue;
        auto* il = benchmark::RegisterBenchmark(bench_name(o, "Interleaved", type).c_str(),
                                                [o](benchmark::State& st) { BM_Tessera<T>(st, o, path::interleaved); });
        for (std::int64_t n = 2; n <= 8; ++n) il->Args({n, 1});
        repeated(il);
    }
    for (floor_kind what : floors) {
        auto* f = benchmark::RegisterBenchmark(
            fmt::format("BM_{}_{}", floor_name(what), type).c_str(),
            [what](benchmark::State& st) { BM_Floor<T>(st, what); });
        for (std::int64_t n = 2; n <= 4; ++n) f->Args({n});
        repeated(f);
        f->ComputeStatistics("min", tessera_bench::min_statistic);  // a floor takes its fastest
    }
}

// ---- the summary ---------------------------------------------------------------------------

/// The speed-up over the native Eigen loop the SIMD-across-batch kernels aim for (svd and eigh:
/// at n = 2 and 3, where they have such kernels).
double target_speedup(op o, const char* type, std::int64_t n) {
    if (is_decomposition(o)) return 10.0;
    const bool f32 = type[1] == '3';
    return n <= 4 ? (f32 ? 4.0 : 2.0) : (f32 ? 2.0 : 1.5);
}

void print_summary(const tessera_bench::results& r) {
    using tessera_bench::goal;
    using tessera_bench::median_ns;
    tessera_bench::summary_table targets, table, floor_table;
    const std::int64_t threads = all_threads();
    for (const char* type : {"f32", "f64"})
        for (op o : ops)
            for (std::int64_t n : sizes(o)) {
                const auto one = median_ns(r, fmt::format("{}/{}/1", bench_name(o, "Tessera", type), n));
                const auto eigen = median_ns(r, fmt::format("{}/{}", bench_name(o, "EigenLoop", type), n));
                const std::string what = fmt::format("{} {}x{} {}", op_name(o), n, n, type);
                if (n <= 8) {
                    const auto native = median_ns(r, fmt::format("{}/{}", bench_name(o, "EigenNative", type), n));
                    if (!is_decomposition(o) || n <= 3)
                        targets.add(what + " vs Eigen native", one, native, goal::speedup_at_least,
                                    target_speedup(o, type, n));
                    else
                        table.add(what + " vs Eigen native", one, native, goal::info);
                    table.add(what + ", per-matrix path vs Eigen native",
                              median_ns(r, fmt::format("{}/{}/1", bench_name(o, "PerMatrix", type), n)),
                              native, goal::info);
                    const auto interleaved =
                        is_decomposition(o)
                            ? std::nullopt
                            : median_ns(r, fmt::format("{}/{}/1", bench_name(o, "Interleaved", type), n));
                    if (!is_decomposition(o))
                        table.add(what + ", interleaved [n, n, batch] vs Eigen native", interleaved,
                                  native, goal::info);
                    if ((o == op::inverse || o == op::det) && n <= 4) {
                        // The time the target allows against what no kernel of the design can beat.
                        const std::optional<double> allowed =
                            native ? std::optional<double>(*native / target_speedup(o, type, n))
                                   : std::nullopt;
                        const auto floor = [&](floor_kind k) {
                            return tessera_bench::min_ns(
                                r, fmt::format("BM_{}_{}/{}", floor_name(k), type, n));
                        };
                        const bool inv = o == op::inverse;
                        floor_table.add(what + (inv ? ": the target's time vs a copy of the batch"
                                                    : ": the target's time vs a read of the batch"),
                                        allowed, floor(inv ? floor_kind::copy : floor_kind::read),
                                        goal::info);
                        floor_table.add(what + (inv ? ": the target's time vs into lanes and back"
                                                    : ": the target's time vs into lanes"),
                                        allowed,
                                        floor(inv ? floor_kind::into_lanes_and_back
                                                  : floor_kind::into_lanes),
                                        goal::info);
                        floor_table.add(
                            what + ": the target's time vs the kernel on [n, n, batch] (no shuffles)",
                            allowed, interleaved, goal::info);
                    }
                }
                table.add(what + ", 1 thread vs Eigen default target", one, eigen, goal::info);
                if (threads > 1)
                    table.add(fmt::format("{}, {} threads vs Eigen default target", what, threads),
                              median_ns(r, fmt::format("{}/{}/{}", bench_name(o, "Tessera", type), n, threads)),
                              eigen, goal::info);
            }
    fmt::print("batched linalg, {} matrices per op, medians of 3 runs\n\n"
               "SIMD-across-batch kernels (1 thread) against the per-matrix Eigen loop compiled "
               "with -march=native (speed-up = Eigen / tessera):\n\n",
               batch);
    targets.print(stdout);
    fmt::print("\nFloors under the targets of inverse and det at n <= 4 (ratio = the time the target "
               "allows / the floor; below 1: no kernel that moves dense items into lanes, or for "
               "the bytes alone none at all, can meet the target on this machine; the kernel on "
               "[n, n, batch] loads, computes and stores without shuffles; each floor the fastest "
               "of its three runs):\n\n");
    floor_table.print(stdout);
    fmt::print("\nEverything else (ratio = tessera / baseline; below 1 is faster):\n\n");
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    register_type<float>();
    register_type<double>();
    return tessera_bench::run_benchmarks(argc, argv, print_summary);
}
