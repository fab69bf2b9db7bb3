// sum, prod, mean, norm, max, min, argmax, argmin and their *_all forms: every form against an
// independent high-precision reference on fresh random inputs (contiguous, transposed, flipped,
// sliced, permuted, broadcast), keepdims shapes, accuracy of a 10M-element float sum, bitwise
// determinism across thread counts, bad input, dispatch counts and heap allocations.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tessera/tessera.hpp>
#include <type_traits>
#include <vector>

#include "support/messages.hpp"
#include "support/alloc_counter.hpp"
#include "support/backends.hpp"
#include "support/random.hpp"

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;
using tessera::test::fresh_seed;
using tessera::test::allocation_scope;

using cf = std::complex<float>;
using cd = std::complex<double>;
// The reference accumulates in long double (64-bit mantissa on x86-64): at least float64, and
// precise enough that its own rounding never matters next to the tolerances below.
using ld = long double;
using cld = std::complex<long double>;

template <class T>
using mean_t = std::conditional_t<tessera::floating<T>, T, double>;
template <class T>
using norm_t = std::conditional_t<tessera::floating<T>, tessera::real_type_t<T>, double>;

// Unit roundoff of the type an op computes in.
template <class T>
constexpr ld unit_roundoff() {
    return std::is_same_v<tessera::real_type_t<T>, float> ? 0x1p-24L : 0x1p-53L;
}

template <class T>
cld widen(T x) {
    if constexpr (tessera::is_complex_v<T>)
        return cld(x.real(), x.imag());
    else
        return cld(static_cast<ld>(x), 0);
}

// Values in [-2, 2] (floating; both parts for complex) or [-5, 5] (integers).
template <class T>
tensor<T> random_tensor(session& s, const shape& sh, std::uint64_t seed) {
    if constexpr (std::is_integral_v<T>)
        return tessera::uniform<T>(s, sh, T{-5}, T{5}, seed);
    else
        return tessera::uniform<T>(s, sh, -2, 2, seed);
}

// Axes as a test passes them: nullopt means "all" (the two-argument form).
using axes_t = std::optional<std::vector<std::ptrdiff_t>>;

std::string text(const axes_t& axes) {
    if (!axes) return "all";
    std::string t = "{";
    for (auto a : *axes) t += std::to_string(a) + ",";
    return t + "}";
}

std::uint32_t mask_of(const axes_t& axes, std::size_t rank) {
    if (!axes) return (1u << rank) - 1u;
    std::uint32_t m = 0;
    for (auto a : *axes) m |= 1u << (a < 0 ? a + static_cast<std::ptrdiff_t>(rank) : a);
    return m;
}

// The elements each output reduces, in row-major order of the reduced axes, and the expected
// result shape; computed by walking the view element by element.
template <class T>
struct buckets {
    std::vector<std::vector<T>> values;
    std::vector<std::size_t> dims;
};

template <class T>
buckets<T> gather(const tensor_view<const T>& in, std::uint32_t mask, bool keepdims) {
    buckets<T> b;
    const std::size_t r = in.rank();
    std::size_t outputs = 1;
    for (std::size_t a = 0; a < r; ++a) {
        const bool reduced = (mask >> a) & 1u;
        if (!reduced) {
            b.dims.push_back(in.extent(a));
            outputs *= in.extent(a);
        } else if (keepdims) {
            b.dims.push_back(1);
        }
    }
    b.values.resize(outputs);
    std::vector<std::size_t> index(r);
    for (std::size_t flat = 0; flat < in.size(); ++flat) {
        std::size_t rest = flat;
        for (std::size_t a = r; a-- > 0;) {
            index[a] = rest % in.extent(a);
            rest /= in.extent(a);
        }
        std::ptrdiff_t offset = 0;
        std::size_t o = 0;
        for (std::size_t a = 0; a < r; ++a) {
            offset += static_cast<std::ptrdiff_t>(index[a]) * in.stride(a);
            if (((mask >> a) & 1u) == 0) o = o * in.extent(a) + index[a];
        }
        b.values[o].push_back(in.data()[offset]);
    }
    return b;
}

// --- per-op reference checks -------------------------------------------------------------------

template <class T>
void expect_sum(const std::vector<T>& x, T got) {
    if constexpr (std::is_integral_v<T>) {
        std::uint64_t acc = 0;  // wrap-around reference
        for (T v : x) acc += static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
        EXPECT_EQ(got, static_cast<T>(acc));
    } else {
        cld ref = 0;
        ld scale = 0;
        for (T v : x) {
            ref += widen(v);
            scale += std::abs(widen(v));
        }
        const ld tol = 64 * unit_roundoff<T>() * scale;
        EXPECT_LE(std::abs(widen(got) - ref), tol) << "n=" << x.size();
    }
}

// Products of many values in [-2, 2] over- or underflow (correctly, but the reference does not):
// floating products are checked against the reference up to 64 factors, where |x| <= 2 keeps
// them finite; ProductsOfManyFactorsNearOneAreAccurate covers long products.
template <class T>
void expect_prod(const std::vector<T>& x, T got) {
    if constexpr (std::is_integral_v<T>) {
        std::uint64_t acc = 1;
        for (T v : x) acc *= static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
        EXPECT_EQ(got, static_cast<T>(acc));
    } else {
        if (x.size() > 64) return;
        cld ref = 1;
        for (T v : x) ref *= widen(v);
        const ld floor = 8 * static_cast<ld>(std::numeric_limits<tessera::real_type_t<T>>::min());
        const ld tol =
            (8 * static_cast<ld>(x.size()) + 16) * unit_roundoff<T>() * std::abs(ref) + floor;
        EXPECT_LE(std::abs(widen(got) - ref), tol) << "n=" << x.size();
    }
}

template <class T>
void expect_mean(const std::vector<T>& x, mean_t<T> got) {
    cld ref = 0;
    ld scale = 0;
    for (T v : x) {
        ref += widen(v);
        scale += std::abs(widen(v));
    }
    const auto n = static_cast<ld>(x.size());
    const ld tol = 64 * unit_roundoff<mean_t<T>>() * scale / n;
    EXPECT_LE(std::abs(widen(got) - ref / n), tol) << "n=" << x.size();
}

