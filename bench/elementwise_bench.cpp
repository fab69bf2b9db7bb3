// elementwise_bench.cpp - large elementwise ops (16M floats, far beyond the caches) against the
// memory bandwidth memcpy reaches on the same machine in the same run (DESIGN.md §4: >= 80%).
// tessera's add (out-parameter form), relu and full sum at one thread and at all threads, each
// set against a memcpy that moves the same bytes with the same thread count.
// `--summary` prints the bandwidth table and the contract table instead of the per-run lines.
//
// Bytes moved = bytes read + bytes written, counted once per array an op touches:
//   add   c = a + b   reads 2 arrays, writes 1: 3 x 64 MiB
//   relu  c = relu(a) reads 1 array,  writes 1: 2 x 64 MiB
//   sum   sum_all(a)  reads 1 array:            1 x 64 MiB
// A memcpy of n bytes reads n and writes n, so the baseline for an op that moves m bytes copies
// m / 2 bytes. Write-allocate traffic (a cache line read before it is overwritten) is not counted
// for either side.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

// GCC 12 flags broadcast_all's `op` as set but unused in NDEBUG builds when a one-operand op
// (relu) instantiates it with an empty pack; the warning is in detail/elementwise.hpp, not here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-but-set-parameter"
#include <tessera/ops/reduce.hpp>
#include <tessera/tessera.hpp>
#pragma GCC diagnostic pop

#include "bench_support.hpp"

namespace {

// 16M floats: 64 MiB per array.
constexpr std::size_t elements = std::size_t{1} << 24;
constexpr std::size_t array_bytes = elements * sizeof(float);

// Arrays each op reads plus arrays it writes.
constexpr std::size_t add_arrays = 3;
constexpr std::size_t relu_arrays = 2;
constexpr std::size_t sum_arrays = 1;

int machine_threads() { return tbb::info::default_concurrency(); }

// 1 and the machine's thread count.
std::vector<std::int64_t> thread_counts() {
    std::vector<std::int64_t> counts{1};
    if (machine_threads() > 1) counts.push_back(machine_threads());
    return counts;
}

// Fills `n` floats with fixed values in [-1, 1) from a small LCG: both signs, so relu takes both
// branches, and every page is written (faulted in) before anything is timed.
void fill(float* p, std::size_t n, std::uint64_t seed) {
    std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (std::size_t i = 0; i < n; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1 << 24) *
                                      2.0 -
                                  1.0);
    }
}

void report_bytes(benchmark::State& state, std::size_t arrays) {
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(arrays * array_bytes));
}

// --- tessera ----------------------------------------------------------------------------------

struct tessera_setup {
    tessera::backend be;
    tessera::tensor<float> a;
    tessera::tensor<float> b;
    tessera::tensor<float> c;

    explicit tessera_setup(std::int64_t threads)
        : be(tessera::backend_options{}.with_threads(static_cast<int>(threads))) {
        be.run([&](tessera::session& s) {
            const tessera::shape sh = tessera::shape::of_length(elements);
            a = tessera::empty<float>(s, sh);
            b = tessera::empty<float>(s, sh);
            c = tessera::empty<float>(s, sh);
        });
        fill(a.data(), elements, 1);
        fill(b.data(), elements, 2);
        fill(c.data(), elements, 3);
    }
};

// One backend and one set of filled arrays per thread count, made on first use and kept for the
// whole run: every repetition finds its pages faulted in, and the setup is paid once.
tessera_setup& setup_for(std::int64_t threads) {
    static std::map<std::int64_t, std::unique_ptr<tessera_setup>> made;
    std::unique_ptr<tessera_setup>& t = made[threads];
    if (!t) t = std::make_unique<tessera_setup>(threads);
    return *t;
}

// Reports tessera's dispatch decisions per iteration: 1 inline (one thread) or 1 parallel.
void report_dispatches(benchmark::State& state, const tessera::stats& d) {
    using benchmark::Counter;
    state.counters["inline_dispatches"] =
        Counter(static_cast<double>(d.inline_dispatches), Counter::kAvgIterations);
    state.counters["parallel_dispatches"] =
        Counter(static_cast<double>(d.parallel_dispatches), Counter::kAvgIterations);
}

template <class Expected>
void check_elements(benchmark::State& state, const float* got, Expected expected) {
    for (std::size_t i = 0; i < elements; ++i) {
        if (!(got[i] == expected(i))) {
            state.SkipWithError(
                fmt::format("wrong result at {}: {} instead of {}", i, got[i], expected(i)).c_str());
            return;
        }
    }
}

