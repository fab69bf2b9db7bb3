// bench_support.cpp - machine facts, the recording reporter behind run_benchmarks, and the
// summary table.
#include "bench_support.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/version.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <fstream>
#include <string_view>
#include <tessera/version.hpp>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sched.h>
#endif

#ifndef TESSERA_BUILD_TYPE
#define TESSERA_BUILD_TYPE "unknown"
#endif

namespace tessera_bench {

std::size_t l2_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
    const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (bytes > 0) return static_cast<std::size_t>(bytes);
#endif
    return std::size_t{1} << 20;
}

std::vector<std::int64_t> thread_counts(int min_threads) {
    const int machine = tbb::info::default_concurrency();
    std::vector<std::int64_t> counts;
    for (const int n : {1, 2, machine})
        if (n >= min_threads) counts.push_back(n);
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
}

namespace {

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        const std::size_t colon = line.find(':');
        if (colon == std::string::npos) break;
        const std::size_t start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? std::string{} : line.substr(start);
    }
    return "unknown";
}

// -1 where the platform has no affinity mask to ask.
int affinity_count() {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
#endif
    return -1;
}

}  // namespace

void print_machine_facts(std::FILE* out) {
#ifdef NDEBUG
    constexpr std::string_view ndebug = "on";
#else
    constexpr std::string_view ndebug = "off (assertions compiled in)";
#endif
    const int affinity = affinity_count();
    const char* env_threads = std::getenv("TESSERA_NUM_THREADS");

    fmt::print(out, "tessera {} benchmark\n", TESSERA_VERSION_STRING);
    fmt::print(out, "  cpu          {}\n", cpu_model());
    fmt::print(out, "  cpus         {} logical, {} in this process's affinity mask\n",
               std::thread::hardware_concurrency(),
               affinity < 0 ? std::string("unknown") : std::to_string(affinity));
    fmt::print(out, "  oneTBB       {} (runtime {}), default_concurrency {}\n", TBB_VERSION_STRING,
               TBB_runtime_version(), tbb::info::default_concurrency());
    fmt::print(out, "  compiler     {}\n",
#if defined(__clang__)
               "clang " __VERSION__
#elif defined(__GNUC__)
               "GCC " __VERSION__
#else
               "unknown"
#endif
    );
    fmt::print(out, "  build        {}, NDEBUG {}\n", TESSERA_BUILD_TYPE, ndebug);
    fmt::print(out, "  TESSERA_NUM_THREADS  {}\n",
               env_threads != nullptr ? env_threads : "(unset)");
    fmt::print(out, "  date         {:%Y-%m-%d %H:%M:%S}\n", fmt::localtime(std::time(nullptr)));
}

std::optional<double> median_ns(const results& r, const std::string& name) {
    const auto it = r.find(name);
    if (it == r.end()) return std::nullopt;
    return it->second.median_ns;
}

std::optional<double> min_ns(const results& r, const std::string& name) {
    const auto it = r.find(name);
    if (it == r.end()) return std::nullopt;
    return it->second.min_ns;
}

double min_statistic(const std::vector<double>& values) {
    return values.empty() ? 0.0 : *std::min_element(values.begin(), values.end());
}

namespace {

using benchmark::BenchmarkReporter;

// Forwards everything to the normal display reporter (or, in --summary mode, prints a dot per
// benchmark instead) and keeps each benchmark's real time per iteration for the summary.
class recording_reporter final : public BenchmarkReporter {
public:
    explicit recording_reporter(BenchmarkReporter* forward) : forward_(forward) {}

    bool ReportContext(const Context& context) override {
        return forward_ == nullptr || forward_->ReportContext(context);
    }

    void ReportRuns(const std::vector<Run>& runs) override {
        if (forward_ != nullptr) {
            forward_->ReportRuns(runs);
        } else {
            std::fputc('.', stderr);
            std::fflush(stderr);
        }
        for (const Run& run : runs) record(run);
    }