template <class T>
void expect_norm(const std::vector<T>& x, norm_t<T> got) {
    ld ssq = 0;
    for (T v : x) ssq += std::norm(widen(v));
    const ld ref = std::sqrt(ssq);
    EXPECT_LE(std::abs(static_cast<ld>(got) - ref), 64 * unit_roundoff<norm_t<T>>() * ref)
        << "n=" << x.size();
}

template <class T, bool Max>
void expect_extreme(const std::vector<T>& x, T got) {
    T best = x[0];
    for (T v : x) best = Max ? (best < v ? v : best) : (v < best ? v : best);
    EXPECT_EQ(got, best);
}

template <class T, bool Max>
void expect_arg(const std::vector<T>& x, std::int64_t got) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < x.size(); ++i)
        if (Max ? x[best] < x[i] : x[i] < x[best]) best = i;
    EXPECT_EQ(got, static_cast<std::int64_t>(best));
}

// Calls `fn` with axes as the test holds them: the two-argument form for "all" without keepdims,
// tessera::all_axes with keepdims, else the list (through axis_list's range constructor).
template <class Fn, class In>
auto call(session& s, const Fn& fn, const In& in, const axes_t& axes, bool keepdims) {
    if (!axes) return keepdims ? fn(s, in, tessera::all_axes, tessera::keepdims) : fn(s, in);
    return keepdims ? fn(s, in, *axes, tessera::keepdims) : fn(s, in, *axes);
}

// Checks the allocating result against the reference, then the out-parameter form against the
// allocating one, bit for bit.
template <class R, class Fn, class In, class Check, class T>
void check_op(session& s, const char* what, const Fn& fn, const In& in, const axes_t& axes,
              bool keepdims, const buckets<T>& b, const Check& check) {
    SCOPED_TRACE(what);
    tensor<R> r = call(s, fn, in, axes, keepdims);
    ASSERT_EQ(r.shape(), shape(std::span<const std::size_t>(b.dims)));
    for (std::size_t o = 0; o < b.values.size(); ++o) {
        SCOPED_TRACE("output " + std::to_string(o));
        check(b.values[o], r.values()[o]);
    }
    auto out = tessera::full<R>(s, r.shape(), R{7});
    if (!axes)
        fn(s, in, tessera::all_axes, out.view());
    else
        fn(s, in, *axes, out.view());
    ASSERT_EQ(std::memcmp(out.data(), r.data(), r.size() * sizeof(R)), 0);
}

template <class V>
bool same_bits(const V& a, const V& b) {
    return std::memcmp(&a, &b, sizeof(V)) == 0;
}

template <class T>
void check_every_op(session& s, const tensor_view<const T>& in, const axes_t& axes, bool keepdims) {
    SCOPED_TRACE("axes " + text(axes) + (keepdims ? " keepdims" : ""));
    const std::uint32_t mask = mask_of(axes, in.rank());
    const buckets<T> b = gather(in, mask, keepdims);
    const bool has_elements = b.values.empty() || !b.values[0].empty();

    check_op<T>(s, "sum", tessera::sum, in, axes, keepdims, b,
                [](const auto& x, T got) { expect_sum(x, got); });
    check_op<T>(s, "prod", tessera::prod, in, axes, keepdims, b,
                [](const auto& x, T got) { expect_prod(x, got); });
    check_op<norm_t<T>>(s, "norm", tessera::norm, in, axes, keepdims, b,
                        [](const auto& x, norm_t<T> got) { expect_norm(x, got); });
    if (has_elements)
        check_op<mean_t<T>>(s, "mean", tessera::mean, in, axes, keepdims, b,
                            [](const auto& x, mean_t<T> got) { expect_mean(x, got); });
    if (!axes && !keepdims && has_elements) {  // the scalar forms agree bit for bit (NaN included)
        EXPECT_TRUE(same_bits(tessera::sum_all(s, in), tessera::sum(s, in).values()[0]));
        EXPECT_TRUE(same_bits(tessera::prod_all(s, in), tessera::prod(s, in).values()[0]));
        EXPECT_TRUE(same_bits(tessera::mean_all(s, in), tessera::mean(s, in).values()[0]));
        EXPECT_TRUE(same_bits(tessera::norm_all(s, in), tessera::norm(s, in).values()[0]));
    }
    if constexpr (tessera::real_numeric<T>) {
        if (!has_elements) return;
        check_op<T>(s, "max", tessera::max, in, axes, keepdims, b,
                    [](const auto& x, T got) { expect_extreme<T, true>(x, got); });
        check_op<T>(s, "min", tessera::min, in, axes, keepdims, b,
                    [](const auto& x, T got) { expect_extreme<T, false>(x, got); });
        if (!axes && !keepdims) {
            EXPECT_EQ(tessera::max_all(s, in), tessera::max(s, in).values()[0]);
            EXPECT_EQ(tessera::min_all(s, in), tessera::min(s, in).values()[0]);
            EXPECT_EQ(tessera::argmax_all(s, in), tessera::argmax(s, in).values()[0]);
            EXPECT_EQ(tessera::argmin_all(s, in), tessera::argmin(s, in).values()[0]);
        }
        // argmax/argmin take one axis or all of them.
        if (axes && axes->size() != 1) return;
        const axes_t one = axes;
        auto arg = [&](const auto& fn, const char* what, auto check) {
            SCOPED_TRACE(what);
            tensor<std::int64_t> r =
                !one ? (keepdims ? fn(s, in, tessera::all_axes, tessera::keepdims) : fn(s, in))
                     : (keepdims ? fn(s, in, (*one)[0], tessera::keepdims) : fn(s, in, (*one)[0]));
            ASSERT_EQ(r.shape(), shape(std::span<const std::size_t>(b.dims)));
            for (std::size_t o = 0; o < b.values.size(); ++o) check(b.values[o], r.values()[o]);
            auto out = tessera::full<std::int64_t>(s, r.shape(), -7);
            if (!one)
                fn(s, in, tessera::all_axes, out.view());
            else
                fn(s, in, (*one)[0], out.view());
            for (std::size_t o = 0; o < r.size(); ++o) ASSERT_EQ(out.values()[o], r.values()[o]);
        };
        arg(tessera::argmax, "argmax",
            [](const auto& x, std::int64_t got) { expect_arg<T, true>(x, got); });
        arg(tessera::argmin, "argmin",
            [](const auto& x, std::int64_t got) { expect_arg<T, false>(x, got); });
    }
}

