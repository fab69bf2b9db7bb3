// tensor_view, shape and the tensor makers, black-box: every transform is checked element by
// element against addresses computed here with independent index arithmetic (row-major offsets
// into the viewed storage), never with the library's own stride logic.
#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::slice_end;
using tessera::tensor_view;

using index_list = std::vector<std::size_t>;
using offset_list = std::vector<std::ptrdiff_t>;

// ---- the independent reference -----------------------------------------------------------------

std::size_t product(const index_list& dims) {
    std::size_t n = 1;
    for (std::size_t d : dims) n *= d;
    return n;
}

// Calls fn(idx) for every multi-index of `dims`, last axis fastest.
template <class Fn>
void for_each_index(const index_list& dims, Fn fn) {
    if (product(dims) == 0) return;
    index_list idx(dims.size(), 0);
    while (true) {
        fn(static_cast<const index_list&>(idx));
        std::size_t axis = dims.size();
        while (axis > 0) {
            --axis;
            if (++idx[axis] < dims[axis]) break;
            idx[axis] = 0;
            if (axis == 0) return;
        }
        if (dims.empty()) return;
    }
}

// Row-major position of `idx` in `dims`: ((i0 * d1 + i1) * d2 + i2) ...
std::ptrdiff_t row_major(const index_list& dims, const index_list& idx) {
    std::ptrdiff_t off = 0;
    for (std::size_t k = 0; k < dims.size(); ++k)
        off = off * static_cast<std::ptrdiff_t>(dims[k]) + static_cast<std::ptrdiff_t>(idx[k]);
    return off;
}

// What a view should be: its extents and, for every element in row-major order, its offset from
// the start of the viewed storage.
struct reference {
    index_list dims;
    offset_list offsets;

    static reference dense(const index_list& d) {
        reference r{d, {}};
        for_each_index(d, [&](const index_list& i) { r.offsets.push_back(row_major(d, i)); });
        return r;
    }
    std::ptrdiff_t at(const index_list& idx) const {
        return offsets[static_cast<std::size_t>(row_major(dims, idx))];
    }
    // A new reference of extents `d` whose element idx is this one's element source(idx).
    template <class Source>
    reference remap(const index_list& d, Source source) const {
        reference r{d, {}};
        for_each_index(d, [&](const index_list& i) { r.offsets.push_back(at(source(i))); });
        return r;
    }
};

template <class T>
index_list dims_of(const tensor_view<T>& v) {
    return {v.shape().dims().begin(), v.shape().dims().end()};
}

// The view's element idx by its documented layout: data() + sum(idx[k] * stride(k)).
template <class T>
T* address_of(const tensor_view<T>& v, const index_list& idx) {
    std::ptrdiff_t off = 0;
    for (std::size_t k = 0; k < idx.size(); ++k)
        off += static_cast<std::ptrdiff_t>(idx[k]) * v.stride(k);
    return v.data() + off;
}

// Asserts that `v` views exactly the elements `want` names, in order, in storage `base`.
template <class T>
void expect_view(const tensor_view<T>& v, const reference& want,
                 const std::remove_const_t<T>* base) {
    ASSERT_EQ(dims_of(v), want.dims);
    ASSERT_EQ(v.rank(), want.dims.size());
    ASSERT_EQ(v.size(), product(want.dims));
    ASSERT_EQ(v.strides().size(), want.dims.size());
    std::size_t k = 0;
    for_each_index(want.dims, [&](const index_list& i) {
        EXPECT_EQ(address_of(v, i) - base, want.offsets[k]) << "element " << k;
        ++k;
    });
}

// Python's slice semantics, spelled out as CPython adjusts indices. `none_start`/`none_stop`
// stand for an omitted bound.
index_list python_slice(std::ptrdiff_t n, std::ptrdiff_t start, std::ptrdiff_t stop,
                        std::ptrdiff_t step, bool none_start, bool none_stop) {
    auto adjust = [&](std::ptrdiff_t i, bool none, bool is_start) {
        if (none) return step < 0 ? (is_start ? n - 1 : -1) : (is_start ? 0 : n);
        if (i < 0) {
            i += n;
            if (i < 0) i = step < 0 ? -1 : 0;
        } else if (i >= n) {
            i = step < 0 ? n - 1 : n;
        }
        return i;
    };
    const std::ptrdiff_t b = adjust(start, none_start, true);
    const std::ptrdiff_t e = adjust(stop, none_stop, false);
    index_list out;
    for (std::ptrdiff_t i = b; step > 0 ? i < e : i > e;) {
        out.push_back(static_cast<std::size_t>(i));
        if (step > 0 ? e - i <= step : i - e <= -step) break;  // the next step leaves the range
        i += step;
    }
    return out;
}

// The same, for tessera's slice arguments: slice_end as a stop means "to the end in the step's
// direction"; as a start it is simply a very large index.
index_list reference_slice(std::size_t n, std::ptrdiff_t start, std::ptrdiff_t stop,
                           std::ptrdiff_t step) {
    const bool none_stop = stop == slice_end;
    const bool none_start = start == slice_end && step < 0;
    return python_slice(static_cast<std::ptrdiff_t>(n), start, stop, step, none_start, none_stop);
}

// True when some strides make (base offset, strides) produce `offsets` for extents `dims`: the
// strides are read off the unit steps and then verified on every element.
bool expressible_without_copy(const index_list& dims, const offset_list& offsets) {
    if (offsets.empty()) return true;
    std::vector<std::ptrdiff_t> strides(dims.size(), 0);
    for (std::size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] < 2) continue;
        index_list unit(dims.size(), 0);
        unit[k] = 1;
        strides[k] = offsets[static_cast<std::size_t>(row_major(dims, unit))] - offsets[0];
    }
    bool ok = true;
    std::size_t n = 0;
    for_each_index(dims, [&](const index_list& i) {
        std::ptrdiff_t off = offsets[0];
        for (std::size_t k = 0; k < dims.size(); ++k)
            off += static_cast<std::ptrdiff_t>(i[k]) * strides[k];
        ok = ok && off == offsets[n++];
    });
    return ok;
}

template <class Fn>
void expect_shape_error(Fn fn, const std::string& message) {
    try {
        fn();
        ADD_FAILURE() << "no exception; expected: " << message;
    } catch (const tessera::shape_error& e) {
        EXPECT_EQ(std::string(e.what()), message);
    }
}

// Storage 0, 1, 2, ...: an element's value is its offset, so values check addresses too.
std::vector<std::int64_t> iota_storage(std::size_t n) {
    std::vector<std::int64_t> v(n);
    std::iota(v.begin(), v.end(), std::int64_t{0});
    return v;
}

template <class Fn>
void in_session(Fn&& fn) {
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) { fn(s); });
}

// ---- construction ------------------------------------------------------------------------------

TEST(TensorViewTest, PointerAndShapeViewIsRowMajor) {
    auto data = iota_storage(24);
    tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    expect_view(v, reference::dense({2, 3, 4}), data.data());
    EXPECT_EQ(v.stride(0), 12);
    EXPECT_EQ(v.stride(1), 4);
    EXPECT_EQ(v.stride(2), 1);
    EXPECT_TRUE(v.is_contiguous());
    EXPECT_EQ(v(1, 2, 3), 23);
    EXPECT_EQ(&v(1, 0, 2), data.data() + 14);
    v(0, 1, 1) = -5;
    EXPECT_EQ(data[5], -5);
}

TEST(TensorViewTest, DefaultViewIsEmptyOfRankOne) {
    tensor_view<const float> v;
    EXPECT_EQ(v.rank(), 1u);
    EXPECT_EQ(v.size(), 0u);
    EXPECT_EQ(v.extent(0), 0u);
    EXPECT_EQ(v.data(), nullptr);
    EXPECT_TRUE(v.is_contiguous());
}

