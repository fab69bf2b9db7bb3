// to_string, operator<< and the fmt formatters (tessera/print.hpp, tessera/format.hpp): exact
// NumPy-style text for small tensors, summaries of large ones, strided views in logical order,
// and a round trip of random values through the text.
#include <tessera/format.hpp>
#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::to_string;
using cf = std::complex<float>;
using cd = std::complex<double>;

// Printing is not executor-sensitive: one inline backend serves every test.
template <class Fn>
void in_session(Fn&& fn) {
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) { fn(s); });
}

template <class T>
std::string streamed(const T& value) {
    std::ostringstream os;
    os << value;
    return os.str();
}

std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
        ++n;
    return n;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream is(text);
    for (std::string line; std::getline(is, line);) lines.push_back(line);
    return lines;
}

TEST(PrintTest, ShapePrintsItsExtentsInBrackets) {
    EXPECT_EQ(to_string(shape{3, 4}), "[3,4]");
    EXPECT_EQ(to_string(shape{7}), "[7]");
    EXPECT_EQ(to_string(shape{2, 0, 5}), "[2,0,5]");
    EXPECT_EQ(to_string(shape{}), "[]");
    EXPECT_EQ(streamed(shape{3, 4}), "[3,4]");
    EXPECT_EQ(fmt::format("{}", shape{3, 4}), "[3,4]");
    EXPECT_EQ(fmt::format("<{:>8}|{:<6}>", shape{3, 4}, shape{1}), "<   [3,4]|[1]   >");
}

// Every field of tessera::stats comes from the counter list, so the printed text names each of
// them once, in the list's order, and operator- subtracts every cumulative one.
TEST(PrintTest, StatsPrintEveryCounterOnceInTheListsOrder) {
    tessera::stats st;
    std::uint64_t next = 1;
#define SET_COUNTER(name, meaning) st.name = next++;
    TESSERA_SESSION_COUNTERS(SET_COUNTER)
    TESSERA_BACKEND_COUNTERS(SET_COUNTER)
    TESSERA_GAUGES(SET_COUNTER)
#undef SET_COUNTER
    const std::uint64_t fields = next - 1;
    EXPECT_EQ(fields * sizeof(std::uint64_t), sizeof(tessera::stats))
        << "a field of tessera::stats is missing from the counter lists";
    const std::string text = tessera::to_string(st);
    EXPECT_EQ(static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '=')), fields);
    EXPECT_EQ(text.rfind("sessions=1 arena_entries=2 attached_entries=3 inline_entries=4 ", 0), 0u) << text;
    EXPECT_NE(text.find(" plan_cache_evictions=15 bytes_retained=16 open_sessions=17"),
              std::string::npos)
        << text;
    EXPECT_EQ(fmt::format("{}", st), text);
    std::ostringstream os;
    os << st;
    EXPECT_EQ(os.str(), text);

    const tessera::stats zero{};
    const tessera::stats d = st - st;
#define EXPECT_SUBTRACTED(name, meaning) EXPECT_EQ(d.name, 0u) << #name;
    TESSERA_SESSION_COUNTERS(EXPECT_SUBTRACTED)
    TESSERA_BACKEND_COUNTERS(EXPECT_SUBTRACTED)
#undef EXPECT_SUBTRACTED
    EXPECT_EQ(d.bytes_retained, st.bytes_retained);  // gauges come from `after`
    EXPECT_EQ(d.open_sessions, st.open_sessions);
    EXPECT_EQ(st - zero, st);
}

TEST(PrintTest, OneDimensionalIntegersAlignToTheWidestEntry) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::from<std::int32_t>(s, {1, 2, 3})), "[1 2 3]");
        EXPECT_EQ(to_string(tessera::from<std::int32_t>(s, {-1, 10, 200})), "[ -1  10 200]");
        EXPECT_EQ(to_string(tessera::from<std::int64_t>(
                      s, {std::numeric_limits<std::int64_t>::min(), 0})),
                  "[-9223372036854775808                    0]");
        EXPECT_EQ(to_string(tessera::from<std::int32_t>(s, {5})), "[5]");
    });
}

TEST(PrintTest, TwoDimensionalFloatsShareOneDigitCount) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::from<double>(s, {{1.5, -2}, {0, 3.25}})),
                  "[[ 1.50 -2.00]\n"
                  " [ 0.00  3.25]]");
        EXPECT_EQ(to_string(tessera::from<float>(s, {{1, 2, 3}, {-4, 5, 6}})),
                  "[[ 1.  2.  3.]\n"
                  " [-4.  5.  6.]]");
    });
}

