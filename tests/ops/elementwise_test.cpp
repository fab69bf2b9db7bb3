// Elementwise ops (ops/elementwise.hpp and the engine in detail/elementwise.hpp): every op in every
// form against a wide reference computed here with plain loops on fresh random inputs, for each
// element type it accepts; broadcasting and layout edge cases; validation before any write;
// pinned dispatch, pool and heap-allocation counts; and the element types each op rejects at
// compile time. A failure prints the seed; TESSERA_TEST_SEED=<seed> replays it.
#include "support/alloc_counter.hpp"
#include "support/backends.hpp"
#include "support/random.hpp"

#include <tessera/backend.hpp>
#include <tessera/error.hpp>
#include <tessera/ops/elementwise.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/stats.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;
using tessera::test::fresh_seed;
using cf = std::complex<float>;
using cd = std::complex<double>;
using i32 = std::int32_t;
using i64 = std::int64_t;
using index_array = std::array<std::size_t, tessera::max_rank>;

// ---------------------------------------------------------------------------------------------
// Test-side type facts, written independently of dtype.hpp so the acceptance checks below compare
// the header against this file rather than against itself.

template <class T, class... U>
inline constexpr bool one_of = (std::is_same_v<T, U> || ...);
template <class T>
inline constexpr bool is_cplx = one_of<T, cf, cd, std::complex<long double>>;

template <class T>
struct real_of {
    using type = T;
};
template <class T>
struct real_of<std::complex<T>> {
    using type = T;
};
template <class T>
using real_of_t = typename real_of<T>::type;

struct accepts_numeric {
    template <class T>
    static constexpr bool value = one_of<T, float, double, cf, cd, i32, i64>;
};
struct accepts_real {
    template <class T>
    static constexpr bool value = one_of<T, float, double, i32, i64>;
};
struct accepts_floating {
    template <class T>
    static constexpr bool value = one_of<T, float, double, cf, cd>;
};
struct accepts_complex {
    template <class T>
    static constexpr bool value = one_of<T, cf, cd>;
};

// The reference computes in a wider type: float in double, double in long double, integers in
// int64 (exact for the input ranges drawn below).
template <class T>
struct wide {
    using type = T;
};
template <>
struct wide<float> {
    using type = double;
};
template <>
struct wide<double> {
    using type = long double;
};
template <>
struct wide<cf> {
    using type = std::complex<double>;
};
template <>
struct wide<cd> {
    using type = std::complex<long double>;
};
template <>
struct wide<i32> {
    using type = i64;
};
template <class T>
using wide_t = typename wide<T>::type;

template <class W, class T>
W widen_to(T x) {
    if constexpr (is_cplx<T>) {
        using R = real_of_t<W>;
        return W(static_cast<R>(x.real()), static_cast<R>(x.imag()));
    } else {
        return static_cast<W>(x);
    }
}
template <class T>
wide_t<T> widen(T x) {
    return widen_to<wide_t<T>>(x);
}

// The element type an op on T should return, given the type its wide reference returns: masks
// stay bool, a real result of a complex input is the real type, anything else is T.
template <class T, class WR>
using narrow_t =
    std::conditional_t<std::is_same_v<WR, bool>, bool,
                       std::conditional_t<is_cplx<T> && !is_cplx<WR>, real_of_t<T>, T>>;

template <class T>
std::string type_name() {
    if constexpr (std::is_same_v<T, float>)
        return "float";
    else if constexpr (std::is_same_v<T, double>)
        return "double";
    else if constexpr (std::is_same_v<T, cf>)
        return "complexfloat";
    else if constexpr (std::is_same_v<T, cd>)
        return "complexdouble";
    else if constexpr (std::is_same_v<T, i32>)
        return "int32";
    else if constexpr (std::is_same_v<T, i64>)
        return "int64";
    else
        return "bool";
}
struct type_names {
    template <class T>
    static std::string GetName(int) {
        return type_name<T>();
    }
};

// ---------------------------------------------------------------------------------------------
// Seeds, random values, index loops.

std::string seed_text(std::uint64_t seed) {
    return "seed " + std::to_string(seed) +
           " (replay with TESSERA_TEST_SEED=" + std::to_string(seed) + ")";
}

