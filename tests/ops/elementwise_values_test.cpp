// Elementwise ops (ops/elementwise.hpp): every op in every form against a wide reference computed
// with plain loops on fresh random inputs, for each element type it accepts, and the element types
// each op rejects at compile time. A failure prints the seed; TESSERA_TEST_SEED=<seed> replays it.
#include "elementwise_support.hpp"

namespace {

using namespace tessera::test::elementwise;

// ---------------------------------------------------------------------------------------------
// Compile-time checks: ops that make no sense for a type do not compile, and the accepted element
// types of every op are exactly those of the tables in elementwise_support.hpp.

template <class Op, class T>
concept has_binary_in_place = requires(const Op& op, session& s, tensor<T>& a, const tensor<T>& b) {
    op(s, a, b, a);
};
template <class Op, class T>
concept has_unary_in_place = requires(const Op& op, session& s, tensor<T>& a) {
    op(s, a, a);
};
template <class Op, class V>
concept in_place_on = requires(const Op& op, session& s, const V& v) {
    op(s, v, v);
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
        static_assert(has_binary_in_place<Op, T> == std::is_same_v<R, T>,
                      "in place must compile exactly when the result type is the input type");
    } else {
        static_assert(!has_binary_in_place<Op, T>);
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
        static_assert(has_unary_in_place<Op, T> == std::is_same_v<R, T>,
                      "in place must compile exactly when the result type is the input type");
    } else {
        static_assert(!has_unary_in_place<Op, T>);
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
static_assert(!in_place_on<decltype(tessera::neg), tensor_view<const float>>);
static_assert(in_place_on<decltype(tessera::neg), tensor_view<float>>);
static_assert(!has_unary_in_place<decltype(tessera::abs), cf>);
static_assert(has_unary_in_place<decltype(tessera::abs), float>);
static_assert(!has_binary_in_place<decltype(tessera::less), float>);
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

            // In place: a = op(a, b), by passing a (tensor or view) as out.
            if constexpr (std::is_same_v<R, T>) {
                if (rs == sa) {
                    auto a1 = copy_of(s, a);
                    c.op(s, a1, b, a1);
                    EXPECT_TRUE(matches(a1.view(), want, tol)) << "in place (tensor)";
                    auto a2 = copy_of(s, a);
                    c.op(s, a2.view(), b, a2.view());
                    EXPECT_TRUE(matches(a2.view(), want, tol)) << "in place (view)";
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
                c.op(s, a1, a1);
                EXPECT_TRUE(matches(a1.view(), want, tol)) << "in place (tensor)";
                auto a2 = copy_of(s, a);
                c.op(s, a2.view(), a2.view());
                EXPECT_TRUE(matches(a2.view(), want, tol)) << "in place (view)";
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
            tessera::map(s, twice, tensor_view<const T>(a), mapped.view());
            EXPECT_TRUE(matches(mapped.view(), want_twice, exact)) << "map into out";
            auto a1 = copy_of(s, a);
            tessera::map(s, twice, a1, a1.view());
            EXPECT_TRUE(matches(a1.view(), want_twice, exact)) << "map in place";
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
                tessera::zip(s, fused, std::forward_as_tuple(a.view(), tensor_view<const T>(b)), flipped);
                EXPECT_TRUE(matches(flipped, want_fused, rounded)) << "zip into out, flipped";
            }

            // zip of three element types, the mask broadcast along the other axis.
            auto m = random_tensor<bool>(s, sb, domain::any, rng);
            auto k = random_tensor<i32>(s, sa, domain::ties, rng);
            auto pick = [](T x, bool on, i32 n) { return on ? x : static_cast<T>(n); };
            const auto want_pick = reference_of(
                rs, [](T x, bool on, i32 n) { return on ? widen(x) : widen(static_cast<T>(n)); },
                b.view(), m.view(), k.view());
            auto picked = filled<T>(s, rs);
            tessera::zip(s, pick, std::tie(b, m, k), picked.view());
            EXPECT_TRUE(matches(picked.view(), want_pick, exact)) << "zip into out, three inputs";
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
