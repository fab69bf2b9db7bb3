// dispatch_grid_bench.cpp - what one elementwise op costs when ops come in chains: depth 1, 10 and
// 100 alternating relu and add (x = relu(x); x = add(x, y); ...) at width 8, where only the
// dispatch overhead is left, and width 4096, where the kernel starts to count. tessera in one
// session (out-parameter and allocating forms), with a session per op and on a one-thread backend,
// side by side with Eigen Tensor on a ThreadPoolDevice and a raw loop (DESIGN.md §4).
// `--summary` prints the per-op grid and the contract table instead of the per-run lines.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <oneapi/tbb/info.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// GCC 12 flags broadcast_all's `op` as set but unused in NDEBUG builds when a one-operand op
// (relu) instantiates it with an empty pack; the warning is in detail/elementwise.hpp, not here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-but-set-parameter"
#include <tessera/tessera.hpp>
#pragma GCC diagnostic pop

#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>
#include <unsupported/Eigen/CXX11/ThreadPool>

#include "bench_support.hpp"

namespace {

using benchmark::Counter;

constexpr std::int64_t depths[] = {1, 10, 100};
constexpr std::int64_t widths[] = {8, 4096};

int machine_threads() { return tbb::info::default_concurrency(); }

tessera::backend make_backend(int threads) {
    return tessera::backend{tessera::backend_options{}.with_threads(threads)};
}

// Called after every op of every variant: the op's result is written to memory and the next op
// reads it back, so no variant can fuse the chain or keep it in registers.
inline void op_done() { benchmark::ClobberMemory(); }

// Step i of the chain is relu for even i and add(x, y) for odd i; step 0 reads x0, so every
// iteration computes the same values.
bool is_relu_step(std::int64_t i) { return i % 2 == 0; }

// --- the expected result: the chain in plain scalar code, computed once per benchmark ---------

std::vector<float> expected_chain(const std::vector<float>& x0, const std::vector<float>& y,
                                  std::int64_t depth) {
    std::vector<float> x = x0;
    for (std::int64_t i = 0; i < depth; ++i)
        for (std::size_t j = 0; j < x.size(); ++j)
            x[j] = is_relu_step(i) ? (x[j] < 0.0f ? 0.0f : x[j]) : x[j] + y[j];
    return x;
}

std::vector<float> random_values(std::size_t n, std::uint64_t seed) {
    // Fixed values in [-1, 1) from a small LCG, independent of tessera's own makers; both signs
    // occur, so relu takes both branches.
    std::vector<float> v(n);
    std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& x : v) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1 << 24) *
                                   2.0 -
                               1.0);
    }
    return v;
}

// Marks the benchmark failed if `got` differs from the scalar chain (exact: relu and add are
// exactly rounded, so every variant must agree bit for bit up to the sign of zero).
void check_result(benchmark::State& state, const float* got, const std::vector<float>& want) {
    for (std::size_t j = 0; j < want.size(); ++j) {
        if (!(got[j] == want[j])) {
            state.SkipWithError(
                fmt::format("wrong result at {}: {} instead of {}", j, got[j], want[j]).c_str());
            return;
        }
    }
}

// --- tessera variants -------------------------------------------------------------------------

struct chain_tensors {
    tessera::tensor<float> x0;
    tessera::tensor<float> y;
    tessera::tensor<float> a;  // the two out-parameter buffers the chain ping-pongs between
    tessera::tensor<float> b;
};

chain_tensors make_tensors(tessera::backend& be, const std::vector<float>& x0,
                           const std::vector<float>& y) {
    return be.run([&](tessera::session& s) {
        const tessera::shape sh = tessera::shape::of_length(x0.size());
        return chain_tensors{tessera::from<float>(s, sh, x0), tessera::from<float>(s, sh, y),
                             tessera::zeros<float>(s, sh), tessera::zeros<float>(s, sh)};
    });
}

// Out-parameter step i: reads `src`, writes `dst`. Tensors are passed as a user would pass them;
// the ops convert them to views.
void step_out(tessera::session& s, std::int64_t i, const tessera::tensor<float>& src,
              const tessera::tensor<float>& y, tessera::tensor<float>& dst) {
    if (is_relu_step(i))
        tessera::relu(s, src, dst);
    else
        tessera::add(s, src, y, dst);
    op_done();
}