// Views of `t` ([d0, d1, d2]) that exercise strides: transposed, flipped, stepped, permuted.
template <class T>
std::vector<std::pair<std::string, tensor_view<const T>>> views_of(const tensor<T>& t) {
    const tensor_view<const T> v = t;
    return {{"contiguous", v},
            {"transpose", v.transpose()},
            {"flip0", v.flip(0)},
            {"flip12", v.flip(2).flip(1)},
            {"step2", v.slice(1, 0, tessera::slice_end, 2)},
            {"reversed-step", v.slice(2, -1, tessera::slice_end, -2)},
            {"permute", v.permute({1, 2, 0})}};
}

const std::vector<axes_t>& rank3_axis_sets() {
    static const std::vector<axes_t> sets{std::nullopt,
                                          std::vector<std::ptrdiff_t>{},
                                          std::vector<std::ptrdiff_t>{0},
                                          std::vector<std::ptrdiff_t>{1},
                                          std::vector<std::ptrdiff_t>{2},
                                          std::vector<std::ptrdiff_t>{-1},
                                          std::vector<std::ptrdiff_t>{0, 2},
                                          std::vector<std::ptrdiff_t>{2, 0},
                                          std::vector<std::ptrdiff_t>{-3, -2},
                                          std::vector<std::ptrdiff_t>{0, 1, 2}};
    return sets;
}

class ReduceTest : public ::testing::TestWithParam<int> {};

template <class T>
void small_inputs_for_type(session& s) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto t = random_tensor<T>(s, {3, 4, 5}, seed);
    for (const auto& [name, v] : views_of(t)) {
        SCOPED_TRACE(name);
        for (const axes_t& axes : rank3_axis_sets())
            for (bool keepdims : {false, true}) check_every_op<T>(s, v, axes, keepdims);
    }
    // A broadcast input: stride-0 axes, reduced and kept.
    const auto row = random_tensor<T>(s, {4, 1}, seed + 1);
    const tensor_view<const T> b = row.view().broadcast_to({3, 4, 5});
    for (const axes_t& axes : rank3_axis_sets()) check_every_op<T>(s, b, axes, false);
    // Rank 0 and rank 1.
    const auto scalar = random_tensor<T>(s, shape(), seed + 2);
    check_every_op<T>(s, scalar, std::nullopt, false);
    check_every_op<T>(s, scalar, std::vector<std::ptrdiff_t>{}, true);
    const auto line = random_tensor<T>(s, {1000}, seed + 3);
    check_every_op<T>(s, line, std::nullopt, true);
    check_every_op<T>(s, line.view().flip(0), std::vector<std::ptrdiff_t>{-1}, false);
    check_every_op<T>(s, line.view().slice(0, 1, tessera::slice_end, 3),
                      std::vector<std::ptrdiff_t>{0}, false);
}

TEST_P(ReduceTest, EveryOpMatchesAReferenceOnSmallInputsAndViews) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        small_inputs_for_type<float>(s);
        small_inputs_for_type<double>(s);
        small_inputs_for_type<std::int32_t>(s);
        small_inputs_for_type<std::int64_t>(s);
        small_inputs_for_type<cf>(s);
        small_inputs_for_type<cd>(s);
    });
}

// Shapes with many leaves per output, partial tiles (37 = 2 * 16 + 5 columns) and nd walks.
template <class T>
void larger_inputs_for_type(session& s) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto t = random_tensor<T>(s, {130, 7, 37}, seed);
    const tensor_view<const T> v = t;
    const std::vector<axes_t> sets{std::nullopt,
                                   std::vector<std::ptrdiff_t>{0},
                                   std::vector<std::ptrdiff_t>{1},
                                   std::vector<std::ptrdiff_t>{-1},
                                   std::vector<std::ptrdiff_t>{0, 2},
                                   std::vector<std::ptrdiff_t>{0, 1}};
    for (const auto& [name, view] :
         {std::pair{"contiguous", v}, std::pair{"transpose", v.transpose()},
          std::pair{"flip0", v.flip(0)}}) {
        SCOPED_TRACE(name);
        for (const axes_t& axes : sets)
            for (bool keepdims : {false, true}) check_every_op<T>(s, view, axes, keepdims);
    }
    const auto m = random_tensor<T>(s, {300, 37}, seed + 1);
    for (const axes_t& axes :
         {axes_t{std::vector<std::ptrdiff_t>{0}}, axes_t{std::vector<std::ptrdiff_t>{1}}}) {
        check_every_op<T>(s, m.view(), axes, false);
        check_every_op<T>(s, m.view().transpose(), axes, false);
    }
}

TEST_P(ReduceTest, EveryOpMatchesAReferenceOnLargerInputs) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        larger_inputs_for_type<float>(s);
        larger_inputs_for_type<double>(s);
        larger_inputs_for_type<std::int32_t>(s);
        larger_inputs_for_type<std::int64_t>(s);
        larger_inputs_for_type<cf>(s);
        larger_inputs_for_type<cd>(s);
    });
}

// Above the grain: outputs spread over threads, and few outputs split their trees.
template <class T>
void parallel_inputs_for_type(session& s) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto wide = random_tensor<T>(s, {3, 70001}, seed);  // 3 long rows: split trees
    check_every_op<T>(s, wide, std::vector<std::ptrdiff_t>{1}, false);
    check_every_op<T>(s, wide, std::nullopt, false);
    const auto tall = random_tensor<T>(s, {70001, 3}, seed + 1);  // one narrow tile, split
    check_every_op<T>(s, tall, std::vector<std::ptrdiff_t>{0}, true);
    const auto square = random_tensor<T>(s, {600, 601}, seed + 2);  // many outputs
    check_every_op<T>(s, square, std::vector<std::ptrdiff_t>{0}, false);
    check_every_op<T>(s, square.view().transpose(), std::vector<std::ptrdiff_t>{0}, false);
    check_every_op<T>(s, square.view().flip(1), std::vector<std::ptrdiff_t>{1}, false);
}