TEST(TensorViewTest, ExplicitStridesAreHonoured) {
    auto data = iota_storage(12);
    // Column-major 3x4 over the same storage.
    tensor_view<std::int64_t> v(data.data(), {3, 4}, {1, 3});
    for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(&v(i, j), data.data() + i + 3 * j);
    EXPECT_FALSE(v.is_contiguous());
    const std::array<std::ptrdiff_t, 2> st{-4, 1};
    tensor_view<const std::int64_t> up(data.data() + 8, {3, 4},
                                       std::span<const std::ptrdiff_t>(st));
    EXPECT_EQ(up(0, 0), 8);
    EXPECT_EQ(up(2, 3), 3);
    EXPECT_FALSE(up.is_contiguous());
}

TEST(TensorViewTest, StrideCountMustMatchTheRank) {
    std::vector<float> data(6);
    expect_shape_error(
        [&] {
            tensor_view<float>(data.data(), {2, 3}, {1});
        },
        "tensor_view: 1 strides given for rank 2");
    const std::array<std::ptrdiff_t, 3> three{3, 1, 1};
    expect_shape_error(
        [&] {
            tensor_view<float>(data.data(), {2, 3}, std::span<const std::ptrdiff_t>(three));
        },
        "tensor_view: 3 strides given for rank 2");
    expect_shape_error([&] { tensor_view<float>(data.data(), shape{}, {1}); },
                       "tensor_view: 1 strides given for rank 0");
}

TEST(TensorViewTest, SpansViewAsRankOne) {
    std::vector<double> data{1, 2, 3, 4, 5};
    tensor_view v = std::span<double>(data);
    static_assert(std::is_same_v<decltype(v), tensor_view<double>>);
    EXPECT_EQ(v.data(), data.data());
    EXPECT_EQ(dims_of(v), index_list{5});
    EXPECT_TRUE(v.is_contiguous());
    v(4) = 50;
    EXPECT_EQ(data[4], 50);
    tensor_view c = std::span<const double>(data);
    static_assert(std::is_same_v<decltype(c), tensor_view<const double>>);
    EXPECT_EQ(c(2), 3);
    std::array<float, 4> fixed{1, 2, 3, 4};
    tensor_view<const float> f = std::span<float, 4>(fixed);
    EXPECT_EQ(f.size(), 4u);
    EXPECT_EQ(&f(3), fixed.data() + 3);
    tensor_view<float> empty_span = std::span<float>();
    EXPECT_EQ(empty_span.size(), 0u);
}

TEST(TensorViewTest, MutableViewsConvertToConstButNotBack) {
    static_assert(std::is_convertible_v<tensor_view<float>, tensor_view<const float>>);
    static_assert(!std::is_convertible_v<tensor_view<const float>, tensor_view<float>>);
    static_assert(!std::is_constructible_v<tensor_view<float>, tensor_view<const float>>);
    static_assert(!std::is_convertible_v<tensor_view<float>, tensor_view<double>>);
    static_assert(!std::is_convertible_v<std::span<const float>, tensor_view<float>>);
    static_assert(std::is_convertible_v<tessera::tensor<float>&, tensor_view<float>>);
    static_assert(std::is_convertible_v<const tessera::tensor<float>&, tensor_view<const float>>);
    static_assert(!std::is_convertible_v<const tessera::tensor<float>&, tensor_view<float>>);
    static_assert(std::is_same_v<tensor_view<const float>::value_type, float>);
    auto data = iota_storage(12);
    tensor_view<std::int64_t> m(data.data(), {3, 4});
    const auto t = m.transpose().slice(0, 1, 3);
    tensor_view<const std::int64_t> c = t;
    EXPECT_EQ(c.data(), t.data());
    EXPECT_EQ(dims_of(c), dims_of(t));
    EXPECT_TRUE(std::equal(c.strides().begin(), c.strides().end(), t.strides().begin()));
}

TEST(TensorViewTest, ElementAccessFollowsTheStridesAtEveryRank) {
    auto data = iota_storage(120);
    const tensor_view<std::int64_t> r0(data.data() + 7, shape{});
    EXPECT_EQ(r0(), 7);
    const tensor_view<std::int64_t> r1(data.data(), {120});
    EXPECT_EQ(r1(119), 119);
    const tensor_view<std::int64_t> r4(data.data(), {2, 3, 4, 5});
    for_each_index({2, 3, 4, 5}, [&](const index_list& i) {
        EXPECT_EQ(r4(i[0], i[1], i[2], i[3]), row_major({2, 3, 4, 5}, i));
    });
    // Any integral index type.
    EXPECT_EQ(r4(1, std::size_t{2}, std::int64_t{3}, short{4}), 119);
    const auto f = r4.flip(1).transpose(0, 3);  // [5,3,4,2]
    for_each_index({5, 3, 4, 2}, [&](const index_list& i) {
        EXPECT_EQ(&f(i[0], i[1], i[2], i[3]),
                  data.data() + row_major({2, 3, 4, 5}, {i[3], 2 - i[1], i[2], i[0]}));
    });
}

// ---- transforms --------------------------------------------------------------------------------

TEST(TensorViewTest, TransposeReversesTheAxes) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    const reference r = reference::dense({2, 3, 4});
    expect_view(v.transpose(),
                r.remap({4, 3, 2},
                        [](const index_list& i) {
                            return index_list{i[2], i[1], i[0]};
                        }),
                data.data());
    EXPECT_FALSE(v.transpose().is_contiguous());
    const tensor_view<std::int64_t> m(data.data(), {2, 5});
    expect_view(m.transpose(),
                reference::dense({2, 5}).remap({5, 2},
                                               [](const index_list& i) {
                                                   return index_list{i[1], i[0]};
                                               }),
                data.data());
    expect_view(m.transpose().transpose(), reference::dense({2, 5}), data.data());
    // Rank 1 and rank 0: nothing to reverse.
    const tensor_view<std::int64_t> line(data.data(), {7});
    expect_view(line.transpose(), reference::dense({7}), data.data());
    const tensor_view<std::int64_t> scalar(data.data() + 3, shape{});
    EXPECT_EQ(scalar.transpose()(), 3);
    EXPECT_EQ(scalar.transpose().rank(), 0u);
}

TEST(TensorViewTest, TransposeOfTwoAxesSwapsThem) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    const reference r = reference::dense({2, 3, 4});
    const reference swapped02 = r.remap({4, 3, 2}, [](const index_list& i) {
        return index_list{i[2], i[1], i[0]};
    });
    const reference swapped12 = r.remap({2, 4, 3}, [](const index_list& i) {
        return index_list{i[0], i[2], i[1]};
    });
    expect_view(v.transpose(0, 2), swapped02, data.data());
    expect_view(v.transpose(2, 0), swapped02, data.data());
    expect_view(v.transpose(-1, -3), swapped02, data.data());
    expect_view(v.transpose(1, -1), swapped12, data.data());
    expect_view(v.transpose(1, 1), r, data.data());
    expect_shape_error([&] { (void)v.transpose(0, 3); },
                       "transpose: axis 3 is out of range for rank 3");
    expect_shape_error([&] { (void)v.transpose(-4, 0); },
                       "transpose: axis -4 is out of range for rank 3");
}

TEST(TensorViewTest, PermuteReordersAxesIncludingNegativeOnes) {
    auto data = iota_storage(120);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4, 5});
    const reference r = reference::dense({2, 3, 4, 5});
    // Axis i of the result is axis axes[i] of the source.
    const reference p = r.remap({4, 2, 5, 3}, [](const index_list& i) {
        return index_list{i[1], i[3], i[0], i[2]};
    });
    expect_view(v.permute({2, 0, 3, 1}), p, data.data());
    expect_view(v.permute({-2, -4, -1, 1}), p, data.data());
    const std::array<std::ptrdiff_t, 4> axes{2, 0, 3, 1};
    expect_view(v.permute(std::span<const std::ptrdiff_t>(axes)), p, data.data());
    expect_view(v.permute({0, 1, 2, 3}), r, data.data());
    EXPECT_TRUE(v.permute({0, 1, 2, 3}).is_contiguous());
    EXPECT_FALSE(v.permute({0, 1, 3, 2}).is_contiguous());
    expect_shape_error(
        [&] {
            (void)v.permute({0, 1, 2});
        },
        "permute: 3 axes given for a view of rank 4");
    expect_shape_error(
        [&] {
            (void)v.permute({0, 1, 2, 3, 0});
        },
        "permute: 5 axes given for a view of rank 4");
    expect_shape_error(
        [&] {
            (void)v.permute({0, 1, 1, 3});
        },
        "permute: axis 1 appears more than once");
    expect_shape_error(
        [&] {
            (void)v.permute({0, -4, 2, 3});
        },
        "permute: axis 0 appears more than once");
    expect_shape_error(
        [&] {
            (void)v.permute({0, 1, 2, 4});
        },
        "permute: axis 4 is out of range for rank 4");
    expect_shape_error(
        [&] {
            (void)v.permute({-5, 1, 2, 3});
        },
        "permute: axis -5 is out of range for rank 4");
}