    void Finalize() override {
        if (forward_ != nullptr)
            forward_->Finalize();
        else
            std::fputc('\n', stderr);
    }

    results collected() const {
        results out;
        for (const auto& [name, s] : seen_) {
            if (s.samples.empty() && !s.mean) continue;
            std::vector<double> sorted = s.samples;
            std::sort(sorted.begin(), sorted.end());
            double mean = 0;
            for (const double x : sorted) mean += x;
            if (!sorted.empty()) mean /= static_cast<double>(sorted.size());
            double median = mean;
            if (!sorted.empty()) {
                const std::size_t mid = sorted.size() / 2;
                median = sorted.size() % 2 != 0 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
            }
            std::optional<double> fastest = s.min;
            if (!sorted.empty()) fastest = sorted.front();
            out[name] = result{s.mean.value_or(mean), s.median.value_or(s.mean ? *s.mean : median),
                               fastest, s.counters};
        }
        return out;
    }

private:
    struct seen {
        std::vector<double> samples;  // per repetition, when repetitions are reported
        std::optional<double> mean;   // from the aggregates, when only those are reported
        std::optional<double> median;
        std::optional<double> min;
        benchmark::UserCounters counters;
    };

    static std::string key_of(const Run& run) {
        std::string key = run.run_name.function_name;
        for (const std::string* part : {&run.run_name.args, &run.run_name.threads})
            if (!part->empty()) key += "/" + *part;
        return key;
    }

    void record(const Run& run) {
        if (run.error_occurred) {
            if (forward_ == nullptr)
                fmt::print(stderr, "\n{}: error: {}\n", run.benchmark_name(), run.error_message);
            return;
        }
        const double ns =
            run.GetAdjustedRealTime() * 1e9 / benchmark::GetTimeUnitMultiplier(run.time_unit);
        seen& s = seen_[key_of(run)];
        if (run.run_type == Run::RT_Iteration) {
            s.samples.push_back(ns);
            if (!s.mean) s.counters = run.counters;
        } else if (run.aggregate_name == "mean") {
            s.mean = ns;
            s.counters = run.counters;
        } else if (run.aggregate_name == "median") {
            s.median = ns;
        } else if (run.aggregate_name == "min") {
            s.min = ns;
        }
    }

    BenchmarkReporter* forward_;
    std::map<std::string, seen> seen_;
};

void print_help() {
    benchmark::PrintDefaultHelp();
    std::fputs(
        "          [--summary]  (progress dots instead of per-benchmark lines, then the\n"
        "                        performance-contract table)\n",
        stdout);
}

bool flag_is_set(std::string_view arg, std::string_view name) {
    if (arg.substr(0, name.size()) != name) return false;
    arg.remove_prefix(name.size());
    return arg.empty() || (arg.front() == '=' && arg != "=false" && arg != "=0" && arg != "=no");
}

}  // namespace

int run_benchmarks(int argc, char** argv, const std::function<void(const results&)>& summary) {
    // --summary is ours: take it out before Google Benchmark rejects it as unknown.
    bool summary_mode = false;
    bool listing = false;
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        listing = listing || flag_is_set(arg, "--benchmark_list_tests");
        if (arg == "--summary")
            summary_mode = true;
        else
            argv[kept++] = argv[i];
    }
    argc = kept;
    argv[argc] = nullptr;

    benchmark::Initialize(&argc, argv, print_help);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

    // The library's own display reporter honours --benchmark_format and --benchmark_color; it is
    // a function-local static there, so it is not ours to delete.
    BenchmarkReporter* display = benchmark::CreateDefaultDisplayReporter();
    const bool console = dynamic_cast<benchmark::ConsoleReporter*>(display) != nullptr;
    if (!listing) {
        // Keep a JSON or CSV stdout parseable.
        std::FILE* facts = summary_mode || console ? stdout : stderr;
        print_machine_facts(facts);
        fmt::print(facts, "\n");
        std::fflush(facts);
    }

    recording_reporter recorder(summary_mode ? nullptr : display);
    benchmark::RunSpecifiedBenchmarks(&recorder);
    benchmark::Shutdown();

    if (summary_mode && !listing) {
        const results r = recorder.collected();
        if (r.empty()) {
            fmt::print(stderr, "no benchmark ran; no summary\n");
            return 1;
        }
        summary(r);
    }
    return 0;
}