// Step i reads x0 (i = 0) or the buffer step i - 1 wrote, and writes a (even i) or b (odd i).
const tessera::tensor<float>& source_of(const chain_tensors& t, std::int64_t i) {
    return i == 0 ? t.x0 : (i % 2 != 0 ? t.a : t.b);
}
tessera::tensor<float>& target_of(chain_tensors& t, std::int64_t i) {
    return i % 2 == 0 ? t.a : t.b;
}

// The whole chain in out-parameter form; returns the buffer that holds the result.
const float* chain_out(tessera::session& s, chain_tensors& t, std::int64_t depth) {
    for (std::int64_t i = 0; i < depth; ++i) step_out(s, i, source_of(t, i), t.y, target_of(t, i));
    return target_of(t, depth - 1).data();
}

struct tessera_run {
    std::vector<float> x0;
    std::vector<float> y;
    std::vector<float> want;
    tessera::backend be;
    chain_tensors t;

    tessera_run(const benchmark::State& state, int threads)
        : x0(random_values(static_cast<std::size_t>(state.range(1)), 1)),
          y(random_values(static_cast<std::size_t>(state.range(1)), 2)),
          want(expected_chain(x0, y, state.range(0))),
          be(make_backend(threads)),
          t(make_tensors(be, x0, y)) {}
};

// Reports the time per op and, per op, the dispatches tessera counted between `before` and now.
void report(benchmark::State& state, std::int64_t depth, const tessera::stats* d) {
    state.counters["time_per_op"] =
        Counter(static_cast<double>(depth), Counter::kIsIterationInvariantRate | Counter::kInvert);
    if (d == nullptr) return;
    const auto per_op = [&](std::uint64_t total) {
        return Counter(static_cast<double>(total) / static_cast<double>(depth),
                       Counter::kAvgIterations);
    };
    state.counters["inline_per_op"] = per_op(d->inline_dispatches);
    state.counters["parallel_per_op"] = per_op(d->parallel_dispatches);
    state.counters["pool_misses_per_op"] = per_op(d->pool_misses);
}

void run_session_out(benchmark::State& state, int threads) {
    const std::int64_t depth = state.range(0);
    tessera_run r(state, threads);
    const float* result = r.be.run([&](tessera::session& s) { return chain_out(s, r.t, depth); });
    const tessera::stats before = r.be.stats();
    for (auto _ : state) {
        r.be.run([&](tessera::session& s) { chain_out(s, r.t, depth); });
    }
    const tessera::stats d = r.be.stats() - before;
    report(state, depth, &d);
    check_result(state, result, r.want);
}

// One session per chain on the machine's thread count, out-parameter form.
void BM_Chain_Session_Out(benchmark::State& state) { run_session_out(state, machine_threads()); }

// The same chain on the one-thread backend (no arena, no oneTBB).
void BM_Chain_OneThread_Out(benchmark::State& state) { run_session_out(state, 1); }

// One session per chain, allocating form: each op returns a new tensor and the previous one goes
// back to the session's workspace.
void BM_Chain_Session_Alloc(benchmark::State& state) {
    const std::int64_t depth = state.range(0);
    tessera_run r(state, machine_threads());
    const auto chain = [&](tessera::session& s) {
        tessera::tensor<float> x = tessera::relu(s, r.t.x0);
        op_done();
        for (std::int64_t i = 1; i < depth; ++i) {
            x = is_relu_step(i) ? tessera::relu(s, x) : tessera::add(s, x, r.t.y);
            op_done();
        }
        benchmark::DoNotOptimize(x.data());
        return x;
    };
    std::vector<float> got;
    {
        // The result outlives its session; read it before it goes back to the pool.
        const tessera::tensor<float> x = r.be.run(chain);
        got.assign(x.data(), x.data() + x.size());
    }
    const tessera::stats before = r.be.stats();
    // The result dies inside the session: its block goes back to the workspace, as a temporary's
    // would in a longer computation.
    for (auto _ : state) r.be.run([&](tessera::session& s) { chain(s); });
    const tessera::stats d = r.be.stats() - before;
    report(state, depth, &d);
    check_result(state, got.data(), r.want);
}

