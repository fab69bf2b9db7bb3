// Elementwise ops over every layout: broadcasting (size-1 axes, rank promotion, zero-size axes,
// scalars), negative strides, transposes and slices, up to rank 8, in and out of place.
#include "elementwise_support.hpp"

namespace {

using namespace tessera::test::elementwise;

// ---------------------------------------------------------------------------------------------
// Broadcasting and layouts: size-1 axes, rank promotion, zero-size axes, scalars, negative
// strides, transposes, step slices, broadcast inputs and rank 8, mixed in one call.

enum class layout { dense, transposed, flipped, strided, reversed_step, broadcast };
constexpr std::array input_layouts{layout::dense,   layout::transposed,    layout::flipped,
                                   layout::strided, layout::reversed_step, layout::broadcast};
constexpr std::array output_layouts{layout::dense, layout::transposed, layout::flipped,
                                    layout::strided, layout::reversed_step};

const char* layout_name(layout l) {
    switch (l) {
        case layout::dense:
            return "dense";
        case layout::transposed:
            return "transposed";
        case layout::flipped:
            return "flipped";
        case layout::strided:
            return "strided";
        case layout::reversed_step:
            return "reversed_step";
        case layout::broadcast:
            return "broadcast";
    }
    return "?";
}

/// Storage for one operand and a view of it, with a given logical shape, in one of the layouts;
/// the storage may hold more elements than the view.
template <class T>
struct laid_out {
    tensor<T> storage;
    tensor_view<T> view;
};

template <class T>
laid_out<T> make_layout(session& s, const shape& logical, layout l) {
    const std::size_t r = logical.rank();
    std::vector<std::size_t> dims(logical.dims().begin(), logical.dims().end());
    if (r == 0) l = layout::dense;
    laid_out<T> out;
    auto make = [&](const std::vector<std::size_t>& d) {
        out.storage = tessera::empty<T>(s, shape(std::span<const std::size_t>(d)));
        return out.storage.view();
    };
    switch (l) {
        case layout::dense:
            out.view = make(dims);
            break;
        case layout::transposed: {
            std::vector<std::size_t> reversed(dims.rbegin(), dims.rend());
            out.view = make(reversed).transpose();
            break;
        }
        case layout::flipped: {
            tensor_view<T> v = make(dims);
            for (std::size_t a = 0; a < r; ++a) v = v.flip(static_cast<std::ptrdiff_t>(a));
            out.view = v;
            break;
        }
        case layout::strided: {  // every second element along the first and the last axis
            std::vector<std::size_t> d = dims;
            d[r - 1] *= 2;
            if (r > 1) d[0] *= 2;
            tensor_view<T> v = make(d).slice(-1, 0, tessera::slice_end, 2);
            if (r > 1) v = v.slice(0, 1, tessera::slice_end, 2);
            out.view = v;
            break;
        }
        case layout::reversed_step: {  // every third element of the last axis, backwards
            std::vector<std::size_t> d = dims;
            d[r - 1] *= 3;
            out.view = make(d).slice(-1, tessera::slice_end, tessera::slice_end, -3);
            break;
        }
        case layout::broadcast: {  // extent 1 with stride 0 on every even axis
            std::vector<std::size_t> d = dims;
            for (std::size_t a = 0; a < r; a += 2) d[a] = 1;
            out.view = make(d).broadcast_to(logical);
            break;
        }
    }
    return out;
}

template <class T>
laid_out<T> random_layout(session& s, const shape& logical, layout l, domain d,
                          std::mt19937_64& rng) {
    laid_out<T> o = make_layout<T>(s, logical, l);
    for (T& v : o.storage.values()) v = draw<T>(d, rng);
    return o;
}

/// Checks that an op wrote nothing outside `o.view`: overwrite the view with the sentinel through
/// this file's indexing, then every storage element must be the sentinel.
template <class T>
::testing::AssertionResult no_stray_writes(const laid_out<T>& o) {
    for_each_index(o.view.shape(), [&](const index_array& index) {
        at(o.view, index, o.view.rank()) = sentinel<T>();
    });
    for (const T& v : o.storage.values())
        if (!(v == sentinel<T>()))
            return ::testing::AssertionFailure() << "an element outside out was written";
    return ::testing::AssertionSuccess();
}

const std::vector<std::pair<shape, shape>>& layout_shapes() {
    static const std::vector<std::pair<shape, shape>> pairs{
        {{}, {}},
        {{5}, {1}},
        {{4}, {3, 4}},
        {{3, 1}, {1, 4}},
        {{2, 3, 4}, {3, 1}},
        {{0, 3}, {1, 3}},
        {{0}, {1}},
        {{}, {2, 3}},
        {{2, 1, 3, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 3}},
        {{2, 2, 2, 2, 2, 2, 2, 3}, {3}},
    };
    return pairs;
}

/// Runs a binary op over every combination of input and output layouts on every shape pair.
template <class T, class Op, class Ref>
void check_binary_layouts(session& s, std::mt19937_64& rng, const Op& op, Ref ref, tolerance tol) {
    using WR = std::invoke_result_t<Ref&, wide_t<T>, wide_t<T>>;
    using R = narrow_t<T, WR>;
    for (const auto& [sa, sb] : layout_shapes()) {
        const shape rs = broadcast_shapes(sa, sb);
        for (layout la : input_layouts) {
            for (layout lb : input_layouts) {
                for (layout lo : output_layouts) {
                    SCOPED_TRACE(text(sa) + " " + layout_name(la) + ", " + text(sb) + " " +
                                 layout_name(lb) + " -> " + layout_name(lo));
                    const auto a = random_layout<T>(s, sa, la, domain::any, rng);
                    const auto b = random_layout<T>(s, sb, lb, domain::nonzero, rng);
                    const auto want = reference_of(
                        rs, [&](T x, T y) { return ref(widen(x), widen(y)); }, a.view, b.view);
                    auto o = make_layout<R>(s, rs, lo);
                    for (R& v : o.storage.values()) v = sentinel<R>();
                    op(s, a.view, tensor_view<const T>(b.view), o.view);
                    EXPECT_TRUE(matches(o.view, want, tol));
                    EXPECT_TRUE(no_stray_writes(o));
                    if (lo == layout::dense) {
                        EXPECT_TRUE(matches(op(s, a.view, b.view).view(), want, tol));
                    }
                }
            }
        }
    }
}

class ElementwiseLayoutTest : public ::testing::TestWithParam<int> {
protected:
    backend be_{backend_options{}.with_threads(GetParam()).with_grain(64)};
};

TEST_P(ElementwiseLayoutTest, BinaryOpsBroadcastOverEveryLayoutMix) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        check_binary_layouts<float>(
            s, rng, tessera::add, [](auto x, auto y) { return x + y; },
            tolerance_for<float>(kind::rounded));
        check_binary_layouts<cd>(
            s, rng, tessera::div, [](auto x, auto y) { return x / y; },
            tolerance_for<cd>(kind::rounded));
        check_binary_layouts<i64>(
            s, rng, tessera::sub, [](auto x, auto y) { return x - y; }, tolerance{});
        check_binary_layouts<double>(
            s, rng, tessera::less_equal, [](auto x, auto y) { return x <= y; }, tolerance{});
    });
}

