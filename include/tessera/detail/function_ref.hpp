// tessera/detail/function_ref.hpp - function_ref, a non-owning reference to a callable. It is how
// the header templates hand work to the compiled runtime (src/runtime.cpp) without the runtime
// being a template: one indirect call, no allocation, no copy of the callable.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace tessera::detail {

template <class Signature>
class function_ref;

/// Refers to a callable of signature R(Args...) that outlives every call made through it (a
/// lambda passed straight to the function that takes the function_ref does).
template <class R, class... Args>
class function_ref<R(Args...)> {
public:
    template <class F>
        requires(!std::same_as<std::remove_cvref_t<F>, function_ref> &&
                 std::is_invocable_r_v<R, std::remove_reference_t<F>&, Args...>)
    function_ref(F&& f) noexcept  // NOLINT(google-explicit-constructor): by design
        : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_(&call<std::remove_reference_t<F>>) {}

    /// Calls the referenced callable.
    R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
    template <class F>
    static R call(void* object, Args... args) {
        return std::invoke(*static_cast<F*>(object), std::forward<Args>(args)...);
    }

    void* object_;
    R (*call_)(void*, Args...);
};

}  // namespace tessera::detail
