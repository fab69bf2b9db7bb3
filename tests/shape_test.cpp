// tessera::shape and tessera::axis_list (shape.hpp): extents and axes of any integer type, in
// braced lists and in containers, with negative extents and out-of-range axes reported as
// shape_errors naming the op instead of wrapping around; and the ops that take axis lists
// (reductions, permute, tensordot) taking every form.
#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;

// Runs `f`, expecting a shape_error whose message contains every one of `parts`.
void expect_shape_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
    try {
        f();
        ADD_FAILURE() << "no shape_error";
    } catch (const tessera::shape_error& e) {
        for (const std::string& p : parts)
            EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
                << "'" << p << "' missing from: " << e.what();
    }
}

TEST(ShapeTest, TakesExtentsOfAnyIntegerType) {
    const int rows = 2;
    const long cols = 3;
    const std::size_t depth = 4;
    const short one = 1;
    const shape want{2, 3, 4, 1};
    EXPECT_EQ((shape{rows, cols, depth, one}), want);
    EXPECT_EQ(shape(std::vector<int>{2, 3, 4, 1}), want);
    EXPECT_EQ(shape(std::array<unsigned, 4>{2, 3, 4, 1}), want);
    EXPECT_EQ(shape(std::vector<std::int64_t>{2, 3, 4, 1}), want);
    const std::array<std::size_t, 4> dims{2, 3, 4, 1};
    EXPECT_EQ(shape(std::span<const std::size_t>(dims)), want);
    EXPECT_EQ(shape(std::vector<int>{}), shape());
    EXPECT_EQ(shape(std::vector<int>{}).count(), 1u);
}

// Characters are not extents, and integers wider than std::uintmax_t cannot be kept exactly.
static_assert(!std::is_constructible_v<shape, const char (&)[3]>);
static_assert(!std::is_constructible_v<shape, std::string>);
static_assert(!std::is_convertible_v<char, tessera::any_integer>);
static_assert(!std::is_convertible_v<bool, tessera::any_integer>);
__extension__ typedef __int128 int128;  // GCC's and Clang's, accepted as std::integral in gnu++20
static_assert(!std::is_convertible_v<int128, tessera::any_integer>);
static_assert(std::is_convertible_v<unsigned short, tessera::any_integer>);

TEST(ShapeTest, UnscopedEnumeratorsAreExtentsAndAxes) {
    enum { rows = 2, cols = 3 };
    EXPECT_EQ((shape{rows, cols}), (shape{2, 3}));
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const tensor<double> a = tessera::zeros<double>(s, {rows, cols});
        EXPECT_EQ(tessera::sum(s, a, {rows - 1}).shape(), (shape{2}));
    });
}

TEST(ShapeTest, NegativeExtentIsAShapeErrorNamingTheAxisAndValue) {
    const int bad = -3;
    expect_shape_error([&] { shape s{2, bad}; }, {"shape", "-3", "axis 1", "negative"});
    expect_shape_error([] { shape s(std::vector<long>{-1, 4}); }, {"-1", "axis 0"});
    const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
    expect_shape_error([&] { shape s{lowest}; }, {"-9223372036854775808", "axis 0"});
}

TEST(ShapeTest, RankAndCountAreCheckedForEveryForm) {
    expect_shape_error([] { shape s(std::vector<int>(9, 1)); }, {"rank 9"});
    expect_shape_error([] { shape s{1, 1, 1, 1, 1, 1, 1, 1, 1}; }, {"rank 9"});
    const std::size_t big = std::size_t{1} << 40;
    expect_shape_error([&] { shape s{big, big}; }, {"overflows"});
    EXPECT_EQ((shape{big, big, 0}).count(), 0u);  // an empty shape never overflows
}

TEST(ShapeTest, MakersTakeIntVariables) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const int rows = 2, cols = 5;
        const tensor<float> t = tessera::zeros<float>(s, {rows, cols});
        EXPECT_EQ(t.shape(), (shape{2, 5}));
        const int bad = -2;
        expect_shape_error([&] { (void)tessera::zeros<float>(s, {rows, bad}); }, {"-2"});
    });
}

TEST(AxisListTest, ReductionsTakeAxesOfAnyIntegerType) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const tensor<double> a = tessera::arange<double>(s, 0, 24).reshape({2, 3, 4});
        const tensor<double> want = tessera::sum(s, a, {0, -1});
        const std::vector<int> ints{0, -1};
        const std::vector<std::size_t> sizes{0, 2};
        const std::array<short, 2> shorts{2, 0};
        for (const tensor<double>& got :
             {tessera::sum(s, a, ints), tessera::sum(s, a, sizes), tessera::sum(s, a, shorts),
              tessera::sum(s, a, std::span<const int>(ints))}) {
            ASSERT_EQ(got.shape(), want.shape());
            for (std::size_t i = 0; i < want.size(); ++i)
                EXPECT_EQ(got.values()[i], want.values()[i]);
        }
        const int axis = 1;
        const std::size_t uaxis = 1;
        EXPECT_EQ(tessera::sum(s, a, axis).shape(), (shape{2, 4}));
        EXPECT_EQ(tessera::sum(s, a, uaxis).shape(), (shape{2, 4}));
    });
}