void BM_Add_Session(benchmark::State& state) {
    tessera_setup& t = setup_for(state.range(0));
    t.be.run([&](tessera::session& s) { tessera::add(s, t.a, t.b, t.c); });  // warm
    const tessera::stats before = t.be.stats();
    for (auto _ : state) {
        t.be.run([&](tessera::session& s) { tessera::add(s, t.a, t.b, t.c); });
        benchmark::ClobberMemory();
    }
    report_dispatches(state, t.be.stats() - before);
    report_bytes(state, add_arrays);
    check_elements(state, t.c.data(), [&](std::size_t i) { return t.a.data()[i] + t.b.data()[i]; });
}

void BM_Relu_Session(benchmark::State& state) {
    tessera_setup& t = setup_for(state.range(0));
    t.be.run([&](tessera::session& s) { tessera::relu(s, t.a, t.c); });  // warm
    const tessera::stats before = t.be.stats();
    for (auto _ : state) {
        t.be.run([&](tessera::session& s) { tessera::relu(s, t.a, t.c); });
        benchmark::ClobberMemory();
    }
    report_dispatches(state, t.be.stats() - before);
    report_bytes(state, relu_arrays);
    check_elements(state, t.c.data(), [&](std::size_t i) { return std::max(t.a.data()[i], 0.0f); });
}

void BM_Sum_Session(benchmark::State& state) {
    tessera_setup& t = setup_for(state.range(0));
    float total = t.be.run([&](tessera::session& s) { return tessera::sum_all(s, t.a); });  // warm
    const tessera::stats before = t.be.stats();
    for (auto _ : state) {
        total = t.be.run([&](tessera::session& s) { return tessera::sum_all(s, t.a); });
        benchmark::DoNotOptimize(total);
    }
    report_dispatches(state, t.be.stats() - before);
    report_bytes(state, sum_arrays);
    // Against a double-precision sum: a pairwise float sum of 16M values in [-1, 1) is within a
    // few ulps of the magnitude sum.
    double exact = 0, magnitude = 0;
    for (std::size_t i = 0; i < elements; ++i) {
        exact += static_cast<double>(t.a.data()[i]);
        magnitude += std::abs(static_cast<double>(t.a.data()[i]));
    }
    if (std::abs(static_cast<double>(total) - exact) > 1e-6 * magnitude)
        state.SkipWithError(fmt::format("sum is {}, expected {}", total, exact).c_str());
}

// --- baseline: memcpy of the same bytes --------------------------------------------------------

struct aligned_delete {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
};
using aligned_bytes = std::unique_ptr<std::byte[], aligned_delete>;

