// tests/support/messages.hpp - the message of the exception a call throws, for tests that pin
// error text.
#pragma once

#include <exception>
#include <string>
#include <tessera/error.hpp>

namespace tessera::test {

/// Runs `f` and returns the message of the E it throws (any tessera::error unless named), or a
/// marker when it throws nothing or something else, so that a comparison shows what happened.
template <class E = tessera::error, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("<another exception: ") + e.what() + ">";
    }
    return "<no exception>";
}

}  // namespace tessera::test
