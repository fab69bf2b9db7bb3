// Black-box: every op family validates through the same checks, so the same mistake gets the same
// error, in one message format naming the op and the operands: broadcasting (elementwise ops and
// the batch axes of matmul and linalg), an out's shape, an out that repeats elements, and an out
// that overlaps an input (in place allowed for elementwise, reductions, copies and linalg; refused
// for products). Nothing is written when a check fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tessera/tessera.hpp>
#include <vector>

#include "support/messages.hpp"
#include "support/backends.hpp"

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;

using tessera::test::message_of;

template <class T>
std::vector<T> snapshot(const tensor<T>& t) {
    return {t.values().begin(), t.values().end()};
}

/// Well-conditioned square matrices: 2 on the diagonal, 0.25 * (i - j) elsewhere.
tensor<double> matrices(session& s, const shape& sh) {
    tensor<double> a = tessera::empty<double>(s, sh);
    const std::size_t n = sh[sh.rank() - 1];
    for (std::size_t idx = 0; idx < a.size(); ++idx) {
        const std::size_t i = idx / n % n, j = idx % n;
        a.values()[idx] = i == j ? 2.0 : 0.25 * (static_cast<double>(i) - static_cast<double>(j));
    }
    return a;
}

const std::string in_place_reason =
    " without being the same view; in-place use must pass the very same elements";
const std::string disjoint_reason = "; the two must not share any element";

class ValidationTest : public ::testing::TestWithParam<int> {
protected:
    backend be_{backend_options{}.with_threads(GetParam())};
};

TEST_P(ValidationTest, BroadcastErrorsNameTheOpAndTheShapes) {
    be_.run([](session& s) {
        const tensor<double> a34 = tessera::full<double>(s, {3, 4}, 1.0);
        const tensor<double> a43 = tessera::full<double>(s, {4, 3}, 1.0);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::add(s, a34, a43); }),
                  "add: shapes [3,4] and [4,3] do not broadcast");
        // The batch axes of matrix operands follow the same rule, with the same wording in both
        // families.
        const tensor<double> m234 = tessera::full<double>(s, {2, 3, 4}, 1.0);
        const tensor<double> m345 = tessera::full<double>(s, {3, 4, 5}, 1.0);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::batched_matmul(s, m234, m345); }),
                  "batched_matmul: the batch axes of a [2,3,4] and b [3,4,5] do not broadcast");
        const tensor<double> sq = matrices(s, {2, 3, 3});
        const tensor<double> rhs = tessera::full<double>(s, {3, 3, 1}, 1.0);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::solve(s, sq, rhs); }),
                  "solve: the batch axes of a [2,3,3] and b [3,3,1] do not broadcast");
        // One shape to another: copy and broadcast_to.
        const tensor<double> v3 = tessera::full<double>(s, {3}, 1.0);
        tensor<double> d24 = tessera::full<double>(s, {2, 4}, -1.0);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::copy(s, v3, d24.view()); }),
                  "copy: shape [3] does not broadcast to [2,4]");
        EXPECT_EQ(message_of<tessera::shape_error>([&] {
                      (void)v3.view().broadcast_to({2, 4});
                  }),
                  "broadcast_to: shape [3] does not broadcast to [2,4]");
        for (double x : d24.values()) EXPECT_EQ(x, -1.0);
    });
}

TEST_P(ValidationTest, BatchAxesBroadcastAsElementwiseShapesDo) {
    be_.run([](session& s) {
        // [2,1] and [4] batches broadcast to [2,4] in add, batched_matmul and solve alike.
        const tensor<double> a = matrices(s, {2, 1, 3, 3});
        const tensor<double> b = tessera::full<double>(s, {4, 3, 2}, 0.5);
        const tensor<double> batch =
            tessera::add(s, tessera::zeros<double>(s, {2, 1}), tessera::zeros<double>(s, {4}));
        EXPECT_EQ(batch.shape(), (shape{2, 4}));
        EXPECT_EQ(tessera::batched_matmul(s, a, b).shape(), (shape{2, 4, 3, 2}));
        EXPECT_EQ(tessera::solve(s, a, b).shape(), (shape{2, 4, 3, 2}));
    });
}

TEST_P(ValidationTest, OutShapeErrorsHaveOneFormat) {
    be_.run([](session& s) {
        const tensor<double> a = tessera::full<double>(s, {3, 4}, 1.0);
        tensor<double> out4 = tessera::full<double>(s, {4}, -1.0);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::add(s, a, a, out4.view()); }),
                  "add: out has shape [4] but the result has shape [3,4]");
        EXPECT_EQ(message_of<tessera::shape_error>(
                      [&] { tessera::matmul(s, a, a.view().transpose(), out4); }),
                  "matmul: out has shape [4] but the result has shape [3,3]");
        EXPECT_EQ(message_of<tessera::shape_error>(
                      [&] { tessera::sum(s, a, {0}, out4.view().slice(0, 0, 2)); }),
                  "sum: out has shape [2] but the result has shape [4] (or [1,4] with the reduced "
                  "axes kept)");
        EXPECT_EQ(message_of<tessera::shape_error>([&] {
                      tessera::concat<double>(s, {a, a}, 0, out4.view());
                  }),
                  "concat: out has shape [4] but the result has shape [6,4]");
        const tensor<double> sq = matrices(s, {2, 2, 2});
        tensor<double> x = tessera::full<double>(s, {2, 2, 2}, -1.0);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::inverse(s, sq, out4.view()); }),
                  "inverse: out has shape [4] but the result has shape [2,2,2]");
        tensor<std::int32_t> info = tessera::full<std::int32_t>(s, {3}, -1);
        EXPECT_EQ(message_of<tessera::shape_error>(
                      [&] { tessera::inverse(s, sq, x.view(), info.view()); }),
                  "inverse: info has shape [3] but the result has shape [2]");
        for (double v : out4.values()) EXPECT_EQ(v, -1.0);
        for (double v : x.values()) EXPECT_EQ(v, -1.0);
    });
}

