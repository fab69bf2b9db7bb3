// Shared by the elementwise tests (tests/ops/elementwise_*_test.cpp): test-side type facts, seeds
// and random inputs, the wide reference and its tolerances, and the op tables that list every op
// with its reference, accepted element types, input domains and cost class.
#pragma once

#include "support/messages.hpp"
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

namespace tessera::test::elementwise {

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

inline std::string seed_text(std::uint64_t seed) {
    return "seed " + std::to_string(seed) +
           " (replay with TESSERA_TEST_SEED=" + std::to_string(seed) + ")";
}

inline std::string text(const shape& s) {
    std::string t = "[";
    for (std::size_t i = 0; i < s.rank(); ++i) {
        // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) of
        // `const char* + std::string` here.
        if (i) t += ',';
        t += std::to_string(s[i]);
    }
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
inline shape broadcast_shapes(const shape& a, const shape& b) {
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

inline ::testing::AssertionResult same_shape(const shape& got, const shape& want) {
    if (got == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "shape " << text(got) << ", want " << text(want);
}

using tessera::test::message_of;

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

inline constexpr std::tuple binary_cases{
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

inline constexpr std::tuple unary_cases{
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

}  // namespace tessera::test::elementwise