TEST(PrintTest, ThreeDimensionalBlocksAreSeparatedByABlankLine) {
    in_session([](session& s) {
        auto t = tessera::arange<std::int32_t>(s, 0, 24);
        EXPECT_EQ(to_string(t.view().reshape({2, 3, 4})),
                  "[[[ 0  1  2  3]\n"
                  "  [ 4  5  6  7]\n"
                  "  [ 8  9 10 11]]\n"
                  "\n"
                  " [[12 13 14 15]\n"
                  "  [16 17 18 19]\n"
                  "  [20 21 22 23]]]");
        auto u = tessera::arange<std::int32_t>(s, 0, 4);
        EXPECT_EQ(to_string(u.view().reshape({2, 1, 1, 2})),
                  "[[[[0 1]]]\n"
                  "\n"
                  "\n"
                  " [[[2 3]]]]");
    });
}

TEST(PrintTest, RankZeroPrintsTheBareScalar) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::full<float>(s, {}, 2.5f)), "2.5");
        EXPECT_EQ(to_string(tessera::full<double>(s, {}, 3.0)), "3.");
        EXPECT_EQ(to_string(tessera::full<std::int64_t>(s, {}, -7)), "-7");
        EXPECT_EQ(to_string(tessera::full<bool>(s, {}, true)), "true");
        EXPECT_EQ(to_string(tessera::full<cd>(s, {}, cd{1, 2})), "1+2j");
    });
}

TEST(PrintTest, EmptyTensorsPrintEmptyBrackets) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::empty<float>(s, {0})), "[]");
        EXPECT_EQ(to_string(tessera::empty<std::int32_t>(s, {2, 0})), "[]");
        EXPECT_EQ(to_string(tessera::empty<cd>(s, {0, 3, 4})), "[]");
        EXPECT_EQ(to_string(tessera::tensor<double>{}), "[]");
        EXPECT_EQ(to_string(tessera::tensor_view<const bool>{}), "[]");
    });
}

TEST(PrintTest, FloatsKeepAtMostEightSignificantDigits) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::from<double>(s, {1, 2, 3})), "[1. 2. 3.]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {1.0 / 3.0})), "[0.33333333]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {123456.789})), "[123456.79]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {200.0 / 3.0, 0.5})), "[66.666667  0.500000]");
        // float: the shortest digits that round-trip a float, not those of its double value.
        EXPECT_EQ(to_string(tessera::from<float>(s, {0.1f, 0.25f})), "[0.10 0.25]");
        EXPECT_EQ(to_string(tessera::from<float>(s, {0.1f, 0.2f, 1.0f / 3.0f})),
                  "[0.10000000 0.20000000 0.33333334]");
        // Rounding to eight digits may carry into a new leading digit.
        EXPECT_EQ(to_string(tessera::from<double>(s, {9.9999999999})), "[10.]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {-0.0, 1.0})), "[-0.  1.]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {0.0, 0.0})), "[0. 0.]");
    });
}

TEST(PrintTest, WideRangesSwitchTheWholeTensorToScientific) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::from<double>(s, {1e8, 1, -3.5})),
                  "[ 1.0e+08  1.0e+00 -3.5e+00]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {1e-5})), "[1.e-05]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {0.0001, 0.1})), "[0.0001 0.1000]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {1, 1000})), "[   1. 1000.]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {1, 1001})), "[1.000e+00 1.001e+03]");
        EXPECT_EQ(to_string(tessera::from<double>(s, {0, 1e9})), "[0.e+00 1.e+09]");
        // The exponent takes the width the widest one needs, at least two digits.
        EXPECT_EQ(to_string(tessera::from<double>(s, {1e-5, 1.0, 2e200})),
                  "[1.e-005 1.e+000 2.e+200]");
        EXPECT_EQ(to_string(tessera::from<float>(s, {1.5e10f, -2.25e-10f})),
                  "[ 1.50e+10 -2.25e-10]");
    });
}

TEST(PrintTest, NonFiniteValuesPrintAsNanAndInf) {
    in_session([](session& s) {
        const double inf = std::numeric_limits<double>::infinity();
        const double nan = std::numeric_limits<double>::quiet_NaN();
        EXPECT_EQ(to_string(tessera::from<double>(s, {nan, inf, -inf, 1.25})),
                  "[ nan  inf -inf 1.25]");
        // Non-finite values do not push the finite ones into scientific notation.
        EXPECT_EQ(to_string(tessera::from<double>(s, {inf, 0.5})), "[inf 0.5]");
        EXPECT_EQ(to_string(tessera::from<cd>(s, {cd{1, inf}, cd{nan, -1}})),
                  "[  1+infj nan  -1j]");
    });
}