struct slice_case {
    std::ptrdiff_t start, stop, step;
    index_list want;  // as Python's list(range(10))[start:stop:step] gives
};

TEST(TensorViewTest, SliceFollowsPythonSemantics) {
    constexpr std::ptrdiff_t E = slice_end;
    // The expected lists are Python's, written out; the reference function must agree with them.
    const std::vector<slice_case> cases{
        {2, 8, 3, {2, 5}},
        {0, E, 1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
        {-3, E, 1, {7, 8, 9}},
        {-100, 100, 1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
        {2, -2, 1, {2, 3, 4, 5, 6, 7}},
        {-10, E, 3, {0, 3, 6, 9}},
        {-11, E, 3, {0, 3, 6, 9}},
        {0, E, 20, {0}},
        {9, E, 4, {9}},
        {5, 2, 1, {}},
        {3, 3, 1, {}},
        {10, E, 1, {}},
        {E, E, 1, {}},
        {E, E, -1, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
        {E, E, -3, {9, 6, 3, 0}},
        {E, 4, -2, {9, 7, 5}},
        {8, 2, -2, {8, 6, 4}},
        {-2, 3, -4, {8, 4}},
        {-1, -11, -1, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
        {-1, -10, -1, {9, 8, 7, 6, 5, 4, 3, 2, 1}},
        {100, 5, -1, {9, 8, 7, 6}},
        {5, -100, -1, {5, 4, 3, 2, 1, 0}},
        {0, -100, -1, {0}},
        {-100, 5, -1, {}},
        {0, 0, -1, {}},
        {3, 7, -1, {}},
    };
    auto data = iota_storage(30);
    const tensor_view<std::int64_t> row(data.data(), {10});
    const tensor_view<std::int64_t> grid(data.data(), {3, 10});
    const reference g = reference::dense({3, 10});
    for (const slice_case& c : cases) {
        SCOPED_TRACE(testing::Message()
                     << "slice(" << c.start << ", " << c.stop << ", " << c.step << ")");
        ASSERT_EQ(reference_slice(10, c.start, c.stop, c.step), c.want);
        const auto v = row.slice(0, c.start, c.stop, c.step);
        expect_view(
            v,
            reference::dense({10}).remap(
                {c.want.size()}, [&](const index_list& i) { return index_list{c.want[i[0]]}; }),
            data.data());
        EXPECT_EQ(v.is_contiguous(), c.want.size() <= 1 || c.step == 1);
        const reference along_columns = g.remap({3, c.want.size()}, [&](const index_list& i) {
            return index_list{i[0], c.want[i[1]]};
        });
        expect_view(grid.slice(1, c.start, c.stop, c.step), along_columns, data.data());
        expect_view(grid.slice(-1, c.start, c.stop, c.step), along_columns, data.data());
    }
    // The stop defaults to slice_end and the step to 1.
    expect_view(
        row.slice(0, 6),
        reference::dense({10}).remap({4}, [](const index_list& i) { return index_list{i[0] + 6}; }),
        data.data());
    // A slice of a slice.
    const auto twice = grid.slice(1, 1, E, 2).slice(1, E, E, -2);  // columns 1,3,5,7,9 then 9,5,1
    expect_view(twice,
                g.remap({3, 3},
                        [](const index_list& i) {
                            return index_list{i[0], 9 - 4 * i[1]};
                        }),
                data.data());
}

TEST(TensorViewTest, SliceRejectsStepZeroAndBadAxes) {
    auto data = iota_storage(6);
    const tensor_view<std::int64_t> v(data.data(), {2, 3});
    expect_shape_error([&] { (void)v.slice(0, 0, 1, 0); }, "slice: step must not be 0");
    expect_shape_error([&] { (void)v.slice(2, 0, 1); }, "slice: axis 2 is out of range for rank 2");
    expect_shape_error([&] { (void)v.slice(-3, 0, 1); },
                       "slice: axis -3 is out of range for rank 2");
}

// A step as large as the axis allows keeps one element, as in Python (a[::sys.maxsize]). slice
// computes the length as stop - start + step - 1, which overflows std::ptrdiff_t for such steps
// (undefined behaviour; in practice the result is empty), and multiplies the stride by the step
// even when the result has one element. Disabled until tensor_view::slice avoids both overflows
// (see the report that accompanies this test).
TEST(TensorViewTest, SliceWithAHugeStepKeepsOneElement) {
    auto data = iota_storage(30);
    const tensor_view<std::int64_t> v(data.data(), {3, 10});
    constexpr std::ptrdiff_t huge = std::numeric_limits<std::ptrdiff_t>::max();
    const auto first = v.slice(1, 0, slice_end, huge);
    ASSERT_EQ(dims_of(first), (index_list{3, 1}));
    EXPECT_EQ(first(2, 0), 20);
    const auto last = v.slice(1, slice_end, slice_end, -huge);
    ASSERT_EQ(dims_of(last), (index_list{3, 1}));
    EXPECT_EQ(last(2, 0), 29);
    const auto row = v.slice(0, 1, slice_end, huge);
    ASSERT_EQ(dims_of(row), (index_list{1, 10}));
    EXPECT_EQ(row(0, 4), 14);
}

TEST(TensorViewTest, EmptySlicesHaveZeroExtentAndStayUsable) {
    auto data = iota_storage(12);
    const tensor_view<std::int64_t> v(data.data(), {3, 4});
    const auto e = v.slice(1, 2, 2);
    EXPECT_EQ(dims_of(e), (index_list{3, 0}));
    EXPECT_EQ(e.size(), 0u);
    EXPECT_TRUE(e.is_contiguous());
    EXPECT_EQ(dims_of(e.transpose()), (index_list{0, 3}));
    EXPECT_EQ(dims_of(e.reshape({0})), index_list{0});
    EXPECT_EQ(dims_of(e.reshape({2, 0, 7})), (index_list{2, 0, 7}));
    EXPECT_EQ(dims_of(e.slice(0, 1, 3)), (index_list{2, 0}));
    EXPECT_EQ(dims_of(e.flip(1)), (index_list{3, 0}));
}

TEST(TensorViewTest, FlipReversesOneAxis) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    const reference r = reference::dense({2, 3, 4});
    expect_view(v.flip(0),
                r.remap({2, 3, 4},
                        [](const index_list& i) {
                            return index_list{1 - i[0], i[1], i[2]};
                        }),
                data.data());
    expect_view(v.flip(-1),
                r.remap({2, 3, 4},
                        [](const index_list& i) {
                            return index_list{i[0], i[1], 3 - i[2]};
                        }),
                data.data());
    expect_view(v.flip(1).flip(1), r, data.data());
    EXPECT_FALSE(v.flip(2).is_contiguous());
    const tensor_view<std::int64_t> one(data.data(), {1, 5});
    EXPECT_TRUE(one.flip(0).is_contiguous());  // a flipped extent-1 axis is still dense
    EXPECT_THROW((void)v.flip(3), tessera::shape_error);
    EXPECT_THROW((void)v.flip(-4), tessera::shape_error);
}

// flip reports a bad axis through slice, so the message reads "slice: axis 3 is out of range for
// rank 3" and does not name flip. Disabled until tensor_view::flip checks its axis itself (see
// the report that accompanies this test).
TEST(TensorViewTest, FlipAxisErrorNamesTheOp) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    expect_shape_error([&] { (void)v.flip(3); }, "flip: axis 3 is out of range for rank 3");
}

TEST(TensorViewTest, ReshapeOfContiguousViewsKeepsRowMajorOrder) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    for (const shape& to : {shape{24}, shape{4, 6}, shape{2, 12}, shape{1, 24, 1},
                            shape{2, 2, 2, 3}, shape{1, 1, 1, 1, 1, 1, 1, 24}}) {
        const index_list d(to.dims().begin(), to.dims().end());
        SCOPED_TRACE(tessera::to_string(to));
        const auto w = v.reshape(to);
        expect_view(w, reference::dense(d), data.data());
        EXPECT_TRUE(w.is_contiguous());
    }
    const tensor_view<std::int64_t> scalar(data.data() + 5, shape{});
    EXPECT_EQ(scalar.reshape({1, 1})(0, 0), 5);
    EXPECT_EQ(scalar.reshape({1, 1}).reshape(shape{})(), 5);
    expect_shape_error(
        [&] {
            (void)v.reshape({5, 5});
        },
        "reshape: cannot reshape [2,3,4] (24 elements) to [5,5] (25 elements)");
    expect_shape_error([&] { (void)v.reshape(shape{}); },
                       "reshape: cannot reshape [2,3,4] (24 elements) to [] (1 elements)");
}

TEST(TensorViewTest, ReshapeOfStridedViewsWorksWhereNoCopyIsNeeded) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> m(data.data(), {6, 4});
    const reference r = reference::dense({6, 4});
    // Rows 0, 2, 4: a slice along the outer axis; splitting or keeping the inner axis is free.
    const auto rows = m.slice(0, 0, slice_end, 2);
    const reference rows_ref = r.remap({3, 4}, [](const index_list& i) {
        return index_list{2 * i[0], i[1]};
    });
    expect_view(rows, rows_ref, data.data());
    EXPECT_FALSE(rows.is_contiguous());
    expect_view(rows.reshape({3, 2, 2}), reference{{3, 2, 2}, rows_ref.offsets}, data.data());
    expect_view(rows.reshape({3, 1, 4, 1}), reference{{3, 1, 4, 1}, rows_ref.offsets}, data.data());
    expect_view(rows.reshape({1, 3, 4}), reference{{1, 3, 4}, rows_ref.offsets}, data.data());
    // Rows 1..4, a contiguous block in the middle: any reshape.
    const auto block = m.slice(0, 1, 5);
    EXPECT_TRUE(block.is_contiguous());
    offset_list middle(16);
    std::iota(middle.begin(), middle.end(), std::ptrdiff_t{4});
    expect_view(block.reshape({16}), reference{{16}, middle}, data.data());
    expect_view(block.reshape({2, 8}), reference{{2, 8}, middle}, data.data());
    // The first 3 columns: the outer axis may split, the rows may not merge.
    const auto cols = m.slice(1, 0, 3);
    const reference cols_ref = r.remap({6, 3}, [](const index_list& i) {
        return index_list{i[0], i[1]};
    });
    expect_view(cols.reshape({2, 3, 3}), reference{{2, 3, 3}, cols_ref.offsets}, data.data());
    // A transposed matrix: each of its axes may split, but they cannot merge.
    const auto t = m.transpose();  // [4, 6]
    const reference t_ref = r.remap({4, 6}, [](const index_list& i) {
        return index_list{i[1], i[0]};
    });
    expect_view(t.reshape({2, 2, 6}), reference{{2, 2, 6}, t_ref.offsets}, data.data());
    expect_view(t.reshape({4, 3, 2}), reference{{4, 3, 2}, t_ref.offsets}, data.data());
    // Flipped rows merge with nothing but split fine.
    const auto flipped = m.flip(0);
    const reference f_ref = r.remap({6, 4}, [](const index_list& i) {
        return index_list{5 - i[0], i[1]};
    });
    expect_view(flipped.reshape({3, 2, 4}), reference{{3, 2, 4}, f_ref.offsets}, data.data());
    // A broadcast row: the repeated axis splits with stride 0.
    const auto rep = m.slice(0, 2, 3).broadcast_to({6, 4});
    const reference rep_ref = r.remap({6, 4}, [](const index_list& i) {
        return index_list{2, i[1]};
    });
    expect_view(rep.reshape({2, 3, 4}), reference{{2, 3, 4}, rep_ref.offsets}, data.data());
}

