// Elementwise ops on bad input: every check (broadcast, out shape, overlap, repeated elements,
// element-count overflow, rank) happens before anything is written, and the messages name the op
// and the operands.
#include "elementwise_support.hpp"

namespace {

using namespace tessera::test::elementwise;

// ---------------------------------------------------------------------------------------------
// Bad input: every check happens before anything is written.

class ElementwiseValidationTest : public ::testing::TestWithParam<int> {
protected:
    backend be_{backend_options{}.with_threads(GetParam())};
};

template <class Case>
void expect_broadcast_errors(session& s, std::mt19937_64& rng, const Case& c) {
    using T = float;  // every binary op takes float
    using R = typename std::invoke_result_t<const decltype(c.op)&, session&, const tensor<T>&,
                                            const tensor<T>&>::value_type;
    const std::vector<std::pair<shape, shape>> mismatched{
        {{3, 4}, {4, 3}}, {{3}, {2, 4}}, {{0, 3}, {2, 3}}, {{2, 1, 5}, {3, 4}}, {{2}, {0}}};
    for (const auto& [sa, sb] : mismatched) {
        const std::string want =
            std::string(c.name) + ": shapes " + text(sa) + " and " + text(sb) + " do not broadcast";
        auto a = random_tensor<T>(s, sa, domain::positive, rng);
        auto b = random_tensor<T>(s, sb, domain::positive, rng);
        auto out = filled<R>(s, sa);
        const auto before = snapshot(out);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { c.op(s, a, b, out); }), want);
        EXPECT_TRUE(unchanged(out, before)) << c.name;
        EXPECT_EQ(message_of<tessera::shape_error>([&] { auto r = c.op(s, a, b); }), want);
        if constexpr (std::is_same_v<R, T>) {
            const auto a_before = snapshot(a);
            EXPECT_EQ(message_of<tessera::shape_error>([&] { c.op(s, a, b, a); }), want);
            EXPECT_TRUE(unchanged(a, a_before)) << c.name << " in place";
        }
    }
}

TEST_P(ElementwiseValidationTest, ShapesThatDoNotBroadcastNameTheOpAndBothShapes) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        std::apply([&](const auto&... c) { (expect_broadcast_errors(s, rng, c), ...); },
                   binary_cases);

        auto a = random_tensor<float>(s, {3, 4}, domain::any, rng);
        auto b = random_tensor<float>(s, {4, 3}, domain::any, rng);
        auto m = random_tensor<bool>(s, {5}, domain::any, rng);
        auto out = filled<float>(s, {3, 4});
        const auto before = snapshot(out);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::where(s, m, a, a, out.view()); }),
                  "where: shapes [5] and [3,4] do not broadcast");
        EXPECT_EQ(message_of<tessera::shape_error>([&] { auto r = tessera::where(s, m, a, a); }),
                  "where: shapes [5] and [3,4] do not broadcast");
        auto first = [](float x, float y) { return x + y; };
        EXPECT_EQ(message_of<tessera::shape_error>(
                      [&] { tessera::zip(s, first, std::tie(a, b), out.view()); }),
                  "zip: shapes [3,4] and [4,3] do not broadcast");
        EXPECT_EQ(message_of<tessera::shape_error>([&] { auto r = tessera::zip(s, first, a, b); }),
                  "zip: shapes [3,4] and [4,3] do not broadcast");
        // A [1] in the middle does not rescue a later mismatch: [3,4], [1] and [4,3].
        auto three = [](float x, float y, float z) { return x + y + z; };
        auto one = filled<float>(s, {1}, 1.0f);
        EXPECT_EQ(message_of<tessera::shape_error>(
                      [&] { tessera::zip(s, three, std::tie(a, one, b), out.view()); }),
                  "zip: shapes [3,4] and [4,3] do not broadcast");
        EXPECT_TRUE(unchanged(out, before));
    });
}

template <class Case>
void expect_out_shape_errors(session& s, const Case& c) {
    using T = std::conditional_t<Case::accepts_type::template value<float>, float, cf>;
    using R = typename std::invoke_result_t<const decltype(c.op)&, session&,
                                            const tensor<T>&>::value_type;
    auto a = filled<T>(s, {3, 4}, T{1});
    for (const shape& wrong : {shape{4, 3}, shape{12}, shape{1, 4}, shape{3, 4, 1}, shape{}}) {
        auto out = filled<R>(s, wrong);
        const auto before = snapshot(out);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { c.op(s, a, out); }),
                  std::string(c.name) + ": out has shape " + text(wrong) +
                      " but the result has shape [3,4]");
        EXPECT_TRUE(unchanged(out, before)) << c.name;
    }
}