TEST(PrintTest, ComplexPrintsRealAndImaginaryPartsAligned) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::from<cd>(s, {cd{1, 2}})), "[1+2j]");
        EXPECT_EQ(to_string(tessera::from<cf>(s, {cf{0.5f, -1.25f}})), "[0.5-1.25j]");
        EXPECT_EQ(to_string(tessera::from<cd>(s, {cd{1, 2}, cd{3, -4.5}, cd{-10, 100}})),
                  "[  1  +2.0j   3  -4.5j -10+100.0j]");
        EXPECT_EQ(
            to_string(tessera::from<cf>(s, {{cf{1, 0}, cf{0, 1}}, {cf{-1, -0.5f}, cf{2, 2}}})),
            "[[ 1+0.0j  0+1.0j]\n"
            " [-1-0.5j  2+2.0j]]");
        EXPECT_EQ(to_string(tessera::from<cd>(s, {cd{1e9, 1}})), "[1e+09+1j]");
    });
}

TEST(PrintTest, BoolsPrintAsTrueAndFalse) {
    in_session([](session& s) {
        EXPECT_EQ(to_string(tessera::from<bool>(s, {true, false, true})), "[ true false  true]");
        EXPECT_EQ(to_string(tessera::from<bool>(s, {{true, false}, {false, true}})),
                  "[[ true false]\n"
                  " [false  true]]");
        EXPECT_EQ(to_string(tessera::from<bool>(s, {true, true})), "[true true]");
    });
}

TEST(PrintTest, LongRowsWrapAtSeventyFiveColumns) {
    in_session([](session& s) {
        // np.arange(30.) and np.arange(100) print exactly so.
        EXPECT_EQ(to_string(tessera::arange<float>(s, 0, 30)),
                  "[ 0.  1.  2.  3.  4.  5.  6.  7.  8.  9. 10. 11. 12. 13. 14. 15. 16. 17.\n"
                  " 18. 19. 20. 21. 22. 23. 24. 25. 26. 27. 28. 29.]");
        const std::string ints = to_string(tessera::arange<std::int64_t>(s, 0, 100));
        const std::vector<std::string> lines = lines_of(ints);
        ASSERT_EQ(lines.size(), 5u) << ints;
        EXPECT_EQ(lines[0],
                  "[ 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23");
        EXPECT_EQ(lines[4], " 96 97 98 99]");
        for (const std::string& line : lines) EXPECT_LE(line.size(), 75u) << line;
        // Inner rows wrap with a deeper hanging indent.
        const std::string nested =
            to_string(tessera::arange<std::int32_t>(s, 0, 60).view().reshape({2, 30}));
        EXPECT_EQ(nested,
                  "[[ 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23\n"
                  "  24 25 26 27 28 29]\n"
                  " [30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53\n"
                  "  54 55 56 57 58 59]]");
    });
}

TEST(PrintTest, AThousandElementsPrintInFullAndMoreAreSummarised) {
    in_session([](session& s) {
        const std::string full = to_string(tessera::arange<std::int32_t>(s, 0, 1000));
        EXPECT_EQ(full.find("..."), std::string::npos);
        std::istringstream words(full);
        std::size_t n = 0;
        for (std::string w; words >> w;) n += w != "[";
        EXPECT_EQ(n, 1000u);
        EXPECT_EQ(full.substr(0, 9), "[  0   1 ");
        EXPECT_EQ(full.substr(full.size() - 9), " 998 999]");
        EXPECT_EQ(to_string(tessera::arange<std::int32_t>(s, 0, 1001)),
                  "[   0    1    2 ...  998  999 1000]");
        EXPECT_EQ(to_string(tessera::arange<std::int64_t>(s, 0, 2000)),
                  "[   0    1    2 ... 1997 1998 1999]");
    });
}

