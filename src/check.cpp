// The replaceable handler behind TESSERA_CHECK and TESSERA_ASSERT.
#include <tessera/detail/check.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace tessera {
namespace {

void default_check_handler(const char* file, int line, const char* condition, const char* message) {
    std::fprintf(stderr, "tessera: check failed at %s:%d: %s\n  %s\n", file, line, condition, message);
    std::fflush(stderr);
    std::abort();
}

std::atomic<check_handler> current_handler{&default_check_handler};

}  // namespace

check_handler set_check_handler(check_handler handler) noexcept {
    return current_handler.exchange(handler != nullptr ? handler : &default_check_handler);
}

namespace detail {

void check_failed(const char* file, int line, const char* condition, const char* message) noexcept {
    current_handler.load()(file, line, condition, message);
    // A handler must not return; if it does, stop here rather than run on corrupted state.
    std::abort();
}

}  // namespace detail
}  // namespace tessera