TEST(TensorViewTest, ReshapeThatWouldNeedACopyAsksForContiguous) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> m(data.data(), {6, 4});
    const std::string tail = " without a copy; make it contiguous first (tessera::contiguous)";
    expect_shape_error(
        [&] { (void)m.slice(0, 0, slice_end, 2).reshape({12}); },
        "reshape: the strides of this [3,4] view do not allow viewing it as [12]" + tail);
    expect_shape_error(
        [&] { (void)m.slice(1, 0, 3).reshape({18}); },
        "reshape: the strides of this [6,3] view do not allow viewing it as [18]" + tail);
    expect_shape_error(
        [&] { (void)m.transpose().reshape({24}); },
        "reshape: the strides of this [4,6] view do not allow viewing it as [24]" + tail);
    expect_shape_error(
        [&] {
            (void)m.transpose().reshape({6, 4});
        },
        "reshape: the strides of this [4,6] view do not allow viewing it as [6,4]" + tail);
    expect_shape_error(
        [&] { (void)m.flip(0).reshape({24}); },
        "reshape: the strides of this [6,4] view do not allow viewing it as [24]" + tail);
    expect_shape_error(
        [&] {
            (void)m.slice(0, 0, 1).broadcast_to({3, 4}).reshape({12});
        },
        "reshape: the strides of this [3,4] view do not allow viewing it as [12]" + tail);
}

TEST(TensorViewTest, BroadcastToRepeatsWithStrideZero) {
    auto data = iota_storage(12);
    const tensor_view<std::int64_t> row(data.data(), {3});
    const reference r3 = reference::dense({3});
    const auto b = row.broadcast_to({2, 4, 3});  // rank promotion by two
    expect_view(b, r3.remap({2, 4, 3}, [](const index_list& i) { return index_list{i[2]}; }),
                data.data());
    EXPECT_EQ(b.stride(0), 0);
    EXPECT_EQ(b.stride(1), 0);
    EXPECT_FALSE(b.is_contiguous());
    const tensor_view<std::int64_t> col(data.data(), {3, 1}, {4, 1});
    const reference c = reference{{3, 1}, {0, 4, 8}};
    expect_view(col.broadcast_to({3, 5}),
                c.remap({3, 5},
                        [](const index_list& i) {
                            return index_list{i[0], 0};
                        }),
                data.data());
    expect_view(col.broadcast_to({2, 3, 2}),
                c.remap({2, 3, 2},
                        [](const index_list& i) {
                            return index_list{i[1], 0};
                        }),
                data.data());
    expect_view(row.broadcast_to({3}), r3, data.data());
    const tensor_view<std::int64_t> scalar(data.data() + 9, shape{});
    const auto filled = scalar.broadcast_to({2, 2});
    EXPECT_EQ(filled(1, 1), 9);
    EXPECT_EQ(&filled(1, 0), data.data() + 9);
    // Zero-size axes: extent 1 broadcasts to 0; 0 stays 0.
    const tensor_view<std::int64_t> one(data.data(), {1});
    EXPECT_EQ(dims_of(one.broadcast_to({0})), index_list{0});
    EXPECT_EQ(dims_of(one.broadcast_to({4, 0})), (index_list{4, 0}));
    const tensor_view<std::int64_t> none(data.data(), {0, 3});
    EXPECT_EQ(dims_of(none.broadcast_to({2, 0, 3})), (index_list{2, 0, 3}));
    EXPECT_EQ(none.broadcast_to({2, 0, 3}).size(), 0u);
    expect_shape_error([&] { (void)row.broadcast_to({4}); },
                       "broadcast_to: shape [3] does not broadcast to [4]");
    expect_shape_error(
        [&] {
            (void)row.broadcast_to({3, 1});
        },
        "broadcast_to: shape [3] does not broadcast to [3,1]");
    expect_shape_error([&] { (void)col.broadcast_to({3}); },
                       "broadcast_to: shape [3,1] does not broadcast to [3]");
    expect_shape_error(
        [&] {
            (void)none.broadcast_to({2, 3});
        },
        "broadcast_to: shape [0,3] does not broadcast to [2,3]");
    expect_shape_error([&] { (void)row.broadcast_to({0}); },
                       "broadcast_to: shape [3] does not broadcast to [0]");
}

