// bench_support.hpp - what every tessera bench binary shares: the thread counts it sweeps, the
// machine and build facts it prints, a main with a --summary mode that collects each benchmark's
// time, and the table that sets those times against the performance contract (DESIGN.md §4).
// Start with run_benchmarks; a bench file's main is one call to it.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera_bench {

/// Returns the thread counts executor benchmarks sweep: 1, 2 and the machine's count
/// (tbb::info::default_concurrency(), i.e. the process's affinity count), sorted, deduplicated,
/// and only those of at least `min_threads`.
std::vector<std::int64_t> thread_counts(int min_threads = 1);

/// Returns the size of this CPU's L2 cache in bytes (1 MiB when the system does not say): the
/// batched benchmarks size their "L2-resident" batches from it.
std::size_t l2_bytes();

/// Prints the CPU, CPU counts, oneTBB version and concurrency, compiler, build type, NDEBUG and
/// the date, so that every set of numbers says where it came from.
void print_machine_facts(std::FILE* out);

/// What one benchmark measured: real time per iteration, in ns.
struct result {
    double mean_ns = 0;    ///< mean over the repetitions (the single run's time without them)
    double median_ns = 0;  ///< median over the repetitions; equals mean_ns without them
    /// fastest repetition, where the repetitions or a "min" statistic were reported (floors)
    std::optional<double> min_ns;
    benchmark::UserCounters counters;  ///< the mean aggregate's counters, else the last run's
};

/// Results keyed by function name and arguments, e.g. "BM_EmptySession_Arena/2": the
/// min_time:, repeats: and real_time parts of a run's name are left out.
using results = std::map<std::string, result>;

/// Returns the median time per iteration (ns) of benchmark `name`, or nothing if it did not run
/// (filtered out, or it failed).
std::optional<double> median_ns(const results& r, const std::string& name);

/// Returns the fastest repetition's time per iteration (ns) of benchmark `name`, or nothing if it
/// did not run or reported neither its repetitions nor min_statistic. Noise only slows a run, so
/// a floor takes its fastest.
std::optional<double> min_ns(const results& r, const std::string& name);

/// The statistic that adds a "min" aggregate to a benchmark reporting only aggregates:
/// `->ComputeStatistics("min", tessera_bench::min_statistic)`.
double min_statistic(const std::vector<double>& values);

/// Runs every registered benchmark and, with --summary, calls `summary(results)` at the end.
///
/// Takes the standard --benchmark_* flags (JSON via --benchmark_out=<file>
/// --benchmark_out_format=json works as usual) plus --summary, which replaces the per-benchmark
/// console lines with one progress dot per benchmark on stderr. The machine facts are printed
/// first in both modes (to stderr when --benchmark_format is not console). Returns the process
/// exit code.
int run_benchmarks(int argc, char** argv, const std::function<void(const results&)>& summary);

/// What a summary row checks.
enum class goal {
    info,              ///< no target; the ratio is tessera / baseline
    ratio_at_most,     ///< tessera / baseline <= target
    speedup_at_least,  ///< baseline / tessera >= target
    ns_at_most,        ///< tessera's time <= target ns; the ratio is tessera / baseline
};

/// The contract table: `measure | tessera | baseline | ratio | target | verdict`, aligned.
/// A row whose times are missing prints "n/a" and counts neither as a pass nor a miss.
class summary_table {
public:
    void add(std::string measure, std::optional<double> tessera_ns,
             std::optional<double> baseline_ns, goal kind, double target = 0);
    /// Prints the rows and a closing "N of M targets met" line.
    void print(std::FILE* out) const;

private:
    struct row {
        std::string measure;
        std::optional<double> tessera_ns;
        std::optional<double> baseline_ns;
        goal kind;
        double target;
    };
    std::vector<row> rows_;
};

/// Formats a time in ns with a readable unit: "12.3 ns", "4.56 us", "7.89 ms".
std::string format_ns(double ns);

}  // namespace tessera_bench
