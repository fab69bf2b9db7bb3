// White-box: the one broadcast routine (detail/broadcast.hpp) and the shared checks
// (detail/validate.hpp) that every op's validation is built from.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <string>
#include <tessera/tessera.hpp>

#include "support/messages.hpp"

namespace {

using tessera::shape;
using tessera::tensor_view;
namespace detail = tessera::detail;

using tessera::test::message_of;

TEST(BroadcastTest, BroadcastsWholeShapesAndBatchAxesByOneRule) {
    EXPECT_EQ(detail::broadcast_shapes("add", shape{3, 1}, shape{4}), (shape{3, 4}));
    EXPECT_EQ(detail::broadcast_shapes("add", shape{}, shape{2, 3}), (shape{2, 3}));
    EXPECT_EQ(detail::broadcast_shapes("add", shape{0, 1}, shape{1, 5}), (shape{0, 5}));
    EXPECT_EQ(detail::broadcast_all("where", shape{2, 1, 1}, shape{3, 1}, shape{4}),
              (shape{2, 3, 4}));
    // core = 2: the matrix axes are left out, whatever they are.
    EXPECT_EQ(detail::broadcast_shapes("solve", shape{5, 1, 3, 3}, shape{4, 3, 7}, 2),
              (shape{5, 4}));
    EXPECT_EQ(detail::broadcast_shapes("solve", shape{3, 3}, shape{3, 7}, 2), (shape{}));

    EXPECT_EQ(message_of<tessera::shape_error>([] {
                  detail::broadcast_shapes("add", shape{3, 4}, shape{4, 3});
              }),
              "add: shapes [3,4] and [4,3] do not broadcast");
    EXPECT_EQ(message_of<tessera::shape_error>([] {
                  detail::broadcast_all("where", shape{3, 1}, shape{4}, shape{5});
              }),
              "where: shapes [3,4] and [5] do not broadcast");
    EXPECT_EQ(message_of<tessera::shape_error>([] {
                  detail::broadcast_shapes("batched_matmul", shape{2, 3, 4}, shape{3, 4, 5}, 2);
              }),
              "batched_matmul: the batch axes of a [2,3,4] and b [3,4,5] do not broadcast");
}

TEST(BroadcastTest, BroadcastsToIsTheBroadcastBeingTheTarget) {
    EXPECT_TRUE(detail::broadcasts_to(shape{3, 1}, shape{2, 3, 4}));
    EXPECT_TRUE(detail::broadcasts_to(shape{}, shape{2}));
    EXPECT_TRUE(detail::broadcasts_to(shape{1}, shape{0}));
    EXPECT_TRUE(detail::broadcasts_to(shape{2, 3}, shape{2, 3}));
    EXPECT_FALSE(detail::broadcasts_to(shape{3, 4}, shape{4}));  // more axes than the target
    EXPECT_FALSE(detail::broadcasts_to(shape{4}, shape{4, 1}));  // would stretch the target
    EXPECT_FALSE(detail::broadcasts_to(shape{0}, shape{1}));     // 0 does not stretch to 1
    EXPECT_FALSE(detail::broadcasts_to(shape{3}, shape{2, 4}));
}

TEST(BroadcastTest, StridesOfABroadcastViewAreZeroOnlyWhereStretched) {
    const std::array<std::ptrdiff_t, tessera::max_rank> st{5, 7, 9, 11};
    const auto b = detail::broadcast_strides(shape{1, 3}, st, shape{2, 4, 3});
    EXPECT_EQ(b[0], 0);  // added
    EXPECT_EQ(b[1], 0);  // stretched from 1
    EXPECT_EQ(b[2], 7);  // kept
    const auto same = detail::broadcast_strides(shape{1, 3}, st, shape{1, 3});
    EXPECT_EQ(same[0], 5);  // an extent-1 axis that is not stretched keeps its stride
    EXPECT_EQ(same[1], 7);
    EXPECT_EQ(same[2], 0);  // nothing past the rank
}

TEST(ValidateTest, SameElementsIgnoresStridesThatAreNeverUsed) {
    std::array<float, 8> data{};
    const tensor_view<float> dense(data.data(), shape{2, 1, 4});
    // The same elements with another stride on the extent-1 axis,
    const tensor_view<const float> odd_stride(data.data(), shape{2, 1, 4}, {4, 99, 1});
    // and with a stale entry past the rank (a reshape to a lower rank leaves it there).
    const tensor_view<const float> reshaped =
        tensor_view<const float>(data.data(), shape{2, 1, 4, 1}).reshape({2, 1, 4});
    ASSERT_NE(reshaped.stride_values(), dense.stride_values());
    for (const tensor_view<const float>& v : {odd_stride, reshaped}) {
        EXPECT_TRUE(detail::same_elements(dense, v));
        EXPECT_NO_THROW(
            detail::check_in_place("add", "out", dense, detail::operand_name("input", 0), v));
    }
    // The same address read with elements of another size are not the same elements (a type of
    // the same size is: each element is read before the op writes it).
    const tensor_view<const double> doubles(reinterpret_cast<const double*>(data.data()),
                                            shape{2, 1, 4});
    EXPECT_FALSE(detail::same_elements(dense, doubles));
    const tensor_view<const int> ints(reinterpret_cast<const int*>(data.data()), shape{2, 1, 4});
    EXPECT_TRUE(detail::same_elements(dense, ints));
}

TEST(ValidateTest, OneMessageFormatForEveryCheck) {
    std::array<double, 12> data{};
    const tensor_view<double> all(data.data(), shape{12});
    const tensor_view<double> head(data.data(), shape{6});
    const tensor_view<double> tail(data.data() + 3, shape{6});
    const tensor_view<double> far(data.data() + 6, shape{6});
    EXPECT_EQ(message_of<tessera::shape_error>([&] {
                  detail::check_out("sum", "out", all, shape{3, 4});
              }),
              "sum: out has shape [12] but the result has shape [3,4]");
    EXPECT_EQ(
        message_of<tessera::alias_error>([&] {
            detail::check_out("qr", "q", head.reshape({1, 6}).broadcast_to({2, 6}), shape{2, 6});
        }),
        "qr: q repeats elements (an axis with stride 0); it cannot be written");
    EXPECT_EQ(
        message_of<tessera::alias_error>([&] {
            detail::check_in_place("concat", "out", head, detail::operand_name("input", 2), tail);
        }),
        "concat: out overlaps input 2 without being the same view; in-place use must pass the "
        "very same elements");
    EXPECT_EQ(message_of<tessera::alias_error>(
                  [&] { detail::check_disjoint("matmul", "out", head, "b", head); }),
              "matmul: out overlaps b; the two must not share any element");
    // Disjoint ranges and exact in-place use pass.
    EXPECT_NO_THROW(detail::check_disjoint("matmul", "out", head, "a", far));
    EXPECT_NO_THROW(detail::check_in_place("add", "out", head, "a", head));
}

}  // namespace