TEST(TensorViewTest, SelectPicksOnePositionAndDropsTheAxis) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    const reference r = reference::dense({2, 3, 4});
    expect_view(v.select(0, 1),
                r.remap({3, 4}, [](const index_list& i) { return index_list{1, i[0], i[1]}; }),
                data.data());
    expect_view(v.select(1, -1),
                r.remap({2, 4}, [](const index_list& i) { return index_list{i[0], 2, i[1]}; }),
                data.data());
    expect_view(v.select(-1, 0),
                r.remap({2, 3}, [](const index_list& i) { return index_list{i[0], i[1], 0}; }),
                data.data());
    expect_view(v.transpose().select(0, 3),
                r.remap({3, 2}, [](const index_list& i) { return index_list{i[1], i[0], 3}; }),
                data.data());
    EXPECT_EQ(v.select(0, 0).select(0, 0).select(0, 0).rank(), 0u);
    // An empty view keeps its (possibly null) data pointer: no offset is applied to it.
    const tensor_view<std::int64_t> empty(nullptr, {0, 3});
    EXPECT_EQ(empty.select(1, 2).data(), nullptr);
    EXPECT_EQ(empty.select(1, 2).shape(), shape({0}));
    // The same for slice (and so flip) along an axis that keeps elements of an empty view; the
    // fuzz target found this one (fuzz/corpus/views/regression_slice_of_empty_view).
    EXPECT_EQ(empty.slice(1, 1, 3).data(), nullptr);
    EXPECT_EQ(empty.slice(1, 1, 3).shape(), shape({0, 2}));
    EXPECT_EQ(empty.flip(1).data(), nullptr);
    expect_shape_error([&] { (void)v.select(1, 3); },
                       "select: index 3 is out of range for axis 1 of extent 3");
    expect_shape_error([&] { (void)v.select(0, -3); },
                       "select: index -3 is out of range for axis 0 of extent 2");
}

TEST(TensorViewTest, SqueezeRemovesExtentOneAxes) {
    auto data = iota_storage(6);
    const tensor_view<std::int64_t> v(data.data(), {1, 2, 1, 3, 1});
    const reference r = reference::dense({1, 2, 1, 3, 1});
    expect_view(v.squeeze(0),
                r.remap({2, 1, 3, 1},
                        [](const index_list& i) {
                            return index_list{0, i[0], i[1], i[2], i[3]};
                        }),
                data.data());
    expect_view(v.squeeze(-1),
                r.remap({1, 2, 1, 3},
                        [](const index_list& i) {
                            return index_list{i[0], i[1], i[2], i[3], 0};
                        }),
                data.data());
    expect_view(v.squeeze(2),
                r.remap({1, 2, 3, 1},
                        [](const index_list& i) {
                            return index_list{i[0], i[1], 0, i[2], i[3]};
                        }),
                data.data());
    expect_view(v.squeeze(), reference::dense({2, 3}), data.data());
    const tensor_view<std::int64_t> ones(data.data() + 4, {1, 1, 1});
    EXPECT_EQ(ones.squeeze().rank(), 0u);
    EXPECT_EQ(ones.squeeze()(), 4);
    const tensor_view<std::int64_t> scalar(data.data(), shape{});
    EXPECT_EQ(scalar.squeeze().rank(), 0u);
    expect_shape_error([&] { (void)v.squeeze(1); }, "squeeze: axis 1 has extent 2, not 1");
    expect_shape_error([&] { (void)v.squeeze(-2); }, "squeeze: axis 3 has extent 3, not 1");
    expect_shape_error([&] { (void)v.squeeze(5); }, "squeeze: axis 5 is out of range for rank 5");
}

TEST(TensorViewTest, UnsqueezeInsertsAnExtentOneAxis) {
    auto data = iota_storage(6);
    const tensor_view<std::int64_t> v(data.data(), {2, 3});
    const reference r = reference::dense({2, 3});
    const auto before0 = [](const index_list& i) { return index_list{i[1], i[2]}; };
    const auto before1 = [](const index_list& i) { return index_list{i[0], i[2]}; };
    const auto at_end = [](const index_list& i) { return index_list{i[0], i[1]}; };
    expect_view(v.unsqueeze(0), r.remap({1, 2, 3}, before0), data.data());
    expect_view(v.unsqueeze(-3), r.remap({1, 2, 3}, before0), data.data());
    expect_view(v.unsqueeze(1), r.remap({2, 1, 3}, before1), data.data());
    expect_view(v.unsqueeze(-2), r.remap({2, 1, 3}, before1), data.data());
    expect_view(v.unsqueeze(2), r.remap({2, 3, 1}, at_end), data.data());
    expect_view(v.unsqueeze(-1), r.remap({2, 3, 1}, at_end), data.data());
    EXPECT_TRUE(v.unsqueeze(1).is_contiguous());
    EXPECT_EQ(v.unsqueeze(1).squeeze(1).stride(0), 3);
    const tensor_view<std::int64_t> scalar(data.data() + 2, shape{});
    EXPECT_EQ(scalar.unsqueeze(0)(0), 2);
    EXPECT_EQ(scalar.unsqueeze(-1)(0), 2);
    expect_shape_error([&] { (void)v.unsqueeze(3); },
                       "unsqueeze: axis 3 is out of range for rank 3");
    expect_shape_error([&] { (void)v.unsqueeze(-4); },
                       "unsqueeze: axis -4 is out of range for rank 3");
}

TEST(TensorViewTest, UnsqueezeStopsAtRankEight) {
    auto data = iota_storage(6);
    tensor_view<std::int64_t> v(data.data(), {2, 3});
    for (int i = 0; i < 6; ++i) v = v.unsqueeze(i % 2 == 0 ? 0 : -1);
    EXPECT_EQ(v.rank(), tessera::max_rank);
    EXPECT_EQ(dims_of(v), (index_list{1, 1, 1, 2, 3, 1, 1, 1}));
    EXPECT_EQ(&v(0, 0, 0, 1, 2, 0, 0, 0), data.data() + 5);
    EXPECT_THROW((void)v.unsqueeze(0), tessera::shape_error);
    EXPECT_THROW((void)v.unsqueeze(-1), tessera::shape_error);
    EXPECT_EQ(v.squeeze().rank(), 2u);
}

// The rank-limit error of unsqueeze comes from shape's own check and reads
// "shape: rank 9 exceeds the maximum rank 8": it does not name the op. Disabled until
// tensor_view::unsqueeze reports it itself (see the report that accompanies this test).
TEST(TensorViewTest, UnsqueezeRankLimitErrorNamesTheOp) {
    auto data = iota_storage(1);
    const tensor_view<std::int64_t> v(data.data(), {1, 1, 1, 1, 1, 1, 1, 1});
    try {
        (void)v.unsqueeze(0);
        ADD_FAILURE() << "no exception";
    } catch (const tessera::shape_error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("unsqueeze: ", 0), 0u) << e.what();
    }
}