// Every op of the chain in its own be.run (out-parameter form): a session entry per op.
void BM_Chain_SessionPerOp(benchmark::State& state) {
    const std::int64_t depth = state.range(0);
    tessera_run r(state, machine_threads());
    const auto chain = [&] {
        for (std::int64_t i = 0; i < depth; ++i)
            r.be.run([&](tessera::session& s) {
                step_out(s, i, source_of(r.t, i), r.t.y, target_of(r.t, i));
            });
        return target_of(r.t, depth - 1).data();
    };
    const float* result = chain();
    const tessera::stats before = r.be.stats();
    for (auto _ : state) chain();
    const tessera::stats d = r.be.stats() - before;
    report(state, depth, &d);
    check_result(state, result, r.want);
}

// --- baselines --------------------------------------------------------------------------------

// Eigen Tensor on a ThreadPoolDevice with the machine's thread count: each op is one device
// assignment, which decides from Eigen's cost model whether to split the work over the pool.
void BM_Chain_EigenTensorPool(benchmark::State& state) {
    using map = Eigen::TensorMap<Eigen::Tensor<float, 1>>;
    using const_map = Eigen::TensorMap<const Eigen::Tensor<float, 1>>;
    const std::int64_t depth = state.range(0);
    const auto width = static_cast<Eigen::Index>(state.range(1));
    const int threads = machine_threads();
    Eigen::ThreadPool pool(threads);
    const Eigen::ThreadPoolDevice dev(&pool, threads);

    const std::vector<float> x0 = random_values(static_cast<std::size_t>(width), 1);
    const std::vector<float> y = random_values(static_cast<std::size_t>(width), 2);
    const std::vector<float> want = expected_chain(x0, y, depth);
    std::vector<float> a(x0.size()), b(x0.size());
    const const_map ym(y.data(), width);

    const auto chain = [&] {
        const float* src = x0.data();
        float* dst = a.data();
        float* spare = b.data();
        for (std::int64_t i = 0; i < depth; ++i) {
            const const_map in(src, width);
            map out(dst, width);
            if (is_relu_step(i))
                out.device(dev) = in.cwiseMax(0.0f);
            else
                out.device(dev) = in + ym;
            op_done();
            src = dst;
            std::swap(dst, spare);
        }
        return src;
    };
    const float* result = chain();
    for (auto _ : state) chain();
    report(state, depth, nullptr);
    check_result(state, result, want);
}

// The chain as plain loops on the calling thread: the floor for both widths.
void BM_Chain_RawLoop(benchmark::State& state) {
    const std::int64_t depth = state.range(0);
    const auto width = static_cast<std::size_t>(state.range(1));
    const std::vector<float> x0 = random_values(width, 1);
    const std::vector<float> y = random_values(width, 2);
    const std::vector<float> want = expected_chain(x0, y, depth);
    std::vector<float> a(width), b(width);

    const auto chain = [&] {
        const float* src = x0.data();
        float* dst = a.data();
        float* spare = b.data();
        const float* yp = y.data();
        for (std::int64_t i = 0; i < depth; ++i) {
            if (is_relu_step(i)) {
                for (std::size_t j = 0; j < width; ++j) dst[j] = src[j] < 0.0f ? 0.0f : src[j];
            } else {
                for (std::size_t j = 0; j < width; ++j) dst[j] = src[j] + yp[j];
            }
            op_done();
            src = dst;
            std::swap(dst, spare);
        }
        return src;
    };
    const float* result = chain();
    for (auto _ : state) chain();
    report(state, depth, nullptr);
    check_result(state, result, want);
}

// --- registration ---------------------------------------------------------------------------