TEST_P(ElementwiseValidationTest, OutOfTheWrongShapeIsAShapeErrorAndStaysUnchanged) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        std::apply([&](const auto&... c) { (expect_out_shape_errors(s, c), ...); }, unary_cases);

        auto a = random_tensor<float>(s, {3, 4}, domain::any, rng);
        auto row = random_tensor<float>(s, {4}, domain::any, rng);
        auto m = random_tensor<bool>(s, {3, 1}, domain::any, rng);
        // An out that the result would broadcast to is still the wrong shape (no NumPy-style
        // out broadcasting), and so is one with the right count.
        for (const shape& wrong :
             {shape{2, 3, 4}, shape{1, 4}, shape{12}, shape{4, 3}, shape{0, 4}}) {
            SCOPED_TRACE(text(wrong));
            auto out = filled<float>(s, wrong);
            const auto before = snapshot(out);
            const std::string tail =
                ": out has shape " + text(wrong) + " but the result has shape [3,4]";
            EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::add(s, a, row, out); }),
                      "add" + tail);
            EXPECT_EQ(message_of<tessera::shape_error>(
                          [&] { tessera::clamp(s, a, 0.0f, 1.0f, out.view()); }),
                      "clamp" + tail);
            EXPECT_EQ(
                message_of<tessera::shape_error>([&] { tessera::where(s, m, a, row, out.view()); }),
                "where" + tail);
            EXPECT_EQ(message_of<tessera::shape_error>([&] {
                          tessera::map(
                              s, [](float x) { return x; }, a, out.view());
                      }),
                      "map" + tail);
            EXPECT_EQ(message_of<tessera::shape_error>([&] {
                          tessera::zip(s, [](float x, float y) { return x * y; }, std::tie(a, row), out.view());
                      }),
                      "zip" + tail);
            auto mask = filled<bool>(s, wrong);
            const auto mask_before = snapshot(mask);
            EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::less(s, a, row, mask); }),
                      "less" + tail);
            EXPECT_TRUE(unchanged(out, before));
            EXPECT_TRUE(unchanged(mask, mask_before));
        }
        // In place where the other operand would grow the result: a [4] += [3,4].
        auto small = random_tensor<float>(s, {4}, domain::any, rng);
        const auto small_before = snapshot(small);
        EXPECT_EQ(message_of<tessera::shape_error>([&] { tessera::add(s, small, a, small); }),
                  "add: out has shape [4] but the result has shape [3,4]");
        EXPECT_TRUE(unchanged(small, small_before));
    });
}

TEST_P(ElementwiseValidationTest, OutPartiallyOverlappingAnInputIsAnAliasError) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        auto buffer = random_tensor<float>(s, {9}, domain::any, rng);
        auto other = random_tensor<float>(s, {8}, domain::any, rng);
        const auto before = snapshot(buffer);
        const tensor_view<float> head = buffer.view().slice(0, 0, 8);
        const tensor_view<float> tail = buffer.view().slice(0, 1, 9);
        auto overlap = [](const char* op, int input) {
            return std::string(op) + ": out overlaps input " + std::to_string(input) +
                   " without being the same view; in-place use must pass the very same elements";
        };
        auto expect_alias = [&](const std::string& want, auto&& call) {
            EXPECT_EQ(message_of<tessera::alias_error>(call), want);
            EXPECT_TRUE(unchanged(buffer, before)) << want;
        };
        // out is the input shifted by one element, either way round, in either input position.
        expect_alias(overlap("add", 0), [&] { tessera::add(s, head, other, tail); });
        expect_alias(overlap("add", 1), [&] { tessera::add(s, other, head, tail); });
        expect_alias(overlap("sub", 0), [&] { tessera::sub(s, tail, other, head); });
        expect_alias(overlap("exp", 0), [&] { tessera::exp(s, head, tail); });
        expect_alias(overlap("clamp", 0), [&] { tessera::clamp(s, tail, 0.0f, 1.0f, head); });
        expect_alias(overlap("add", 1), [&] { tessera::add(s, head, tail, head); });
        expect_alias(overlap("neg", 0), [&] { tessera::neg(s, head, tail); });
        // The same elements in another order are not an in-place op either.
        expect_alias(overlap("mul", 0), [&] { tessera::mul(s, head, other, head.flip(0)); });
        const tensor_view<float> square = buffer.view().reshape({3, 3});
        expect_alias(overlap("add", 0),
                     [&] { tessera::add(s, square, square, square.transpose()); });
        // A broadcast input over the out's own storage: the row is read while it is written.
        expect_alias(overlap("mul", 1),
                     [&] { tessera::mul(s, square, square.slice(0, 0, 1), square); });
        auto m = random_tensor<bool>(s, {8}, domain::any, rng);
        auto keep = [](float x) { return x; };
        expect_alias(overlap("where", 2), [&] { tessera::where(s, m, other, head, tail); });
        expect_alias(overlap("map", 0), [&] { tessera::map(s, keep, head, tail); });
        auto pick = [](bool on, float x, float y) { return on ? x : y; };
        expect_alias(overlap("zip", 2), [&] { tessera::zip(s, pick, std::tie(m, other, head), tail); });
    });
}