TEST_P(ReduceTest, LargeReductionsMatchAReference) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        parallel_inputs_for_type<float>(s);
        parallel_inputs_for_type<double>(s);
        parallel_inputs_for_type<std::int32_t>(s);
        parallel_inputs_for_type<cd>(s);
    });
}

TEST_P(ReduceTest, KeepdimsAndAxisFormsGiveTheDocumentedShapes) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {2, 3, 4}, 1.0f);
        EXPECT_EQ(tessera::sum(s, a).shape(), shape());
        EXPECT_EQ(tessera::sum(s, a, tessera::all_axes, tessera::keepdims).shape(), shape({1, 1, 1}));
        EXPECT_EQ(tessera::sum(s, a, {1}).shape(), shape({2, 4}));
        EXPECT_EQ(tessera::sum(s, a, {1}, tessera::keepdims).shape(), shape({2, 1, 4}));
        EXPECT_EQ(tessera::sum(s, a, {-1, 0}).shape(), shape({3}));
        EXPECT_EQ(tessera::sum(s, a, {-1, 0}, tessera::keepdims).shape(), shape({1, 3, 1}));
        EXPECT_EQ(tessera::sum(s, a, {}).shape(), shape({2, 3, 4}));  // no axis: NumPy's axis=()
        EXPECT_EQ(tessera::sum(s, a, 2).shape(), shape({2, 3}));      // one integer axis
        const std::array<std::ptrdiff_t, 2> arr{0, 2};
        EXPECT_EQ(tessera::sum(s, a, arr).shape(), shape({3}));
        EXPECT_EQ(tessera::sum(s, a, std::span<const std::ptrdiff_t>(arr)).shape(), shape({3}));
        EXPECT_EQ(tessera::argmax(s, a, 1).shape(), shape({2, 4}));
        EXPECT_EQ(tessera::argmax(s, a, -1, tessera::keepdims).shape(), shape({2, 3, 1}));
        EXPECT_EQ(tessera::argmax(s, a).shape(), shape());
        EXPECT_EQ(tessera::argmax(s, a, tessera::all_axes, tessera::keepdims).shape(), shape({1, 1, 1}));
        EXPECT_EQ(tessera::sum(s, a, {1}).values()[0], 3.0f);
        EXPECT_EQ(tessera::sum_all(s, a), 24.0f);

        static_assert(
            std::is_same_v<decltype(tessera::mean_all(s, tessera::full<std::int32_t>(s, {2}, 1))),
                           double>);
        static_assert(
            std::is_same_v<decltype(tessera::norm_all(s, tessera::full<cf>(s, {2}, cf{}))), float>);
        static_assert(
            std::is_same_v<decltype(tessera::norm(s, tessera::full<std::int64_t>(s, {2}, 1))),
                           tensor<double>>);
        static_assert(std::is_same_v<decltype(tessera::argmax(s, a)), tensor<std::int64_t>>);
    });
}

TEST_P(ReduceTest, OutParameterMayHaveAnyStrides) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const auto a = random_tensor<double>(s, {5, 6, 7}, fresh_seed());
        auto store = tessera::full<double>(s, {7, 5}, -1.0);
        const tensor_view<double> out = store.view().transpose();  // [5, 7], strides (1, 5)
        tessera::sum(s, a, {1}, out);
        const auto want = tessera::sum(s, a, {1});
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t k = 0; k < 7; ++k) EXPECT_EQ(out(i, k), want(i, k));

        auto store2 = tessera::full<std::int64_t>(s, {35, 2}, -1);
        const tensor_view<std::int64_t> every_other = store2.view().slice(1, 0, 1).reshape({5, 7});
        const auto in = a.view().transpose(1, 2);  // [5, 7, 6]
        tessera::argmin(s, in, 2, every_other);
        const auto want_idx = tessera::argmin(s, in, 2);
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t k = 0; k < 7; ++k) EXPECT_EQ(every_other(i, k), want_idx(i, k));
        for (std::size_t i = 0; i < 35; ++i) EXPECT_EQ(store2(i, 1), -1);  // untouched

        double total = -1.0;  // the full reduction into a rank-0 view of a plain variable
        tessera::sum(s, a, tessera::all_axes, tensor_view<double>(&total, shape()));
        EXPECT_EQ(total, tessera::sum_all(s, a));
    });
}

// 10M floats in [0, 1): the pairwise sum stays within 1e-6 of a float64 reference.
TEST(ReduceAccuracyTest, TenMillionFloatSumStaysWithinOnePpmOfFloat64) {
    backend be;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    be.run([&](session& s) {
        const std::size_t n = 10'000'000;
        const auto a = tessera::uniform<float>(s, {n}, 0.0f, 1.0f, seed);
        double ref = 0.0, ref_sq = 0.0;
        for (float v : a.values()) {
            ref += static_cast<double>(v);
            ref_sq += static_cast<double>(v) * static_cast<double>(v);
        }
        const double got = static_cast<double>(tessera::sum_all(s, a));
        EXPECT_LE(std::abs(got - ref) / ref, 1e-6);
        const double mean_ref = ref / static_cast<double>(n);
        EXPECT_LE(std::abs(static_cast<double>(tessera::mean_all(s, a)) - mean_ref) / mean_ref,
                  1e-6);
        const double norm_ref = std::sqrt(ref_sq);
        EXPECT_LE(std::abs(static_cast<double>(tessera::norm_all(s, a)) - norm_ref) / norm_ref,
                  1e-6);

        // Column sums walk tiles of outputs; each column still gets its own pairwise tree.
        const auto m = a.view().reshape({n / 4, 4});
        const auto cols = tessera::sum(s, m, {0});
        for (std::size_t c = 0; c < 4; ++c) {
            double col_ref = 0.0;
            for (std::size_t r = 0; r < n / 4; ++r) col_ref += static_cast<double>(m(r, c));
            EXPECT_LE(std::abs(static_cast<double>(cols(c)) - col_ref) / col_ref, 1e-6) << c;
        }
    });
}