TEST(TensorViewTest, DiagonalOfMatrices) {
    auto data = iota_storage(15);
    const tensor_view<std::int64_t> square(data.data(), {3, 3});
    expect_view(square.diagonal(), reference{{3}, {0, 4, 8}}, data.data());
    const tensor_view<std::int64_t> wide(data.data(), {3, 5});
    expect_view(wide.diagonal(), reference{{3}, {0, 6, 12}}, data.data());
    expect_view(wide.diagonal(1, 0), reference{{3}, {0, 6, 12}}, data.data());
    const tensor_view<std::int64_t> tall(data.data(), {5, 3});
    expect_view(tall.diagonal(), reference{{3}, {0, 4, 8}}, data.data());
    expect_view(tall.diagonal(-1, -2), reference{{3}, {0, 4, 8}}, data.data());
    // The anti-diagonal, through a flip.
    expect_view(square.flip(1).diagonal(), reference{{3}, {2, 4, 6}}, data.data());
    expect_view(wide.transpose().diagonal(), reference{{3}, {0, 6, 12}}, data.data());
    const tensor_view<std::int64_t> empty_rows(data.data(), {0, 4});
    EXPECT_EQ(dims_of(empty_rows.diagonal()), index_list{0});
    expect_shape_error([&] { (void)square.diagonal(1, 1); },
                       "diagonal: both axes are 1; they must differ");
    expect_shape_error([&] { (void)square.diagonal(0, -2); },
                       "diagonal: both axes are 0; they must differ");
    expect_shape_error([&] { (void)square.diagonal(0, 2); },
                       "diagonal: axis 2 is out of range for rank 2");
    const tensor_view<std::int64_t> line(data.data(), {3});
    expect_shape_error([&] { (void)line.diagonal(); },
                       "diagonal: axis 1 is out of range for rank 1");
}

TEST(TensorViewTest, DiagonalOfRankThreeAppendsTheDiagonalAxis) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    const reference r = reference::dense({2, 3, 4});
    // Remaining axes keep their order; the diagonal becomes the last axis.
    expect_view(v.diagonal(1, 2),
                r.remap({2, 3},
                        [](const index_list& i) {
                            return index_list{i[0], i[1], i[1]};
                        }),
                data.data());
    expect_view(v.diagonal(2, 1),
                r.remap({2, 3},
                        [](const index_list& i) {
                            return index_list{i[0], i[1], i[1]};
                        }),
                data.data());
    expect_view(v.diagonal(0, 2),
                r.remap({3, 2},
                        [](const index_list& i) {
                            return index_list{i[1], i[0], i[1]};
                        }),
                data.data());
    expect_view(v.diagonal(-3, -1),
                r.remap({3, 2},
                        [](const index_list& i) {
                            return index_list{i[1], i[0], i[1]};
                        }),
                data.data());
    expect_view(v.diagonal(),
                r.remap({4, 2},
                        [](const index_list& i) {
                            return index_list{i[1], i[1], i[0]};
                        }),
                data.data());
    EXPECT_EQ(v.diagonal(1, 2)(1, 2), 12 + 2 * 4 + 2);
}

TEST(TensorViewTest, IsContiguousMeansDenseRowMajor) {
    auto data = iota_storage(24);
    const tensor_view<std::int64_t> v(data.data(), {2, 3, 4});
    EXPECT_TRUE(v.is_contiguous());
    EXPECT_TRUE(v.slice(0, 1, 2).is_contiguous());
    EXPECT_FALSE(v.slice(1, 1, 2).is_contiguous());  // [2,1,4]: its two rows are 12 apart
    EXPECT_TRUE(v.slice(0, 1, 2).slice(1, 1, 2).is_contiguous());  // [1,1,4]
    EXPECT_FALSE(v.slice(1, 1, 3).is_contiguous());
    EXPECT_FALSE(v.slice(2, 0, 2).is_contiguous());
    EXPECT_TRUE(v.unsqueeze(0).unsqueeze(2).is_contiguous());
    EXPECT_TRUE(tensor_view<std::int64_t>(data.data(), {1, 3}, {99, 1}).is_contiguous());
    EXPECT_FALSE(tensor_view<std::int64_t>(data.data(), {2, 3}, {4, 1}).is_contiguous());
    EXPECT_TRUE(tensor_view<std::int64_t>(data.data(), shape{}).is_contiguous());
    EXPECT_TRUE(tensor_view<std::int64_t>(data.data(), {4, 0}, {0, 0}).is_contiguous());
    EXPECT_FALSE(v.slice(0, 0, 1).broadcast_to({2, 3, 4}).is_contiguous());
}

// ---- random compositions against the reference -------------------------------------------------

// Random shapes with `count` elements: its prime factors dealt into up to `max_axes` axes, with
// extent-1 axes sprinkled in.
index_list random_shape_of(std::size_t count, std::size_t max_axes, std::mt19937_64& rng) {
    std::vector<std::size_t> factors;
    for (std::size_t n = count, p = 2; n > 1;) {
        if (n % p == 0) {
            factors.push_back(p);
            n /= p;
        } else {
            ++p;
        }
    }
    std::uniform_int_distribution<std::size_t> axes_dist(1, max_axes);
    index_list dims(axes_dist(rng), 1);
    std::uniform_int_distribution<std::size_t> pick(0, dims.size() - 1);
    for (std::size_t f : factors) dims[pick(rng)] *= f;
    return dims;
}