std::string text(const shape& s) {
    std::string t = "[";
    for (std::size_t i = 0; i < s.rank(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
    return t + "]";
}

/// Input value ranges, chosen per op so that results are finite and exact where they must be.
enum class domain { any, ties, positive, nonzero, small, pow_base, pow_exponent };

template <class R>
R draw_real(domain d, std::mt19937_64& rng) {
    auto uniform = [&](double lo, double hi) {
        return static_cast<R>(std::uniform_real_distribution<double>(lo, hi)(rng));
    };
    auto integer = [&](long long lo, long long hi) {
        return static_cast<R>(std::uniform_int_distribution<long long>(lo, hi)(rng));
    };
    if constexpr (std::is_integral_v<R>) {
        constexpr bool is64 = sizeof(R) == 8;
        switch (d) {
            case domain::ties:
                return integer(-3, 3);
            case domain::nonzero: {
                const R v = integer(1, 50);
                return (rng() & 1) ? v : static_cast<R>(-v);
            }
            // Exponents below 8 with |base| <= 12 (int32) or 200 (int64) keep even base^8 inside
            // the type, so no squaring order can overflow; PowTest covers the tight cases.
            case domain::pow_base:
                return is64 ? integer(-200, 200) : integer(-12, 12);
            case domain::pow_exponent:
                return integer(-3, 7);
            default:
                return is64 ? integer(-1'000'000'000, 1'000'000'000) : integer(-1000, 1000);
        }
    } else {
        switch (d) {
            case domain::ties:
                return integer(-3, 3);
            case domain::positive:
                return uniform(0.1, 10.0);
            case domain::nonzero: {
                const R v = uniform(0.5, 10.0);
                return (rng() & 1) ? v : -v;
            }
            case domain::small:
                return uniform(-4.0, 4.0);
            case domain::pow_base:
                return uniform(0.25, 4.0);
            case domain::pow_exponent:
                return uniform(-3.0, 3.0);
            default:
                return uniform(-10.0, 10.0);
        }
    }
}

template <class T>
T draw(domain d, std::mt19937_64& rng) {
    if constexpr (std::is_same_v<T, bool>) {
        return (rng() & 1) != 0;
    } else if constexpr (is_cplx<T>) {
        using R = real_of_t<T>;
        auto uniform = [&](double lo, double hi) {
            return static_cast<R>(std::uniform_real_distribution<double>(lo, hi)(rng));
        };
        switch (d) {
            case domain::ties:
                return T(draw_real<R>(domain::ties, rng), draw_real<R>(domain::ties, rng));
            case domain::positive:
                return T(uniform(0.1, 10.0), uniform(-10.0, 10.0));
            case domain::nonzero: {
                const double radius = std::uniform_real_distribution<double>(0.5, 10.0)(rng);
                const double angle = std::uniform_real_distribution<double>(-3.14, 3.14)(rng);
                return T(static_cast<R>(radius * std::cos(angle)),
                         static_cast<R>(radius * std::sin(angle)));
            }
            // Imaginary parts within [-1, 1] keep tanh and sigmoid away from their poles.
            case domain::small:
                return T(uniform(-3.0, 3.0), uniform(-1.0, 1.0));
            case domain::pow_base:
                return T(uniform(0.25, 4.0), uniform(-1.0, 1.0));
            case domain::pow_exponent:
                return T(uniform(-2.0, 2.0), uniform(-1.0, 1.0));
            default:
                return T(uniform(-10.0, 10.0), uniform(-10.0, 10.0));
        }
    } else {
        return draw_real<T>(d, rng);
    }
}

/// Calls f(index) for every multi-index of `s` in row-major order (nothing for an empty shape).
template <class F>
void for_each_index(const shape& s, F&& f) {
    index_array index{};
    for (std::size_t k = 0, n = s.count(); k < n; ++k) {
        f(static_cast<const index_array&>(index));
        for (std::size_t a = s.rank(); a-- > 0;) {
            if (++index[a] < s[a]) break;
            index[a] = 0;
        }
    }
}

/// The element of `v` that NumPy broadcasting pairs with `index` of a result of rank `rank`.
template <class T>
T& at(const tensor_view<T>& v, const index_array& index, std::size_t rank) {
    const std::size_t lead = rank - v.rank();
    std::ptrdiff_t offset = 0;
    for (std::size_t i = 0; i < v.rank(); ++i)
        if (v.extent(i) != 1) offset += static_cast<std::ptrdiff_t>(index[lead + i]) * v.stride(i);
    return v.data()[offset];
}

/// NumPy's broadcast of two shapes that are known to broadcast.
shape broadcast_shapes(const shape& a, const shape& b) {
    const std::size_t rank = std::max(a.rank(), b.rank());
    std::vector<std::size_t> dims(rank);
    for (std::size_t i = 0; i < rank; ++i) {
        const std::size_t x = i + a.rank() < rank ? 1 : a[i + a.rank() - rank];
        const std::size_t y = i + b.rank() < rank ? 1 : b[i + b.rank() - rank];
        dims[i] = x == 1 ? y : x;
    }
    return shape(std::span<const std::size_t>(dims));
}

template <class T>
tensor<T> random_tensor(session& s, const shape& sh, domain d, std::mt19937_64& rng) {
    auto t = tessera::empty<T>(s, sh);
    for (T& v : t.values()) v = draw<T>(d, rng);
    return t;
}

template <class T>
T sentinel() {
    if constexpr (std::is_same_v<T, bool>)
        return true;
    else
        return T(-77);
}

template <class T>
tensor<T> filled(session& s, const shape& sh, T value = sentinel<T>()) {
    auto t = tessera::empty<T>(s, sh);
    for (T& v : t.values()) v = value;
    return t;
}

template <class T>
tensor<T> copy_of(session& s, const tensor<T>& t) {
    auto c = tessera::empty<T>(s, t.shape());
    std::copy(t.values().begin(), t.values().end(), c.values().begin());
    return c;
}

template <class T>
std::vector<T> snapshot(const tensor<T>& t) {
    return std::vector<T>(t.values().begin(), t.values().end());
}
template <class T>
bool unchanged(const tensor<T>& t, const std::vector<T>& before) {
    return std::equal(t.values().begin(), t.values().end(), before.begin(), before.end());
}

/// Evaluates `f` over the broadcast of the inputs with this file's own indexing.
template <class F, class... V>
auto reference_of(const shape& result, F f, const tensor_view<V>&... in) {
    using WR = std::invoke_result_t<F&, V&...>;
    std::vector<WR> want;
    want.reserve(result.count());
    for_each_index(result, [&](const index_array& index) {
        want.push_back(f(at(in, index, result.rank())...));
    });
    return want;
}

// ---------------------------------------------------------------------------------------------
// Comparison with a tolerance relative to the magnitude of the expected value.

enum class kind { exact, rounded, transcendental, power };

struct tolerance {
    long double ulps = 0;   // 0: bit-exact
    long double floor = 0;  // magnitudes below this are scaled as if they were this
};

template <class T>
tolerance tolerance_for(kind k) {
    constexpr bool c = is_cplx<T>;
    switch (k) {
        case kind::exact:
            return {0, 0};
        case kind::rounded:
            return {c ? 16.0L : 4.0L, 0};
        // Complex functions lose relative accuracy near their zeros (log near 1), so their
        // error is measured against max(|want|, 1).
        case kind::transcendental:
            return {c ? 32.0L : 8.0L, c ? 1.0L : 0};
        // Complex pow is exp(y log x): the error of y log x is amplified by |y log x|.
        case kind::power:
            return {c ? 256.0L : 8.0L, c ? 1.0L : 0};
    }
    return {};
}

template <class R, class WR>
bool close(R got, const WR& want, tolerance tol) {
    if constexpr (std::is_same_v<R, bool> || std::is_integral_v<R>) {
        return static_cast<WR>(got) == want;
    } else {
        const WR g = widen_to<WR>(got);
        if (tol.ulps == 0) return g == want;
        using std::abs;
        const auto err = static_cast<long double>(abs(g - want));
        const long double scale = std::max(static_cast<long double>(abs(want)), tol.floor);
        const auto eps = static_cast<long double>(std::numeric_limits<real_of_t<R>>::epsilon());
        return err <= tol.ulps * eps * scale;
    }
}

/// Checks every element of `got` (walked in row-major order) against `want`.
template <class R, class WR>
::testing::AssertionResult matches(const tensor_view<R>& got, const std::vector<WR>& want,
                                   tolerance tol) {
    if (got.size() != want.size())
        return ::testing::AssertionFailure()
               << "got " << got.size() << " elements, want " << want.size();
    std::size_t k = 0, bad = 0;
    std::ostringstream first;
    for_each_index(got.shape(), [&](const index_array& index) {
        const R g = at(got, index, got.rank());
        const WR w = want[k];
        if (!close(g, w, tol) && bad++ == 0)
            first << std::setprecision(21) << "flat index " << k << ": got " << g << ", want " << w;
        ++k;
    });
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << bad << " of " << want.size() << " elements differ; first at " << first.str();
}

::testing::AssertionResult same_shape(const shape& got, const shape& want) {
    if (got == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "shape " << text(got) << ", want " << text(want);
}

/// Runs `f` and returns the message of the E it throws, or a marker when it throws nothing or
/// something else.
template <class E, class F>
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

// ---------------------------------------------------------------------------------------------
// The op tables: each row names an op, its reference, the element types it must accept, the input
// ranges, the tolerance class, and whether the engine counts it as transcendental (grain / 8).

enum class work { cheap, transcendental };

template <class Op, class Ref, class Accepts>
struct binary_case {
    using accepts_type = Accepts;
    Op op;
    const char* name;
    Ref ref;
    Accepts accepts;
    domain lhs;
    domain rhs;
    kind tol;
    work cost;
};

template <class Op, class Ref, class Accepts>
struct unary_case {
    using accepts_type = Accepts;
    Op op;
    const char* name;
    Ref ref;
    Accepts accepts;
    domain in;
    kind tol;
    work cost;
};

// Integer pow as documented: repeated multiplication; a negative exponent gives 0 except for bases
// 1 and -1.
struct reference_pow {
    template <class W>
    W operator()(W x, W y) const {
        if constexpr (std::is_integral_v<W>) {
            if (y < 0) return x == 1 ? W{1} : (x == -1 ? (y % 2 == 0 ? W{1} : W{-1}) : W{0});
            W r{1};
            for (W k = 0; k < y; ++k) r *= x;
            return r;
        } else {
            using std::pow;
            return pow(x, y);
        }
    }
};

constexpr std::tuple binary_cases{
    binary_case{tessera::add, "add", [](auto x, auto y) { return x + y; }, accepts_numeric{},
                domain::any, domain::any, kind::rounded, work::cheap},
    binary_case{tessera::sub, "sub", [](auto x, auto y) { return x - y; }, accepts_numeric{},
                domain::any, domain::any, kind::rounded, work::cheap},
    binary_case{tessera::mul, "mul", [](auto x, auto y) { return x * y; }, accepts_numeric{},
                domain::any, domain::any, kind::rounded, work::cheap},
    binary_case{tessera::div, "div", [](auto x, auto y) { return x / y; }, accepts_numeric{},
                domain::any, domain::nonzero, kind::rounded, work::cheap},
    binary_case{tessera::maximum, "maximum", [](auto x, auto y) { return std::max(x, y); },
                accepts_real{}, domain::ties, domain::any, kind::exact, work::cheap},
    binary_case{tessera::minimum, "minimum", [](auto x, auto y) { return std::min(x, y); },
                accepts_real{}, domain::ties, domain::any, kind::exact, work::cheap},
    binary_case{tessera::pow, "pow", reference_pow{}, accepts_numeric{}, domain::pow_base,
                domain::pow_exponent, kind::power, work::transcendental},
    binary_case{tessera::equal, "equal", [](auto x, auto y) { return x == y; }, accepts_numeric{},
                domain::ties, domain::ties, kind::exact, work::cheap},
    binary_case{tessera::not_equal, "not_equal", [](auto x, auto y) { return x != y; },
                accepts_numeric{}, domain::ties, domain::ties, kind::exact, work::cheap},
    binary_case{tessera::less, "less", [](auto x, auto y) { return x < y; }, accepts_real{},
                domain::ties, domain::ties, kind::exact, work::cheap},
    binary_case{tessera::less_equal, "less_equal", [](auto x, auto y) { return x <= y; },
                accepts_real{}, domain::ties, domain::ties, kind::exact, work::cheap},
    binary_case{tessera::greater, "greater", [](auto x, auto y) { return x > y; }, accepts_real{},
                domain::ties, domain::ties, kind::exact, work::cheap},
    binary_case{tessera::greater_equal, "greater_equal", [](auto x, auto y) { return x >= y; },
                accepts_real{}, domain::ties, domain::ties, kind::exact, work::cheap},
};

constexpr std::tuple unary_cases{
    unary_case{tessera::neg, "neg", [](auto x) { return -x; }, accepts_numeric{}, domain::any,
               kind::exact, work::cheap},
    unary_case{tessera::abs, "abs",
               [](auto x) {
                   using std::abs;
                   return abs(x);
               },
               accepts_numeric{}, domain::any, kind::rounded, work::cheap},
    unary_case{tessera::square, "square", [](auto x) { return x * x; }, accepts_numeric{},
               domain::any, kind::rounded, work::cheap},
    unary_case{tessera::relu, "relu",
               [](auto x) { return x < decltype(x){0} ? decltype(x){0} : x; }, accepts_real{},
               domain::any, kind::exact, work::cheap},
    unary_case{tessera::exp, "exp",
               [](auto x) {
                   using std::exp;
                   return exp(x);
               },
               accepts_floating{}, domain::small, kind::transcendental, work::transcendental},
    unary_case{tessera::log, "log",
               [](auto x) {
                   using std::log;
                   return log(x);
               },
               accepts_floating{}, domain::positive, kind::transcendental, work::transcendental},
    unary_case{tessera::sqrt, "sqrt",
               [](auto x) {
                   using std::sqrt;
                   return sqrt(x);
               },
               accepts_floating{}, domain::positive, kind::transcendental, work::transcendental},
    unary_case{tessera::rsqrt, "rsqrt",
               [](auto x) {
                   using std::sqrt;
                   return decltype(x){1} / sqrt(x);
               },
               accepts_floating{}, domain::positive, kind::transcendental, work::transcendental},
    unary_case{tessera::sin, "sin",
               [](auto x) {
                   using std::sin;
                   return sin(x);
               },
               accepts_floating{}, domain::any, kind::transcendental, work::transcendental},
    unary_case{tessera::cos, "cos",
               [](auto x) {
                   using std::cos;
                   return cos(x);
               },
               accepts_floating{}, domain::any, kind::transcendental, work::transcendental},
    unary_case{tessera::tanh, "tanh",
               [](auto x) {
                   using std::tanh;
                   return tanh(x);
               },
               accepts_floating{}, domain::small, kind::transcendental, work::transcendental},
    unary_case{tessera::sigmoid, "sigmoid",
               [](auto x) {
                   using std::exp;
                   using W = decltype(x);
                   return W{1} / (W{1} + exp(-x));
               },
               accepts_floating{}, domain::small, kind::transcendental, work::transcendental},
    unary_case{tessera::conj, "conj",
               [](auto x) {
                   if constexpr (is_cplx<decltype(x)>)
                       return std::conj(x);
                   else
                       return x;
               },
               accepts_numeric{}, domain::any, kind::exact, work::cheap},
    unary_case{tessera::real, "real", [](auto x) { return std::real(x); }, accepts_complex{},
               domain::any, kind::exact, work::cheap},
    unary_case{tessera::imag, "imag", [](auto x) { return std::imag(x); }, accepts_complex{},
               domain::any, kind::exact, work::cheap},
};

// ---------------------------------------------------------------------------------------------
// Compile-time checks: ops that make no sense for a type do not compile, and the accepted element
// types of every op are exactly those of the tables above.

template <class Op, class T>
concept has_binary_inplace = requires(const Op& op, session& s, tensor<T>& a, const tensor<T>& b) {
    op.inplace(s, a, b);
};
template <class Op, class T>
concept has_unary_inplace = requires(const Op& op, session& s, tensor<T>& a) {
    op.inplace(s, a);
};
template <class Op, class V>
concept inplace_on = requires(const Op& op, session& s, const V& v) {
    op.inplace(s, v);
};
template <class T>
concept clampable = requires(session& s, const tensor<T>& a, T v) {
    tessera::clamp(s, a, v, v);
};
template <class F, class T>
concept mappable = requires(session& s, F f, const tensor<T>& a) {
    tessera::map(s, f, a);
};
template <class M, class A, class B>
concept whereable = requires(session& s, const tensor<M>& m, const tensor<A>& a,
                             const tensor<B>& b) {
    tessera::where(s, m, a, b);
};

template <class Case, class T>
consteval bool binary_acceptance_as_tabled() {
    using Op = decltype(Case::op);
    constexpr bool expected = Case::accepts_type::template value<T>;
    static_assert(
        std::is_invocable_v<const Op&, session&, const tensor<T>&, const tensor<T>&> == expected,
        "an op accepts a type its row rejects, or rejects one it accepts");
    if constexpr (expected) {
        using WR = std::invoke_result_t<decltype(Case::ref), wide_t<T>, wide_t<T>>;
        using R = narrow_t<T, WR>;
        static_assert(
            std::is_same_v<
                std::invoke_result_t<const Op&, session&, const tensor<T>&, const tensor<T>&>,
                tensor<R>>,
            "an op returns another element type than its reference implies");
        static_assert(has_binary_inplace<Op, T> == std::is_same_v<R, T>,
                      ".inplace must exist exactly when the result type is the input type");
    } else {
        static_assert(!has_binary_inplace<Op, T>);
    }
    return true;
}

template <class Case, class T>
consteval bool unary_acceptance_as_tabled() {
    using Op = decltype(Case::op);
    constexpr bool expected = Case::accepts_type::template value<T>;
    static_assert(std::is_invocable_v<const Op&, session&, const tensor<T>&> == expected,
                  "an op accepts a type its row rejects, or rejects one it accepts");
    if constexpr (expected) {
        using WR = std::invoke_result_t<decltype(Case::ref), wide_t<T>>;
        using R = narrow_t<T, WR>;
        static_assert(
            std::is_same_v<std::invoke_result_t<const Op&, session&, const tensor<T>&>, tensor<R>>,
            "an op returns another element type than its reference implies");
        static_assert(has_unary_inplace<Op, T> == std::is_same_v<R, T>,
                      ".inplace must exist exactly when the result type is the input type");
    } else {
        static_assert(!has_unary_inplace<Op, T>);
    }
    return true;
}

template <class Case>
consteval bool binary_row_as_tabled() {
    return binary_acceptance_as_tabled<Case, float>() &&
           binary_acceptance_as_tabled<Case, double>() && binary_acceptance_as_tabled<Case, cf>() &&
           binary_acceptance_as_tabled<Case, cd>() && binary_acceptance_as_tabled<Case, i32>() &&
           binary_acceptance_as_tabled<Case, i64>() && binary_acceptance_as_tabled<Case, bool>();
}
template <class Case>
consteval bool unary_row_as_tabled() {
    return unary_acceptance_as_tabled<Case, float>() &&
           unary_acceptance_as_tabled<Case, double>() && unary_acceptance_as_tabled<Case, cf>() &&
           unary_acceptance_as_tabled<Case, cd>() && unary_acceptance_as_tabled<Case, i32>() &&
           unary_acceptance_as_tabled<Case, i64>() && unary_acceptance_as_tabled<Case, bool>();
}

static_assert(std::apply(
    [](const auto&... c) {
        return (binary_row_as_tabled<std::remove_cvref_t<decltype(c)>>() && ...);
    },
    binary_cases));
static_assert(std::apply(
    [](const auto&... c) {
        return (unary_row_as_tabled<std::remove_cvref_t<decltype(c)>>() && ...);
    },
    unary_cases));

// The cases named in the API's promise, spelled out.
static_assert(!std::is_invocable_v<decltype(tessera::log), session&, const tensor<int>&>);
static_assert(std::is_invocable_v<decltype(tessera::log), session&, const tensor<float>&>);
static_assert(!std::is_invocable_v<decltype(tessera::exp), session&, const tensor<i64>&>);
static_assert(!std::is_invocable_v<decltype(tessera::relu), session&, const tensor<cf>&>);
static_assert(
    !std::is_invocable_v<decltype(tessera::less), session&, const tensor<cd>&, const tensor<cd>&>);
static_assert(!std::is_invocable_v<decltype(tessera::maximum), session&, const tensor<cf>&,
                                   const tensor<cf>&>);
static_assert(!std::is_invocable_v<decltype(tessera::real), session&, const tensor<float>&>);
static_assert(!std::is_invocable_v<decltype(tessera::add), session&, const tensor<bool>&,
                                   const tensor<bool>&>);
// Mixing element types: float with double, and an out of another element type.
static_assert(!std::is_invocable_v<decltype(tessera::add), session&, const tensor<float>&,
                                   const tensor<double>&>);
static_assert(
    !std::is_invocable_v<decltype(tessera::mul), session&, const tensor<i32>&, const tensor<i64>&>);
static_assert(!std::is_invocable_v<decltype(tessera::add), session&, const tensor<float>&,
                                   const tensor<float>&, const tensor_view<double>&>);
static_assert(!std::is_invocable_v<decltype(tessera::less), session&, const tensor<float>&,
                                   const tensor<float>&, const tensor_view<float>&>);
static_assert(std::is_invocable_v<decltype(tessera::add), session&, const tensor<float>&,
                                  const tensor_view<const float>&, const tensor_view<float>&>);
// Results of another element type: |complex| and real/imag are real, comparisons are masks.
static_assert(std::is_same_v<decltype(tessera::abs(std::declval<session&>(),
                                                   std::declval<const tensor<cf>&>())),
                             tensor<float>>);
static_assert(std::is_same_v<decltype(tessera::imag(std::declval<session&>(),
                                                    std::declval<const tensor<cd>&>())),
                             tensor<double>>);
static_assert(std::is_same_v<decltype(tessera::equal(std::declval<session&>(),
                                                     std::declval<const tensor<cf>&>(),
                                                     std::declval<const tensor<cf>&>())),
                             tensor<bool>>);
// In place into a read-only view does not compile; nor does in-place abs of complex (real result).
static_assert(!inplace_on<decltype(tessera::neg), tensor_view<const float>>);
static_assert(inplace_on<decltype(tessera::neg), tensor_view<float>>);
static_assert(!has_unary_inplace<decltype(tessera::abs), cf>);
static_assert(has_unary_inplace<decltype(tessera::abs), float>);
static_assert(!has_binary_inplace<decltype(tessera::less), float>);
// clamp, where and map.
static_assert(clampable<float> && clampable<i64>);
static_assert(!clampable<cf> && !clampable<cd> && !clampable<bool>);
static_assert(whereable<bool, float, float> && whereable<bool, cd, cd> &&
              whereable<bool, bool, bool>);
static_assert(!whereable<int, float, float>);
static_assert(!whereable<bool, float, double>);
static_assert(mappable<decltype([](float x) { return x > 0; }), float>);
static_assert(!mappable<decltype([](float x) { return static_cast<unsigned>(x); }), float>);

// ---------------------------------------------------------------------------------------------
// Per-op checks of every form against the reference.

const std::vector<std::pair<shape, shape>>& binary_shapes() {
    static const std::vector<std::pair<shape, shape>> pairs{
        {{}, {}},
        {{7}, {7}},
        {{1}, {5}},
        {{5}, {1}},
        {{3, 4}, {4}},
        {{4}, {3, 4}},
        {{3, 1}, {1, 4}},
        {{2, 3, 4}, {2, 1, 4}},
        {{0, 3}, {1, 3}},
        {{0}, {1}},
        {{}, {3, 2}},
        {{2, 3}, {}},
        {{257}, {257}},
        {{33, 17}, {17}},
        {{9, 1, 8}, {1, 7, 1}},
    };
    return pairs;
}

const std::vector<shape>& unary_shapes() {
    static const std::vector<shape> shapes{{}, {1}, {7}, {3, 4}, {0, 3}, {2, 0}, {257}, {9, 5, 7}};
    return shapes;
}

template <class T, class Case>
void check_binary(session& s, std::mt19937_64& rng, const Case& c) {
    if constexpr (Case::accepts_type::template value<T>) {
        using WR = std::invoke_result_t<decltype(c.ref), wide_t<T>, wide_t<T>>;
        using R = narrow_t<T, WR>;
        const tolerance tol = tolerance_for<T>(c.tol);
        for (const auto& [sa, sb] : binary_shapes()) {
            SCOPED_TRACE(std::string(c.name) + " " + text(sa) + " " + text(sb));
            auto a = random_tensor<T>(s, sa, c.lhs, rng);
            auto b = random_tensor<T>(s, sb, c.rhs, rng);
            const shape rs = broadcast_shapes(sa, sb);
            const std::vector<WR> want = reference_of(
                rs, [&](T x, T y) { return c.ref(widen(x), widen(y)); }, a.view(), b.view());

            // Allocating, from tensors.
            tensor<R> r = c.op(s, a, b);
            EXPECT_TRUE(same_shape(r.shape(), rs));
            EXPECT_TRUE(matches(r.view(), want, tol)) << "allocating";

            // Out-parameter, from read-only views, into a dense tensor.
            auto out = filled<R>(s, rs);
            c.op(s, tensor_view<const T>(a), tensor_view<const T>(b), out.view());
            EXPECT_TRUE(matches(out.view(), want, tol)) << "out-parameter";

            // Out-parameter into a reversed view (negative stride), from mutable views.
            if (rs.rank() > 0) {
                auto buffer = filled<R>(s, rs);
                const tensor_view<R> flipped = buffer.view().flip(0);
                c.op(s, a.view(), b.view(), flipped);
                EXPECT_TRUE(matches(flipped, want, tol)) << "out-parameter, flipped";
            }

            // In place: a = op(a, b), by both .inplace overloads and by passing a as out.
            if constexpr (std::is_same_v<R, T>) {
                if (rs == sa) {
                    auto a1 = copy_of(s, a);
                    c.op.inplace(s, a1, b);
                    EXPECT_TRUE(matches(a1.view(), want, tol)) << ".inplace(tensor)";
                    auto a2 = copy_of(s, a);
                    c.op.inplace(s, a2.view(), b);
                    EXPECT_TRUE(matches(a2.view(), want, tol)) << ".inplace(view)";
                    auto a3 = copy_of(s, a);
                    c.op(s, a3, b, a3);
                    EXPECT_TRUE(matches(a3.view(), want, tol)) << "out aliasing input 0";
                }
                if (rs == sb) {
                    auto b1 = copy_of(s, b);
                    c.op(s, a, b1, b1);
                    EXPECT_TRUE(matches(b1.view(), want, tol)) << "out aliasing input 1";
                }
            }
        }
        // Both operands the very same tensor, also as out: a = op(a, a).
        // One domain for both roles: the divisor's for div; for pow, one where x^x stays finite.
        const domain both = c.rhs != domain::pow_exponent ? c.rhs
                            : std::is_integral_v<T>       ? domain::pow_exponent
                                                          : domain::pow_base;
        auto a = random_tensor<T>(s, {6, 5}, both, rng);
        const std::vector<WR> want = reference_of(
            a.shape(), [&](T x, T y) { return c.ref(widen(x), widen(y)); }, a.view(), a.view());
        EXPECT_TRUE(matches(c.op(s, a, a).view(), want, tol)) << c.name << "(a, a)";
        if constexpr (std::is_same_v<R, T>) {
            c.op(s, a, a, a);
            EXPECT_TRUE(matches(a.view(), want, tol)) << c.name << "(a, a, out = a)";
        }
    }
}

template <class T, class Case>
void check_unary(session& s, std::mt19937_64& rng, const Case& c) {
    if constexpr (Case::accepts_type::template value<T>) {
        using WR = std::invoke_result_t<decltype(c.ref), wide_t<T>>;
        using R = narrow_t<T, WR>;
        const tolerance tol = tolerance_for<T>(c.tol);
        for (const shape& sa : unary_shapes()) {
            SCOPED_TRACE(std::string(c.name) + " " + text(sa));
            auto a = random_tensor<T>(s, sa, c.in, rng);
            const std::vector<WR> want = reference_of(
                sa, [&](T x) { return c.ref(widen(x)); }, a.view());

            tensor<R> r = c.op(s, a);
            EXPECT_TRUE(same_shape(r.shape(), sa));
            EXPECT_TRUE(matches(r.view(), want, tol)) << "allocating";

            auto out = filled<R>(s, sa);
            c.op(s, tensor_view<const T>(a), out.view());
            EXPECT_TRUE(matches(out.view(), want, tol)) << "out-parameter";

            if (sa.rank() > 0) {
                auto buffer = filled<R>(s, sa);
                const tensor_view<R> flipped = buffer.view().flip(-1);
                c.op(s, a.view(), flipped);
                EXPECT_TRUE(matches(flipped, want, tol)) << "out-parameter, flipped";
            }

            if constexpr (std::is_same_v<R, T>) {
                auto a1 = copy_of(s, a);
                c.op.inplace(s, a1);
                EXPECT_TRUE(matches(a1.view(), want, tol)) << ".inplace(tensor)";
                auto a2 = copy_of(s, a);
                c.op.inplace(s, a2.view());
                EXPECT_TRUE(matches(a2.view(), want, tol)) << ".inplace(view)";
                auto a3 = copy_of(s, a);
                c.op(s, a3, a3);
                EXPECT_TRUE(matches(a3.view(), want, tol)) << "out aliasing the input";
            }
        }
    }
}

/// A backend per thread count, with a small grain so that inputs of a few hundred elements
/// already take the parallel path (and its chunk boundaries) on multi-thread backends.
template <class Body>
void on_each_backend(Body body) {
    for (int threads : tessera::test::thread_counts()) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        backend be{backend_options{}.with_threads(threads).with_grain(64)};
        be.run([&](session& s) { body(s); });
    }
}

template <class T>
class ElementwiseTypedTest : public ::testing::Test {};
using numeric_types = ::testing::Types<float, double, cf, cd, i32, i64>;
TYPED_TEST_SUITE(ElementwiseTypedTest, numeric_types, type_names);

TYPED_TEST(ElementwiseTypedTest, BinaryOpsMatchAWideReferenceInEveryForm) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    on_each_backend([&](session& s) {
        std::apply([&](const auto&... c) { (check_binary<T>(s, rng, c), ...); }, binary_cases);
    });
}

TYPED_TEST(ElementwiseTypedTest, UnaryOpsMatchAWideReferenceInEveryForm) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    on_each_backend([&](session& s) {
        std::apply([&](const auto&... c) { (check_unary<T>(s, rng, c), ...); }, unary_cases);
    });
}

