// session_entry_bench.cpp - what entering a tessera session costs, side by side with what raw
// oneTBB, a plain call and install-style handoffs cost on the same machine in the same run
// (DESIGN.md §1 and §4). `--summary` prints the contract table instead of the per-run lines.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <tessera/arena.hpp>
#include <tessera/tessera.hpp>
#include <thread>

#include "bench_support.hpp"

namespace {

using benchmark::Counter;
using tessera_bench::thread_counts;

// The body every entry benchmark runs: nothing, so that only the entry is timed.
constexpr auto empty_body = [](tessera::session&) {};

tessera::backend make_backend(std::int64_t threads) {
    return tessera::backend{tessera::backend_options{}.with_threads(static_cast<int>(threads))};
}

// Reports `total` (accumulated over the timing loop) per iteration.
void per_iteration(benchmark::State& state, const char* name, std::uint64_t total) {
    state.counters[name] = Counter(static_cast<double>(total), Counter::kAvgIterations);
}

// --- tessera session entry ------------------------------------------------------------------

void BM_EmptySession_Arena(benchmark::State& state) {
    tessera::backend be = make_backend(state.range(0));
    be.run(empty_body);  // warm: this thread's first entry into the arena
    const tessera::stats before = be.stats();
    for (auto _ : state) {
        be.run(empty_body);
        // As if called from unrelated code: nothing about the thread's session state may be kept
        // in registers across iterations.
        benchmark::ClobberMemory();
    }
    const tessera::stats d = be.stats() - before;
    per_iteration(state, "arena_entries", d.arena_entries);
}

void BM_EmptySession_Inline(benchmark::State& state) {
    tessera::backend be = make_backend(1);
    be.run(empty_body);
    const tessera::stats before = be.stats();
    for (auto _ : state) {
        be.run(empty_body);
        benchmark::ClobberMemory();
    }
    const tessera::stats d = be.stats() - before;
    per_iteration(state, "arena_entries", d.arena_entries);
    per_iteration(state, "inline_entries", d.inline_entries);
}

void BM_NestedRun(benchmark::State& state) {
    tessera::backend be = make_backend(state.range(0));
    const tessera::stats before = be.stats();
    // The whole timing loop runs inside one session, so every timed run() is the nested reuse.
    be.run([&](tessera::session&) {
        for (auto _ : state) {
            be.run(empty_body);
            // Without it the loop folds into one counter increment kept in a register (~0.5 ns).
            benchmark::ClobberMemory();
        }
    });
    // The outer session's one arena entry is not per iteration, so only the reuses are reported.
    const tessera::stats d = be.stats() - before;
    per_iteration(state, "nested_reuses", d.nested_reuses);
}

// --- baselines ------------------------------------------------------------------------------

// The body with no session around it, called through a volatile function pointer so that the
// call is neither inlined nor dropped.
void BM_DirectCall(benchmark::State& state) {
    void (*volatile body)() = [] {};
    for (auto _ : state) {
        body();
        benchmark::ClobberMemory();
    }
}

// An arena built as tessera builds its own: threads - 1 workers plus one slot reserved for the
// application thread (session_slots = 1), initialised before timing.
struct raw_arena {
    explicit raw_arena(std::int64_t threads)
        : arena(static_cast<int>(threads) - 1 + 1, /*reserved_for_masters=*/1) {
        arena.initialize();
    }
    tbb::task_arena arena;
};

void BM_RawArenaExecute(benchmark::State& state) {
    raw_arena raw(state.range(0));
    raw.arena.execute([] {});  // warm, as for the session
    for (auto _ : state) {
        raw.arena.execute([] {});
        benchmark::ClobberMemory();
    }
}

// A persistent worker thread that runs one submitted closure at a time while the submitter waits:
// the install-style entry of runtimes that hand work to a pool thread.
class condvar_worker {
public:
    condvar_worker() : thread_([this] { serve(); }) {}
    ~condvar_worker() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        work_ready_.notify_one();
        thread_.join();
    }
    condvar_worker(const condvar_worker&) = delete;
    condvar_worker& operator=(const condvar_worker&) = delete;

