// A consumer of tessera built with plain g++ and pkg-config: one session, two fills and an add.
#include <tessera/tessera.hpp>
#include <cstdio>
int main() {
  tessera::backend be{tessera::backend_options{}.with_threads(2)};
  float sum = be.run([](tessera::session& s) {
    auto a = tessera::full<float>(s, {4}, 1.5f);
    auto b = tessera::full<float>(s, {4}, 2.0f);
    auto c = tessera::add(s, a, b);
    float acc = 0; for (float v : c.values()) acc += v; return acc;
  });
  std::printf("consumer: sum=%g arena_entries=%llu\n", sum, (unsigned long long)be.stats().arena_entries);
  return sum == 14.0f && be.stats().arena_entries == 1 ? 0 : 1;
}