TYPED_TEST(ElementwiseTypedTest, MapAndZipMatchAWideReferenceInEveryForm) {
    using T = TypeParam;
    using W = wide_t<T>;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    const tolerance exact = tolerance_for<T>(kind::exact);
    const tolerance rounded = tolerance_for<T>(kind::rounded);
    on_each_backend([&](session& s) {
        for (const auto& [sa, sb] : binary_shapes()) {
            SCOPED_TRACE(text(sa) + " " + text(sb));
            auto a = random_tensor<T>(s, sa, domain::any, rng);
            auto b = random_tensor<T>(s, sb, domain::any, rng);
            const shape rs = broadcast_shapes(sa, sb);

            // map: doubling is exact; a captured value and a type change (T -> bool).
            const T two{2};
            auto twice = [two](T x) { return x * two; };
            const auto want_twice = reference_of(
                sa, [](T x) { return widen(x) * W{2}; }, a.view());
            EXPECT_TRUE(matches(tessera::map(s, twice, a).view(), want_twice, exact)) << "map";
            auto mapped = filled<T>(s, sa);
            tessera::map_into(s, twice, tensor_view<const T>(a), mapped.view());
            EXPECT_TRUE(matches(mapped.view(), want_twice, exact)) << "map_into";
            auto a1 = copy_of(s, a);
            tessera::map_into(s, twice, a1, a1.view());
            EXPECT_TRUE(matches(a1.view(), want_twice, exact)) << "map_into in place";
            auto nonzero = [](T x) { return x != T{}; };
            const auto want_nonzero = reference_of(
                sa, [](T x) { return widen(x) != W{}; }, a.view());
            tensor<bool> mask = tessera::map(s, nonzero, a);
            EXPECT_TRUE(matches(mask.view(), want_nonzero, exact)) << "map to bool";

            // zip of two, broadcast: one rounding.
            auto fused = [](T x, T y) { return x * T{2} - y; };
            const auto want_fused = reference_of(
                rs, [](T x, T y) { return widen(x) * W{2} - widen(y); }, a.view(), b.view());
            EXPECT_TRUE(matches(tessera::zip(s, fused, a, b).view(), want_fused, rounded)) << "zip";
            if (rs.rank() > 0) {
                auto buffer = filled<T>(s, rs);
                const tensor_view<T> flipped = buffer.view().flip(0);
                tessera::zip_into(s, fused, flipped, a.view(), tensor_view<const T>(b));
                EXPECT_TRUE(matches(flipped, want_fused, rounded)) << "zip_into, flipped";
            }

            // zip of three element types, the mask broadcast along the other axis.
            auto m = random_tensor<bool>(s, sb, domain::any, rng);
            auto k = random_tensor<i32>(s, sa, domain::ties, rng);
            auto pick = [](T x, bool on, i32 n) { return on ? x : static_cast<T>(n); };
            const auto want_pick = reference_of(
                rs, [](T x, bool on, i32 n) { return on ? widen(x) : widen(static_cast<T>(n)); },
                b.view(), m.view(), k.view());
            auto picked = filled<T>(s, rs);
            tessera::zip_into(s, pick, picked.view(), b, m, k);
            EXPECT_TRUE(matches(picked.view(), want_pick, exact)) << "zip_into of three";
            EXPECT_TRUE(matches(tessera::zip(s, pick, b, m, k).view(), want_pick, exact))
                << "zip of three";
        }
    });
}