// Why the tree is there: a plain float loop misses the same 1e-6 bound. Its error is a random
// walk (about 3e-5 here), so the demonstration uses a fixed seed to stay deterministic, plus the
// classic drift of adding 0.1f ten million times.
TEST(ReduceAccuracyTest, APlainFloatLoopMissesTheBoundThePairwiseSumMeets) {
    backend be;
    be.run([&](session& s) {
        const std::size_t n = 10'000'000;
        const auto a = tessera::uniform<float>(s, {n}, 0.0f, 1.0f, 42);
        double ref = 0.0;
        float naive = 0.0f;
        for (float v : a.values()) {
            ref += static_cast<double>(v);
            naive += v;
        }
        EXPECT_GT(std::abs(static_cast<double>(naive) - ref) / ref, 1e-5);
        EXPECT_LE(std::abs(static_cast<double>(tessera::sum_all(s, a)) - ref) / ref, 1e-6);

        const auto tenth = tessera::full<float>(s, {n}, 0.1f);
        float drift = 0.0f;
        for (float v : tenth.values()) drift += v;
        const double exact = static_cast<double>(0.1f) * static_cast<double>(n);
        EXPECT_GT(std::abs(static_cast<double>(drift) - exact) / exact, 1e-2);
        EXPECT_LE(std::abs(static_cast<double>(tessera::sum_all(s, tenth)) - exact) / exact, 1e-6);
    });
}

TEST_P(ReduceTest, ProductsOfManyFactorsNearOneAreAccurate) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    be.run([&](session& s) {
        auto check = [&]<class T>(const tensor<T>& t) {
            for (const axes_t& axes : {axes_t{}, axes_t{std::vector<std::ptrdiff_t>{0}},
                                       axes_t{std::vector<std::ptrdiff_t>{1}}}) {
                const buckets<T> b = gather(t.view(), mask_of(axes, 2), false);
                const tensor<T> r = axes ? tessera::prod(s, t, *axes) : tessera::prod(s, t);
                for (std::size_t o = 0; o < r.size(); ++o) {
                    cld ref = 1;
                    for (T v : b.values[o]) ref *= widen(v);
                    const ld n = static_cast<ld>(b.values[o].size());
                    EXPECT_LE(std::abs(widen(r.values()[o]) - ref),
                              4 * n * unit_roundoff<T>() * std::abs(ref))
                        << text(axes) << " " << o;
                }
            }
        };
        check(tessera::uniform<float>(s, {300, 301}, 0.999f, 1.001f, seed));
        check(tessera::uniform<double>(s, {300, 301}, 0.999, 1.001, seed + 1));
        auto z = tessera::uniform<cf>(s, {200, 150}, -0.001f, 0.001f, seed + 2);
        for (cf& v : z.values()) v += 1.0f;  // near 1 + 0i
        check(z);
    });
}

// The tree depends on the shape and strides only: any thread count gives the same bits.
TEST_P(ReduceTest, ResultsAreBitwiseIdenticalToAOneThreadRun) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto compute = [seed](backend& be) {
        return be.run([seed](session& s) {
            std::vector<double> out;
            auto keep = [&](const auto& t) {
                for (auto v : t.values()) {
                    if constexpr (tessera::is_complex_v<std::remove_cvref_t<decltype(v)>>) {
                        out.push_back(static_cast<double>(v.real()));
                        out.push_back(static_cast<double>(v.imag()));
                    } else {
                        out.push_back(static_cast<double>(v));
                    }
                }
            };
            const auto big = tessera::uniform<float>(s, {2'000'003}, -1.0f, 1.0f, seed);
            keep(tessera::sum(s, big));
            keep(tessera::mean(s, big));
            keep(tessera::norm(s, big));
            keep(tessera::sum(s, big.view().flip(0)));
            const auto rows = tessera::uniform<float>(s, {3, 400'001}, -1.0f, 1.0f, seed + 1);
            keep(tessera::sum(s, rows, {1}));
            keep(tessera::sum(s, rows.view().transpose(), {0}));
            const auto m = tessera::uniform<double>(s, {1000, 1001}, -1.0, 1.0, seed + 2);
            keep(tessera::sum(s, m, {0}));
            keep(tessera::sum(s, m, {1}));
            keep(tessera::prod(s, m, {1}));
            keep(tessera::argmax(s, m, 0));
            const auto z = tessera::uniform<cf>(s, {700'001, 2}, -1.0f, 1.0f, seed + 3);
            keep(tessera::sum(s, z, {0}));
            keep(tessera::mean(s, z));
            return out;
        });
    };
    backend one{backend_options{}.with_threads(1)};
    backend many{backend_options{}.with_threads(GetParam())};
    const std::vector<double> a = compute(one), b = compute(many), c = compute(many);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(b.data(), c.data(), b.size() * sizeof(double)), 0);
}

using tessera::test::message_of;

// The out form takes the result's shape with or without the reduced axes kept: both hold the same
// elements in the same order, and out's rank says which it is.
TEST_P(ReduceTest, OutMayHaveEitherResultShape) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const auto a = random_tensor<float>(s, {3, 4, 5}, fresh_seed());
        const auto want = tessera::sum(s, a, {1});
        auto flat = tessera::full<float>(s, {3, 5}, -1.0f);
        auto kept = tessera::full<float>(s, {3, 1, 5}, -1.0f);
        tessera::sum(s, a, {1}, flat);
        tessera::sum(s, a, {1}, kept);
        EXPECT_EQ(tessera::sum(s, a, {1}, tessera::keepdims).shape(), shape({3, 1, 5}));
        for (std::size_t i = 0; i < want.size(); ++i) {
            EXPECT_EQ(flat.values()[i], want.values()[i]) << i;
            EXPECT_EQ(kept.values()[i], want.values()[i]) << i;
        }
        const auto want_idx = tessera::argmax(s, a, -1);
        auto idx_flat = tessera::full<std::int64_t>(s, {3, 4}, -1);
        auto idx_kept = tessera::full<std::int64_t>(s, {3, 4, 1}, -1);
        tessera::argmax(s, a, -1, idx_flat.view());
        tessera::argmax(s, a, -1, idx_kept.view());
        for (std::size_t i = 0; i < want_idx.size(); ++i) {
            EXPECT_EQ(idx_flat.values()[i], want_idx.values()[i]) << i;
            EXPECT_EQ(idx_kept.values()[i], want_idx.values()[i]) << i;
        }
        // Reducing no axis: both shapes are the input's.
        auto same = tessera::full<float>(s, {3, 4, 5}, -1.0f);
        tessera::sum(s, a, std::vector<int>{}, same);
        for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(same.values()[i], a.values()[i]) << i;
    });
}