    /// Hands `job` to the worker and returns once the worker has run it.
    void run(void (*job)()) {
        std::unique_lock lock(mutex_);
        job_ = job;
        work_ready_.notify_one();
        work_done_.wait(lock, [&] { return job_ == nullptr; });
    }

private:
    void serve() {
        std::unique_lock lock(mutex_);
        for (;;) {
            work_ready_.wait(lock, [&] { return job_ != nullptr || stop_; });
            if (stop_) return;
            void (*job)() = job_;
            lock.unlock();
            job();
            lock.lock();
            job_ = nullptr;
            work_done_.notify_one();
        }
    }

    std::mutex mutex_;
    std::condition_variable work_ready_;
    std::condition_variable work_done_;
    void (*job_)() = nullptr;
    bool stop_ = false;
    std::thread thread_;  // last: it starts serving once the members above exist
};

void BM_InstallHandoff_Condvar(benchmark::State& state) {
    condvar_worker worker;
    worker.run([] {});  // warm: the worker has started and run once
    for (auto _ : state) worker.run([] {});
}

// Static storage: an enqueued task may still be inside notify_one() when its benchmark returns.
std::atomic<std::uint32_t> enqueued_ran{0};

void wait_until_set(std::atomic<std::uint32_t>& flag) {
    // Spin briefly, then sleep in the futex as a blocking caller would. On the 2-core development
    // machine 64 loads gave the steadiest numbers; a 4096-load spin was slower (it holds a core the
    // worker wants), 65536 about 3x slower.
    for (int spin = 0; spin < 64; ++spin)
        if (flag.load(std::memory_order_acquire) != 0) return;
    while (flag.load(std::memory_order_acquire) == 0) flag.wait(0, std::memory_order_acquire);
}

void BM_ArenaEnqueueWait(benchmark::State& state) {
    raw_arena raw(state.range(0));
    const auto submit_and_wait = [&] {
        enqueued_ran.store(0, std::memory_order_relaxed);
        raw.arena.enqueue([] {
            enqueued_ran.store(1, std::memory_order_release);
            enqueued_ran.notify_one();
        });
        wait_until_set(enqueued_ran);
    };
    submit_and_wait();  // warm
    for (auto _ : state) submit_and_wait();
}

// --- tiny ops: one session for N ops vs one session per op ------------------------------------

struct operands {
    tessera::tensor<float> a;
    tessera::tensor<float> b;
    tessera::tensor<float> out;
};

// Made in a setup session; tensors outlive it.
operands make_operands(tessera::backend& be) {
    return be.run([](tessera::session& s) {
        return operands{tessera::full<float>(s, {8}, 1.0f), tessera::full<float>(s, {8}, 2.0f),
                        tessera::zeros<float>(s, {8})};
    });
}

void add_once(tessera::session& s, operands& x) {
    tessera::add(s, x.a, x.b, x.out);
    benchmark::ClobberMemory();  // each op's result is written, not folded into the next
}

void report_ops(benchmark::State& state, std::int64_t ops, const tessera::stats& d) {
    const double total_ops = static_cast<double>(ops) * static_cast<double>(state.iterations());
    state.SetItemsProcessed(static_cast<std::int64_t>(total_ops));
    // Seconds per op (an inverted rate): the console shows it as e.g. "4.7ns", JSON in seconds.
    state.counters["time_per_op"] = Counter(total_ops, Counter::kIsRate | Counter::kInvert);
    per_iteration(state, "arena_entries", d.arena_entries);
    per_iteration(state, "parallel_dispatches", d.parallel_dispatches);
}

void BM_OpsInOneSession(benchmark::State& state) {
    tessera::backend be = make_backend(state.range(0));
    const std::int64_t ops = state.range(1);
    operands x = make_operands(be);
    const tessera::stats before = be.stats();
    for (auto _ : state) {
        be.run([&](tessera::session& s) {
            for (std::int64_t i = 0; i < ops; ++i) add_once(s, x);
        });
    }
    report_ops(state, ops, be.stats() - before);
}

void BM_SessionPerOp(benchmark::State& state) {
    tessera::backend be = make_backend(state.range(0));
    const std::int64_t ops = state.range(1);
    operands x = make_operands(be);
    const tessera::stats before = be.stats();
    for (auto _ : state) {
        for (std::int64_t i = 0; i < ops; ++i) be.run([&](tessera::session& s) { add_once(s, x); });
    }
    report_ops(state, ops, be.stats() - before);
}