template <class T>
class WhereTypedTest : public ::testing::Test {};
using element_types = ::testing::Types<float, double, cf, cd, i32, i64, bool>;
TYPED_TEST_SUITE(WhereTypedTest, element_types, type_names);

TYPED_TEST(WhereTypedTest, PicksFromEitherInputInEveryForm) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    const tolerance exact{};
    const std::vector<std::array<shape, 3>> triples{
        {shape{}, shape{}, shape{}},
        {shape{5}, shape{5}, shape{5}},
        {shape{3, 1}, shape{1, 4}, shape{4}},
        {shape{2, 3}, shape{}, shape{}},
        {shape{}, shape{2, 3}, shape{3}},
        {shape{0, 3}, shape{1, 3}, shape{3}},
        {shape{0}, shape{1}, shape{}},
        {shape{257}, shape{257}, shape{1}},
        {shape{2, 1, 2, 1, 2, 1, 2, 1}, shape{1, 2, 1, 2, 1, 2, 1, 3},
         shape{2, 1, 1, 1, 1, 1, 1, 1}},
    };
    on_each_backend([&](session& s) {
        for (const auto& [sm, sa, sb] : triples) {
            SCOPED_TRACE(text(sm) + " " + text(sa) + " " + text(sb));
            auto m = random_tensor<bool>(s, sm, domain::any, rng);
            auto a = random_tensor<T>(s, sa, domain::any, rng);
            auto b = random_tensor<T>(s, sb, domain::any, rng);
            const shape rs = broadcast_shapes(broadcast_shapes(sm, sa), sb);
            const auto want = reference_of(
                rs, [](bool on, T x, T y) { return on ? x : y; }, m.view(), a.view(), b.view());

            tensor<T> r = tessera::where(s, m, a, b);
            EXPECT_TRUE(same_shape(r.shape(), rs));
            EXPECT_TRUE(matches(r.view(), want, exact)) << "allocating";
            auto out = filled<T>(s, rs);
            tessera::where(s, tensor_view<const bool>(m), a.view(), tensor_view<const T>(b),
                           out.view());
            EXPECT_TRUE(matches(out.view(), want, exact)) << "out-parameter";
            if (rs.rank() > 0) {
                auto buffer = filled<T>(s, rs);
                const tensor_view<T> flipped = buffer.view().flip(-1);
                tessera::where(s, m, a, b, flipped);
                EXPECT_TRUE(matches(flipped, want, exact)) << "out-parameter, flipped";
            }
            if (rs == sa) {
                auto a1 = copy_of(s, a);
                tessera::where(s, m, a1, b, a1.view());
                EXPECT_TRUE(matches(a1.view(), want, exact)) << "out aliasing a";
            }
            if (rs == sb) {
                auto b1 = copy_of(s, b);
                tessera::where(s, m, a, b1, b1.view());
                EXPECT_TRUE(matches(b1.view(), want, exact)) << "out aliasing b";
            }
        }
    });
}

template <class T>
class ClampTypedTest : public ::testing::Test {};
using real_types = ::testing::Types<float, double, i32, i64>;
TYPED_TEST_SUITE(ClampTypedTest, real_types, type_names);

TYPED_TEST(ClampTypedTest, MatchesMinOfMaxInEveryForm) {
    using T = TypeParam;
    using W = wide_t<T>;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    const tolerance exact{};
    on_each_backend([&](session& s) {
        for (const shape& sa : unary_shapes()) {
            SCOPED_TRACE(text(sa));
            auto a = random_tensor<T>(s, sa, domain::any, rng);
            T low = draw<T>(domain::any, rng), high = draw<T>(domain::any, rng);
            if (high < low) std::swap(low, high);
            const auto want = reference_of(
                sa, [&](T x) { return std::min(std::max(widen(x), W(low)), W(high)); }, a.view());

            EXPECT_TRUE(matches(tessera::clamp(s, a, low, high).view(), want, exact))
                << "allocating";
            auto out = filled<T>(s, sa);
            tessera::clamp(s, tensor_view<const T>(a), low, high, out.view());
            EXPECT_TRUE(matches(out.view(), want, exact)) << "out-parameter";
            if (sa.rank() > 0) {
                auto buffer = filled<T>(s, sa);
                const tensor_view<T> flipped = buffer.view().flip(0);
                tessera::clamp(s, a.view(), low, high, flipped);
                EXPECT_TRUE(matches(flipped, want, exact)) << "out-parameter, flipped";
            }
            auto a1 = copy_of(s, a);
            tessera::clamp(s, a1, low, high, a1.view());
            EXPECT_TRUE(matches(a1.view(), want, exact)) << "in place";
            // The bounds themselves are kept.
            auto edges = filled<T>(s, {2});
            edges.values()[0] = low;
            edges.values()[1] = high;
            auto kept = tessera::clamp(s, edges, low, high);
            EXPECT_EQ(kept.values()[0], low);
            EXPECT_EQ(kept.values()[1], high);
        }
    });
}

// clamp is documented as min(max(a, low), high), which NumPy's clip also computes: with
// low > high that is `high` everywhere. (An earlier kernel tested `x < low` first and gave
// clamp(3, 5, 1) = 5.)
TEST(ClampTest, LowAboveHighFollowsTheDocumentedDefinition) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        auto a = tessera::from<float>(s, {3.0f, -1.0f, 7.0f});
        auto c = tessera::clamp(s, a, 5.0f, 1.0f);
        for (float v : c.values()) EXPECT_EQ(v, 1.0f);
    });
}

// ---------------------------------------------------------------------------------------------
// Broadcasting and layouts: size-1 axes, rank promotion, zero-size axes, scalars, negative
// strides, transposes, step slices, broadcast inputs and rank 8, mixed in one call.

enum class layout { dense, transposed, flipped, strided, reversed_step, broadcast };
constexpr std::array input_layouts{layout::dense,   layout::transposed,    layout::flipped,
                                   layout::strided, layout::reversed_step, layout::broadcast};
constexpr std::array output_layouts{layout::dense, layout::transposed, layout::flipped,
                                    layout::strided, layout::reversed_step};

const char* layout_name(layout l) {
    switch (l) {
        case layout::dense:
            return "dense";
        case layout::transposed:
            return "transposed";
        case layout::flipped:
            return "flipped";
        case layout::strided:
            return "strided";
        case layout::reversed_step:
            return "reversed_step";
        case layout::broadcast:
            return "broadcast";
    }
    return "?";
}

/// Storage for one operand and a view of it, with a given logical shape, in one of the layouts;
/// the storage may hold more elements than the view.
template <class T>
struct laid_out {
    tensor<T> storage;
    tensor_view<T> view;
};

template <class T>
laid_out<T> make_layout(session& s, const shape& logical, layout l) {
    const std::size_t r = logical.rank();
    std::vector<std::size_t> dims(logical.dims().begin(), logical.dims().end());
    if (r == 0) l = layout::dense;
    laid_out<T> out;
    auto make = [&](const std::vector<std::size_t>& d) {
        out.storage = tessera::empty<T>(s, shape(std::span<const std::size_t>(d)));
        return out.storage.view();
    };
    switch (l) {
        case layout::dense:
            out.view = make(dims);
            break;
        case layout::transposed: {
            std::vector<std::size_t> reversed(dims.rbegin(), dims.rend());
            out.view = make(reversed).transpose();
            break;
        }
        case layout::flipped: {
            tensor_view<T> v = make(dims);
            for (std::size_t a = 0; a < r; ++a) v = v.flip(static_cast<std::ptrdiff_t>(a));
            out.view = v;
            break;
        }
        case layout::strided: {  // every second element along the first and the last axis
            std::vector<std::size_t> d = dims;
            d[r - 1] *= 2;
            if (r > 1) d[0] *= 2;
            tensor_view<T> v = make(d).slice(-1, 0, tessera::slice_end, 2);
            if (r > 1) v = v.slice(0, 1, tessera::slice_end, 2);
            out.view = v;
            break;
        }
        case layout::reversed_step: {  // every third element of the last axis, backwards
            std::vector<std::size_t> d = dims;
            d[r - 1] *= 3;
            out.view = make(d).slice(-1, tessera::slice_end, tessera::slice_end, -3);
            break;
        }
        case layout::broadcast: {  // extent 1 with stride 0 on every even axis
            std::vector<std::size_t> d = dims;
            for (std::size_t a = 0; a < r; a += 2) d[a] = 1;
            out.view = make(d).broadcast_to(logical);
            break;
        }
    }
    return out;
}

template <class T>
laid_out<T> random_layout(session& s, const shape& logical, layout l, domain d,
                          std::mt19937_64& rng) {
    laid_out<T> o = make_layout<T>(s, logical, l);
    for (T& v : o.storage.values()) v = draw<T>(d, rng);
    return o;
}