// CPU time of the calling thread: at both widths every variant runs each op on the calling thread
// (tessera's grain keeps 4096 elements inline, as the dispatch counters show; Eigen's parallelFor
// runs an op in the caller while its cost model estimates under ~100k cycles, about 30k elements
// here), and on a shared machine CPU time leaves out the time the process waits for a core. Five short repetitions; the summary uses the mean of time_per_op.
void grid(benchmark::internal::Benchmark* b) {
    b->ArgNames({"depth", "width"})
        ->ArgsProduct({{std::begin(depths), std::end(depths)}, {std::begin(widths), std::end(widths)}})
        ->MinTime(0.05)
        ->Repetitions(5)
        ->ReportAggregatesOnly(true);
}

BENCHMARK(BM_Chain_Session_Out)->Apply(grid);
BENCHMARK(BM_Chain_Session_Alloc)->Apply(grid);
BENCHMARK(BM_Chain_SessionPerOp)->Apply(grid);
BENCHMARK(BM_Chain_OneThread_Out)->Apply(grid);
BENCHMARK(BM_Chain_EigenTensorPool)->Apply(grid);
BENCHMARK(BM_Chain_RawLoop)->Apply(grid);

// --- the summary ------------------------------------------------------------------------------

std::string key(const char* bench, std::int64_t depth, std::int64_t width) {
    return fmt::format("{}/depth:{}/width:{}", bench, depth, width);
}

// CPU time per op (ns) of `bench` at (depth, width): the time_per_op counter (seconds), averaged
// over the repetitions.
std::optional<double> per_op_ns(const tessera_bench::results& r, const char* bench,
                                std::int64_t depth, std::int64_t width) {
    const auto it = r.find(key(bench, depth, width));
    if (it == r.end()) return std::nullopt;
    const auto c = it->second.counters.find("time_per_op");
    if (c == it->second.counters.end()) return std::nullopt;
    return c->second.value * 1e9;
}

std::string dispatches_per_op(const tessera_bench::results& r, const char* bench,
                              std::int64_t depth, std::int64_t width) {
    const auto it = r.find(key(bench, depth, width));
    if (it == r.end()) return "n/a";
    const auto value = [&](const char* name) -> std::string {
        const auto c = it->second.counters.find(name);
        return c == it->second.counters.end() ? "n/a" : fmt::format("{:.2f}", c->second.value);
    };
    return value("inline_per_op") + " / " + value("parallel_per_op");
}

// Per-op time of every variant at every (depth, width), then tessera's dispatch decisions.
void print_grid(const tessera_bench::results& r) {
    struct variant {
        const char* bench;
        const char* label;
        bool counted;  // a tessera variant, with dispatch counters
    };
    const variant variants[] = {
        {"BM_Chain_Session_Out", "tessera, one session, out-param", true},
        {"BM_Chain_Session_Alloc", "tessera, one session, allocating", true},
        {"BM_Chain_SessionPerOp", "tessera, session per op, out-param", true},
        {"BM_Chain_OneThread_Out", "tessera, one-thread backend, out-param", true},
        {"BM_Chain_EigenTensorPool", "Eigen Tensor, ThreadPoolDevice", false},
        {"BM_Chain_RawLoop", "raw loop", false},
    };
    std::vector<std::vector<std::string>> lines;
    std::vector<std::string> header{"CPU time per op (mean of 5)"};
    for (const std::int64_t w : widths)
        for (const std::int64_t d : depths) header.push_back(fmt::format("w{} d{}", w, d));
    for (const std::int64_t w : widths)
        header.push_back(fmt::format("inline/parallel per op, w{} d100", w));
    lines.push_back(header);
    for (const variant& v : variants) {
        std::vector<std::string> line{v.label};
        for (const std::int64_t w : widths)
            for (const std::int64_t d : depths) {
                const std::optional<double> ns = per_op_ns(r, v.bench, d, w);
                line.push_back(ns ? tessera_bench::format_ns(*ns) : "n/a");
            }
        for (const std::int64_t w : widths)
            line.push_back(v.counted ? dispatches_per_op(r, v.bench, 100, w) : "-");
        lines.push_back(line);
    }
    std::vector<std::size_t> width(header.size(), 0);
    for (const auto& line : lines)
        for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
    for (std::size_t l = 0; l < lines.size(); ++l) {
        std::string text = fmt::format("{:<{}}", lines[l][0], width[0]);
        for (std::size_t i = 1; i < lines[l].size(); ++i)
            text += fmt::format(" | {:>{}}", lines[l][i], width[i]);
        fmt::print("{}\n", text);
        if (l == 0) fmt::print("{}\n", std::string(text.size(), '-'));
    }

    // CPU time of the calling thread is the cost of an op only while ops run on that thread.
    for (const variant& v : variants) {
        if (!v.counted) continue;
        for (const std::int64_t w : widths)
            for (const std::int64_t d : depths) {
                const auto it = r.find(key(v.bench, d, w));
                if (it == r.end()) continue;
                const auto c = it->second.counters.find("parallel_per_op");
                if (c != it->second.counters.end() && c->second.value > 0)
                    fmt::print("note: {} fanned out at w{} d{}; its CPU time leaves out the other "
                               "threads' share\n",
                               v.bench, w, d);
            }
    }
}