TEST_P(ElementwiseLayoutTest, UnaryOpsReadAndWriteEveryLayout) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        for (const auto& [logical, unused] : layout_shapes()) {
            for (layout li : input_layouts) {
                for (layout lo : output_layouts) {
                    SCOPED_TRACE(text(logical) + " " + layout_name(li) + " -> " + layout_name(lo));
                    const auto a = random_layout<cf>(s, logical, li, domain::small, rng);
                    const auto want_exp = reference_of(
                        logical, [](cf x) { return std::exp(widen(x)); }, a.view);
                    auto o = make_layout<cf>(s, logical, lo);
                    for (cf& v : o.storage.values()) v = sentinel<cf>();
                    tessera::exp(s, a.view, o.view);
                    EXPECT_TRUE(matches(o.view, want_exp, tolerance_for<cf>(kind::transcendental)));
                    EXPECT_TRUE(no_stray_writes(o));

                    const auto want_abs = reference_of(
                        logical, [](cf x) { return std::abs(widen(x)); }, a.view);
                    auto m = make_layout<float>(s, logical, lo);
                    for (float& v : m.storage.values()) v = sentinel<float>();
                    tessera::abs(s, a.view, m.view);
                    EXPECT_TRUE(matches(m.view, want_abs, tolerance_for<cf>(kind::rounded)));
                    EXPECT_TRUE(no_stray_writes(m));
                }
            }
        }
    });
}

TEST_P(ElementwiseLayoutTest, InPlaceOnAStridedViewUpdatesOnlyTheView) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    be_.run([&](session& s) {
        for (layout l : output_layouts) {
            SCOPED_TRACE(layout_name(l));
            auto a = random_layout<double>(s, {4, 6}, l, domain::any, rng);
            auto b = random_tensor<double>(s, {6}, domain::any, rng);
            const auto before = snapshot(a.storage);
            const auto want = reference_of(
                shape{4, 6}, [](double x, double y) { return widen(x) * widen(y); }, a.view,
                b.view());
            tessera::mul(s, a.view, b, a.view);
            EXPECT_TRUE(matches(a.view, want, tolerance_for<double>(kind::rounded)));
            // Elements outside the view are as they were.
            for_each_index(a.view.shape(), [&](const index_array& index) {
                at(a.view, index, 2) = std::numeric_limits<double>::quiet_NaN();
            });
            std::size_t outside = 0, kept = 0;
            for (std::size_t i = 0; i < a.storage.size(); ++i) {
                if (std::isnan(a.storage.values()[i])) continue;
                ++outside;
                kept += a.storage.values()[i] == before[i];
            }
            EXPECT_EQ(kept, outside);
            EXPECT_EQ(outside, a.storage.size() - 24);
        }
    });
}

