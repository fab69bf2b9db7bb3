// White-box test of the private src/linalg_lanes_kernels.hpp: which lanes of a flag vector a block
// hands back to the per-matrix path. On x86 the kernels take them from one comparison into a mask
// (AVX-512) or a comparison and a movemask (AVX2, SSE2); other targets compile only the portable
// fold, which no test could reach on this machine through the ops. Here the portable template,
// called by name, must give the bits of the x86 overload the kernels use for every vector type,
// lane by lane over values that decide differently under a wrong comparison (-0, +0, the smallest
// subnormal, NaN, infinities).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <random>

#include "linalg_lanes_kernels.hpp"

namespace {

using tessera::detail::vec_t;

template <class T>
constexpr std::array<T, 9> probe_values() {
    using L = std::numeric_limits<T>;
    return {T(-1), T(-0.0),       T(0),           L::denorm_min(), L::min(),
            T(2),  L::infinity(), -L::infinity(), L::quiet_NaN()};
}

// Whether this CPU runs the overload of vectors of Lanes elements of T (the clone that uses it).
template <class T, int Lanes>
bool runs_here() {
#if defined(__x86_64__) || defined(__i386__)
    constexpr int bits = Lanes * static_cast<int>(sizeof(T)) * 8;
    if constexpr (bits == 512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    else if constexpr (bits == 256)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return true;
}

// Every lane alone at every probe value over a background of each probe value, then random
// vectors; the kernels' choice (plain overload resolution) against the portable template.
template <class T, int Lanes>
void expect_portable_bits() {
    using V = vec_t<T, Lanes>;
    if (!runs_here<T, Lanes>()) GTEST_SKIP() << "this CPU lacks the clone of " << Lanes << " lanes";
    constexpr auto values = probe_values<T>();
    const auto check = [](const V& x) {
        using tessera::detail::lanes::positive_lanes;
        std::uint32_t expected = 0;
        for (int l = 0; l < Lanes; ++l)
            if (x[l] > T(0)) expected |= std::uint32_t{1} << l;
        ASSERT_EQ(positive_lanes(x), expected);
        ASSERT_EQ(positive_lanes<V>(x), expected);
        for (int count = 0; count <= Lanes; ++count)
            ASSERT_EQ(tessera::detail::lanes::flag_bits(x, count),
                      expected & tessera::detail::lanes::low_bits(count))
                << count;
    };
    for (const T background : values)
        for (int lane = 0; lane < Lanes; ++lane)
            for (const T v : values) {
                V x{};
                for (int l = 0; l < Lanes; ++l) x[l] = background;
                x[lane] = v;
                SCOPED_TRACE(::testing::Message()
                             << "lane " << lane << " = " << v << " among " << background);
                check(x);
                if (::testing::Test::HasFatalFailure()) return;
            }
    std::mt19937 rng(20261203);
    std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
    for (int trial = 0; trial < 2000; ++trial) {
        V x{};
        for (int l = 0; l < Lanes; ++l) x[l] = values[pick(rng)];
        check(x);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(LaneFlagsTest, Avx512FloatMaskMatchesThePortableFold) {
    expect_portable_bits<float, 16>();
}
TEST(LaneFlagsTest, Avx512DoubleMaskMatchesThePortableFold) {
    expect_portable_bits<double, 8>();
}
TEST(LaneFlagsTest, Avx2FloatMovemaskMatchesThePortableFold) {
    expect_portable_bits<float, 8>();
}
TEST(LaneFlagsTest, Avx2DoubleMovemaskMatchesThePortableFold) {
    expect_portable_bits<double, 4>();
}
TEST(LaneFlagsTest, BaselineFloatMovemaskMatchesThePortableFold) {
    expect_portable_bits<float, 4>();
}
TEST(LaneFlagsTest, BaselineDoubleMovemaskMatchesThePortableFold) {
    expect_portable_bits<double, 2>();
}

}  // namespace