void print_summary(const tessera_bench::results& r) {
    using tessera_bench::goal;
    // The kernels are header templates, so they are compiled with this file's flags.
#if defined(__AVX512F__)
    constexpr const char* isa = "AVX-512";
#elif defined(__AVX2__)
    constexpr const char* isa = "AVX2";
#elif defined(__AVX__)
    constexpr const char* isa = "AVX";
#else
    constexpr const char* isa = "SSE2 (generic x86-64)";
#endif
    fmt::print(
        "dispatch grid: chains of alternating relu / add(x, y), float, {} threads for the "
        "multi-thread variants; elementwise kernels compiled for {}\n\n",
        machine_threads(), isa);
    print_grid(r);

    const auto ns8 = [&](const char* bench) { return per_op_ns(r, bench, 100, 8); };
    tessera_bench::summary_table table;
    table.add("per op, w8 d100: one session, out-param vs Eigen pool",
              ns8("BM_Chain_Session_Out"), ns8("BM_Chain_EigenTensorPool"), goal::ratio_at_most,
              1.5);
    table.add("per op, w8 d100: one session, allocating vs Eigen pool",
              ns8("BM_Chain_Session_Alloc"), ns8("BM_Chain_EigenTensorPool"), goal::ratio_at_most,
              2.5);
    table.add(fmt::format("tiny op: {}-thread session vs one-thread session (w8 d100)",
                          machine_threads()),
              ns8("BM_Chain_Session_Out"), ns8("BM_Chain_OneThread_Out"), goal::ratio_at_most,
              1.1);
    table.add("per op, w8 d100: session per op vs one session", ns8("BM_Chain_SessionPerOp"),
              ns8("BM_Chain_Session_Out"), goal::info);
    table.add("per op, w8 d100: one session, out-param vs raw loop", ns8("BM_Chain_Session_Out"),
              ns8("BM_Chain_RawLoop"), goal::info);
    const auto ns4k = [&](const char* bench) { return per_op_ns(r, bench, 100, 4096); };
    table.add("per op, w4096 d100: one session, out-param vs Eigen pool",
              ns4k("BM_Chain_Session_Out"), ns4k("BM_Chain_EigenTensorPool"), goal::info);
    table.add("per op, w4096 d100: one session, out-param vs raw loop",
              ns4k("BM_Chain_Session_Out"), ns4k("BM_Chain_RawLoop"), goal::info);

    fmt::print("\nperformance contract (DESIGN.md section 4), CPU time per op, means of 5 runs\n\n");
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    // Repetitions of all benchmarks run in random order by default, so that a slow phase of a
    // shared machine does not fall on one variant of a ratio only; a later
    // --benchmark_enable_random_interleaving=false on the command line wins.
    static char interleave[] = "--benchmark_enable_random_interleaving=true";
    const auto args = std::make_unique<char*[]>(static_cast<std::size_t>(argc) + 2);  // nullptr-ended
    args[0] = argv[0];
    args[1] = interleave;
    for (int i = 1; i < argc; ++i) args[static_cast<std::size_t>(i) + 1] = argv[i];
    return tessera_bench::run_benchmarks(argc + 1, args.get(), print_summary);
}
