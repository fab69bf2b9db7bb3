// NaN of both signs, infinities and signed zeros through the elementwise ops whose IEEE edge cases
// NumPy pins: maximum/minimum propagate a NaN from either side, fmax/fmin ignore a NaN on one
// side, ties and signed zeros follow NumPy's operand order, abs clears the sign of -0.0, clamp is
// exactly minimum(maximum(a, low), high). Every pair of special values is checked bit for bit
// against NumPy's definitions written out here (a NaN by class and sign, so which operand's NaN
// comes out is checked too), inline and on the vectorised, parallel path of a large tensor.
#include "support/backends.hpp"

#include <tessera/backend.hpp>
#include <tessera/ops/elementwise.hpp>
#include <tessera/session.hpp>
#include <tessera/tensor.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::tensor;

// NumPy's loops (numpy/core/src/umath/loops.c.src), one element each.
struct numpy_rules {
    template <class T> static T maximum(T a, T b) { return (a >= b || std::isnan(a)) ? a : b; }
    template <class T> static T minimum(T a, T b) { return (a <= b || std::isnan(a)) ? a : b; }
    template <class T> static T fmax(T a, T b) { return (a >= b || std::isnan(b)) ? a : b; }
    template <class T> static T fmin(T a, T b) { return (a <= b || std::isnan(b)) ? a : b; }
};

template <class T>
std::vector<T> special_values() {
    using lim = std::numeric_limits<T>;
    return {lim::quiet_NaN(), -lim::quiet_NaN(), -lim::infinity(), -lim::max(),
            T(-1.5),          -lim::denorm_min(), T(-0.0),         T(0.0),
            lim::denorm_min(), T(2),             lim::max(),        lim::infinity()};
}

// Same value: both NaN of the same sign (which NaN an op returns is NumPy's operand order), or the
// same bits (so 0.0 and -0.0 differ).
template <class T>
bool same_value(T got, T want) {
    if (std::isnan(want)) return std::isnan(got) && std::signbit(got) == std::signbit(want);
    return std::memcmp(&got, &want, sizeof(T)) == 0;
}

template <class T>
std::string text(T x) {
    if (std::isnan(x)) return std::signbit(x) ? "-nan" : "+nan";
    // Not `const char* + std::string`: GCC 12 at -O3 warns of it (-Wrestrict, a false positive).
    std::string t = std::signbit(x) ? "-" : "+";
    return t += std::to_string(std::fabs(x));
}

// Every (a, b) pair of special values, repeated `copies` times so that large tensors take the
// vectorised and parallel paths with a NaN in every lane position.
template <class T>
struct pairs {
    std::vector<T> a, b;
    explicit pairs(std::size_t copies) {
        const std::vector<T> v = special_values<T>();
        for (std::size_t c = 0; c < copies; ++c)
            for (T x : v)
                for (T y : v) {
                    a.push_back(x);
                    b.push_back(y);
                }
    }
};

template <class T>
class SpecialValuesTest : public ::testing::TestWithParam<int> {};

using SpecialValuesFloatTest = SpecialValuesTest<float>;
using SpecialValuesDoubleTest = SpecialValuesTest<double>;

template <class T, class Op, class Rule>
void check_binary(const char* name, const Op& op, Rule rule, int threads) {
    backend be{backend_options{}.with_threads(threads).with_grain(256)};
    for (std::size_t copies : {std::size_t{1}, std::size_t{4099}}) {
        SCOPED_TRACE(std::string(name) + ", " + std::to_string(copies) + " copies");
        const pairs<T> p(copies);
        const tessera::shape sh{p.a.size()};
        be.run([&](session& s) {
            const auto a = tessera::from<T>(s, sh, p.a);
            const auto b = tessera::from<T>(s, sh, p.b);
            const tensor<T> got = op(s, a, b);
            auto out = tessera::zeros<T>(s, sh);
            op(s, a, b, out);
            for (std::size_t i = 0; i < p.a.size(); ++i) {
                const T want = rule(p.a[i], p.b[i]);
                ASSERT_TRUE(same_value(got.values()[i], want))
                    << name << "(" << text(p.a[i]) << ", " << text(p.b[i]) << ") = "
                    << text(got.values()[i]) << ", want " << text(want);
                ASSERT_TRUE(same_value(out.values()[i], want)) << "out form, element " << i;
            }
        });
    }
}

template <class T>
void check_all_binary(int threads) {
    check_binary<T>("maximum", tessera::maximum, numpy_rules::maximum<T>, threads);
    check_binary<T>("minimum", tessera::minimum, numpy_rules::minimum<T>, threads);
    check_binary<T>("fmax", tessera::fmax, numpy_rules::fmax<T>, threads);
    check_binary<T>("fmin", tessera::fmin, numpy_rules::fmin<T>, threads);
}

