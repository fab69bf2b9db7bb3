// tessera/detail/function_ref.hpp - function_ref, a non-owning reference to a callable. It is how
// the header templates hand work to the compiled runtime (src/runtime.cpp) without the runtime
// being a template: one indirect call, no allocation, no copy of the callable.
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

// GCC, Clang and MSVC provide __builtin_addressof, of which their std::addressof is made; naming
// std::addressof would take <memory>, ~0.5 s of compile time for every includer of session.hpp.
#if !defined(__GNUC__) && !defined(__clang__) && !defined(_MSC_VER)
#include <memory>
#endif

namespace tessera::detail {

/// Returns the address of `x`, even if its type overloads unary operator&: std::addressof.
template <class T>
constexpr T* address_of(T& x) noexcept {
#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
    return __builtin_addressof(x);
#else
    return std::addressof(x);
#endif
}

template <class Signature>
class function_ref;

/// Refers to a callable of signature R(Args...) that outlives every call made through it (a
/// lambda passed straight to the function that takes the function_ref does). Pointers to members
/// are not callables here: the call is a plain call expression, not std::invoke.
template <class R, class... Args>
class function_ref<R(Args...)> {
public:
    template <class F>
        requires(!std::same_as<std::remove_cvref_t<F>, function_ref> &&
                 !std::is_member_pointer_v<std::remove_cvref_t<F>> &&
                 std::is_invocable_r_v<R, std::remove_reference_t<F>&, Args...>)
    function_ref(F&& f) noexcept  // NOLINT(google-explicit-constructor): by design
        : object_(const_cast<void*>(static_cast<const void*>(address_of(f)))),
          call_(&call<std::remove_reference_t<F>>) {}

    /// Calls the referenced callable.
    R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
    template <class F>
    static R call(void* object, Args... args) {
        if constexpr (std::is_void_v<R>)
            static_cast<void>((*static_cast<F*>(object))(std::forward<Args>(args)...));
        else
            return (*static_cast<F*>(object))(std::forward<Args>(args)...);
    }

    void* object_;
    R (*call_)(void*, Args...);
};

}  // namespace tessera::detail
