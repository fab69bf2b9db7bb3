// one_thread_backend: when and why to use a one-thread backend.
//
// A multi-thread backend enters its oneTBB arena once per session: cheap (tens of nanoseconds),
// but not free, and a large op then fans out and wakes the workers. A backend built with
// threads(1) has no arena at all: `run` calls your function inline on your thread, and no oneTBB
// call is made. Use it for tiny, isolated calls on a latency-critical thread (a request handler,
// an audio callback, a control loop), or inside code that is already parallel at a coarser
// level. Use the multi-thread backend when single ops are large enough to split.
//
// This program times a session holding one tiny op (a 4x4 product) on each backend, and
// prints both with the counters that show where the difference comes from.
#include <tessera/tessera.hpp>

#include <chrono>
#include <cstdio>

namespace {

// Nanoseconds per iteration of a loop of `reps` sessions, each doing one 4x4 product.
double ns_per_session(tessera::backend& be, int reps) {
    tessera::tensor<float> a, b, c;
    be.run([&](tessera::session& s) {
        a = tessera::uniform<float>(s, {4, 4}, -1.0f, 1.0f, 1);
        b = tessera::uniform<float>(s, {4, 4}, -1.0f, 1.0f, 2);
        c = tessera::zeros<float>(s, {4, 4});
    });
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) be.run([&](tessera::session& s) { tessera::matmul(s, a, b, c); });
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    return took.count() / reps;
}

}  // namespace

int main() {
    constexpr int reps = 200000;
    tessera::backend pooled{tessera::backend_options{}.with_threads(2)};
    tessera::backend inline_only{tessera::backend_options{}.with_threads(1)};

    // Warm both (first sessions fill the buffer pools), then measure.
    ns_per_session(pooled, 1000);
    ns_per_session(inline_only, 1000);
    const tessera::stats p0 = pooled.stats(), i0 = inline_only.stats();
    const double pooled_ns = ns_per_session(pooled, reps);
    const double inline_ns = ns_per_session(inline_only, reps);
    const tessera::stats p = pooled.stats() - p0, i = inline_only.stats() - i0;

    std::printf("one 4x4 matmul per session, %d sessions each:\n", reps);
    std::printf("  2-thread backend: %7.1f ns per session (arena entries: %llu)\n", pooled_ns,
                static_cast<unsigned long long>(p.arena_entries));
    std::printf("  1-thread backend: %7.1f ns per session (arena entries: %llu, inline entries: %llu)\n",
                inline_ns, static_cast<unsigned long long>(i.arena_entries),
                static_cast<unsigned long long>(i.inline_entries));
    std::printf("Both are far below a thread-pool handoff per call (microseconds). For many tiny\n"
                "ops, open one session around all of them, or use a batched op.\n");
    const bool counts_ok = i.arena_entries == 0 && i.inline_entries == reps + 1 &&
                           p.arena_entries == reps + 1 && p.inline_entries == 0;
    std::printf("counters %s\n", counts_ok ? "as expected" : "UNEXPECTED");
    return counts_ok ? 0 : 1;
}