TEST(TensorViewTest, RandomCompositionsMatchTheReference) {
    const std::uint64_t seed = std::random_device{}();
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uniform_int = [&](std::ptrdiff_t lo, std::ptrdiff_t hi) {
        return std::uniform_int_distribution<std::ptrdiff_t>(lo, hi)(rng);
    };
    std::size_t accepted_reshapes = 0, rejected_reshapes = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const index_list start_dims =
            random_shape_of(static_cast<std::size_t>(uniform_int(1, 360)), 4, rng);
        auto data = iota_storage(product(start_dims));
        tensor_view<std::int64_t> v(data.data(), shape(std::span<const std::size_t>(start_dims)));
        reference r = reference::dense(start_dims);
        for (int step = 0; step < 8; ++step) {
            const auto rank = static_cast<std::ptrdiff_t>(r.dims.size());
            const auto axis_in = [&](std::ptrdiff_t n) { return uniform_int(-n, n - 1); };
            const auto wrap = [](std::ptrdiff_t a, std::ptrdiff_t n) {
                return static_cast<std::size_t>(a < 0 ? a + n : a);
            };
            const int op = static_cast<int>(uniform_int(0, 8));
            std::string what;
            if (op == 0 && rank > 0) {  // permute
                std::vector<std::ptrdiff_t> axes(r.dims.size());
                std::iota(axes.begin(), axes.end(), std::ptrdiff_t{0});
                std::shuffle(axes.begin(), axes.end(), rng);
                index_list d(r.dims.size());
                for (std::size_t i = 0; i < d.size(); ++i)
                    d[i] = r.dims[static_cast<std::size_t>(axes[i])];
                const std::vector<std::ptrdiff_t> src_axes = axes;
                for (auto& a : axes)
                    if (uniform_int(0, 1) == 1) a -= rank;
                v = v.permute(std::span<const std::ptrdiff_t>(axes));
                r = r.remap(d, [&](const index_list& i) {
                    index_list s(i.size());
                    for (std::size_t k = 0; k < i.size(); ++k)
                        s[static_cast<std::size_t>(src_axes[k])] = i[k];
                    return s;
                });
                what = "permute";
            } else if (op == 1 && rank > 0) {  // slice
                const std::ptrdiff_t a = axis_in(rank);
                const std::size_t ax = wrap(a, rank);
                const auto n = static_cast<std::ptrdiff_t>(r.dims[ax]);
                auto bound = [&] {
                    return uniform_int(0, 5) == 0 ? slice_end : uniform_int(-n - 2, n + 2);
                };
                const std::ptrdiff_t b = bound(), e = bound();
                std::ptrdiff_t st = 0;
                while (st == 0) st = uniform_int(-n - 2, n + 2);
                const index_list picked = reference_slice(r.dims[ax], b, e, st);
                index_list d = r.dims;
                d[ax] = picked.size();
                v = v.slice(a, b, e, st);
                r = r.remap(d, [&](const index_list& i) {
                    index_list s = i;
                    s[ax] = picked[i[ax]];
                    return s;
                });
                what = "slice";
            } else if (op == 2 && rank > 0) {  // flip
                const std::ptrdiff_t a = axis_in(rank);
                const std::size_t ax = wrap(a, rank);
                v = v.flip(a);
                r = r.remap(r.dims, [&](const index_list& i) {
                    index_list s = i;
                    s[ax] = r.dims[ax] - 1 - i[ax];
                    return s;
                });
                what = "flip";
            } else if (op == 3) {  // reshape, allowed or not
                const std::size_t count = product(r.dims);
                index_list d = count == 0
                                   ? index_list{0, static_cast<std::size_t>(uniform_int(1, 3))}
                                   : random_shape_of(count, 5, rng);
                const shape to{std::span<const std::size_t>(d)};
                const bool possible = expressible_without_copy(d, r.offsets);
                try {
                    v = v.reshape(to);
                    ++accepted_reshapes;
                    EXPECT_TRUE(possible) << "reshape accepted a layout no strides can express";
                    r = reference{d, r.offsets};
                } catch (const tessera::shape_error&) {
                    ++rejected_reshapes;
                    EXPECT_FALSE(possible)
                        << "reshape refused a layout strides can express: "
                        << tessera::to_string(v.shape()) << " to " << tessera::to_string(to);
                }
                what = "reshape";
            } else if (op == 4 && rank < 6) {  // broadcast_to
                index_list d;
                const auto lead = uniform_int(0, 2);
                for (std::ptrdiff_t k = 0; k < lead; ++k)
                    d.push_back(static_cast<std::size_t>(uniform_int(1, 3)));
                for (std::size_t e : r.dims)
                    d.push_back(e == 1 ? static_cast<std::size_t>(uniform_int(0, 3)) : e);
                const auto l = static_cast<std::size_t>(lead);
                v = v.broadcast_to(shape(std::span<const std::size_t>(d)));
                r = r.remap(d, [&](const index_list& i) {
                    index_list s(r.dims.size());
                    for (std::size_t k = 0; k < s.size(); ++k) s[k] = r.dims[k] == 1 ? 0 : i[k + l];
                    return s;
                });
                what = "broadcast_to";
            } else if (op == 5 && rank < 8) {  // unsqueeze
                const std::ptrdiff_t a = uniform_int(-rank - 1, rank);
                const std::size_t ax = wrap(a, rank + 1);
                index_list d = r.dims;
                d.insert(d.begin() + static_cast<std::ptrdiff_t>(ax), 1);
                v = v.unsqueeze(a);
                r = r.remap(d, [&](const index_list& i) {
                    index_list s = i;
                    s.erase(s.begin() + static_cast<std::ptrdiff_t>(ax));
                    return s;
                });
                what = "unsqueeze";
            } else if (op == 6) {  // squeeze everything
                index_list d;
                for (std::size_t e : r.dims)
                    if (e != 1) d.push_back(e);
                v = v.squeeze();
                r = r.remap(d, [&](const index_list& i) {
                    index_list s;
                    std::size_t k = 0;
                    for (std::size_t e : r.dims) s.push_back(e == 1 ? 0 : i[k++]);
                    return s;
                });
                what = "squeeze";
            } else if (op == 7 && rank >= 2) {  // diagonal
                const std::ptrdiff_t a = axis_in(rank);
                std::ptrdiff_t b = a;
                while (wrap(b, rank) == wrap(a, rank)) b = axis_in(rank);
                const std::size_t x = wrap(a, rank), y = wrap(b, rank);
                index_list d;
                for (std::size_t k = 0; k < r.dims.size(); ++k)
                    if (k != x && k != y) d.push_back(r.dims[k]);
                d.push_back(std::min(r.dims[x], r.dims[y]));
                v = v.diagonal(a, b);
                r = r.remap(d, [&](const index_list& i) {
                    index_list s(r.dims.size());
                    std::size_t k = 0;
                    for (std::size_t j = 0; j < s.size(); ++j)
                        if (j != x && j != y) s[j] = i[k++];
                    s[x] = s[y] = i.back();
                    return s;
                });
                what = "diagonal";
            } else if (op == 8 && rank > 0) {  // transpose, whole or two axes
                if (uniform_int(0, 1) == 0) {
                    index_list d(r.dims.rbegin(), r.dims.rend());
                    v = v.transpose();
                    r = r.remap(
                        d, [](const index_list& i) { return index_list(i.rbegin(), i.rend()); });
                } else {
                    const std::ptrdiff_t a = axis_in(rank), b = axis_in(rank);
                    const std::size_t x = wrap(a, rank), y = wrap(b, rank);
                    index_list d = r.dims;
                    std::swap(d[x], d[y]);
                    v = v.transpose(a, b);
                    r = r.remap(d, [&](const index_list& i) {
                        index_list s = i;
                        std::swap(s[x], s[y]);
                        return s;
                    });
                }
                what = "transpose";
            } else {
                continue;
            }
            SCOPED_TRACE(testing::Message()
                         << "trial " << trial << " step " << step << " " << what);
            expect_view(v, r, data.data());
            if (testing::Test::HasFailure()) return;
            // is_contiguous means: the elements are exactly v.data()[0 .. size) in order.
            bool dense = true;
            for (std::size_t k = 0; k < r.offsets.size(); ++k)
                dense = dense && r.offsets[k] == r.offsets[0] + static_cast<std::ptrdiff_t>(k);
            EXPECT_EQ(v.is_contiguous(), dense) << tessera::to_string(v.shape());
        }
    }
    // Both outcomes of reshape were exercised.
    EXPECT_GT(accepted_reshapes, 50u);
    EXPECT_GT(rejected_reshapes, 10u);
}

// ---- makers ------------------------------------------------------------------------------------