/// Checks that an op wrote nothing outside `o.view`: overwrite the view with the sentinel through
/// this file's indexing, then every storage element must be the sentinel.
template <class T>
::testing::AssertionResult no_stray_writes(const laid_out<T>& o) {
    for_each_index(o.view.shape(), [&](const index_array& index) {
        at(o.view, index, o.view.rank()) = sentinel<T>();
    });
    for (const T& v : o.storage.values())
        if (!(v == sentinel<T>()))
            return ::testing::AssertionFailure() << "an element outside out was written";
    return ::testing::AssertionSuccess();
}

const std::vector<std::pair<shape, shape>>& layout_shapes() {
    static const std::vector<std::pair<shape, shape>> pairs{
        {{}, {}},
        {{5}, {1}},
        {{4}, {3, 4}},
        {{3, 1}, {1, 4}},
        {{2, 3, 4}, {3, 1}},
        {{0, 3}, {1, 3}},
        {{0}, {1}},
        {{}, {2, 3}},
        {{2, 1, 3, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 3}},
        {{2, 2, 2, 2, 2, 2, 2, 3}, {3}},
    };
    return pairs;
}

/// Runs a binary op over every combination of input and output layouts on every shape pair.
template <class T, class Op, class Ref>
void check_binary_layouts(session& s, std::mt19937_64& rng, const Op& op, Ref ref, tolerance tol) {
    using WR = std::invoke_result_t<Ref&, wide_t<T>, wide_t<T>>;
    using R = narrow_t<T, WR>;
    for (const auto& [sa, sb] : layout_shapes()) {
        const shape rs = broadcast_shapes(sa, sb);
        for (layout la : input_layouts) {
            for (layout lb : input_layouts) {
                for (layout lo : output_layouts) {
                    SCOPED_TRACE(text(sa) + " " + layout_name(la) + ", " + text(sb) + " " +
                                 layout_name(lb) + " -> " + layout_name(lo));
                    const auto a = random_layout<T>(s, sa, la, domain::any, rng);
                    const auto b = random_layout<T>(s, sb, lb, domain::nonzero, rng);
                    const auto want = reference_of(
                        rs, [&](T x, T y) { return ref(widen(x), widen(y)); }, a.view, b.view);
                    auto o = make_layout<R>(s, rs, lo);
                    for (R& v : o.storage.values()) v = sentinel<R>();
                    op(s, a.view, tensor_view<const T>(b.view), o.view);
                    EXPECT_TRUE(matches(o.view, want, tol));
                    EXPECT_TRUE(no_stray_writes(o));
                    if (lo == layout::dense) {
                        EXPECT_TRUE(matches(op(s, a.view, b.view).view(), want, tol));
                    }
                }
            }
        }
    }
}

class ElementwiseLayoutTest : public ::testing::TestWithParam<int> {
protected:
    backend be_{backend_options{}.with_threads(GetParam()).with_grain(64)};
};

TEST_P(ElementwiseLayoutTest, BinaryOpsBroadcastOverEveryLayoutMix) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        check_binary_layouts<float>(
            s, rng, tessera::add, [](auto x, auto y) { return x + y; },
            tolerance_for<float>(kind::rounded));
        check_binary_layouts<cd>(
            s, rng, tessera::div, [](auto x, auto y) { return x / y; },
            tolerance_for<cd>(kind::rounded));
        check_binary_layouts<i64>(
            s, rng, tessera::sub, [](auto x, auto y) { return x - y; }, tolerance{});
        check_binary_layouts<double>(
            s, rng, tessera::less_equal, [](auto x, auto y) { return x <= y; }, tolerance{});
    });
}

TEST_P(ElementwiseLayoutTest, UnaryOpsReadAndWriteEveryLayout) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        for (const auto& [logical, unused] : layout_shapes()) {
            for (layout li : input_layouts) {
                for (layout lo : output_layouts) {
                    SCOPED_TRACE(text(logical) + " " + layout_name(li) + " -> " + layout_name(lo));
                    const auto a = random_layout<cf>(s, logical, li, domain::small, rng);
                    const auto want_exp = reference_of(
                        logical, [](cf x) { return std::exp(widen(x)); }, a.view);
                    auto o = make_layout<cf>(s, logical, lo);
                    for (cf& v : o.storage.values()) v = sentinel<cf>();
                    tessera::exp(s, a.view, o.view);
                    EXPECT_TRUE(matches(o.view, want_exp, tolerance_for<cf>(kind::transcendental)));
                    EXPECT_TRUE(no_stray_writes(o));

                    const auto want_abs = reference_of(
                        logical, [](cf x) { return std::abs(widen(x)); }, a.view);
                    auto m = make_layout<float>(s, logical, lo);
                    for (float& v : m.storage.values()) v = sentinel<float>();
                    tessera::abs(s, a.view, m.view);
                    EXPECT_TRUE(matches(m.view, want_abs, tolerance_for<cf>(kind::rounded)));
                    EXPECT_TRUE(no_stray_writes(m));
                }
            }
        }
    });
}

TEST_P(ElementwiseLayoutTest, InPlaceOnAStridedViewUpdatesOnlyTheView) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        for (layout l : output_layouts) {
            SCOPED_TRACE(layout_name(l));
            auto a = random_layout<double>(s, {4, 6}, l, domain::any, rng);
            auto b = random_tensor<double>(s, {6}, domain::any, rng);
            const auto before = snapshot(a.storage);
            const auto want = reference_of(
                shape{4, 6}, [](double x, double y) { return widen(x) * widen(y); }, a.view,
                b.view());
            tessera::mul.inplace(s, a.view, b);
            EXPECT_TRUE(matches(a.view, want, tolerance_for<double>(kind::rounded)));
            // Elements outside the view are as they were.
            for_each_index(a.view.shape(), [&](const index_array& index) {
                at(a.view, index, 2) = std::numeric_limits<double>::quiet_NaN();
            });
            std::size_t outside = 0, kept = 0;
            for (std::size_t i = 0; i < a.storage.size(); ++i) {
                if (std::isnan(a.storage.values()[i])) continue;
                ++outside;
                kept += a.storage.values()[i] == before[i];
            }
            EXPECT_EQ(kept, outside);
            EXPECT_EQ(outside, a.storage.size() - 24);
        }
    });
}

TEST_P(ElementwiseLayoutTest, WhereAndZipOfThreeMixLayoutsUpToRankEight) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    const std::vector<std::array<shape, 3>> triples{
        {shape{3, 1}, shape{1, 4}, shape{4}},
        {shape{}, shape{2, 3}, shape{3}},
        {shape{0, 1}, shape{1, 5}, shape{}},
        {shape{2, 1, 2, 1, 2, 1, 2, 1}, shape{1, 2, 1, 2, 1, 2, 1, 3},
         shape{2, 1, 1, 1, 1, 1, 1, 3}},
    };
    be_.run([&](session& s) {
        for (const auto& [sm, sa, sb] : triples) {
            const shape rs = broadcast_shapes(broadcast_shapes(sm, sa), sb);
            for (std::size_t i = 0; i < input_layouts.size(); ++i) {
                const layout lm = input_layouts[i];
                const layout la = input_layouts[(i + 1) % input_layouts.size()];
                const layout lb = input_layouts[(i + 3) % input_layouts.size()];
                for (layout lo : output_layouts) {
                    SCOPED_TRACE(text(sm) + " " + layout_name(lm) + ", " + text(sa) + " " +
                                 layout_name(la) + ", " + text(sb) + " " + layout_name(lb) +
                                 " -> " + layout_name(lo));
                    const auto m = random_layout<bool>(s, sm, lm, domain::any, rng);
                    const auto a = random_layout<float>(s, sa, la, domain::any, rng);
                    const auto b = random_layout<i32>(s, sb, lb, domain::any, rng);
                    const auto c = random_layout<float>(s, sb, lb, domain::any, rng);

                    const auto want_where = reference_of(
                        rs, [](bool on, float x, float y) { return on ? x : y; }, m.view, a.view,
                        c.view);
                    auto o = make_layout<float>(s, rs, lo);
                    for (float& v : o.storage.values()) v = sentinel<float>();
                    tessera::where(s, m.view, a.view, c.view, o.view);
                    EXPECT_TRUE(matches(o.view, want_where, tolerance{})) << "where";
                    EXPECT_TRUE(no_stray_writes(o));

                    auto f = [](bool on, float x, i32 n) {
                        return on ? static_cast<double>(x) * n : -1.0;
                    };
                    const auto want_zip = reference_of(
                        rs,
                        [](bool on, float x, i32 n) {
                            return on ? static_cast<double>(x) * n : -1.0;
                        },
                        m.view, a.view, b.view);
                    auto z = make_layout<double>(s, rs, lo);
                    for (double& v : z.storage.values()) v = sentinel<double>();
                    tessera::zip_into(s, f, z.view, m.view, a.view, b.view);
                    EXPECT_TRUE(matches(z.view, want_zip, tolerance{})) << "zip_into";
                    EXPECT_TRUE(no_stray_writes(z));
                    EXPECT_TRUE(matches(tessera::zip(s, f, m.view, a.view, b.view).view(), want_zip,
                                        tolerance{}))
                        << "zip";
                }
            }
        }
    });
}

TEST_P(ElementwiseLayoutTest, ZeroSizeResultsComeOutEmptyAndWriteNothing) {
    be_.run([](session& s) {
        auto a = tessera::empty<float>(s, {0, 3});
        auto b = filled<float>(s, {1, 3}, 2.0f);
        auto r = tessera::add(s, a, b);
        EXPECT_TRUE(same_shape(r.shape(), shape{0, 3}));
        EXPECT_EQ(r.size(), 0u);
        auto z = tessera::mul(s, tessera::empty<double>(s, {0}), filled<double>(s, {1}, 1.0));
        EXPECT_TRUE(same_shape(z.shape(), shape{0}));
        auto e = tessera::exp(s, tessera::empty<cf>(s, {2, 0, 4}));
        EXPECT_TRUE(same_shape(e.shape(), shape{2, 0, 4}));
        // A view whose shape overflows std::size_t once the zero is left out is still empty.
        const std::size_t huge = std::size_t{1} << 40;
        float one = 1.0f;
        const tensor_view<const float> wide_empty(&one, shape{huge, huge, 0}, {0, 0, 0});
        auto w = tessera::add(s, wide_empty, b.view().reshape({3}).slice(0, 0, 1));
        EXPECT_TRUE(same_shape(w.shape(), shape{huge, huge, 0}));
        EXPECT_EQ(w.size(), 0u);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseLayoutTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// ---------------------------------------------------------------------------------------------
// Bad input: every check happens before anything is written.

class ElementwiseValidationTest : public ::testing::TestWithParam<int> {
protected:
    backend be_{backend_options{}.with_threads(GetParam())};
};

template <class Case>
void expect_broadcast_errors(session& s, std::mt19937_64& rng, const Case& c) {
    using T = float;  // every binary op takes float
    using R = typename std::invoke_result_t<const decltype(c.op)&, session&, const tensor<T>&,
                                            const tensor<T>&>::value_type;
    const std::vector<std::pair<shape, shape>> mismatched{
        {{3, 4}, {4, 3}}, {{3}, {2, 4}}, {{0, 3}, {2, 3}}, {{2, 1, 5}, {3, 4}}, {{2}, {0}}};
    for (const auto& [sa, sb] : mismatched) {
        const std::string want =
            std::string(c.name) + ": shapes " + text(sa) + " and " + text(sb) + " do not broadcast";
        auto a = random_tensor<T>(s, sa, domain::positive, rng);
        auto b = random_tensor<T>(s, sb, domain::positive, rng);
        auto out = filled<R>(s, sa);
        const auto before = snapshot(out);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { c.op(s, a, b, out); }), want);
        EXPECT_TRUE(unchanged(out, before)) << c.name;
        EXPECT_EQ(message_of<tessera::shape_error>([&] { auto r = c.op(s, a, b); }), want);
        if constexpr (std::is_same_v<R, T>) {
            const auto a_before = snapshot(a);
            EXPECT_EQ(message_of<tessera::shape_error>([&] { c.op.inplace(s, a, b); }), want);
            EXPECT_TRUE(unchanged(a, a_before)) << c.name << ".inplace";
        }
    }
}

TEST_P(ElementwiseValidationTest, ShapesThatDoNotBroadcastNameTheOpAndBothShapes) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        std::apply([&](const auto&... c) { (expect_broadcast_errors(s, rng, c), ...); },
                   binary_cases);

        auto a = random_tensor<float>(s, {3, 4}, domain::any, rng);
        auto b = random_tensor<float>(s, {4, 3}, domain::any, rng);
        auto m = random_tensor<bool>(s, {5}, domain::any, rng);
        auto out = filled<float>(s, {3, 4});
        const auto before = snapshot(out);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::where(s, m, a, a, out.view()); }),
                  "where: shapes [5] and [3,4] do not broadcast");
        EXPECT_EQ(message_of<tessera::shape_error>([&] { auto r = tessera::where(s, m, a, a); }),
                  "where: shapes [5] and [3,4] do not broadcast");
        auto first = [](float x, float y) { return x + y; };
        EXPECT_EQ(message_of<tessera::shape_error>(
                      [&] { tessera::zip_into(s, first, out.view(), a, b); }),
                  "zip: shapes [3,4] and [4,3] do not broadcast");
        EXPECT_EQ(message_of<tessera::shape_error>([&] { auto r = tessera::zip(s, first, a, b); }),
                  "zip: shapes [3,4] and [4,3] do not broadcast");
        // A [1] in the middle does not rescue a later mismatch: [3,4], [1] and [4,3].
        auto three = [](float x, float y, float z) { return x + y + z; };
        auto one = filled<float>(s, {1}, 1.0f);
        EXPECT_EQ(message_of<tessera::shape_error>(
                      [&] { tessera::zip_into(s, three, out.view(), a, one, b); }),
                  "zip: shapes [3,4] and [4,3] do not broadcast");
        EXPECT_TRUE(unchanged(out, before));
    });
}

