// tessera/detail/check.hpp - TESSERA_CHECK (always on) and TESSERA_ASSERT (debug/sanitizer builds).
// Both report through one replaceable out-of-line handler, so the checks themselves stay a compare
// and a cold call: nothing is formatted unless a check fails.
#pragma once

namespace tessera {

/// Signature of the handler called when a TESSERA_CHECK or TESSERA_ASSERT fails.
/// The handler must not return; the default prints the failure to stderr and aborts.
using check_handler = void (*)(const char* file, int line, const char* condition,
                               const char* message);

/// Installs `handler` (nullptr restores the default) and returns the previous one. Thread-safe.
check_handler set_check_handler(check_handler handler) noexcept;

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const char* message) noexcept;
}  // namespace detail
}  // namespace tessera

/// Always-on guard for conditions whose failure would corrupt memory (e.g. a session used from a
/// thread other than its own).
#define TESSERA_CHECK(cond, message)                                                  \
    do {                                                                              \
        if (!(cond)) [[unlikely]]                                                     \
            ::tessera::detail::check_failed(__FILE__, __LINE__, #cond, message);      \
    } while (false)

#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/// 1 when TESSERA_ASSERT checks its condition (NDEBUG undefined, or __SANITIZE_ADDRESS__ or
/// __SANITIZE_THREAD__ defined), else 0; usable in `#if`.
#define TESSERA_ASSERTS_ENABLED 1
/// Debug guard for internal invariants: when TESSERA_ASSERTS_ENABLED is 1 it behaves exactly like
/// TESSERA_CHECK (a failure calls the check handler, which does not return); when it is 0 it
/// expands to nothing and `cond` is not evaluated, so `cond` must have no side effects.
#define TESSERA_ASSERT(cond, message) TESSERA_CHECK(cond, message)
#else
#define TESSERA_ASSERTS_ENABLED 0
#define TESSERA_ASSERT(cond, message) static_cast<void>(0)
#endif