TEST_P(ElementwiseValidationTest, ExactAliasingIsAnInPlaceOpAndAllowed) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        auto a = random_tensor<double>(s, {5, 6}, domain::any, rng);
        auto b = random_tensor<double>(s, {6}, domain::any, rng);
        // The same elements through a flipped, transposed view; as input 0 and as out.
        const tensor_view<double> odd = a.view().transpose().flip(0);
        auto want = reference_of(
            odd.shape(), [](double x, double y) { return widen(x) - widen(y); }, odd,
            b.view().reshape({6, 1}));
        tessera::sub(s, odd, b.view().reshape({6, 1}), odd);
        EXPECT_TRUE(matches(odd, want, tolerance_for<double>(kind::rounded)));
        // The same elements through an independently built view with equal shape and strides.
        const tensor_view<double> rebuilt(a.data() + 5, shape{6, 5}, {-1, 6});
        want = reference_of(
            rebuilt.shape(), [](double x) { return -widen(x); }, rebuilt);
        tessera::neg(s, odd, rebuilt);
        EXPECT_TRUE(matches(rebuilt, want, tolerance{}));
        // Views over one buffer that do not overlap at all.
        auto buffer = random_tensor<float>(s, {2, 8}, domain::any, rng);
        const tensor_view<float> top = buffer.view().slice(0, 0, 1),
                                 bottom = buffer.view().slice(0, 1, 2);
        const auto sum = reference_of(
            shape{1, 8}, [](float x, float y) { return widen(x) + widen(y); }, top, top);
        tessera::add(s, top, top, bottom);
        EXPECT_TRUE(matches(bottom, sum, tolerance_for<float>(kind::rounded)));
    });
}

// The same elements in the same order are an in-place op however the views were made: a reshaped
// view keeps a stale stride past its rank and a squeezed one does not, and an extent-1 axis may
// carry any stride. Only strides of axes with more than one element may decide. (An earlier
// overlap check compared all max_rank stored strides and rejected both as partial overlaps.)
TEST_P(ElementwiseValidationTest, ExactAliasThroughAnotherRouteIsAllowed) {
    be_.run([](session& s) {
        auto t = filled<float>(s, {3, 2, 2}, 1.0f);
        const tensor_view<float> sliced = t.view().slice(2, 0, 1);  // [3,2,1], not contiguous
        EXPECT_NO_THROW(
            tessera::add(s, sliced.squeeze(2), sliced.squeeze(2), sliced.reshape({3, 2})));
        auto u = filled<float>(s, {1, 8}, 1.0f);
        const tensor_view<float> every_other = u.view().slice(1, 0, tessera::slice_end, 2);
        const tensor_view<float> zero_stride_row(u.data(), shape{1, 4}, {0, 2});
        EXPECT_NO_THROW(tessera::add(s, zero_stride_row, zero_stride_row, every_other));
        for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(t(i, 0, 0) + t(i, 1, 0), 4.0f);
        for (std::size_t j = 0; j < 8; j += 2) EXPECT_EQ(u(0, j), 2.0f);
    });
}