TEST_P(ReduceTest, BadAxesAndOutsThrowBeforeWritingAndNameTheOp) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const auto a = random_tensor<float>(s, {3, 4, 5}, fresh_seed());
        auto out = tessera::full<float>(s, {3, 5}, -1.0f);
        const tensor_view<float> o = out;
        EXPECT_EQ(message_of([&] { tessera::sum(s, a, {3}, o); }),
                  "sum: axis 3 is out of range for rank 3");
        EXPECT_EQ(message_of([&] { tessera::prod(s, a, {-4}, o); }),
                  "prod: axis -4 is out of range for rank 3");
        EXPECT_EQ(message_of([&] {
                      tessera::mean(s, a, {1, -2}, o);
                  }),
                  "mean: axis 1 appears more than once");
        EXPECT_EQ(message_of([&] {
                      tessera::max(s, a, {0, 1, 2, 0, 1, 2, 0, 1, 2}, o);
                  }),
                  "max: 9 axes given for a view of rank 3");
        EXPECT_EQ(message_of([&] { tessera::norm(s, a, {0}, o); }),
                  "norm: out has shape [3,5] but the result has shape [4,5] (or [1,4,5] with the "
                  "reduced axes kept)");
        auto out3 = tessera::full<float>(s, {3, 1, 4}, -1.0f);
        EXPECT_EQ(message_of([&] { tessera::min(s, a, {1}, out3); }),
                  "min: out has shape [3,1,4] but the result has shape [3,5] (or [3,1,5] with the "
                  "reduced axes kept)");
        EXPECT_EQ(message_of([&] { tessera::sum(s, a, {5}); }),
                  "sum: axis 5 is out of range for rank 3");
        EXPECT_EQ(message_of([&] { tessera::argmax(s, a, 3); }),
                  "argmax: axis 3 is out of range for rank 3");
        EXPECT_EQ(message_of([&] { (void)tessera::argmin_all(s, tessera::empty<double>(s, {0})); }),
                  "argmin_all: cannot reduce zero elements (shape [0] over axes [0]); argmin_all "
                  "has no identity");
        auto idx = tessera::full<std::int64_t>(s, {3, 1, 4}, -1);
        EXPECT_EQ(message_of([&] { tessera::argmin(s, a, -2, idx.view()); }),
                  "argmin: out has shape [3,1,4] but the result has shape [3,5] (or [3,1,5] with "
                  "the reduced axes kept)");
        for (float v : out.values()) EXPECT_EQ(v, -1.0f);
        for (float v : out3.values()) EXPECT_EQ(v, -1.0f);
        for (std::int64_t v : idx.values()) EXPECT_EQ(v, -1);

        // An out that repeats elements cannot be written.
        auto one = tessera::full<float>(s, {1, 5}, -1.0f);
        EXPECT_EQ(message_of([&] {
                      tessera::sum(s, a, {1}, one.view().broadcast_to({3, 5}));
                  }),
                  "sum: out repeats elements (an axis with stride 0); it cannot be written");
        for (float v : one.values()) EXPECT_EQ(v, -1.0f);
    });
}

TEST_P(ReduceTest, OutOverlappingTheInputIsAnAliasError) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        auto a = random_tensor<double>(s, {4, 4}, fresh_seed());
        const std::vector<double> before(a.values().begin(), a.values().end());
        const tensor_view<double> row0 = a.view().slice(0, 0, 1).reshape({4});
        EXPECT_EQ(
            message_of([&] { tessera::sum(s, a, {0}, row0); }),
            "sum: out overlaps input 0 without being the same view; in-place use must pass the "
            "very same elements");
        EXPECT_THROW(tessera::max(s, a.view().transpose(), {1}, row0), tessera::alias_error);
        for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.values()[i], before[i]);

        // The very same elements are fine: a reduction over an extent-1 axis, in place.
        auto col = random_tensor<double>(s, {4, 1}, fresh_seed());
        const std::vector<double> col_before(col.values().begin(), col.values().end());
        tessera::norm(s, col, {1}, col.view());
        for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(col.values()[i], std::abs(col_before[i]));
    });
}

TEST_P(ReduceTest, EmptyReductionsFollowTheDocumentedRules) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const auto a = tessera::empty<float>(s, {3, 0});
        for (float v : tessera::sum(s, a, {1}).values()) EXPECT_EQ(v, 0.0f);
        for (float v : tessera::prod(s, a, {1}).values()) EXPECT_EQ(v, 1.0f);
        for (float v : tessera::mean(s, a, {1}).values()) EXPECT_TRUE(std::isnan(v));
        for (float v : tessera::norm(s, a, {1}).values()) EXPECT_EQ(v, 0.0f);
        EXPECT_EQ(tessera::sum(s, a, {1}).shape(), shape({3}));
        EXPECT_EQ(tessera::sum_all(s, a), 0.0f);
        EXPECT_FALSE(std::signbit(tessera::sum_all(s, a)));
        EXPECT_EQ(tessera::prod_all(s, tessera::empty<cd>(s, {0, 2})), cd(1.0, 0.0));
        EXPECT_TRUE(std::isnan(tessera::mean_all(s, tessera::empty<std::int32_t>(s, {0}))));
        EXPECT_EQ(tessera::sum_all(s, tessera::empty<std::int64_t>(s, {2, 0, 2})), 0);

        auto out = tessera::full<float>(s, {3}, -1.0f);
        EXPECT_EQ(
            message_of([&] { tessera::max(s, a, {1}, out.view()); }),
            "max: cannot reduce zero elements (shape [3,0] over axes [1]); max has no identity");
        EXPECT_EQ(message_of([&] { tessera::argmax(s, a, 1); }),
                  "argmax: cannot reduce zero elements (shape [3,0] over axes [1]); argmax has no "
                  "identity");
        EXPECT_THROW(tessera::min(s, a), tessera::shape_error);
        EXPECT_THROW((void)tessera::max_all(s, a), tessera::shape_error);
        for (float v : out.values()) EXPECT_EQ(v, -1.0f);
        // No output needs an element: not an error.
        EXPECT_EQ(tessera::max(s, a, {0}).shape(), shape({0}));
        EXPECT_EQ(tessera::argmin(s, a, 0).shape(), shape({0}));
    });
}