aligned_bytes allocate_filled(std::size_t bytes, std::uint64_t seed) {
    aligned_bytes p(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
    fill(reinterpret_cast<float*>(p.get()), bytes / sizeof(float), seed);
    return p;
}

// The source and destination of every memcpy baseline: as large as the largest copy, filled once.
struct memcpy_buffers {
    static constexpr std::size_t bytes = add_arrays * array_bytes / 2;
    aligned_bytes src = allocate_filled(bytes, 4);
    aligned_bytes dst = allocate_filled(bytes, 5);
};
const memcpy_buffers& buffers() {
    static const memcpy_buffers made;
    return made;
}

// Copies half the bytes an op of `arrays` arrays moves, with `threads` threads: one memcpy on the
// calling thread, or one contiguous piece per thread in a task_arena of that many threads (static
// partition, no stealing).
void BM_Memcpy(benchmark::State& state, std::size_t arrays) {
    const auto threads = static_cast<int>(state.range(0));
    const std::size_t bytes = arrays * array_bytes / 2;
    const std::byte* const src = buffers().src.get();
    std::byte* const dst = buffers().dst.get();
    tbb::task_arena arena(threads, /*reserved_for_masters=*/1);
    const auto copy = [&] {
        if (threads == 1) {
            std::memcpy(dst, src, bytes);
            return;
        }
        arena.execute([&] {
            const std::size_t pieces = static_cast<std::size_t>(threads);
            tbb::parallel_for(
                tbb::blocked_range<std::size_t>(0, pieces, 1),
                [&](const tbb::blocked_range<std::size_t>& r) {
                    for (std::size_t i = r.begin(); i != r.end(); ++i) {
                        // Piece boundaries on 64-byte lines.
                        const std::size_t lo = (bytes * i / pieces) & ~std::size_t{63};
                        const std::size_t hi =
                            i + 1 == pieces ? bytes : (bytes * (i + 1) / pieces) & ~std::size_t{63};
                        std::memcpy(dst + lo, src + lo, hi - lo);
                    }
                },
                tbb::static_partitioner());
        });
    };
    copy();  // warm: the arena's workers have started
    for (auto _ : state) {
        copy();
        benchmark::ClobberMemory();
    }
    report_bytes(state, arrays);
    if (std::memcmp(dst, src, bytes) != 0) state.SkipWithError("memcpy copied wrongly");
}

// --- registration ---------------------------------------------------------------------------

// Real time: the multi-thread runs spend most of their time on other threads. Each iteration
// moves 64-192 MiB, so a few iterations per repetition suffice.
void per_thread_count(benchmark::internal::Benchmark* b) {
    b->ArgNames({"threads"})
        ->ArgsProduct({thread_counts()})
        ->MinTime(0.25)
        ->Repetitions(3)
        ->ReportAggregatesOnly(true)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Add_Session)->Apply(per_thread_count);
BENCHMARK_CAPTURE(BM_Memcpy, add_bytes, add_arrays)->Apply(per_thread_count);
BENCHMARK(BM_Relu_Session)->Apply(per_thread_count);
BENCHMARK_CAPTURE(BM_Memcpy, relu_bytes, relu_arrays)->Apply(per_thread_count);
BENCHMARK(BM_Sum_Session)->Apply(per_thread_count);
BENCHMARK_CAPTURE(BM_Memcpy, sum_bytes, sum_arrays)->Apply(per_thread_count);

// --- the summary ------------------------------------------------------------------------------

void print_summary(const tessera_bench::results& r) {
    using tessera_bench::goal;
    using tessera_bench::median_ns;
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
        "large elementwise: {} floats ({} MiB) per array, bytes moved = reads + writes, "
        "medians of 3 runs;\nelementwise kernels compiled for {} (header templates, this file's "
        "flags)\n\n",
        elements, array_bytes >> 20, isa);

    struct op {
        const char* name;
        const char* bench;
        const char* memcpy_bench;
        std::size_t arrays;
    };
    const op ops[] = {
        {"add (out-param)", "BM_Add_Session", "BM_Memcpy/add_bytes", add_arrays},
        {"relu (out-param)", "BM_Relu_Session", "BM_Memcpy/relu_bytes", relu_arrays},
        {"sum_all", "BM_Sum_Session", "BM_Memcpy/sum_bytes", sum_arrays},
    };
    const auto gbps = [](std::optional<double> ns, std::size_t arrays) -> std::string {
        if (!ns) return "n/a";
        return fmt::format("{:.1f}", static_cast<double>(arrays * array_bytes) / *ns);
    };

    fmt::print("{:<17} | {:>7} | {:>9} | {:>12} | {:>12} | {:>11}\n", "op", "threads", "MiB moved",
               "tessera GB/s", "memcpy GB/s", "tess/memcpy");
    fmt::print("{}\n", std::string(83, '-'));
    tessera_bench::summary_table table;
    for (const op& o : ops) {
        for (const std::int64_t t : thread_counts()) {
            const std::optional<double> mine = median_ns(r, fmt::format("{}/threads:{}", o.bench, t));
            const std::optional<double> base =
                median_ns(r, fmt::format("{}/threads:{}", o.memcpy_bench, t));
            const std::string ratio =
                mine && base ? fmt::format("{:.0f}%", 100.0 * *base / *mine) : "n/a";
            fmt::print("{:<17} | {:>7} | {:>9} | {:>12} | {:>12} | {:>11}\n", o.name, t,
                       o.arrays * (array_bytes >> 20), gbps(mine, o.arrays), gbps(base, o.arrays),
                       ratio);
            // Same bytes on both sides, so memcpy time / tessera time is the bandwidth ratio.
            table.add(fmt::format("{}, {} thread{} (baseline: memcpy, same bytes)", o.name, t,
                                  t == 1 ? "" : "s"),
                      mine, base, goal::speedup_at_least, 0.8);
        }
    }
    fmt::print(
        "\nperformance contract (DESIGN.md section 4): bandwidth >= 80% of memcpy's; the ratio "
        "is memcpy time / tessera time\n\n");
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
