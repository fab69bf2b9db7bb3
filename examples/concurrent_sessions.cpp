// concurrent_sessions: a server-style program. Several application threads handle "requests",
// each in a short session on one shared backend.
//
// A backend is thread-safe. Each application thread that opens a session occupies one of the
// arena's session slots while its session is open; size session_slots to the number of threads
// that serve requests, so none of them waits for a slot. Every request here scales a small
// batch of vectors and returns a checksum that the thread checks.
#include <tessera/tessera.hpp>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

int main() {
    constexpr int server_threads = 4;
    constexpr int requests_per_thread = 2000;

    // Two worker threads for the ops, and one reserved slot per request thread.
    tessera::backend be{tessera::backend_options{}.with_threads(2).with_session_slots(server_threads)};

    std::atomic<int> wrong{0};
    std::vector<std::thread> servers;
    for (int t = 0; t < server_threads; ++t) {
        servers.emplace_back([&, t] {
            for (int r = 0; r < requests_per_thread; ++r) {
                const float scale = static_cast<float>(t + 1);
                // One request = one session: enter once, run a few ops, leave.
                const float checksum = be.run([&](tessera::session& s) {
                    auto x = tessera::full<float>(s, {16, 8}, static_cast<float>(r % 7));
                    auto y = tessera::mul(s, x, tessera::full<float>(s, {8}, scale));
                    return tessera::sum(s, y).data()[0];  // a rank-0 tensor
                });
                if (checksum != 128.0f * static_cast<float>(r % 7) * scale) ++wrong;
            }
        });
    }
    for (auto& th : servers) th.join();

    const tessera::stats st = be.stats();
    std::printf("%d threads x %d requests: %llu sessions, %llu open now, %d wrong results\n",
                server_threads, requests_per_thread, static_cast<unsigned long long>(st.sessions),
                static_cast<unsigned long long>(st.open_sessions), wrong.load());
    const bool ok = wrong == 0 && st.open_sessions == 0 &&
                    st.sessions == static_cast<unsigned long long>(server_threads * requests_per_thread);
    return ok ? 0 : 1;
}