// --- in the application's arena -----------------------------------------------------------------
// Timed from inside a task of an application's arena of `threads` threads, as an application that
// already runs on oneTBB calls tessera: a backend attached to that arena (no arena to enter), an
// owned backend (a nested entry into its own arena), and, for the chain, the same tiny adds as raw
// tbb::parallel_for calls.

enum class in_arena { direct, attached, owned };

void BM_EmptySession_InAppArena(benchmark::State& state, in_arena how) {
    const int threads = static_cast<int>(state.range(0));
    tbb::task_arena app(threads);
    app.initialize();
    tessera::backend attached{tessera::attached_to(app)};
    tessera::backend owned = make_backend(threads);
    tessera::backend& be = how == in_arena::owned ? owned : attached;
    void (*volatile body)() = [] {};
    tessera::stats d;
    app.execute([&] {
        be.run(empty_body);  // warm
        const tessera::stats before = be.stats();
        for (auto _ : state) {
            if (how == in_arena::direct)
                body();
            else
                be.run(empty_body);
            benchmark::ClobberMemory();
        }
        d = be.stats() - before;
    });
    per_iteration(state, "attached_entries", d.attached_entries);
    per_iteration(state, "arena_entries", d.arena_entries);
}

enum class chain_by { attached, owned, raw_parallel_for };

// 100 tiny adds (8 floats): in one session of an attached or an owned backend, or each as its own
// tbb::parallel_for over the elements, as oneTBB code without tessera would write them.
void BM_Chain_InAppArena(benchmark::State& state, chain_by how) {
    constexpr int ops = 100;
    const int threads = static_cast<int>(state.range(0));
    tbb::task_arena app(threads);
    app.initialize();
    tessera::backend attached{tessera::attached_to(app)};
    tessera::backend owned = make_backend(threads);
    tessera::backend& be = how == chain_by::owned ? owned : attached;
    operands x = make_operands(be);
    app.execute([&] {
        for (auto _ : state) {
            if (how == chain_by::raw_parallel_for) {
                for (int i = 0; i < ops; ++i) {
                    const float* a = x.a.data();
                    const float* b = x.b.data();
                    float* out = x.out.data();
                    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, 8), [&](const auto& r) {
                        for (std::size_t j = r.begin(); j < r.end(); ++j) out[j] = a[j] + b[j];
                    });
                    benchmark::ClobberMemory();
                }
            } else {
                be.run([&](tessera::session& s) {
                    for (int i = 0; i < ops; ++i) add_once(s, x);
                });
            }
        }
    });
    state.counters["time_per_op"] =
        Counter(static_cast<double>(ops) * static_cast<double>(state.iterations()),
                Counter::kIsRate | Counter::kInvert);
}

// --- registration ---------------------------------------------------------------------------

// Every run is short and repeated three times; the summary uses the medians. Real time, because
// the handoff baselines spend their time blocked, which CPU time would not see.
void repeated(benchmark::internal::Benchmark* b) {
    b->MinTime(0.05)->Repetitions(3)->ReportAggregatesOnly(true)->UseRealTime();
}
void all_thread_counts(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({thread_counts(1)});
}
void multi_thread_counts(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({thread_counts(2)});
}
void thread_counts_and_ops(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({thread_counts(1), {1, 10, 100}});
}

BENCHMARK(BM_EmptySession_Arena)->Apply(multi_thread_counts)->Apply(repeated);
BENCHMARK(BM_RawArenaExecute)->Apply(multi_thread_counts)->Apply(repeated);
BENCHMARK(BM_EmptySession_Inline)->Apply(repeated);
BENCHMARK(BM_DirectCall)->Apply(repeated);
BENCHMARK(BM_NestedRun)->Apply(all_thread_counts)->Apply(repeated);
BENCHMARK(BM_InstallHandoff_Condvar)->Apply(repeated);
BENCHMARK(BM_ArenaEnqueueWait)->Apply(multi_thread_counts)->Apply(repeated);
BENCHMARK(BM_OpsInOneSession)->Apply(thread_counts_and_ops)->Apply(repeated);
BENCHMARK(BM_SessionPerOp)->Apply(thread_counts_and_ops)->Apply(repeated);
BENCHMARK_CAPTURE(BM_EmptySession_InAppArena, direct, in_arena::direct)
    ->Name("BM_DirectCall_InAppArena")
    ->Apply(multi_thread_counts)
    ->Apply(repeated);
