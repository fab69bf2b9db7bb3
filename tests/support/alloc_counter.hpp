// Counts heap allocations made anywhere in the test process (all threads), so tests can pin
// "zero allocations in a warm session" exactly.
#pragma once

#include <cstdint>

namespace tessera::test {

/// True when heap_allocations() sees the malloc family (Eigen's aligned buffers, for one) as well
/// as operator new: not under a sanitizer, which owns malloc, so that only operator new is counted.
inline constexpr bool counts_malloc =
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && defined(__GLIBC__)
    true;
#else
    false;
#endif

/// Total heap allocations (malloc family and operator new) since the process started.
std::uint64_t heap_allocations() noexcept;

/// Counts the heap allocations made while it is alive.
class allocation_scope {
public:
    allocation_scope() noexcept : start_(heap_allocations()) {}
    std::uint64_t count() const noexcept { return heap_allocations() - start_; }

private:
    std::uint64_t start_;
};

}  // namespace tessera::test
