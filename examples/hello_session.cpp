// hello_session: build a backend, run a few ops in one session, print the result and the counters.
//
// One backend per application; one `run` around related work. The session enters the backend's
// thread pool once, and every op inside borrows its buffers from the session's workspace.
#include <tessera/tessera.hpp>

#include <cstdio>

int main() {
    // Thread count defaults to the CPU-affinity count (or TESSERA_NUM_THREADS); 2 keeps this
    // example's counters the same on every machine.
    tessera::backend be{tessera::backend_options{}.with_threads(2)};

    const float total = be.run([](tessera::session& s) {
        auto a = tessera::full<float>(s, {2, 3}, 1.5f);
        auto b = tessera::full<float>(s, {2, 3}, 2.0f);
        auto c = tessera::add(s, a, b);  // allocating form: a new tensor from the workspace
        tessera::add(s, c, b, c);        // out-parameter form, in place: never allocates
        float sum = 0;
        for (float v : c.values()) sum += v;
        return sum;  // 6 elements of 1.5 + 2 + 2
    });

    const tessera::stats st = be.stats();
    std::printf("sum = %g\n", static_cast<double>(total));
    std::printf("sessions = %llu, arena entries = %llu, inline dispatches = %llu, pool misses = %llu\n",
                static_cast<unsigned long long>(st.sessions),
                static_cast<unsigned long long>(st.arena_entries),
                static_cast<unsigned long long>(st.inline_dispatches),
                static_cast<unsigned long long>(st.pool_misses));
    return total == 33.0f && st.arena_entries == 1 ? 0 : 1;
}