BENCHMARK_CAPTURE(BM_EmptySession_InAppArena, attached, in_arena::attached)
    ->Name("BM_EmptySession_Attached_InAppArena")
    ->Apply(multi_thread_counts)
    ->Apply(repeated);
BENCHMARK_CAPTURE(BM_EmptySession_InAppArena, owned, in_arena::owned)
    ->Name("BM_EmptySession_Owned_InAppArena")
    ->Apply(multi_thread_counts)
    ->Apply(repeated);
BENCHMARK_CAPTURE(BM_Chain_InAppArena, attached, chain_by::attached)
    ->Name("BM_Chain100_Attached_InAppArena")
    ->Apply(multi_thread_counts)
    ->Apply(repeated);
BENCHMARK_CAPTURE(BM_Chain_InAppArena, owned, chain_by::owned)
    ->Name("BM_Chain100_Owned_InAppArena")
    ->Apply(multi_thread_counts)
    ->Apply(repeated);
BENCHMARK_CAPTURE(BM_Chain_InAppArena, raw, chain_by::raw_parallel_for)
    ->Name("BM_Chain100_RawParallelFor_InAppArena")
    ->Apply(multi_thread_counts)
    ->Apply(repeated);

// --- the contract table ---------------------------------------------------------------------

std::optional<double> divided(std::optional<double> ns, double by) {
    if (!ns) return std::nullopt;
    return *ns / by;
}

void print_summary(const tessera_bench::results& r) {
    using tessera_bench::goal;
    using tessera_bench::median_ns;
    tessera_bench::summary_table table;

    for (const std::int64_t t : thread_counts(2))
        table.add(fmt::format("empty session vs raw execute, {} threads", t),
                  median_ns(r, fmt::format("BM_EmptySession_Arena/{}", t)),
                  median_ns(r, fmt::format("BM_RawArenaExecute/{}", t)), goal::ratio_at_most, 1.5);
    table.add("empty session, 1 thread (baseline: direct call)",
              median_ns(r, "BM_EmptySession_Inline"), median_ns(r, "BM_DirectCall"),
              goal::ns_at_most, 15);

    const std::optional<double> session2 = median_ns(r, "BM_EmptySession_Arena/2");
    table.add("condvar handoff vs empty session, 2 threads", session2,
              median_ns(r, "BM_InstallHandoff_Condvar"), goal::speedup_at_least, 100);
    table.add("enqueue+wait vs empty session, 2 threads", session2,
              median_ns(r, "BM_ArenaEnqueueWait/2"), goal::speedup_at_least, 100);

    for (const std::int64_t t : thread_counts(1))
        table.add(fmt::format("per op, N=100: one session vs session per op, {} thr", t),
                  divided(median_ns(r, fmt::format("BM_OpsInOneSession/{}/100", t)), 100),
                  divided(median_ns(r, fmt::format("BM_SessionPerOp/{}/100", t)), 100), goal::info);

    const std::optional<double> attached = median_ns(r, "BM_EmptySession_Attached_InAppArena/2");
    table.add("attached empty session in the app's arena, 2 thr (baseline: direct call)", attached,
              median_ns(r, "BM_DirectCall_InAppArena/2"), goal::ns_at_most, 10);
    table.add("same: attached vs owned backend's empty session, 2 thr", attached,
              median_ns(r, "BM_EmptySession_Owned_InAppArena/2"), goal::info);
    const std::optional<double> chain = median_ns(r, "BM_Chain100_Attached_InAppArena/2");
    table.add("100 tiny adds in the app's arena: attached vs owned session, 2 thr", chain,
              median_ns(r, "BM_Chain100_Owned_InAppArena/2"), goal::info);
    table.add("100 tiny adds in the app's arena: attached vs raw parallel_for, 2 thr", chain,
              median_ns(r, "BM_Chain100_RawParallelFor_InAppArena/2"), goal::info);

    fmt::print("session entry: performance contract (DESIGN.md section 4), medians of 3 runs\n\n");
    table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    return tessera_bench::run_benchmarks(argc, argv, print_summary);
}