TEST(AxisListTest, EveryReductionFormTakesIntegerContainersAndBracedInts) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const tensor<double> a = tessera::arange<double>(s, 0, 24).reshape({2, 3, 4});
        // Over axes 0 and 1, by a plain loop: want[k] = sum of a[i, j, k].
        std::array<double, 4> want{};
        for (std::size_t i = 0; i < a.size(); ++i) want[i % 4] += a.data()[i];
        const auto expect_want = [&](const tensor<double>& got, const char* what) {
            SCOPED_TRACE(what);
            ASSERT_EQ(got.size(), 4u);
            for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(got.values()[k], want[k]);
        };
        expect_want(tessera::sum(s, a, {0, 1}), "braced ints");
        expect_want(tessera::sum(s, a, std::vector<int>{0, 1}), "std::vector<int> temporary");
        expect_want(tessera::sum(s, a, std::array<int, 2>{0, 1}), "std::array<int, 2>");
        expect_want(tessera::sum(s, a, std::vector<long>{-3, -2}), "std::vector<long>, negative");
        expect_want(tessera::sum(s, a, std::array<unsigned, 2>{1, 0}), "std::array<unsigned, 2>");
        const std::int16_t first = 0, second = 1;
        expect_want(tessera::sum(s, a, {first, second}), "braced std::int16_t");

        const tensor<double> kept = tessera::sum(s, a, std::vector<int>{0, 1}, tessera::keepdims);
        EXPECT_EQ(kept.shape(), (shape{1, 1, 4}));
        tensor<double> out = tessera::zeros<double>(s, {4});
        tessera::sum(s, a, std::array<int, 2>{0, 1}, out);
        expect_want(out, "out form, std::array<int, 2>");
        tensor<double> kept_out = tessera::zeros<double>(s, {1, 1, 4});
        tessera::sum(s, a, std::vector<std::size_t>{0, 1}, kept_out);
        EXPECT_EQ(kept_out.values()[3], want[3]);

        // The other reductions take the same lists; argmax and argmin one axis of any type.
        const tensor<double> mean = tessera::mean(s, a, std::array<int, 2>{0, 1});
        const tensor<double> max = tessera::max(s, a, std::vector<int>{0, 1});
        for (std::size_t k = 0; k < 4; ++k) {
            EXPECT_EQ(mean.values()[k], want[k] / 6);
            EXPECT_EQ(max.values()[k], 20.0 + static_cast<double>(k));
        }
        const short axis = 2;
        EXPECT_EQ(tessera::argmax(s, a, axis).shape(), (shape{2, 3}));
        EXPECT_EQ(tessera::argmin(s, a, std::size_t{0}).shape(), (shape{3, 4}));
    });
}

TEST(AxisListTest, OutOfRangeAxesOfEveryTypeAreShapeErrorsNotWrapped) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const tensor<double> a = tessera::zeros<double>(s, {2, 3});
        // size_t(-1) would wrap to axis -1 (the last) through a signed conversion.
        const std::vector<std::size_t> huge{std::numeric_limits<std::size_t>::max()};
        expect_shape_error([&] { (void)tessera::sum(s, a, huge); },
                           {"sum", "18446744073709551615", "rank 2"});
        const std::vector<std::int64_t> lowest{std::numeric_limits<std::int64_t>::min()};
        expect_shape_error([&] { (void)tessera::sum(s, a, lowest); },
                           {"sum", "-9223372036854775808"});
        expect_shape_error([&] { (void)tessera::sum(s, a, std::vector<int>{2}); },
                           {"sum", "axis 2", "rank 2"});
        expect_shape_error([&] { (void)tessera::sum(s, a, std::vector<int>{-3}); },
                           {"axis -3"});
        expect_shape_error([&] { (void)tessera::sum(s, a, std::vector<int>{1, -1}); },
                           {"more than once"});
        EXPECT_EQ(tessera::sum(s, a, std::vector<int>{-2}).shape(), (shape{3}));
    });
}

TEST(AxisListTest, PermuteTakesAxesOfAnyIntegerType) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        tensor<float> a = tessera::zeros<float>(s, {2, 3, 4});
        const shape want{4, 2, 3};
        EXPECT_EQ(a.view().permute({2, 0, 1}).shape(), want);
        EXPECT_EQ(a.view().permute(std::vector<int>{-1, 0, 1}).shape(), want);
        EXPECT_EQ(a.view().permute(std::array<std::size_t, 3>{2, 0, 1}).shape(), want);
        expect_shape_error([&] { (void)a.view().permute(std::vector<std::size_t>{2, 0, 3}); },
                           {"permute", "axis 3"});
        expect_shape_error([&] { (void)a.view().permute(std::vector<int>{0, 1}); },
                           {"permute", "2 axes"});
        expect_shape_error([&] { (void)a.view().permute(tessera::all_axes); },
                           {"permute", "all_axes"});
    });
}

TEST(AxisListTest, TensordotTakesAxesOfAnyIntegerTypeInBothForms) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const tensor<double> a = tessera::arange<double>(s, 0, 6).reshape({2, 3});
        const tensor<double> b = tessera::arange<double>(s, 0, 12).reshape({3, 4});
        const tensor<double> want = tessera::tensordot(s, a, b, {1}, {0});
        const std::vector<int> ax{1}, bx{0};
        const tensor<double> got = tessera::tensordot(s, a, b, ax, bx);
        tensor<double> out = tessera::zeros<double>(s, {2, 4});
        tessera::tensordot(s, a, b, {-1}, {0}, out);  // braced lists in the out form too
        ASSERT_EQ(got.shape(), want.shape());
        for (std::size_t i = 0; i < want.size(); ++i) {
            EXPECT_EQ(got.values()[i], want.values()[i]);
            EXPECT_EQ(out.values()[i], want.values()[i]);
        }
        expect_shape_error([&] { (void)tessera::tensordot(s, a, b, tessera::all_axes, {0}); },
                           {"tensordot", "all_axes"});
        const std::vector<std::size_t> huge{std::numeric_limits<std::size_t>::max()};
        expect_shape_error([&] { (void)tessera::tensordot(s, a, b, huge, bx); },
                           {"tensordot", "18446744073709551615"});
    });
}

}  // namespace