template <class Case>
void expect_out_shape_errors(session& s, const Case& c) {
    using T = std::conditional_t<Case::accepts_type::template value<float>, float, cf>;
    using R = typename std::invoke_result_t<const decltype(c.op)&, session&,
                                            const tensor<T>&>::value_type;
    auto a = filled<T>(s, {3, 4}, T{1});
    for (const shape& wrong : {shape{4, 3}, shape{12}, shape{1, 4}, shape{3, 4, 1}, shape{}}) {
        auto out = filled<R>(s, wrong);
        const auto before = snapshot(out);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { c.op(s, a, out); }),
                  std::string(c.name) + ": out has shape " + text(wrong) +
                      " but the result has shape [3,4]");
        EXPECT_TRUE(unchanged(out, before)) << c.name;
    }
}

TEST_P(ElementwiseValidationTest, OutOfTheWrongShapeIsAShapeErrorAndStaysUnchanged) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        std::apply([&](const auto&... c) { (expect_out_shape_errors(s, c), ...); }, unary_cases);

        auto a = random_tensor<float>(s, {3, 4}, domain::any, rng);
        auto row = random_tensor<float>(s, {4}, domain::any, rng);
        auto m = random_tensor<bool>(s, {3, 1}, domain::any, rng);
        // An out that the result would broadcast to is still the wrong shape (no NumPy-style
        // out broadcasting), and so is one with the right count.
        for (const shape& wrong :
             {shape{2, 3, 4}, shape{1, 4}, shape{12}, shape{4, 3}, shape{0, 4}}) {
            SCOPED_TRACE(text(wrong));
            auto out = filled<float>(s, wrong);
            const auto before = snapshot(out);
            const std::string tail =
                ": out has shape " + text(wrong) + " but the result has shape [3,4]";
            EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::add(s, a, row, out); }),
                      "add" + tail);
            EXPECT_EQ(message_of<tessera::shape_error>(
                          [&] { tessera::clamp(s, a, 0.0f, 1.0f, out.view()); }),
                      "clamp" + tail);
            EXPECT_EQ(
                message_of<tessera::shape_error>([&] { tessera::where(s, m, a, row, out.view()); }),
                "where" + tail);
            EXPECT_EQ(message_of<tessera::shape_error>([&] {
                          tessera::map_into(
                              s, [](float x) { return x; }, a, out.view());
                      }),
                      "map" + tail);
            EXPECT_EQ(message_of<tessera::shape_error>([&] {
                          tessera::zip_into(
                              s, [](float x, float y) { return x * y; }, out.view(), a, row);
                      }),
                      "zip" + tail);
            auto mask = filled<bool>(s, wrong);
            const auto mask_before = snapshot(mask);
            EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::less(s, a, row, mask); }),
                      "less" + tail);
            EXPECT_TRUE(unchanged(out, before));
            EXPECT_TRUE(unchanged(mask, mask_before));
        }
        // In place where the other operand would grow the result: a [4] += [3,4].
        auto small = random_tensor<float>(s, {4}, domain::any, rng);
        const auto small_before = snapshot(small);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::add.inplace(s, small, a); }),
                  "add: out has shape [4] but the result has shape [3,4]");
        EXPECT_TRUE(unchanged(small, small_before));
    });
}

TEST_P(ElementwiseValidationTest, OutPartiallyOverlappingAnInputIsAnAliasError) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        auto buffer = random_tensor<float>(s, {9}, domain::any, rng);
        auto other = random_tensor<float>(s, {8}, domain::any, rng);
        const auto before = snapshot(buffer);
        const tensor_view<float> head = buffer.view().slice(0, 0, 8);
        const tensor_view<float> tail = buffer.view().slice(0, 1, 9);
        auto overlap = [](const char* op, int input) {
            return std::string(op) + ": out overlaps input " + std::to_string(input) +
                   " without being the same view; in-place use must pass the very same elements";
        };
        auto expect_alias = [&](const std::string& want, auto&& call) {
            EXPECT_EQ(message_of<tessera::alias_error>(call), want);
            EXPECT_TRUE(unchanged(buffer, before)) << want;
        };
        // out is the input shifted by one element, either way round, in either input position.
        expect_alias(overlap("add", 0), [&] { tessera::add(s, head, other, tail); });
        expect_alias(overlap("add", 1), [&] { tessera::add(s, other, head, tail); });
        expect_alias(overlap("sub", 0), [&] { tessera::sub(s, tail, other, head); });
        expect_alias(overlap("exp", 0), [&] { tessera::exp(s, head, tail); });
        expect_alias(overlap("clamp", 0), [&] { tessera::clamp(s, tail, 0.0f, 1.0f, head); });
        expect_alias(overlap("add", 1), [&] { tessera::add.inplace(s, head, tail); });
        expect_alias(overlap("neg", 0), [&] { tessera::neg(s, head, tail); });
        // The same elements in another order are not an in-place op either.
        expect_alias(overlap("mul", 0), [&] { tessera::mul(s, head, other, head.flip(0)); });
        const tensor_view<float> square = buffer.view().reshape({3, 3});
        expect_alias(overlap("add", 0),
                     [&] { tessera::add(s, square, square, square.transpose()); });
        // A broadcast input over the out's own storage: the row is read while it is written.
        expect_alias(overlap("mul", 1),
                     [&] { tessera::mul(s, square, square.slice(0, 0, 1), square); });
        auto m = random_tensor<bool>(s, {8}, domain::any, rng);
        auto keep = [](float x) { return x; };
        expect_alias(overlap("where", 2), [&] { tessera::where(s, m, other, head, tail); });
        expect_alias(overlap("map", 0), [&] { tessera::map_into(s, keep, head, tail); });
        auto pick = [](bool on, float x, float y) { return on ? x : y; };
        expect_alias(overlap("zip", 2), [&] { tessera::zip_into(s, pick, tail, m, other, head); });
    });
}

TEST_P(ElementwiseValidationTest, ExactAliasingIsAnInPlaceOpAndAllowed) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        auto a = random_tensor<double>(s, {5, 6}, domain::any, rng);
        auto b = random_tensor<double>(s, {6}, domain::any, rng);
        // The same elements through a flipped, transposed view; as input 0 and as out.
        const tensor_view<double> odd = a.view().transpose().flip(0);
        auto want = reference_of(
            odd.shape(), [](double x, double y) { return widen(x) - widen(y); }, odd,
            b.view().reshape({6, 1}));
        tessera::sub(s, odd, b.view().reshape({6, 1}), odd);
        EXPECT_TRUE(matches(odd, want, tolerance_for<double>(kind::rounded)));
        // The same elements through an independently built view with equal shape and strides.
        const tensor_view<double> rebuilt(a.data() + 5, shape{6, 5}, {-1, 6});
        want = reference_of(
            rebuilt.shape(), [](double x) { return -widen(x); }, rebuilt);
        tessera::neg(s, odd, rebuilt);
        EXPECT_TRUE(matches(rebuilt, want, tolerance{}));
        // Views over one buffer that do not overlap at all.
        auto buffer = random_tensor<float>(s, {2, 8}, domain::any, rng);
        const tensor_view<float> top = buffer.view().slice(0, 0, 1),
                                 bottom = buffer.view().slice(0, 1, 2);
        const auto sum = reference_of(
            shape{1, 8}, [](float x, float y) { return widen(x) + widen(y); }, top, top);
        tessera::add(s, top, top, bottom);
        EXPECT_TRUE(matches(bottom, sum, tolerance_for<float>(kind::rounded)));
    });
}

// The same elements in the same order are an in-place op however the views were made: a reshaped
// view keeps a stale stride past its rank and a squeezed one does not, and an extent-1 axis may
// carry any stride. Only strides of axes with more than one element may decide. (An earlier
// overlap check compared all max_rank stored strides and rejected both as partial overlaps.)
TEST_P(ElementwiseValidationTest, ExactAliasThroughAnotherRouteIsAllowed) {
    be_.run([](session& s) {
        auto t = filled<float>(s, {3, 2, 2}, 1.0f);
        const tensor_view<float> sliced = t.view().slice(2, 0, 1);  // [3,2,1], not contiguous
        EXPECT_NO_THROW(
            tessera::add(s, sliced.squeeze(2), sliced.squeeze(2), sliced.reshape({3, 2})));
        auto u = filled<float>(s, {1, 8}, 1.0f);
        const tensor_view<float> every_other = u.view().slice(1, 0, tessera::slice_end, 2);
        const tensor_view<float> zero_stride_row(u.data(), shape{1, 4}, {0, 2});
        EXPECT_NO_THROW(tessera::add(s, zero_stride_row, zero_stride_row, every_other));
        for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(t(i, 0, 0) + t(i, 1, 0), 4.0f);
        for (std::size_t j = 0; j < 8; j += 2) EXPECT_EQ(u(0, j), 2.0f);
    });
}

// An out that starts at an input's address but has a wider element type is not the same
// elements: each write would run ahead of the reads (an earlier dense path allowed it and gave
// 1, 1.875, 0, 1.98 instead of 1, 2, 3, 4). The views reinterpret one buffer as two element
// types, which the op must refuse before touching it.
TEST_P(ElementwiseValidationTest, OutOverAnInputOfAnotherElementSizeIsAnAliasError) {
    be_.run([](session& s) {
        auto buffer = filled<float>(s, {8}, 0.0f);
        for (std::size_t i = 0; i < 8; ++i) buffer.values()[i] = static_cast<float>(i + 1);
        const auto before = snapshot(buffer);
        const tensor_view<const float> in(buffer.data(), shape{4});
        const tensor_view<double> out(reinterpret_cast<double*>(buffer.data()), shape{4});
        EXPECT_THROW(tessera::zip_into(
                         s, [](float x) { return static_cast<double>(x); }, out, in),
                     tessera::alias_error);
        EXPECT_TRUE(unchanged(buffer, before));
    });
}