// An out that starts at an input's address but has a wider element type is not the same
// elements: each write would run ahead of the reads (an earlier dense path allowed it and gave
// 1, 1.875, 0, 1.98 instead of 1, 2, 3, 4). The views reinterpret one buffer as two element
// types, which the op must refuse before touching it.
TEST_P(ElementwiseValidationTest, OutOverAnInputOfAnotherElementSizeIsAnAliasError) {
    be_.run([](session& s) {
        auto buffer = filled<float>(s, {8}, 0.0f);
        for (std::size_t i = 0; i < 8; ++i) buffer.values()[i] = static_cast<float>(i + 1);
        const auto before = snapshot(buffer);
        const tensor_view<const float> in(buffer.data(), shape{4});
        const tensor_view<double> out(reinterpret_cast<double*>(buffer.data()), shape{4});
        EXPECT_THROW(tessera::zip(s, [](float x) { return static_cast<double>(x); }, std::tie(in), out),
                     tessera::alias_error);
        EXPECT_TRUE(unchanged(buffer, before));
    });
}

TEST_P(ElementwiseValidationTest, OutThatRepeatsElementsIsAnAliasError) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        auto a = random_tensor<float>(s, {3, 4}, domain::any, rng);
        auto m = random_tensor<bool>(s, {3, 4}, domain::any, rng);
        auto row = filled<float>(s, {4});
        auto flags = filled<bool>(s, {4});
        const auto row_before = snapshot(row);
        const auto flags_before = snapshot(flags);
        const tensor_view<float> repeated = row.view().broadcast_to({3, 4});
        auto repeats = [](const char* op) {
            return std::string(op) +
                   ": out repeats elements (an axis with stride 0); it cannot be written";
        };
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::add(s, a, a, repeated); }),
                  repeats("add"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::sqrt(s, a, repeated); }),
                  repeats("sqrt"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::where(s, m, a, a, repeated); }),
                  repeats("where"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] {
                      tessera::zip(s, [](float x) { return x; }, std::tie(a), repeated);
                  }),
                  repeats("zip"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] {
                      tessera::less(s, a, a, flags.view().broadcast_to({3, 4}));
                  }),
                  repeats("less"));
        // Also an explicit stride of 0 on an inner axis, and in place on a broadcast view.
        const tensor_view<float> inner(row.data(), shape{4, 3}, {1, 0});
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::mul(s, inner, inner, inner); }),
                  repeats("mul"));
        EXPECT_EQ(message_of<tessera::alias_error>([&] { tessera::relu(s, repeated, repeated); }),
                  repeats("relu"));
        EXPECT_TRUE(unchanged(row, row_before));
        EXPECT_TRUE(unchanged(flags, flags_before));
        // A stride-0 axis of extent 1 repeats nothing and is a valid out.
        const tensor_view<float> single(row.data(), shape{1, 4}, {0, 1});
        tessera::add(s, a.view().slice(0, 2, 3), a.view().slice(0, 0, 1), single);
        for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(row.values()[j], a(2, j) + a(0, j));
    });
}

TEST_P(ElementwiseValidationTest, ElementCountOverflowIsAShapeError) {
    be_.run([](session& s) {
        const std::size_t big = std::size_t{1} << 33;
        float one = 1.0f;
        const tensor_view<const float> column(&one, shape{big, 1}, {0, 0});
        const tensor_view<const float> row(&one, shape{1, big}, {0, 0});
        auto out = filled<float>(s, {2});
        const auto before = snapshot(out);
        EXPECT_THROW(tessera::add(s, column, row, out), tessera::shape_error);
        EXPECT_THROW(auto r = tessera::add(s, column, row), tessera::shape_error);
        EXPECT_THROW(
            tessera::where(s, tessera::as_view(filled<bool>(s, {1})), column, row, out.view()),
            tessera::shape_error);
        EXPECT_TRUE(unchanged(out, before));
        EXPECT_THROW((void)shape({big, big}), tessera::shape_error);
        // A count that fits but whose bytes do not is refused by the allocating form.
        const tensor_view<const float> huge(&one, shape{std::size_t{1} << 62}, {0});
        EXPECT_THROW(auto r = tessera::neg(s, huge), tessera::allocation_error);
    });
}

TEST_P(ElementwiseValidationTest, RankAboveEightIsAShapeError) {
    be_.run([](session& s) {
        EXPECT_THROW((void)shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), tessera::shape_error);
        auto eight = filled<float>(s, {1, 2, 1, 2, 1, 2, 1, 2}, 1.5f);
        EXPECT_THROW((void)eight.view().unsqueeze(0), tessera::shape_error);
        auto sum = tessera::add(s, eight, eight.view().transpose());
        EXPECT_EQ(sum.rank(), 8u);
        EXPECT_TRUE(same_shape(sum.shape(), shape{2, 2, 2, 2, 2, 2, 2, 2}));
        for (float v : sum.values()) EXPECT_EQ(v, 3.0f);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseValidationTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
