// tessera/ops/elementwise.hpp - elementwise ops with NumPy broadcasting: arithmetic, comparisons,
// where, unary math, and map/zip for user lambdas.
//
// Each op is a function object with two forms:
//   tessera::add(s, a, b)             allocating: returns a new tensor from the session's workspace
//   tessera::add(s, a, b, out)        out-parameter: writes into `out`, never allocates
// In place is the out form with an input as `out`: tessera::add(s, a, b, a) computes a = a + b.
// Inputs are tensors or views of the same element type; every check (broadcast, out shape, partial
// overlap of `out` with an input) happens before anything is written. Comparisons return
// tensor<bool> masks.
#pragma once

#include <tessera/detail/elementwise.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <cmath>
#include <complex>
#include <concepts>
#include <tuple>
#include <type_traits>

namespace tessera {

namespace detail {

/// A binary elementwise op: `Fn` is the scalar kernel, `Accepts` the element types it takes.
template <class Fn, template <class> class Accepts, cost C = cost::cheap>
struct binary_op {
    const char* name;

    /// Returns op(a, b) over the NumPy broadcast of `a` and `b` as a new tensor from the session's
    /// workspace. Throws shape_error if the shapes do not broadcast, allocation_error if the
    /// result cannot be allocated. Call on the session's own thread (checked).
    template <tensor_like A, tensor_like B, class T = value_of_t<A>>
        requires std::same_as<T, value_of_t<B>> && Accepts<T>::value
    auto operator()(session& s, const A& a, const B& b) const {
        using R = std::invoke_result_t<Fn, T, T>;
        return elementwise_new<R>(s, name, C, Fn{}, as_view(a), as_view(b));
    }
    /// Writes op(a, b) into `out`; never allocates. Throws shape_error if the shapes do not
    /// broadcast or `out`'s shape is not exactly their broadcast, alias_error if `out` repeats
    /// elements (a stride-0 axis) or overlaps an input without being the very same elements.
    /// Every check happens before anything is written. Call on the session's own thread (checked).
    template <tensor_like A, tensor_like B, class T = value_of_t<A>>
        requires std::same_as<T, value_of_t<B>> && Accepts<T>::value
    void operator()(session& s, const A& a, const B& b,
                    const tensor_view<std::invoke_result_t<Fn, T, T>>& out) const {
        elementwise_into(s, name, C, Fn{}, out, as_view(a), as_view(b));
    }
};

/// A unary elementwise op.
template <class Fn, template <class> class Accepts, cost C = cost::cheap>
struct unary_op {
    const char* name;