TEST(TensorMakersTest, ArangeOfFloatsAndIntegers) {
    in_session([](session& s) {
        auto f = tessera::arange<float>(s, 0.0f, 1.0f, 0.25f);
        EXPECT_EQ(f.shape(), shape{4});
        EXPECT_EQ(std::vector<float>(f.values().begin(), f.values().end()),
                  (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
        auto tenth = tessera::arange<double>(s, 0.0, 1.0, 0.1);
        EXPECT_EQ(tenth.size(), 10u);  // as numpy.arange(0, 1, 0.1)
        for (std::size_t i = 0; i < 10; ++i)
            EXPECT_NEAR(tenth.values()[i], 0.1 * static_cast<double>(i), 1e-15);
        auto down = tessera::arange<double>(s, 1.0, -0.5, -0.5);
        EXPECT_EQ(std::vector<double>(down.values().begin(), down.values().end()),
                  (std::vector<double>{1.0, 0.5, 0.0}));
        auto i = tessera::arange<std::int32_t>(s, 0, 10, 3);
        EXPECT_EQ(std::vector<std::int32_t>(i.values().begin(), i.values().end()),
                  (std::vector<std::int32_t>{0, 3, 6, 9}));
        auto j = tessera::arange<std::int64_t>(s, 10, 0, -3);
        EXPECT_EQ(std::vector<std::int64_t>(j.values().begin(), j.values().end()),
                  (std::vector<std::int64_t>{10, 7, 4, 1}));
        auto k = tessera::arange<std::int32_t>(s, -3, 2);
        EXPECT_EQ(std::vector<std::int32_t>(k.values().begin(), k.values().end()),
                  (std::vector<std::int32_t>{-3, -2, -1, 0, 1}));
        EXPECT_EQ(tessera::arange<std::int32_t>(s, 5, 5).shape(), shape{0});
        EXPECT_EQ(tessera::arange<std::int32_t>(s, 5, 0).shape(), shape{0});
        EXPECT_EQ(tessera::arange<float>(s, 0.0f, 1.0f, -0.5f).shape(), shape{0});
        EXPECT_EQ(tessera::arange<double>(s, 0.0, 0.0, -1.0).size(), 0u);
        expect_shape_error([&] { (void)tessera::arange<std::int32_t>(s, 0, 10, 0); },
                           "arange: step must not be 0");
        expect_shape_error([&] { (void)tessera::arange<double>(s, 0.0, 1.0, 0.0); },
                           "arange: step must not be 0");
    });
}

TEST(TensorMakersTest, FromCopiesValuesInRowMajorOrder) {
    in_session([](session& s) {
        auto a = tessera::from<float>(s, {1.5f, -2.0f, 3.0f});
        EXPECT_EQ(a.shape(), shape{3});
        EXPECT_EQ(a(1), -2.0f);
        auto m = tessera::from<std::int32_t>(s, {{1, 2, 3}, {4, 5, 6}});
        EXPECT_EQ(m.shape(), (shape{2, 3}));
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 3; ++j)
                EXPECT_EQ(m(i, j), static_cast<std::int32_t>(3 * i + j + 1));
        const std::vector<double> values{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        auto t = tessera::from<double>(s, {2, 3, 2}, std::span<const double>(values));
        EXPECT_EQ(t.shape(), (shape{2, 3, 2}));
        for_each_index({2, 3, 2}, [&](const index_list& i) {
            EXPECT_EQ(t(i[0], i[1], i[2]), static_cast<double>(row_major({2, 3, 2}, i)));
        });
        EXPECT_NE(t.data(), values.data());  // a copy
        auto b = tessera::from<bool>(s, {true, false});
        EXPECT_TRUE(b(0));
        EXPECT_FALSE(b(1));
        auto c = tessera::from<std::complex<double>>(s, {std::complex<double>{1, 2}});
        EXPECT_EQ(c(0), (std::complex<double>{1, 2}));
        auto scalar =
            tessera::from<float>(s, shape{}, std::span<const float>(std::vector<float>{4.0f}));
        EXPECT_EQ(scalar(), 4.0f);
        const std::vector<float> none;
        EXPECT_EQ(tessera::from<float>(s, {0, 4}, std::span<const float>(none)).size(), 0u);
    });
}

TEST(TensorMakersTest, FromRejectsRaggedRowsAndSizeMismatch) {
    in_session([](session& s) {
        expect_shape_error(
            [&] {
                (void)tessera::from<std::int32_t>(s, {{1, 2}, {3, 4, 5}});
            },
            "from: row 1 has 3 values but row 0 has 2");
        expect_shape_error(
            [&] {
                (void)tessera::from<float>(s, {{1, 2}, {3, 4}, {5}});
            },
            "from: row 2 has 1 values but row 0 has 2");
        const std::vector<double> five{1, 2, 3, 4, 5};
        expect_shape_error(
            [&] {
                (void)tessera::from<double>(s, {2, 3}, std::span<const double>(five));
            },
            "from: 5 values given for shape [2,3] (6 elements)");
        expect_shape_error(
            [&] { (void)tessera::from<double>(s, shape{}, std::span<const double>(five)); },
            "from: 5 values given for shape [] (1 elements)");
    });
}

template <class T>
std::vector<T> values_of(const tessera::tensor<T>& t) {
    return {t.values().begin(), t.values().end()};
}

TEST(TensorMakersTest, UniformIsReproducibleForASeedAndInRange) {
    in_session([](session& s) {
        const shape n{100000};
        auto a = tessera::uniform<float>(s, n, -2.0f, 6.0f, 42);
        auto b = tessera::uniform<float>(s, n, -2.0f, 6.0f, 42);
        auto c = tessera::uniform<float>(s, n, -2.0f, 6.0f, 43);
        EXPECT_EQ(values_of(a), values_of(b));
        EXPECT_NE(values_of(a), values_of(c));
        double sum = 0, lo = 1e9, hi = -1e9;
        for (float x : a.values()) {
            sum += static_cast<double>(x);
            lo = std::min(lo, static_cast<double>(x));
            hi = std::max(hi, static_cast<double>(x));
        }
        // Mean 2, standard error 8 / sqrt(12 * 1e5) ~ 0.007.
        EXPECT_NEAR(sum / 1e5, 2.0, 0.05);
        EXPECT_GE(lo, -2.0);
        EXPECT_LT(hi, 6.0);
        EXPECT_LT(lo, -1.99);
        EXPECT_GT(hi, 5.99);
        // Integers: the closed range [low, high], every value drawn.
        auto d = tessera::uniform<std::int32_t>(s, {10000}, -3, 3, 7);
        std::set<std::int32_t> seen(d.values().begin(), d.values().end());
        EXPECT_EQ(seen, (std::set<std::int32_t>{-3, -2, -1, 0, 1, 2, 3}));
        EXPECT_EQ(values_of(tessera::uniform<std::int64_t>(s, {50}, 0, 1000000, 9)),
                  values_of(tessera::uniform<std::int64_t>(s, {50}, 0, 1000000, 9)));
        auto shaped = tessera::uniform<double>(s, {3, 4, 5}, 0.0, 1.0, 1);
        EXPECT_EQ(shaped.shape(), (shape{3, 4, 5}));
    });
}

TEST(TensorMakersTest, NormalIsReproducibleForASeedWithTheRightMoments) {
    in_session([](session& s) {
        const shape n{200000};
        auto a = tessera::normal<double>(s, n, 3.0, 2.0, 5);
        auto b = tessera::normal<double>(s, n, 3.0, 2.0, 5);
        auto c = tessera::normal<double>(s, n, 3.0, 2.0, 6);
        EXPECT_EQ(values_of(a), values_of(b));
        EXPECT_NE(values_of(a), values_of(c));
        double sum = 0, sq = 0;
        std::size_t within_one = 0;
        for (double x : a.values()) {
            sum += x;
            sq += x * x;
            within_one += std::abs(x - 3.0) < 2.0;
        }
        const double mean = sum / 2e5;
        const double sd = std::sqrt(sq / 2e5 - mean * mean);
        EXPECT_NEAR(mean, 3.0, 0.05);
        EXPECT_NEAR(sd, 2.0, 0.05);
        EXPECT_NEAR(static_cast<double>(within_one) / 2e5, 0.6827, 0.01);
        auto f = tessera::normal<float>(s, {1000}, 0.0f, 1.0f, 5);
        EXPECT_EQ(values_of(f), values_of(tessera::normal<float>(s, {1000}, 0.0f, 1.0f, 5)));
    });
}

TEST(TensorMakersTest, ComplexRandomDrawsBothParts) {
    in_session([](session& s) {
        using cf = std::complex<float>;
        auto a = tessera::uniform<cf>(s, {50000}, -1.0f, 1.0f, 11);
        EXPECT_EQ(values_of(a), values_of(tessera::uniform<cf>(s, {50000}, -1.0f, 1.0f, 11)));
        EXPECT_NE(values_of(a), values_of(tessera::uniform<cf>(s, {50000}, -1.0f, 1.0f, 12)));
        double re = 0, im = 0, re_im = 0;
        std::size_t same = 0;
        for (const cf& z : a.values()) {
            EXPECT_GE(z.real(), -1.0f);
            EXPECT_LT(z.real(), 1.0f);
            EXPECT_GE(z.imag(), -1.0f);
            EXPECT_LT(z.imag(), 1.0f);
            re += static_cast<double>(z.real());
            im += static_cast<double>(z.imag());
            re_im += static_cast<double>(z.real()) * static_cast<double>(z.imag());
            same += z.real() == z.imag();
        }
        EXPECT_NEAR(re / 5e4, 0.0, 0.02);
        EXPECT_NEAR(im / 5e4, 0.0, 0.02);
        EXPECT_NEAR(re_im / 5e4, 0.0, 0.02);  // independent parts
        EXPECT_EQ(same, 0u);
        auto z = tessera::normal<std::complex<double>>(s, {50000}, 1.0, 0.5, 3);
        double zr = 0, zi = 0;
        for (const auto& w : z.values()) {
            zr += w.real();
            zi += w.imag();
        }
        EXPECT_NEAR(zr / 5e4, 1.0, 0.02);
        EXPECT_NEAR(zi / 5e4, 1.0, 0.02);
    });
}

}  // namespace