TEST_P(ReduceTest, NaNWinsAndTiesGoToTheFirstOccurrence) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const auto a = tessera::from<float>(s, {1.0f, 5.0f, nan, 7.0f, nan, -3.0f});
        EXPECT_TRUE(std::isnan(tessera::max_all(s, a)));
        EXPECT_TRUE(std::isnan(tessera::min_all(s, a)));
        EXPECT_EQ(tessera::argmax_all(s, a), 2);
        EXPECT_EQ(tessera::argmin_all(s, a), 2);

        const auto ties = tessera::from<std::int32_t>(s, {3, 1, 3, 0, 3, 0});
        EXPECT_EQ(tessera::argmax_all(s, ties), 0);
        EXPECT_EQ(tessera::argmin_all(s, ties), 3);
        const auto inf = tessera::full<double>(s, {5}, -std::numeric_limits<double>::infinity());
        EXPECT_EQ(tessera::argmax_all(s, inf), 0);
        EXPECT_EQ(tessera::max_all(s, inf), -std::numeric_limits<double>::infinity());

        // Ties spread over lanes, leaves and threads: the first index still wins.
        auto big = tessera::full<double>(s, {200'000}, 0.0);
        big.values()[150'001] = 2.0;
        big.values()[70'003] = 2.0;
        big.values()[199'999] = 2.0;
        big.values()[190'000] = -1.0;
        big.values()[40'000] = -1.0;
        EXPECT_EQ(tessera::argmax_all(s, big), 70'003);
        EXPECT_EQ(tessera::argmin_all(s, big), 40'000);
        big.values()[180'000] = std::numeric_limits<double>::quiet_NaN();
        big.values()[120'000] = std::numeric_limits<double>::quiet_NaN();
        EXPECT_EQ(tessera::argmax_all(s, big), 120'000);
        EXPECT_TRUE(std::isnan(tessera::max_all(s, big)));
        EXPECT_TRUE(std::isnan(tessera::sum_all(s, big)));

        // Column-wise (tile mode) ties and NaN.
        auto m = tessera::full<float>(s, {1000, 20}, 1.0f);
        m(900, 3) = nan;
        m(950, 3) = 9.0f;
        m(10, 4) = -1.0f;
        m(20, 4) = -1.0f;
        const auto am = tessera::argmax(s, m, 0);
        const auto an = tessera::argmin(s, m, 0);
        const auto mx = tessera::max(s, m, {0});
        EXPECT_EQ(am(0), 0);
        EXPECT_EQ(am(3), 900);
        EXPECT_TRUE(std::isnan(mx(3)));
        EXPECT_EQ(an(4), 10);
        EXPECT_EQ(mx(4), 1.0f);
    });
}

TEST_P(ReduceTest, IntegerSumsAndProductsWrapAndMeansAreDouble) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const std::int32_t big = std::numeric_limits<std::int32_t>::max();
        EXPECT_EQ(tessera::sum_all(s, tessera::from<std::int32_t>(s, {big, big})), -2);
        EXPECT_EQ(tessera::prod_all(s, tessera::from<std::int32_t>(s, {65536, 65536, 3})), 0);
        EXPECT_EQ(tessera::prod_all(s, tessera::from<std::int64_t>(s, {-3, 5, -7})), 105);
        EXPECT_EQ(tessera::mean_all(s, tessera::from<std::int32_t>(s, {1, 2})), 1.5);
        EXPECT_EQ(tessera::mean_all(s, tessera::from<std::int64_t>(s, {-1, -2})), -1.5);
        EXPECT_EQ(tessera::norm_all(s, tessera::from<std::int32_t>(s, {3, -4})), 5.0);
    });
}

TEST_P(ReduceTest, NormNeitherOverflowsNorUnderflows) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        EXPECT_DOUBLE_EQ(tessera::norm_all(s, tessera::from<double>(s, {3e200, -4e200})), 5e200);
        EXPECT_DOUBLE_EQ(tessera::norm_all(s, tessera::from<double>(s, {3e-200, 4e-200})), 5e-200);
        EXPECT_DOUBLE_EQ(tessera::norm_all(s, tessera::from<cd>(s, {cd(3e200, 4e200), cd(0, 0)})),
                         5e200);
        EXPECT_FLOAT_EQ(tessera::norm_all(s, tessera::from<float>(s, {3e30f, 4e30f})), 5e30f);
        EXPECT_FLOAT_EQ(tessera::norm_all(s, tessera::from<cf>(s, {cf(3e-30f, -4e-30f)})), 5e-30f);
        EXPECT_EQ(tessera::norm_all(s, tessera::zeros<double>(s, {7})), 0.0);
        const double inf = std::numeric_limits<double>::infinity();
        EXPECT_EQ(tessera::norm_all(s, tessera::from<double>(s, {1.0, -inf})), inf);
        EXPECT_TRUE(
            std::isnan(tessera::norm_all(s, tessera::from<double>(s, {inf, std::nan("")}))));
        // Column-wise, one overflowing column among ordinary ones.
        auto m = tessera::full<double>(s, {3, 20}, 1.0);
        m(0, 7) = 3e200;
        m(1, 7) = 4e200;
        m(2, 7) = 0.0;
        const auto n = tessera::norm(s, m, {0});
        EXPECT_DOUBLE_EQ(n(7), 5e200);
        EXPECT_DOUBLE_EQ(n(6), std::sqrt(3.0));
    });
}

TEST(ReduceTest, MaxMinAndArgReductionsRejectComplexAtCompileTime) {
    using ct = const tensor<cf>&;
    static_assert(!std::is_invocable_v<decltype(tessera::max), session&, ct>);
    static_assert(!std::is_invocable_v<decltype(tessera::min), session&, ct>);
    static_assert(!std::is_invocable_v<decltype(tessera::argmax), session&, ct>);
    static_assert(!std::is_invocable_v<decltype(tessera::argmin), session&, ct, int>);
    static_assert(!std::is_invocable_v<decltype(tessera::max_all), session&, ct>);
    static_assert(!std::is_invocable_v<decltype(tessera::argmax_all), session&, ct>);
    static_assert(std::is_invocable_v<decltype(tessera::sum), session&, ct>);
    static_assert(std::is_invocable_v<decltype(tessera::norm_all), session&, ct>);
    static_assert(
        std::is_invocable_v<decltype(tessera::max), session&, const tensor<std::int32_t>&>);
    // bool is a mask type, not a number; a bool is not an axis.
    static_assert(!std::is_invocable_v<decltype(tessera::sum), session&, const tensor<bool>&>);
    static_assert(
        !std::is_invocable_v<decltype(tessera::argmax), session&, const tensor<float>&, bool>);
}

TEST_P(ReduceTest, TinyReductionsRunInlineAndWakeNobody) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const auto a = tessera::full<float>(s, {8, 4}, 1.0f);
        auto out = tessera::full<float>(s, {4}, 0.0f);
        for (int i = 0; i < 100; ++i) tessera::sum(s, a, {0}, out.view());
        (void)tessera::prod(s, a);
        (void)tessera::mean(s, a, {1});
        (void)tessera::norm_all(s, a);
        (void)tessera::max(s, a, {0, 1});
        (void)tessera::min_all(s, a);
        (void)tessera::argmax(s, a, 1);
        (void)tessera::argmin_all(s, a);
    });
    EXPECT_EQ(be.stats().parallel_dispatches, 0u);
    EXPECT_EQ(be.stats().inline_dispatches, 107u);
}