TEST_P(ValidationTest, AnOutThatRepeatsElementsIsRefusedByEveryFamily) {
    be_.run([](session& s) {
        const tensor<double> a = matrices(s, {3, 3});
        tensor<double> row = tessera::full<double>(s, {1, 3}, -1.0);
        const tensor_view<double> repeated = row.view().broadcast_to({3, 3});
        const std::string reason =
            ": out repeats elements (an axis with stride 0); it cannot be written";
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::add(s, a, a, repeated); }),
                  "add" + reason);
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::matmul(s, a, a, repeated); }),
                  "matmul" + reason);
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::inverse(s, a, repeated); }),
                  "inverse" + reason);
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::copy(s, a, repeated); }),
                  "copy" + reason);
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::fill(s, 0.0, repeated); }),
                  "fill" + reason);
        for (double v : row.values()) EXPECT_EQ(v, -1.0);
    });
}

TEST_P(ValidationTest, OverlapErrorsNameTheOpAndBothOperands) {
    be_.run([](session& s) {
        // Elementwise, reduction and copy: an out partly over an input.
        tensor<double> buffer = tessera::full<double>(s, {9}, 1.0);
        const tensor<double> other = tessera::full<double>(s, {8}, 2.0);
        const tensor_view<double> head = buffer.view().slice(0, 0, 8);
        const tensor_view<double> tail = buffer.view().slice(0, 1, 9);
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::add(s, other, tail, head); }),
                  "add: out overlaps input 1" + in_place_reason);
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::copy(s, tail, head); }),
                  "copy: out overlaps input 0" + in_place_reason);
        EXPECT_EQ(
            message_of<tessera::alias_error>([&] {
                tessera::sum(s, buffer.view().reshape({3, 3}), {0}, buffer.view().slice(0, 1, 4));
            }),
            "sum: out overlaps input 0" + in_place_reason);
        for (double v : buffer.values()) EXPECT_EQ(v, 1.0);

        // Linalg: an out partly over an input, or two outs sharing memory.
        tensor<double> stack = matrices(s, {3, 2, 2});
        const std::vector<double> stack_before = snapshot(stack);
        const tensor_view<double> first2 = stack.view().slice(0, 0, 2);
        const tensor_view<double> last2 = stack.view().slice(0, 1, 3);
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::inverse(s, first2, last2); }),
                  "inverse: out overlaps a" + in_place_reason);
        tensor<double> q = tessera::full<double>(s, {2, 2, 2}, -1.0);
        EXPECT_EQ(
            message_of<tessera::alias_error>([&] { tessera::qr(s, first2, q.view(), q.view()); }),
            "qr: q overlaps r" + disjoint_reason);

        // Products: any shared element, on the inline 2x2-4x4 path and the general one alike.
        EXPECT_EQ(message_of<tessera::alias_error>(
                      [&] { tessera::batched_matmul(s, first2, first2, last2); }),
                  "batched_matmul: out overlaps a" + disjoint_reason);
        for (std::size_t n : {3u, 5u}) {
            tensor<double> m = matrices(s, {n, n});
            const tensor<double> id = matrices(s, {n, n});
            const std::vector<double> m_before = snapshot(m);
            EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::matmul(s, id, m, m); }),
                      "matmul: out overlaps b" + disjoint_reason)
                << n;
            EXPECT_EQ(snapshot(m), m_before);
        }
        EXPECT_EQ(snapshot(stack), stack_before);
        for (double v : q.values()) EXPECT_EQ(v, -1.0);
    });
}

TEST_P(ValidationTest, ExactlyTheSameElementsRunInPlaceWhereTheOpAllowsIt) {
    be_.run([](session& s) {
        tensor<double> x = tessera::full<double>(s, {2, 3}, 1.5);
        tessera::add(s, x, x, x.view());
        for (double v : x.values()) EXPECT_EQ(v, 3.0);

        // solve with out exactly b, where out and b are two views of the same elements that
        // differ only in strides the view never uses: one is a reshape of a rank-4 view (a stale
        // stride past its rank), the other is built directly.
        const tensor<double> a = matrices(s, {2, 3, 3});
        tensor<double> b = tessera::full<double>(s, {2, 3, 1, 1}, 1.0);
        const tensor<double> expected = tessera::solve(s, a, b.view().reshape({2, 3, 1}));
        const tensor_view<double> b_reshaped = b.view().reshape({2, 3, 1});
        const tensor_view<double> b_direct(b.data(), shape{2, 3, 1});
        ASSERT_NE(b_reshaped.stride_values(), b_direct.stride_values());
        tessera::solve(s, a, b_reshaped, b_direct);
        for (std::size_t i = 0; i < b.size(); ++i)
            EXPECT_NEAR(b.values()[i], expected.values()[i], 1e-12);

        // A product refuses even the very same view: it reads its inputs while it writes.
        tensor<double> m = matrices(s, {5, 5});
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::matmul(s, m, m, m.view()); }),
                  "matmul: out overlaps a" + disjoint_reason);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, ValidationTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