TEST_P(ElementwiseValidationTest, OutThatRepeatsElementsIsAnAliasError) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        auto a = random_tensor<float>(s, {3, 4}, domain::any, rng);
        auto m = random_tensor<bool>(s, {3, 4}, domain::any, rng);
        auto row = filled<float>(s, {4});
        auto flags = filled<bool>(s, {4});
        const auto row_before = snapshot(row);
        const auto flags_before = snapshot(flags);
        const tensor_view<float> repeated = row.view().broadcast_to({3, 4});
        auto repeats = [](const char* op) {
            return std::string(op) +
                   ": out repeats elements (an axis with stride 0); it cannot be written";
        };
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::add(s, a, a, repeated); }),
                  repeats("add"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::sqrt(s, a, repeated); }),
                  repeats("sqrt"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::where(s, m, a, a, repeated); }),
                  repeats("where"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] {
                      tessera::zip_into(
                          s, [](float x) { return x; }, repeated, a);
                  }),
                  repeats("zip"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] {
                      tessera::less(s, a, a, flags.view().broadcast_to({3, 4}));
                  }),
                  repeats("less"));
        // Also an explicit stride of 0 on an inner axis, and in place on a broadcast view.
        const tensor_view<float> inner(row.data(), shape{4, 3}, {1, 0});
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::mul(s, inner, inner, inner); }),
                  repeats("mul"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::relu.inplace(s, repeated); }),
                  repeats("relu"));
        EXPECT_TRUE(unchanged(row, row_before));
        EXPECT_TRUE(unchanged(flags, flags_before));
        // A stride-0 axis of extent 1 repeats nothing and is a valid out.
        const tensor_view<float> single(row.data(), shape{1, 4}, {0, 1});
        tessera::add(s, a.view().slice(0, 2, 3), a.view().slice(0, 0, 1), single);
        for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(row.values()[j], a(2, j) + a(0, j));
    });
}

TEST_P(ElementwiseValidationTest, ElementCountOverflowIsAShapeError) {
    be_.run([](session& s) {
        const std::size_t big = std::size_t{1} << 33;
        float one = 1.0f;
        const tensor_view<const float> column(&one, shape{big, 1}, {0, 0});
        const tensor_view<const float> row(&one, shape{1, big}, {0, 0});
        auto out = filled<float>(s, {2});
        const auto before = snapshot(out);
        EXPECT_THROW(tessera::add(s, column, row, out), tessera::shape_error);
        EXPECT_THROW(auto r = tessera::add(s, column, row), tessera::shape_error);
        EXPECT_THROW(
            tessera::where(s, tessera::as_view(filled<bool>(s, {1})), column, row, out.view()),
            tessera::shape_error);
        EXPECT_TRUE(unchanged(out, before));
        EXPECT_THROW((void)shape({big, big}), tessera::shape_error);
        // A count that fits but whose bytes do not is refused by the allocating form.
        const tensor_view<const float> huge(&one, shape{std::size_t{1} << 62}, {0});
        EXPECT_THROW(auto r = tessera::neg(s, huge), tessera::allocation_error);
    });
}

TEST_P(ElementwiseValidationTest, RankAboveEightIsAShapeError) {
    be_.run([](session& s) {
        EXPECT_THROW((void)shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), tessera::shape_error);
        auto eight = filled<float>(s, {1, 2, 1, 2, 1, 2, 1, 2}, 1.5f);
        EXPECT_THROW((void)eight.view().unsqueeze(0), tessera::shape_error);
        auto sum = tessera::add(s, eight, eight.view().transpose());
        EXPECT_EQ(sum.rank(), 8u);
        EXPECT_TRUE(same_shape(sum.shape(), shape{2, 2, 2, 2, 2, 2, 2, 2}));
        for (float v : sum.values()) EXPECT_EQ(v, 3.0f);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseValidationTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// ---------------------------------------------------------------------------------------------
// Dispatch counts: the inline-or-parallel decision, pinned exactly.

struct dispatches {
    std::uint64_t parallel = 0, inlined = 0;
    friend bool operator==(const dispatches&, const dispatches&) = default;
};
void PrintTo(const dispatches& d, std::ostream* os) {
    *os << "{parallel " << d.parallel << ", inline " << d.inlined << "}";
}

/// The dispatches made by one session running `fn`.
template <class Fn>
dispatches dispatches_of(backend& be, Fn fn) {
    const tessera::stats before = be.stats();
    be.run([&](session& s) { fn(s); });
    const tessera::stats d = be.stats() - before;
    return {d.parallel_dispatches, d.inline_dispatches};
}

constexpr dispatches one_inline{0, 1};
constexpr dispatches one_parallel{1, 0};

/// An op on n elements, in whichever of float and complex<float> it accepts.
template <class Case>
void run_binary_on(session& s, const Case& c, std::size_t n) {
    auto a = filled<float>(s, {n}, 1.5f);
    auto r = c.op(s, a, a);
}
template <class Case>
void run_unary_on(session& s, const Case& c, std::size_t n) {
    using T = std::conditional_t<Case::accepts_type::template value<float>, float, cf>;
    auto a = filled<T>(s, {n}, T{1.5f});
    auto r = c.op(s, a);
}

class ElementwiseDispatchTest : public ::testing::TestWithParam<int> {};

TEST_P(ElementwiseDispatchTest, TinyOpsRunInline) {
    backend be{backend_options{}.with_threads(GetParam())};
    auto d = dispatches_of(be, [](session& s) {
        auto a = filled<float>(s, {8}, 1.0f);
        auto m = filled<bool>(s, {8}, true);
        for (int i = 0; i < 10; ++i) {
            tessera::add(s, a, a, a);
            tessera::exp.inplace(s, a);
            tessera::where(s, m, a, a, a.view());
            tessera::map_into(
                s, [](float x) { return x * 0.5f; }, a, a.view());
            tessera::zip_into(
                s, [](float x, bool on) { return on ? x : 0.0f; }, a.view(), a, m);
        }
    });
    EXPECT_EQ(d, (dispatches{0, 50}));
}

TEST(ElementwiseGrainTest, TinyOpsOnASixteenThreadBackendNeverDispatchInParallel) {
    backend be{backend_options{}.with_threads(16)};
    auto d = dispatches_of(be, [](session& s) {
        std::apply([&](const auto&... c) { (run_binary_on(s, c, 8), ...); }, binary_cases);
        std::apply([&](const auto&... c) { (run_unary_on(s, c, 8), ...); }, unary_cases);
    });
    constexpr auto ops =
        std::tuple_size_v<decltype(binary_cases)> + std::tuple_size_v<decltype(unary_cases)>;
    EXPECT_EQ(d, (dispatches{0, ops}));
}

TEST_P(ElementwiseDispatchTest, LargeOpsDispatchOnceInParallelOnlyOnAMultiThreadBackend) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    const std::size_t n = be.options().grain + 1;
    const dispatches want = threads > 1 ? one_parallel : one_inline;
    float one = 1.0f;
    const tensor_view<const float> scalar(&one, shape{});
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n}, 1.0f);
                                auto r = tessera::add(s, a, a);
                            }),
              want);
    // The count is the result's: a scalar against n elements.
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n}, 1.0f);
                                auto r = tessera::mul(s, scalar, a);
                            }),
              want);
    // Strided operands take the strided kernel, still in one dispatch.
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n, 2}, 1.0f);
                                auto b = filled<float>(s, {2, 2 * n}, 1.0f);
                                auto out = filled<float>(s, {n, 2}, 0.0f);
                                tessera::sub(s, a.view().transpose(),
                                             b.view().slice(1, 0, tessera::slice_end, 2),
                                             out.view().transpose().flip(1));
                            }),
              want);
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n, 2}, 1.0f);
                                auto m = filled<bool>(s, {n, 1}, true);
                                auto r =
                                    tessera::where(s, m, a.view().transpose().transpose(), scalar);
                            }),
              want);
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n}, 1.0f);
                                auto r = tessera::zip(
                                    s, [](float x, float y, float z) { return x + y * z; }, a, a,
                                    scalar);
                            }),
              want);
    // A one-thread backend stays inline however large the op and however small the grain.
    if (threads == 1) {
        backend tiny_grain{backend_options{}.with_threads(1).with_grain(1)};
        EXPECT_EQ(dispatches_of(tiny_grain,
                                [&](session& s) {
                                    auto a = filled<float>(s, {4096}, 1.0f);
                                    auto r = tessera::exp(s, a);
                                }),
                  one_inline);
    }
}

TEST_P(ElementwiseDispatchTest, ZeroSizeOpsDispatchNothing) {
    backend be{backend_options{}.with_threads(GetParam()).with_grain(1)};
    EXPECT_EQ(dispatches_of(be,
                            [](session& s) {
                                auto a = tessera::empty<float>(s, {0, 3});
                                auto r = tessera::add(s, a, filled<float>(s, {3}, 1.0f));
                                tessera::exp(s, a, r);
                            }),
              (dispatches{0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseDispatchTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// Transcendental ops count each element as 8 cheap ones: they go parallel above grain / 8
// elements, cheap ops above grain. Both sides of both thresholds, for every op.
TEST(ElementwiseGrainTest, TranscendentalOpsGoParallelAtAnEighthOfTheCheapGrain) {
    constexpr std::size_t grain = 8 * 1000;
    backend be{backend_options{}.with_threads(2).with_grain(grain)};
    auto expect_threshold = [&](const char* name, work cost, auto run) {
        SCOPED_TRACE(name);
        if (cost == work::transcendental) {
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain / 8); }), one_inline);
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain / 8 + 1); }), one_parallel);
        } else {
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain / 8 + 1); }), one_inline);
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain); }), one_inline);
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain + 1); }), one_parallel);
        }
    };
    std::apply(
        [&](const auto&... c) {
            (expect_threshold(c.name, c.cost,
                              [&](session& s, std::size_t n) { run_binary_on(s, c, n); }),
             ...);
        },
        binary_cases);
    std::apply(
        [&](const auto&... c) {
            (expect_threshold(c.name, c.cost,
                              [&](session& s, std::size_t n) { run_unary_on(s, c, n); }),
             ...);
        },
        unary_cases);
    expect_threshold("clamp", work::cheap, [](session& s, std::size_t n) {
        auto r = tessera::clamp(s, filled<float>(s, {n}, 2.0f), 0.0f, 1.0f);
    });
    expect_threshold("where", work::cheap, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 2.0f);
        auto r = tessera::where(s, filled<bool>(s, {n}, false), a, a);
    });
    expect_threshold("map", work::cheap, [](session& s, std::size_t n) {
        auto r = tessera::map(
            s, [](float x) { return std::exp(x); }, filled<float>(s, {n}, 2.0f));
    });
    expect_threshold("zip", work::cheap, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 2.0f);
        tessera::zip_into(
            s, [](float x, float y) { return x * y; }, a.view(), a, a);
    });
    // The in-place and out-parameter forms decide the same way.
    expect_threshold("exp.inplace", work::transcendental, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 0.5f);
        tessera::exp.inplace(s, a);
    });
    expect_threshold("add.inplace", work::cheap, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 0.5f);
        tessera::add.inplace(s, a, a);
    });
}

// ---------------------------------------------------------------------------------------------
// Heap allocations and pool traffic: a warm session makes none.

constexpr std::size_t chain_length = 8;
using chain_values = std::array<float, chain_length>;