    /// Returns op(a) as a new tensor of `a`'s shape from the session's workspace; throws
    /// allocation_error if it cannot be allocated. Call on the session's own thread (checked).
    template <tensor_like A, class T = value_of_t<A>>
        requires Accepts<T>::value
    auto operator()(session& s, const A& a) const {
        using R = std::invoke_result_t<Fn, T>;
        return elementwise_new<R>(s, name, C, Fn{}, as_view(a));
    }
    /// Writes op(a) into `out`; never allocates. Throws shape_error if `out`'s shape differs from
    /// `a`'s, alias_error if `out` repeats elements (a stride-0 axis) or overlaps `a` without being
    /// the very same elements; checks come before any write. Call on the session's own thread.
    template <tensor_like A, class T = value_of_t<A>>
        requires Accepts<T>::value
    void operator()(session& s, const A& a,
                    const tensor_view<std::invoke_result_t<Fn, T>>& out) const {
        elementwise_into(s, name, C, Fn{}, out, as_view(a));
    }
};

template <class T> struct is_numeric : std::bool_constant<numeric<T>> {};
template <class T> struct is_real_numeric : std::bool_constant<real_numeric<T>> {};
template <class T> struct is_floating : std::bool_constant<floating<T>> {};
template <class T> struct is_real_floating : std::bool_constant<real_floating<T>> {};
template <class T> struct is_complex_numeric : std::bool_constant<complex_numeric<T>> {};
template <class T> struct is_signed_numeric
    : std::bool_constant<numeric<T> && !std::is_unsigned_v<T>> {};

struct add_fn { template <class T> T operator()(T x, T y) const { return x + y; } };
struct sub_fn { template <class T> T operator()(T x, T y) const { return x - y; } };
struct mul_fn { template <class T> T operator()(T x, T y) const { return x * y; } };
struct div_fn { template <class T> T operator()(T x, T y) const { return x / y; } };
// NumPy's rules: maximum/minimum propagate a NaN from either side (a's NaN when both are: every
// comparison with a NaN `x` is false); fmax/fmin return the other operand when exactly one is NaN
// (a's NaN when both are). A tie (0.0 and -0.0 included) gives x. Branch-free selects, so loops
// vectorise (`y != y` and `x == x` are NaN tests that fold away for integers).
struct maximum_fn {
    template <class T>
    constexpr T operator()(T x, T y) const noexcept {
        return (x < y) | ((y != y) & (x == x)) ? y : x;
    }
};
struct minimum_fn {
    template <class T>
    constexpr T operator()(T x, T y) const noexcept {
        return (y < x) | ((y != y) & (x == x)) ? y : x;
    }
};
struct fmax_fn {
    template <class T>
    constexpr T operator()(T x, T y) const noexcept {
        return (x < y) | ((x != x) & (y == y)) ? y : x;
    }
};
struct fmin_fn {
    template <class T>
    constexpr T operator()(T x, T y) const noexcept {
        return (y < x) | ((x != x) & (y == y)) ? y : x;
    }
};
struct pow_fn {
    template <class T>
    T operator()(T x, T y) const {
        if constexpr (std::is_integral_v<T>) {
            // Exponentiation by squaring; negative exponents give 0 except for bases 1 and -1.
            if (y < 0) return x == 1 ? T{1} : (x == -1 ? ((y & 1) ? T{-1} : T{1}) : T{0});
            // Square only while exponent bits remain, so no intermediate exceeds the result.
            T result{1};
            for (;;) {
                if (y & 1) result *= x;
                y >>= 1;
                if (y == 0) return result;
                x *= x;
            }
        } else {
            return std::pow(x, y);
        }
    }
};
struct equal_fn { template <class T> bool operator()(T x, T y) const { return x == y; } };
struct not_equal_fn { template <class T> bool operator()(T x, T y) const { return x != y; } };
struct less_fn { template <class T> bool operator()(T x, T y) const { return x < y; } };
struct less_equal_fn { template <class T> bool operator()(T x, T y) const { return x <= y; } };
struct greater_fn { template <class T> bool operator()(T x, T y) const { return x > y; } };
struct greater_equal_fn { template <class T> bool operator()(T x, T y) const { return x >= y; } };

struct neg_fn { template <class T> T operator()(T x) const { return -x; } };
struct abs_fn {
    template <class T>
    real_type_t<T> operator()(T x) const {
        // std::abs clears the sign bit of a float, so abs(-0.0) is +0.0 (a compare-and-negate
        // would keep -0.0); integers keep the compare.
        if constexpr (is_complex_v<T> || std::is_floating_point_v<T>) return std::abs(x);
        else return x < T{0} ? -x : x;
    }
};
struct square_fn { template <class T> T operator()(T x) const { return x * x; } };
struct relu_fn { template <class T> T operator()(T x) const { return x < T{0} ? T{0} : x; } };
struct exp_fn { template <class T> T operator()(T x) const { using std::exp; return exp(x); } };
struct log_fn { template <class T> T operator()(T x) const { using std::log; return log(x); } };
struct sqrt_fn { template <class T> T operator()(T x) const { using std::sqrt; return sqrt(x); } };
struct rsqrt_fn {
    template <class T> T operator()(T x) const { using std::sqrt; return T{1} / sqrt(x); }
};
struct sin_fn { template <class T> T operator()(T x) const { using std::sin; return sin(x); } };
struct cos_fn { template <class T> T operator()(T x) const { using std::cos; return cos(x); } };
struct tanh_fn { template <class T> T operator()(T x) const { using std::tanh; return tanh(x); } };
struct sigmoid_fn {
    template <class T>
    T operator()(T x) const {
        using std::exp;
        return T{1} / (T{1} + exp(-x));
    }
};
struct conj_fn {
    template <class T>
    T operator()(T x) const {
        if constexpr (is_complex_v<T>) return std::conj(x);
        else return x;
    }
};
struct real_fn { template <class T> real_type_t<T> operator()(T x) const { return std::real(x); } };
struct imag_fn { template <class T> real_type_t<T> operator()(T x) const { return std::imag(x); } };

}  // namespace detail

/// a + b, elementwise with broadcasting (numeric types).
inline constexpr detail::binary_op<detail::add_fn, detail::is_numeric> add{"add"};
/// a - b (numeric types).
inline constexpr detail::binary_op<detail::sub_fn, detail::is_numeric> sub{"sub"};
/// a * b (numeric types).
inline constexpr detail::binary_op<detail::mul_fn, detail::is_numeric> mul{"mul"};
/// a / b (numeric types; integer division truncates, and dividing by an integer 0 is undefined).
inline constexpr detail::binary_op<detail::div_fn, detail::is_numeric> div{"div"};
/// The larger of a and b (real types), as NumPy's `maximum`: a NaN in either operand gives NaN
/// (the NaN of `a` when both are), and a tie (0.0 and -0.0 included) gives a.
inline constexpr detail::binary_op<detail::maximum_fn, detail::is_real_numeric> maximum{"maximum"};
/// The smaller of a and b (real types), as NumPy's `minimum`: a NaN in either operand gives NaN
/// (the NaN of `a` when both are), and a tie (0.0 and -0.0 included) gives a.
inline constexpr detail::binary_op<detail::minimum_fn, detail::is_real_numeric> minimum{"minimum"};
/// The larger of a and b ignoring NaN (real types), as NumPy's `fmax`: where one operand is NaN
/// the other is returned, a's NaN where both are; a tie gives a.
inline constexpr detail::binary_op<detail::fmax_fn, detail::is_real_numeric> fmax{"fmax"};
/// The smaller of a and b ignoring NaN (real types), as NumPy's `fmin`.
inline constexpr detail::binary_op<detail::fmin_fn, detail::is_real_numeric> fmin{"fmin"};
/// a raised to b (numeric types; integers by repeated squaring).
inline constexpr detail::binary_op<detail::pow_fn, detail::is_numeric, detail::cost::transcendental>
    pow{"pow"};
/// a == b as a tensor<bool> mask.
inline constexpr detail::binary_op<detail::equal_fn, detail::is_numeric> equal{"equal"};
/// a != b as a mask.
inline constexpr detail::binary_op<detail::not_equal_fn, detail::is_numeric> not_equal{"not_equal"};
/// a < b as a mask (real types).
inline constexpr detail::binary_op<detail::less_fn, detail::is_real_numeric> less{"less"};
/// a <= b as a mask (real types).
inline constexpr detail::binary_op<detail::less_equal_fn, detail::is_real_numeric> less_equal{
    "less_equal"};
/// a > b as a mask (real types).
inline constexpr detail::binary_op<detail::greater_fn, detail::is_real_numeric> greater{"greater"};
/// a >= b as a mask (real types).
inline constexpr detail::binary_op<detail::greater_equal_fn, detail::is_real_numeric> greater_equal{
    "greater_equal"};

/// -a (numeric types).
inline constexpr detail::unary_op<detail::neg_fn, detail::is_numeric> neg{"neg"};
/// |a|; for complex input the result is real.
inline constexpr detail::unary_op<detail::abs_fn, detail::is_numeric> abs{"abs"};
/// a * a.
inline constexpr detail::unary_op<detail::square_fn, detail::is_numeric> square{"square"};
/// max(a, 0) (real types).
inline constexpr detail::unary_op<detail::relu_fn, detail::is_real_numeric> relu{"relu"};
/// e^a (floating types).
inline constexpr detail::unary_op<detail::exp_fn, detail::is_floating, detail::cost::transcendental>
    exp{"exp"};
/// Natural logarithm (floating types).
inline constexpr detail::unary_op<detail::log_fn, detail::is_floating, detail::cost::transcendental>
    log{"log"};
/// Square root (floating types).
inline constexpr detail::unary_op<detail::sqrt_fn, detail::is_floating,
                                  detail::cost::transcendental>
    sqrt{"sqrt"};
/// 1 / sqrt(a) (floating types).
inline constexpr detail::unary_op<detail::rsqrt_fn, detail::is_floating,
                                  detail::cost::transcendental>
    rsqrt{"rsqrt"};
/// Sine (floating types).
inline constexpr detail::unary_op<detail::sin_fn, detail::is_floating, detail::cost::transcendental>
    sin{"sin"};
/// Cosine (floating types).
inline constexpr detail::unary_op<detail::cos_fn, detail::is_floating, detail::cost::transcendental>
    cos{"cos"};
/// Hyperbolic tangent (floating types).
inline constexpr detail::unary_op<detail::tanh_fn, detail::is_floating,
                                  detail::cost::transcendental>
    tanh{"tanh"};
/// 1 / (1 + e^-a) (floating types).
inline constexpr detail::unary_op<detail::sigmoid_fn, detail::is_floating,
                                  detail::cost::transcendental>
    sigmoid{"sigmoid"};
/// Complex conjugate (identity for real types).
inline constexpr detail::unary_op<detail::conj_fn, detail::is_numeric> conj{"conj"};
/// Real part of a complex tensor, as a real tensor.
inline constexpr detail::unary_op<detail::real_fn, detail::is_complex_numeric> real{"real"};
/// Imaginary part of a complex tensor, as a real tensor.
inline constexpr detail::unary_op<detail::imag_fn, detail::is_complex_numeric> imag{"imag"};

namespace detail {
// minimum(maximum(x, low), high), exactly as documented, also when low > high or a bound is NaN.
template <class T>
constexpr T clamp_value(T x, T low, T high) noexcept {
    return minimum_fn{}(maximum_fn{}(x, low), high);
}
}  // namespace detail

/// Returns min(max(a, low), high) elementwise (real types); allocating form.
template <tensor_like A, class T = value_of_t<A>>
    requires real_numeric<T>
tensor<T> clamp(session& s, const A& a, T low, T high) {
    return detail::elementwise_new<T>(
        s, "clamp", detail::cost::cheap,
        [low, high](T x) { return detail::clamp_value(x, low, high); }, as_view(a));
}
/// Writes min(max(a, low), high) into `out` (real types); never allocates.
template <tensor_like A, class T = value_of_t<A>>
    requires real_numeric<T>
void clamp(session& s, const A& a, T low, T high, const tensor_view<T>& out) {
    detail::elementwise_into(
        s, "clamp", detail::cost::cheap,
        [low, high](T x) { return detail::clamp_value(x, low, high); }, out, as_view(a));
}

/// Returns mask ? a : b elementwise, all three broadcast together.
template <tensor_like M, tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<value_of_t<M>, bool> && std::same_as<T, value_of_t<B>> && element<T>
tensor<T> where(session& s, const M& mask, const A& a, const B& b) {
    return detail::elementwise_new<T>(
        s, "where", detail::cost::cheap, [](bool m, T x, T y) { return m ? x : y; }, as_view(mask),
        as_view(a), as_view(b));
}
/// Writes mask ? a : b into `out`; never allocates.
template <tensor_like M, tensor_like A, tensor_like B, class T = value_of_t<A>>
    requires std::same_as<value_of_t<M>, bool> && std::same_as<T, value_of_t<B>> && element<T>
void where(session& s, const M& mask, const A& a, const B& b, const tensor_view<T>& out) {
    detail::elementwise_into(
        s, "where", detail::cost::cheap, [](bool m, T x, T y) { return m ? x : y; }, out,
        as_view(mask), as_view(a), as_view(b));
}

/// Returns f(a) elementwise; the result's element type is f's return type. `f` runs on the
/// arena's threads when the op is large, so it must be safe to call concurrently. A fused kernel
/// written as one lambda runs at the speed of a built-in op.
template <class F, tensor_like A, class T = value_of_t<A>, class R = std::invoke_result_t<F&, T>>
    requires element<R>
tensor<R> map(session& s, F f, const A& a) {
    return detail::elementwise_new<R>(s, "map", detail::cost::cheap, f, as_view(a));
}
/// Writes f(a) into `out`; never allocates. Same checks as the built-in ops' out forms.
template <class F, tensor_like A, class T = value_of_t<A>, class R = std::invoke_result_t<F&, T>>
    requires element<R>
void map(session& s, F f, const A& a, const std::type_identity_t<tensor_view<R>>& out) {
    detail::elementwise_into(s, "map", detail::cost::cheap, f, out, as_view(a));
}

/// Returns f(a, b, ...) elementwise over broadcast inputs of any element types.
template <class F, tensor_like... In,
          class R = std::invoke_result_t<F&, value_of_t<In>...>>
    requires(sizeof...(In) >= 1) && element<R>
tensor<R> zip(session& s, F f, const In&... in) {
    return detail::elementwise_new<R>(s, "zip", detail::cost::cheap, f, as_view(in)...);
}
/// Writes f(a, b, ...) into `out`; never allocates. The inputs come as one tuple, so that `out`
/// stays last and cannot be mistaken for an input: `tessera::zip(s, f, std::tie(a, b), out)`.
template <class F, class... In, class R = std::invoke_result_t<F&, value_of_t<In>...>>
    requires(sizeof...(In) >= 1) && (tensor_like<In> && ...) && element<R>
void zip(session& s, F f, const std::tuple<In...>& in,
         const std::type_identity_t<tensor_view<R>>& out) {
    std::apply(
        [&](const auto&... operand) {
            detail::elementwise_into(s, "zip", detail::cost::cheap, f, out, as_view(operand)...);
        },
        in);
}

}  // namespace tessera