TEST(PrintTest, SummaryOfAHundredByHundredShowsThreeEdgeRowsAndColumns) {
    in_session([](session& s) {
        auto t = tessera::arange<std::int32_t>(s, 0, 10000);
        EXPECT_EQ(to_string(t.view().reshape({100, 100})),
                  "[[   0    1    2 ...   97   98   99]\n"
                  " [ 100  101  102 ...  197  198  199]\n"
                  " [ 200  201  202 ...  297  298  299]\n"
                  " ...\n"
                  " [9700 9701 9702 ... 9797 9798 9799]\n"
                  " [9800 9801 9802 ... 9897 9898 9899]\n"
                  " [9900 9901 9902 ... 9997 9998 9999]]");
        // Axes of at most six entries are never cut, even in a summarised tensor.
        EXPECT_EQ(to_string(t.view().reshape({2000, 5}).slice(0, 0, 2000)).substr(0, 29),
                  "[[   0    1    2    3    4]\n ");
    });
}

TEST(PrintTest, SummaryOfThreeAxesCutsEveryLongAxis) {
    in_session([](session& s) {
        auto t = tessera::arange<std::int32_t>(s, 0, 2000);
        const std::string text = to_string(t.view().reshape({10, 10, 20}));
        const std::vector<std::string> lines = lines_of(text);
        // 6 blocks of (6 rows + "...") lines, blank lines between blocks, and the outer "...".
        ASSERT_EQ(lines.size(), 6u * 7u + 6u + 1u) << text;
        EXPECT_EQ(lines[0], "[[[   0    1    2 ...   17   18   19]");
        EXPECT_EQ(lines[3], "  ...");
        EXPECT_EQ(lines[6], "  [ 180  181  182 ...  197  198  199]]");
        EXPECT_EQ(count_of(text, "\n\n ...\n\n"), 1u);
        EXPECT_EQ(count_of(text, "\n  ...\n"), 6u);
        EXPECT_EQ(count_of(text, " ... "), 36u);
        EXPECT_EQ(lines.back(), "  [1980 1981 1982 ... 1997 1998 1999]]]");
    });
}

TEST(PrintTest, SummaryFormatsOnlyTheShownElements) {
    in_session([](session& s) {
        auto t = tessera::zeros<double>(s, {2000});
        t.values()[1000] = 1e300;  // hidden: must not switch the tensor to scientific notation
        t.values()[1001] = 0.123456;
        EXPECT_EQ(to_string(t), "[0. 0. 0. ... 0. 0. 0.]");
        t.values()[1999] = -0.5;
        EXPECT_EQ(to_string(t), "[ 0.0  0.0  0.0 ...  0.0  0.0 -0.5]");
    });
}

TEST(PrintTest, StridedViewsPrintInLogicalOrder) {
    in_session([](session& s) {
        auto t = tessera::from<std::int32_t>(s, {{1, 2, 3}, {4, 5, 6}});
        tessera::tensor_view<const std::int32_t> v = t;
        EXPECT_EQ(to_string(v.transpose()), "[[1 4]\n [2 5]\n [3 6]]");
        EXPECT_EQ(to_string(v.flip(1)), "[[3 2 1]\n [6 5 4]]");
        EXPECT_EQ(to_string(v.flip(0).flip(1)), "[[6 5 4]\n [3 2 1]]");
        EXPECT_EQ(to_string(v.slice(1, 0, tessera::slice_end, 2)), "[[1 3]\n [4 6]]");
        EXPECT_EQ(to_string(v.slice(0, 1, 2).squeeze()), "[4 5 6]");
        EXPECT_EQ(to_string(v.diagonal()), "[1 5]");
        EXPECT_EQ(to_string(v.slice(1, 1, 2).broadcast_to({2, 2, 1})),
                  "[[[2]\n  [5]]\n\n [[2]\n  [5]]]");
        // A summarised, transposed view walks the strides too.
        auto big = tessera::arange<std::int32_t>(s, 0, 10000);
        const std::string text = to_string(big.view().reshape({100, 100}).transpose().flip(1));
        EXPECT_EQ(lines_of(text)[0], "[[9900 9800 9700 ...  200  100    0]");
        EXPECT_EQ(lines_of(text).back(), " [9999 9899 9799 ...  299  199   99]]");
    });
}

