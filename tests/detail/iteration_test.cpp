// White-box: the iteration space and its cursor (tessera/detail/iteration.hpp) against a
// reference that decodes every item's offsets from scratch, on random shapes, strides and ranges.
#include <tessera/detail/iteration.hpp>
#include <tessera/shape.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace {

using tessera::max_rank;
using tessera::shape;
using tessera::stride_array;
using tessera::detail::collapse;
using tessera::detail::cursor;
using tessera::detail::iteration;

// Offsets of `item` (row-major over `s`) for each operand, decoded directly from the uncollapsed
// shape and strides.
std::array<std::ptrdiff_t, 2> reference(const shape& s, const std::array<stride_array, 2>& st,
                                        std::size_t item) {
    std::array<std::ptrdiff_t, 2> off{};
    for (std::size_t a = s.rank(); a-- > 0;) {
        const auto i = static_cast<std::ptrdiff_t>(item % s[a]);
        item /= s[a];
        for (std::size_t k = 0; k < 2; ++k) off[k] += i * st[k][a];
    }
    return off;
}

struct random_case {
    shape s;
    std::array<stride_array, 2> st{};
};

// A random shape of rank 0-5 (extents 1-4) with, per operand, dense row-major, broadcast (0),
// flipped or arbitrary strides, so that some axes merge and some do not.
random_case make_case(std::mt19937& rng) {
    std::uniform_int_distribution<std::size_t> rank_d(0, 5), ext_d(1, 4);
    std::uniform_int_distribution<int> kind_d(0, 3);
    std::uniform_int_distribution<std::ptrdiff_t> stride_d(-9, 9);
    std::array<std::size_t, max_rank> dims{};
    const std::size_t rank = rank_d(rng);
    for (std::size_t a = 0; a < rank; ++a) dims[a] = ext_d(rng);
    random_case c{shape(std::span<const std::size_t>(dims.data(), rank)), {}};
    for (std::size_t k = 0; k < 2; ++k) {
        const int kind = kind_d(rng);
        std::ptrdiff_t dense = 1;
        for (std::size_t a = rank; a-- > 0;) {
            switch (kind) {
                case 0: c.st[k][a] = dense; break;
                case 1: c.st[k][a] = a % 2 == 0 ? 0 : dense; break;
                case 2: c.st[k][a] = -dense; break;
                default: c.st[k][a] = stride_d(rng); break;
            }
            dense *= static_cast<std::ptrdiff_t>(dims[a]);
        }
    }
    return c;
}

TEST(IterationTest, CollapseKeepsTheCountAndMergesDenseAxes) {
    const shape s{3, 1, 4, 5};
    const stride_array dense{20, 20, 5, 1};
    const iteration<1> it = collapse<1>(s, {&dense});
    EXPECT_EQ(it.rank, 1u);
    EXPECT_EQ(it.count(), 60u);
    EXPECT_EQ(it.inner_stride(0), 1);
    const stride_array sliced{40, 40, 5, 1};  // rows of a wider tensor: two runs
    const iteration<2> two = collapse<2>(s, {&dense, &sliced});
    EXPECT_EQ(two.rank, 2u);
    EXPECT_EQ(two.count(), 60u);
    const iteration<1> scalar = collapse<1>(shape{}, {&dense});
    EXPECT_EQ(scalar.rank, 1u);
    EXPECT_EQ(scalar.count(), 1u);
}

TEST(IterationTest, CursorMatchesDirectDecodingFromAnyStart) {
    std::mt19937 rng(12345);
    for (int trial = 0; trial < 400; ++trial) {
        const random_case c = make_case(rng);
        const iteration<2> it = collapse<2>(c.s, {&c.st[0], &c.st[1]});
        const std::size_t n = c.s.count();
        ASSERT_EQ(it.count(), n);
        std::uniform_int_distribution<std::size_t> start_d(0, n - 1);
        const std::size_t begin = start_d(rng);
        cursor<2> at(it, begin);
        for (std::size_t item = begin; item < n; ++item) {
            ASSERT_EQ(at.offsets(), reference(c.s, c.st, item))
                << "trial " << trial << " item " << item;
            at.advance(1);
        }
    }
}

TEST(IterationTest, RunsAndItemsCoverARangeInOrder) {
    std::mt19937 rng(777);
    for (int trial = 0; trial < 400; ++trial) {
        const random_case c = make_case(rng);
        const iteration<2> it = collapse<2>(c.s, {&c.st[0], &c.st[1]});
        const std::size_t n = c.s.count();
        std::uniform_int_distribution<std::size_t> d(0, n);
        std::size_t begin = d(rng), end = d(rng);
        if (begin > end) std::swap(begin, end);

        std::vector<std::array<std::ptrdiff_t, 2>> runs;
        tessera::detail::for_each_run(
            it, begin, end, [&](const std::array<std::ptrdiff_t, 2>& off, std::size_t length) {
                ASSERT_GT(length, 0u);
                for (std::size_t j = 0; j < length; ++j) {
                    const auto jj = static_cast<std::ptrdiff_t>(j);
                    runs.push_back(
                        {off[0] + jj * it.inner_stride(0), off[1] + jj * it.inner_stride(1)});
                }
            });
        ASSERT_EQ(runs.size(), end - begin) << "trial " << trial;
        for (std::size_t i = 0; i < runs.size(); ++i)
            ASSERT_EQ(runs[i], reference(c.s, c.st, begin + i)) << "trial " << trial;

        std::size_t seen = 0;
        const std::size_t stop = begin + (end - begin) / 2;  // early stop half-way
        tessera::detail::for_each_item(
            it, begin, end, [&](std::size_t item, const std::array<std::ptrdiff_t, 2>& off) {
                EXPECT_EQ(item, begin + seen);
                EXPECT_EQ(off, reference(c.s, c.st, item));
                ++seen;
                return item + 1 < stop;
            });
        EXPECT_EQ(seen, begin == end ? 0 : std::max<std::size_t>(stop - begin, 1))
            << "trial " << trial;
    }
}

}  // namespace