std::string format_ns(double ns) {
    if (ns < 1e3) return fmt::format("{:.1f} ns", ns);
    if (ns < 1e6) return fmt::format("{:.2f} us", ns / 1e3);
    return fmt::format("{:.2f} ms", ns / 1e6);
}

namespace {

std::string format_ratio(double x) {
    if (x < 10) return fmt::format("{:.2f}x", x);
    if (x < 100) return fmt::format("{:.1f}x", x);
    return fmt::format("{:.0f}x", x);
}

}  // namespace

void summary_table::add(std::string measure, std::optional<double> tessera_ns,
                        std::optional<double> baseline_ns, goal kind, double target) {
    rows_.push_back(row{std::move(measure), tessera_ns, baseline_ns, kind, target});
}

void summary_table::print(std::FILE* out) const {
    using cells = std::array<std::string, 6>;
    std::vector<cells> lines{{"measure", "tessera", "baseline", "ratio", "target", "verdict"}};
    int met = 0;
    int checked = 0;
    for (const row& r : rows_) {
        const auto time = [](std::optional<double> ns) { return ns ? format_ns(*ns) : "n/a"; };
        std::optional<double> ratio;
        if (r.tessera_ns && r.baseline_ns && *r.tessera_ns > 0 && *r.baseline_ns > 0)
            ratio = r.kind == goal::speedup_at_least ? *r.baseline_ns / *r.tessera_ns
                                                     : *r.tessera_ns / *r.baseline_ns;
        std::string target = "-";
        std::optional<bool> pass;
        switch (r.kind) {
            case goal::info:
                break;
            case goal::ratio_at_most:
                target = fmt::format("<= {:g}x", r.target);
                if (ratio) pass = *ratio <= r.target;
                break;
            case goal::speedup_at_least:
                target = fmt::format(">= {:g}x", r.target);
                if (ratio) pass = *ratio >= r.target;
                break;
            case goal::ns_at_most:
                target = fmt::format("<= {:g} ns", r.target);
                if (r.tessera_ns) pass = *r.tessera_ns <= r.target;
                break;
        }
        std::string verdict = "info";
        if (r.kind != goal::info) {
            verdict = !pass ? "n/a" : *pass ? "pass" : "MISS";
            if (pass) {
                ++checked;
                met += *pass ? 1 : 0;
            }
        }
        lines.push_back({r.measure, time(r.tessera_ns), time(r.baseline_ns),
                         ratio ? format_ratio(*ratio) : "-", target, verdict});
    }

    std::array<std::size_t, 6> width{};
    for (const cells& c : lines)
        for (std::size_t i = 0; i < c.size(); ++i) width[i] = std::max(width[i], c[i].size());
    const auto print_line = [&](const cells& c) {
        // The measure is left-aligned, the numbers right-aligned, the verdict left-aligned.
        fmt::print(out, "{:<{}} | {:>{}} | {:>{}} | {:>{}} | {:>{}} | {:<{}}\n", c[0], width[0],
                   c[1], width[1], c[2], width[2], c[3], width[3], c[4], width[4], c[5], width[5]);
    };
    print_line(lines.front());
    std::string rule;
    for (std::size_t i = 0; i < width.size(); ++i)
        rule += std::string(width[i] + (i == 0 || i + 1 == width.size() ? 1 : 2), '-') +
                (i + 1 == width.size() ? "" : "+");
    fmt::print(out, "{}\n", rule);
    for (std::size_t i = 1; i < lines.size(); ++i) print_line(lines[i]);
    fmt::print(out, "\n{} of {} targets met\n", met, checked);
}

}  // namespace tessera_bench