TEST(PrintTest, FmtStreamAndToStringAgreeForEveryElementType) {
    in_session([](session& s) {
        auto check = [](auto& t) {
            const std::string want = to_string(t);
            auto mutable_view = t.view();
            const auto& const_tensor = t;
            tessera::tensor_view<const typename std::remove_reference_t<decltype(t)>::value_type>
                ro = t;
            EXPECT_EQ(fmt::format("{}", t), want);
            EXPECT_EQ(fmt::format("{}", mutable_view), want);
            EXPECT_EQ(fmt::format("{}", ro), want);
            EXPECT_EQ(fmt::format("{}", const_tensor), want);
            EXPECT_EQ(streamed(t), want);
            EXPECT_EQ(streamed(mutable_view), want);
            EXPECT_EQ(streamed(ro), want);
            EXPECT_EQ(to_string(mutable_view), want);
            EXPECT_EQ(to_string(ro), want);
        };
        auto f = tessera::uniform<float>(s, {3, 4}, -5.0f, 5.0f, 1);
        auto d = tessera::normal<double>(s, {4, 3}, 0.0, 100.0, 2);
        auto c = tessera::uniform<cf>(s, {2, 2}, -1.0f, 1.0f, 3);
        auto z = tessera::normal<cd>(s, {2, 2, 2}, 1.0, 2.0, 4);
        auto i = tessera::uniform<std::int32_t>(s, {3, 3}, -100, 100, 5);
        auto b = tessera::from<bool>(s, {{true, false}, {false, false}});
        check(f);
        check(d);
        check(c);
        check(z);
        check(i);
        check(b);
        auto lt = tessera::arange<std::int64_t>(s, -2000, 2000);
        check(lt);
        const auto l = lt.view().reshape({4, 1000});
        EXPECT_EQ(fmt::format("{}", l), to_string(l));
        EXPECT_EQ(streamed(l), to_string(l));
        EXPECT_NE(to_string(l).find("..."), std::string::npos);
        EXPECT_EQ(fmt::format("{:>12}", tessera::from<std::int32_t>(s, {1, 2})), "       [1 2]");
    });
}

// Every printed value, read back, is the value rounded to eight significant digits, and every
// element shows the same number of digits after the point.
template <class R>
void check_round_trip(const std::vector<R>& values, const std::string& text) {
    std::istringstream is(text);
    std::string token;
    std::size_t fraction = std::string::npos;
    std::size_t k = 0;
    while (is >> token) {
        while (!token.empty() && token.front() == '[') token.erase(0, 1);
        while (!token.empty() && token.back() == ']') token.pop_back();
        if (token.empty()) continue;
        ASSERT_LT(k, values.size()) << text;
        const double got = std::strtod(token.c_str(), nullptr);
        const auto want = static_cast<double>(values[k]);
        // Eight digits of the exact value, or the shortest digits that read back as the same R
        // (within half a unit in the last place), whichever is fewer.
        const R up = std::nextafter(values[k], std::numeric_limits<R>::infinity());
        const R down = std::nextafter(values[k], -std::numeric_limits<R>::infinity());
        const double half_ulp =
            0.5 * static_cast<double>(std::max(up - values[k], values[k] - down));
        const double bound = std::max(5e-8 * std::abs(want), half_ulp) * (1.0 + 1e-12);
        EXPECT_LE(std::abs(got - want), bound) << token << " vs " << want;
        const std::size_t point = token.find('.');
        ASSERT_NE(point, std::string::npos) << token;
        const std::size_t end =
            token.find('e') == std::string::npos ? token.size() : token.find('e');
        if (fraction == std::string::npos) fraction = end - point - 1;
        EXPECT_EQ(end - point - 1, fraction) << token << " in " << text;
        ++k;
    }
    EXPECT_EQ(k, values.size());
}

TEST(PrintTest, RandomValuesReadBackWithinEightSignificantDigits) {
    std::mt19937_64 rng(std::random_device{}());
    in_session([&](session& s) {
        for (double scale : {1e-6, 1e-2, 1.0, 3e4, 1e12}) {
            std::uniform_real_distribution<double> dist(-scale, scale);
            std::vector<double> d(40);
            std::vector<float> f(40);
            for (std::size_t i = 0; i < d.size(); ++i) {
                d[i] = dist(rng);
                f[i] = static_cast<float>(dist(rng));
            }
            auto td = tessera::from<double>(s, shape{5, 8}, std::span<const double>(d));
            auto tf = tessera::from<float>(s, shape{40}, std::span<const float>(f));
            check_round_trip(d, to_string(td));
            check_round_trip(f, to_string(tf));
            // A narrow range stays positional.
            std::vector<double> narrow(10);
            for (double& v : narrow) v = scale * (1.0 + std::abs(dist(rng)) / scale);
            const std::string text =
                to_string(tessera::from<double>(s, shape{10}, std::span<const double>(narrow)));
            check_round_trip(narrow, text);
            EXPECT_EQ(text.find('e') == std::string::npos, scale < 1e8 && scale >= 1e-4) << text;
        }
    });
}

}  // namespace