TEST_P(ReduceTest, LargeReductionsDispatchOnceEachInParallelOnAMultiThreadBackend) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    const std::size_t n = be.options().grain + 1;
    be.run([&](session& s) {
        const auto flat = tessera::full<float>(s, {n}, 1.0f);
        EXPECT_EQ(tessera::sum_all(s, flat), static_cast<float>(n));
    });
    EXPECT_EQ(be.stats().parallel_dispatches, threads > 1 ? 1u : 0u);
    EXPECT_EQ(be.stats().inline_dispatches, threads > 1 ? 0u : 1u);

    const tessera::stats before = be.stats();
    be.run([&](session& s) {
        const auto m = tessera::full<double>(s, {n / 16 + 1, 16}, 0.5);  // > grain elements
        (void)tessera::sum(s, m, {0});  // one tile of outputs, split tree
        (void)tessera::sum(s, m, {1});  // many outputs
        (void)tessera::mean(s, m);      // full
        (void)tessera::argmax(s, m, 0);
        (void)tessera::norm(s, m.view().transpose(), {1});
        auto out = tessera::full<double>(s, {16}, 0.0);
        tessera::max(s, m, {0}, out.view());
    });
    const tessera::stats d = be.stats() - before;
    EXPECT_EQ(d.parallel_dispatches, threads > 1 ? 6u : 0u);
    EXPECT_EQ(d.inline_dispatches, threads > 1 ? 0u : 6u);
}

TEST_P(ReduceTest, WarmOutParameterAndScalarFormsMakeZeroHeapAllocations) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const auto a = random_tensor<float>(s, {16, 33}, fresh_seed());
        const auto z = random_tensor<cd>(s, {5, 7}, fresh_seed());
        auto rows = tessera::empty<float>(s, {16});
        auto cols = tessera::empty<float>(s, {1, 33});
        auto idx = tessera::empty<std::int64_t>(s, {33});
        auto zn = tessera::empty<double>(s, {7});
        auto zs = tessera::empty<cd>(s, {5});
        double acc = 0.0;
        auto step = [&] {
            tessera::sum(s, a, {1}, rows.view());
            tessera::mean(s, a.view().transpose(), {0}, rows.view());
            tessera::max(s, a, {0}, cols.view());
            tessera::argmin(s, a, 0, idx.view());
            tessera::norm(s, z, {0}, zn.view());
            tessera::prod(s, z, {-1}, zs.view());
            acc +=
                static_cast<double>(tessera::sum_all(s, a) + tessera::max_all(s, a.view().flip(1)));
            acc += tessera::norm_all(s, z) + static_cast<double>(tessera::argmax_all(s, a));
        };
        step();
        allocation_scope counted;
        for (int i = 0; i < 500; ++i) step();
        EXPECT_EQ(counted.count(), 0u);
        EXPECT_TRUE(std::isfinite(acc));
    });
}

TEST_P(ReduceTest, WarmAllocatingFormsMakeZeroHeapAllocations) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const auto a = random_tensor<double>(s, {9, 10, 11}, fresh_seed());
        auto step = [&] {
            auto r1 = tessera::sum(s, a, {0, 2});
            auto r2 = tessera::argmax(s, a, -1, tessera::keepdims);
            auto r3 = tessera::norm(s, a);
            return r1.values()[0] + static_cast<double>(r2.values()[0]) + r3.values()[0];
        };
        step();
        allocation_scope counted;
        double acc = 0.0;
        for (int i = 0; i < 500; ++i) acc += step();
        EXPECT_EQ(counted.count(), 0u);
        EXPECT_TRUE(std::isfinite(acc));
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, ReduceTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