TEST_P(ElementwiseLayoutTest, WhereAndZipOfThreeMixLayoutsUpToRankEight) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_text(seed));
    std::mt19937_64 rng(seed);
    const std::vector<std::array<shape, 3>> triples{
        {shape{3, 1}, shape{1, 4}, shape{4}},
        {shape{}, shape{2, 3}, shape{3}},
        {shape{0, 1}, shape{1, 5}, shape{}},
        {shape{2, 1, 2, 1, 2, 1, 2, 1}, shape{1, 2, 1, 2, 1, 2, 1, 3},
         shape{2, 1, 1, 1, 1, 1, 1, 3}},
    };
    be_.run([&](session& s) {
        for (const auto& [sm, sa, sb] : triples) {
            const shape rs = broadcast_shapes(broadcast_shapes(sm, sa), sb);
            for (std::size_t i = 0; i < input_layouts.size(); ++i) {
                const layout lm = input_layouts[i];
                const layout la = input_layouts[(i + 1) % input_layouts.size()];
                const layout lb = input_layouts[(i + 3) % input_layouts.size()];
                for (layout lo : output_layouts) {
                    SCOPED_TRACE(text(sm) + " " + layout_name(lm) + ", " + text(sa) + " " +
                                 layout_name(la) + ", " + text(sb) + " " + layout_name(lb) +
                                 " -> " + layout_name(lo));
                    const auto m = random_layout<bool>(s, sm, lm, domain::any, rng);
                    const auto a = random_layout<float>(s, sa, la, domain::any, rng);
                    const auto b = random_layout<i32>(s, sb, lb, domain::any, rng);
                    const auto c = random_layout<float>(s, sb, lb, domain::any, rng);

                    const auto want_where = reference_of(
                        rs, [](bool on, float x, float y) { return on ? x : y; }, m.view, a.view,
                        c.view);
                    auto o = make_layout<float>(s, rs, lo);
                    for (float& v : o.storage.values()) v = sentinel<float>();
                    tessera::where(s, m.view, a.view, c.view, o.view);
                    EXPECT_TRUE(matches(o.view, want_where, tolerance{})) << "where";
                    EXPECT_TRUE(no_stray_writes(o));

                    auto f = [](bool on, float x, i32 n) {
                        return on ? static_cast<double>(x) * n : -1.0;
                    };
                    const auto want_zip = reference_of(
                        rs,
                        [](bool on, float x, i32 n) {
                            return on ? static_cast<double>(x) * n : -1.0;
                        },
                        m.view, a.view, b.view);
                    auto z = make_layout<double>(s, rs, lo);
                    for (double& v : z.storage.values()) v = sentinel<double>();
                    tessera::zip(s, f, std::tie(m.view, a.view, b.view), z.view);
                    EXPECT_TRUE(matches(z.view, want_zip, tolerance{})) << "zip into out";
                    EXPECT_TRUE(no_stray_writes(z));
                    EXPECT_TRUE(matches(tessera::zip(s, f, m.view, a.view, b.view).view(), want_zip,
                                        tolerance{}))
                        << "zip";
                }
            }
        }
    });
}

TEST_P(ElementwiseLayoutTest, ZeroSizeResultsComeOutEmptyAndWriteNothing) {
    be_.run([](session& s) {
        auto a = tessera::empty<float>(s, {0, 3});
        auto b = filled<float>(s, {1, 3}, 2.0f);
        auto r = tessera::add(s, a, b);
        EXPECT_TRUE(same_shape(r.shape(), shape{0, 3}));
        EXPECT_EQ(r.size(), 0u);
        auto z = tessera::mul(s, tessera::empty<double>(s, {0}), filled<double>(s, {1}, 1.0));
        EXPECT_TRUE(same_shape(z.shape(), shape{0}));
        auto e = tessera::exp(s, tessera::empty<cf>(s, {2, 0, 4}));
        EXPECT_TRUE(same_shape(e.shape(), shape{2, 0, 4}));
        // A view whose shape overflows std::size_t once the zero is left out is still empty.
        const std::size_t huge = std::size_t{1} << 40;
        float one = 1.0f;
        const tensor_view<const float> wide_empty(&one, shape{huge, huge, 0}, {0, 0, 0});
        auto w = tessera::add(s, wide_empty, b.view().reshape({3}).slice(0, 0, 1));
        EXPECT_TRUE(same_shape(w.shape(), shape{huge, huge, 0}));
        EXPECT_EQ(w.size(), 0u);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseLayoutTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