// 25 ops, each reading the previous result; run 4 times for a chain of 100.
void out_parameter_chain(session& s, tensor<float>& p, tensor<float>& q, const tensor<float>& y,
                         tensor<bool>& m) {
    auto step = [&](auto&& op) {
        op(p, q);
        std::swap(p, q);
    };
    const auto half = [](float x) { return x * 0.5f + 1.0f; };
    const auto fused = [](float x, float y2) { return x - y2 * 0.25f; };
    step([&](auto& in, auto& out) { tessera::add(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::mul(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::sub(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::div(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::maximum(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::minimum(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::neg(s, in, out); });
    step([&](auto& in, auto& out) { tessera::abs(s, in, out); });
    step([&](auto& in, auto& out) { tessera::square(s, in, out); });
    step([&](auto& in, auto& out) { tessera::relu(s, in, out); });
    step([&](auto& in, auto& out) { tessera::sqrt(s, in, out); });
    step([&](auto& in, auto& out) { tessera::tanh(s, in, out); });
    step([&](auto& in, auto& out) { tessera::sigmoid(s, in, out); });
    step([&](auto& in, auto& out) { tessera::sin(s, in, out); });
    step([&](auto& in, auto& out) { tessera::cos(s, in, out); });
    step([&](auto& in, auto& out) { tessera::exp(s, in, out); });
    step([&](auto& in, auto& out) { tessera::log(s, in, out); });
    step([&](auto& in, auto& out) { tessera::clamp(s, in, 0.5f, 2.0f, out.view()); });
    step([&](auto& in, auto& out) { tessera::rsqrt(s, in, out); });
    step([&](auto& in, auto& out) { tessera::pow(s, in, y, out); });
    tessera::less(s, p, y, m);
    step([&](auto& in, auto& out) { tessera::where(s, m, in, y, out.view()); });
    step([&](auto& in, auto& out) { tessera::map_into(s, half, in, out.view()); });
    step([&](auto& in, auto& out) { tessera::zip_into(s, fused, out.view(), in, y); });
    step([&](auto& in, auto& out) { tessera::conj(s, in, out); });
}

// The same 25 ops in the allocating form; each result replaces (and frees) the previous one.
tensor<float> allocating_chain(session& s, tensor<float> cur, const tensor<float>& y) {
    const auto half = [](float x) { return x * 0.5f + 1.0f; };
    const auto fused = [](float x, float y2) { return x - y2 * 0.25f; };
    cur = tessera::add(s, cur, y);
    cur = tessera::mul(s, cur, y);
    cur = tessera::sub(s, cur, y);
    cur = tessera::div(s, cur, y);
    cur = tessera::maximum(s, cur, y);
    cur = tessera::minimum(s, cur, y);
    cur = tessera::neg(s, cur);
    cur = tessera::abs(s, cur);
    cur = tessera::square(s, cur);
    cur = tessera::relu(s, cur);
    cur = tessera::sqrt(s, cur);
    cur = tessera::tanh(s, cur);
    cur = tessera::sigmoid(s, cur);
    cur = tessera::sin(s, cur);
    cur = tessera::cos(s, cur);
    cur = tessera::exp(s, cur);
    cur = tessera::log(s, cur);
    cur = tessera::clamp(s, cur, 0.5f, 2.0f);
    cur = tessera::rsqrt(s, cur);
    cur = tessera::pow(s, cur, y);
    cur = tessera::where(s, tessera::less(s, cur, y), cur, y);
    cur = tessera::map(s, half, cur);
    cur = tessera::zip(s, fused, cur, y);
    cur = tessera::conj(s, cur);
    return cur;
}

class ElementwiseAllocationTest : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        const std::uint64_t seed = fresh_seed();
        trace_ = seed_text(seed);
        std::mt19937_64 rng(seed);
        for (float& v : x_) v = draw_real<float>(domain::small, rng) / 4.0f;             // [-1, 1]
        for (float& v : y_) v = 1.0f + draw_real<float>(domain::positive, rng) / 10.0f;  // [1, 2]
    }
    template <class T>
    static void load(tensor<T>& t, const std::array<T, chain_length>& values) {
        std::copy(values.begin(), values.end(), t.values().begin());
    }
    std::string trace_;
    chain_values x_{}, y_{};
};

TEST_P(ElementwiseAllocationTest, WarmOutParameterChainOfOneHundredOpsMakesNoHeapAllocation) {
    SCOPED_TRACE(trace_);
    backend be{backend_options{}.with_threads(GetParam())};
    chain_values result{};
    auto session_body = [&](session& s) {
        auto p = tessera::empty<float>(s, {chain_length});
        auto q = tessera::empty<float>(s, {chain_length});
        auto y = tessera::empty<float>(s, {chain_length});
        auto m = tessera::empty<bool>(s, {chain_length});
        load(p, x_);
        load(y, y_);
        for (int round = 0; round < 4; ++round) out_parameter_chain(s, p, q, y, m);
        std::copy(p.values().begin(), p.values().end(), result.begin());
    };
    be.run(session_body);  // cold: the workspace gets its four blocks
    const tessera::stats cold = be.stats();
    EXPECT_EQ(cold.pool_misses, 4u);
    EXPECT_EQ(cold.pool_hits, 0u);
    EXPECT_EQ(cold.inline_dispatches, 100u);
    const chain_values cold_result = result;

    tessera::test::allocation_scope counted;
    be.run(session_body);
    EXPECT_EQ(counted.count(), 0u);
    const tessera::stats warm = be.stats() - cold;
    EXPECT_EQ(warm.pool_misses, 0u);
    EXPECT_EQ(warm.pool_hits, 4u);  // the four tensors; the 100 ops borrow nothing
    EXPECT_EQ(warm.inline_dispatches, 100u);
    EXPECT_EQ(warm.parallel_dispatches, 0u);
    EXPECT_EQ(result, cold_result);
    for (float v : result) EXPECT_TRUE(std::isfinite(v)) << v;
}

TEST_P(ElementwiseAllocationTest, WarmAllocatingChainOfOneHundredOpsMakesNoHeapAllocation) {
    SCOPED_TRACE(trace_);
    backend be{backend_options{}.with_threads(GetParam())};
    chain_values result{};
    auto session_body = [&](session& s) {
        auto cur = tessera::empty<float>(s, {chain_length});
        auto y = tessera::empty<float>(s, {chain_length});
        load(cur, x_);
        load(y, y_);
        for (int round = 0; round < 4; ++round) cur = allocating_chain(s, std::move(cur), y);
        std::copy(cur.values().begin(), cur.values().end(), result.begin());
    };
    be.run(session_body);
    const tessera::stats cold = be.stats();
    // cur and y, the first result while cur lives, and where's result while cur and the mask live.
    EXPECT_EQ(cold.pool_misses, 4u);
    EXPECT_EQ(cold.pool_hits, 2u + 100u - 4u);
    EXPECT_EQ(cold.inline_dispatches, 100u);
    const chain_values cold_result = result;

    tessera::test::allocation_scope counted;
    be.run(session_body);
    EXPECT_EQ(counted.count(), 0u);
    const tessera::stats warm = be.stats() - cold;
    EXPECT_EQ(warm.pool_misses, 0u);
    EXPECT_EQ(warm.pool_hits, 2u + 100u);  // two inputs and one result per op (less makes a mask)
    EXPECT_EQ(warm.inline_dispatches, 100u);
    EXPECT_EQ(result, cold_result);

    // The out-parameter chain computes the same values, to the bit.
    chain_values by_out{};
    be.run([&](session& s) {
        auto p = tessera::empty<float>(s, {chain_length});
        auto q = tessera::empty<float>(s, {chain_length});
        auto y = tessera::empty<float>(s, {chain_length});
        auto m = tessera::empty<bool>(s, {chain_length});
        load(p, x_);
        load(y, y_);
        for (int round = 0; round < 4; ++round) out_parameter_chain(s, p, q, y, m);
        std::copy(p.values().begin(), p.values().end(), by_out.begin());
    });
    EXPECT_EQ(by_out, result);
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseAllocationTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// ---------------------------------------------------------------------------------------------
// Integer pow must not square the base past the last bit of the exponent: pow(9, 9) in int32 would
// overflow an intermediate (9^16) although the result (387420489) fits, undefined behaviour that
// only a -fsanitize=undefined build reports; in a plain build this test passes either way.
TEST(PowTest, IntegerPowDoesNotOverflowBeyondItsResult) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        auto base = tessera::from<i32>(s, {9, -9, 46, 2});
        auto exponent = tessera::from<i32>(s, {9, 9, 5, 30});
        auto r = tessera::pow(s, base, exponent);
        EXPECT_EQ(r.values()[0], 387420489);
        EXPECT_EQ(r.values()[1], -387420489);
        EXPECT_EQ(r.values()[2], 205962976);
        EXPECT_EQ(r.values()[3], 1073741824);
    });
}

// ---------------------------------------------------------------------------------------------
// The original add tests.

class AddTest : public ::testing::TestWithParam<int> {};

TEST_P(AddTest, MatchesAFloat64ReferenceOnRandomInputs) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
    be.run([&](session& s) {
        for (std::size_t n : {1u, 7u, 8u, 1000u, 100000u}) {
            auto a = tessera::empty<float>(s, {n});
            auto b = tessera::empty<float>(s, {n});
            for (float& v : a.values()) v = dist(rng);
            for (float& v : b.values()) v = dist(rng);
            auto c = tessera::add(s, a, b);
            for (std::size_t i = 0; i < n; ++i) {
                const double want =
                    static_cast<double>(a.values()[i]) + static_cast<double>(b.values()[i]);
                ASSERT_NEAR(c.values()[i], want, 1e-5 * (1.0 + std::abs(want))) << n << " " << i;
            }
        }
    });
}

TEST_P(AddTest, OutParameterMayBeAnInputItself) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<double>(s, {3, 4}, 1.25);
        auto b = tessera::full<double>(s, {3, 4}, 2.0);
        tessera::add(s, a, b, a);
        for (double v : a.values()) EXPECT_EQ(v, 3.25);
        tessera::add(s, a, a, a);
        for (double v : a.values()) EXPECT_EQ(v, 6.5);
    });
}

TEST_P(AddTest, MismatchedShapesThrowBeforeWriting) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {3, 4}, 1.0f);
        auto b = tessera::full<float>(s, {4, 3}, 1.0f);
        auto out = tessera::full<float>(s, {3, 4}, -1.0f);
        try {
            tessera::add(s, a, b, out);
            FAIL() << "no exception";
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()), "add: shapes [3,4] and [4,3] do not broadcast");
        }
        for (float v : out.values()) EXPECT_EQ(v, -1.0f);
        EXPECT_THROW(tessera::add(s, a, b), tessera::shape_error);

        auto wrong_out = tessera::full<float>(s, {12}, -1.0f);
        try {
            tessera::add(s, a, a, wrong_out);
            FAIL() << "no exception";
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()),
                      "add: out has shape [12] but the result has shape [3,4]");
        }
        for (float v : wrong_out.values()) EXPECT_EQ(v, -1.0f);
    });
}

TEST_P(AddTest, TinyOpNeverDispatchesInParallel) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {8}, 1.0f);
        for (int i = 0; i < 100; ++i) tessera::add(s, a, a, a);
    });
    EXPECT_EQ(be.stats().parallel_dispatches, 0u);
    EXPECT_EQ(be.stats().inline_dispatches, 100u);
}

TEST_P(AddTest, LargeOpDispatchesOnceInParallelOnAMultiThreadBackend) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    const std::size_t n = be.options().grain + 1;
    be.run([&](session& s) {
        auto a = tessera::full<float>(s, {n}, 1.0f);
        auto c = tessera::add(s, a, a);
        EXPECT_EQ(c.values()[n - 1], 2.0f);
    });
    EXPECT_EQ(be.stats().parallel_dispatches, threads > 1 ? 1u : 0u);
    EXPECT_EQ(be.stats().inline_dispatches, threads > 1 ? 0u : 1u);
}

INSTANTIATE_TEST_SUITE_P(Threads, AddTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