TEST_P(SpecialValuesFloatTest, MaximumMinimumFmaxFminFollowNumPyBitForBit) {
    check_all_binary<float>(GetParam());
}
TEST_P(SpecialValuesDoubleTest, MaximumMinimumFmaxFminFollowNumPyBitForBit) {
    check_all_binary<double>(GetParam());
}

template <class T>
void check_abs(int threads) {
    backend be{backend_options{}.with_threads(threads).with_grain(256)};
    for (std::size_t copies : {std::size_t{1}, std::size_t{40000}}) {
        std::vector<T> v;
        for (std::size_t c = 0; c < copies; ++c)
            for (T x : special_values<T>()) v.push_back(x);
        be.run([&](session& s) {
            auto a = tessera::from<T>(s, tessera::shape{v.size()}, v);
            const tensor<T> got = tessera::abs(s, a);
            tessera::abs(s, a, a);  // in place
            for (std::size_t i = 0; i < v.size(); ++i) {
                const T want = std::fabs(v[i]);
                ASSERT_TRUE(same_value(got.values()[i], want))
                    << "abs(" << text(v[i]) << ") = " << text(got.values()[i]);
                ASSERT_TRUE(same_value(a.values()[i], want)) << "in place, element " << i;
            }
        });
    }
}

TEST_P(SpecialValuesFloatTest, AbsClearsTheSignOfEveryValue) { check_abs<float>(GetParam()); }
TEST_P(SpecialValuesDoubleTest, AbsClearsTheSignOfEveryValue) { check_abs<double>(GetParam()); }

TEST(SpecialValuesTest, AbsOfNegativeZeroIsPositiveZero) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const auto a = tessera::from<double>(s, {-0.0});
        const double r = tessera::abs(s, a).values()[0];
        EXPECT_FALSE(std::signbit(r));
        EXPECT_EQ(1.0 / r, std::numeric_limits<double>::infinity());
    });
}

TEST(SpecialValuesTest, MaximumIsSymmetricInNaN) {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const auto one = tessera::from<double>(s, {1.0});
        const auto n = tessera::from<double>(s, {nan});
        EXPECT_TRUE(std::isnan(tessera::maximum(s, one, n).values()[0]));
        EXPECT_TRUE(std::isnan(tessera::maximum(s, n, one).values()[0]));
        EXPECT_TRUE(std::isnan(tessera::minimum(s, one, n).values()[0]));
        EXPECT_TRUE(std::isnan(tessera::minimum(s, n, one).values()[0]));
        EXPECT_EQ(tessera::fmax(s, one, n).values()[0], 1.0);
        EXPECT_EQ(tessera::fmax(s, n, one).values()[0], 1.0);
        EXPECT_EQ(tessera::fmin(s, one, n).values()[0], 1.0);
        EXPECT_EQ(tessera::fmin(s, n, one).values()[0], 1.0);
    });
}

TEST(SpecialValuesTest, ClampIsMinimumOfMaximumWithNaNAndSignedZeros) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const std::vector<double> v = special_values<double>();
        const auto a = tessera::from<double>(s, tessera::shape{v.size()}, v);
        for (double low : v)
            for (double high : v) {
                const tensor<double> got = tessera::clamp(s, a, low, high);
                for (std::size_t i = 0; i < v.size(); ++i) {
                    const double want =
                        numpy_rules::minimum(numpy_rules::maximum(v[i], low), high);
                    ASSERT_TRUE(same_value(got.values()[i], want))
                        << "clamp(" << text(v[i]) << ", " << text(low) << ", " << text(high)
                        << ") = " << text(got.values()[i]) << ", want " << text(want);
                }
            }
    });
}

TEST(SpecialValuesTest, IntegerMaximumAndAbsAreUnchanged) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const auto a = tessera::from<int>(s, {-3, 0, 7, -2147483647});
        const auto b = tessera::from<int>(s, {2, 0, -7, 5});
        const tensor<int> mx = tessera::maximum(s, a, b);
        const tensor<int> fx = tessera::fmin(s, a, b);
        const tensor<int> ab = tessera::abs(s, a);
        const std::vector<int> want_max{2, 0, 7, 5}, want_min{-3, 0, -7, -2147483647},
            want_abs{3, 0, 7, 2147483647};
        for (std::size_t i = 0; i < 4; ++i) {
            EXPECT_EQ(mx.values()[i], want_max[i]);
            EXPECT_EQ(fx.values()[i], want_min[i]);
            EXPECT_EQ(ab.values()[i], want_abs[i]);
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, SpecialValuesFloatTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);
INSTANTIATE_TEST_SUITE_P(Threads, SpecialValuesDoubleTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
