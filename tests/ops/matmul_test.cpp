// matmul, batched_matmul, tensordot, dot, vdot, outer: results against a float64 (complex<double>)
// reference written here with plain loops on fresh random inputs, every size class and kernel
// variant, strided/transposed/broadcast operands, bad input, dispatch and heap-allocation counts.
#include "support/alloc_counter.hpp"
#include "support/backends.hpp"
#include "support/guarded_memory.hpp"
#include "support/random.hpp"

#include <tessera/backend.hpp>
#include <tessera/error.hpp>
#include <tessera/ops/einsum.hpp>
#include <tessera/ops/matmul.hpp>
#include <tessera/stats.hpp>
#include <tessera/tensor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;
using tessera::test::fill_random;
using tessera::test::fresh_seed;
using tessera::test::random_tensor;
using tessera::test::wide_t;
using tessera::test::widen;

using cf = std::complex<float>;
using cd = std::complex<double>;

template <class T>
constexpr double epsilon_of() {
    return static_cast<double>(std::numeric_limits<tessera::real_type_t<T>>::epsilon());
}

// The element of `v` at the (right-aligned, broadcast) index `idx` of a larger shape.
template <class T>
T element(const tensor_view<T>& v, const std::vector<std::size_t>& idx) {
    std::ptrdiff_t offset = 0;
    const std::size_t lead = idx.size() - v.rank();
    for (std::size_t ax = 0; ax < v.rank(); ++ax) {
        const std::size_t i = v.extent(ax) == 1 ? 0 : idx[lead + ax];
        offset += static_cast<std::ptrdiff_t>(i) * v.stride(ax);
    }
    return v.data()[offset];
}

// Reference batched product: c[..., i, j] = sum_p a[..., i, p] b[..., p, j] with broadcast batch
// axes, in double precision, plus the sum of |a||b| each element's rounding error scales with.
template <class T>
struct reference {
    std::vector<wide_t<T>> value;
    std::vector<double> magnitude;
};

template <class T>
reference<T> reference_product(const tensor_view<const T>& a, const tensor_view<const T>& b, const shape& result) {
    const std::size_t r = result.rank();
    const std::size_t m = result[r - 2], n = result[r - 1], k = a.extent(a.rank() - 1);
    reference<T> ref;
    ref.value.resize(result.count());
    ref.magnitude.resize(result.count());
    const std::size_t batches = m * n == 0 ? 0 : result.count() / (m * n);
    // Batch offsets of a and b for each batch index of the result (right-aligned, broadcast).
    const auto offset_of = [&](const tensor_view<const T>& v, std::size_t batch) {
        std::ptrdiff_t offset = 0;
        for (std::size_t ax = r - 2; ax-- > 0;) {
            const std::size_t i = batch % result[ax];
            batch /= result[ax];
            const std::size_t lead = r - v.rank();
            if (ax < lead) continue;
            if (v.extent(ax - lead) != 1) offset += static_cast<std::ptrdiff_t>(i) * v.stride(ax - lead);
        }
        return offset;
    };
    const std::size_t ra = a.rank(), rb = b.rank();
    for (std::size_t bi = 0; bi < batches; ++bi) {
        const T* pa = a.data() + offset_of(a, bi);
        const T* pb = b.data() + offset_of(b, bi);
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
                wide_t<T> sum{};
                double mag = 0;
                for (std::size_t p = 0; p < k; ++p) {
                    const wide_t<T> x = widen(pa[static_cast<std::ptrdiff_t>(i) * a.stride(ra - 2) +
                                                 static_cast<std::ptrdiff_t>(p) * a.stride(ra - 1)]);
                    const wide_t<T> y = widen(pb[static_cast<std::ptrdiff_t>(p) * b.stride(rb - 2) +
                                                 static_cast<std::ptrdiff_t>(j) * b.stride(rb - 1)]);
                    sum += x * y;
                    mag += std::abs(x) * std::abs(y);
                }
                ref.value[(bi * m + i) * n + j] = sum;
                ref.magnitude[(bi * m + i) * n + j] = mag;
            }
    }
    return ref;
}

// Checks `got` (row-major walk of any view) against the reference: rounding error of a k-term
// dot product is at most about k * eps * sum|a||b|.
template <class T>
void expect_matches(const tensor_view<const T>& got, const reference<T>& ref, std::size_t k,
                    const std::string& what) {
    ASSERT_EQ(got.size(), ref.value.size()) << what;
    const double eps = epsilon_of<T>();
    std::vector<std::size_t> idx(got.rank(), 0);
    for (std::size_t flat = 0; flat < got.size(); ++flat) {
        std::size_t rest = flat;
        for (std::size_t ax = got.rank(); ax-- > 0;) {
            idx[ax] = rest % got.extent(ax);
            rest /= got.extent(ax);
        }
        const wide_t<T> g = widen(element(got, idx));
        const double tol = 2.0 * static_cast<double>(k + 2) * eps * ref.magnitude[flat] + 1e-300;
        ASSERT_LE(std::abs(g - ref.value[flat]), tol)
            << what << " element " << flat << " got " << g << " want " << ref.value[flat];
    }
}

std::string text(const shape& s) {
    std::string t = "[";
    for (std::size_t i = 0; i < s.rank(); ++i) {
        if (i != 0) t += ',';
        t += std::to_string(s[i]);
    }
    return t + "]";
}

struct mkn {
    std::size_t m, k, n;
};

// Every 2-D size class: the inline 2/3/4 path, the compile-time kernels, the loop for tiny odd
// sizes, Eigen's GEMM, and sizes that tile on a multi-thread backend.
const std::vector<mkn> matrix_sizes = {
    {2, 2, 2}, {3, 3, 3}, {4, 4, 4},   {5, 5, 5},   {6, 6, 6},    {7, 7, 7},     {8, 8, 8},
    {9, 9, 9}, {16, 16, 16}, {3, 5, 2}, {1, 7, 1},  {17, 1, 9},   {4, 4, 1},     {3, 3, 1},
    {32, 32, 32}, {33, 33, 33}, {64, 64, 64}, {65, 130, 33}, {200, 70, 257}};

class MatmulTest : public ::testing::TestWithParam<int> {};

template <class T>
void check_matmul_sizes(session& s, std::mt19937_64& rng) {
    for (const mkn& z : matrix_sizes) {
        const tensor<T> a = random_tensor<T>(s, {z.m, z.k}, rng);
        const tensor<T> b = random_tensor<T>(s, {z.k, z.n}, rng);
        const tensor<T> c = tessera::matmul(s, a, b);
        ASSERT_EQ(c.shape(), (shape{z.m, z.n}));
        const std::string what = "matmul " + text(a.shape()) + " x " + text(b.shape());
        expect_matches<T>(c, reference_product<T>(a, b, c.shape()), z.k, what);
    }
}

TEST_P(MatmulTest, MatchesTheReferenceForEverySizeClassAndType) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        check_matmul_sizes<float>(s, rng);
        check_matmul_sizes<double>(s, rng);
        check_matmul_sizes<cf>(s, rng);
        check_matmul_sizes<cd>(s, rng);
    });
}

// a and b as transposes, slices with steps, reversed axes (negative strides) and strides no
// Eigen map can express (both strides != 1), written into strided outputs.
template <class T>
void check_strided(session& s, std::mt19937_64& rng, std::size_t m, std::size_t k, std::size_t n) {
    const tensor<T> at = random_tensor<T>(s, {k, m}, rng);      // a = at^T: column-major
    const tensor<T> bw = random_tensor<T>(s, {2 * k, 3 * n}, rng);  // b = every other row, third column
    const tensor<T> bflip = random_tensor<T>(s, {k, n}, rng);
    const tensor_view<const T> a = at.view().transpose();
    const tensor_view<const T> b = bw.view().slice(0, 0, tessera::slice_end, 2).slice(1, 1, tessera::slice_end, 3);
    const tensor_view<const T> b2 = bflip.view().flip(0).flip(1);
    const std::string what = "strided " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);

    tensor<T> c1 = tessera::matmul(s, a, b);
    expect_matches<T>(c1, reference_product<T>(a, b, c1.shape()), k, what + " a^T b[::2, 1::3]");

    // Output as a transposed view, and as a view with no unit stride (computed in a temp).
    tensor<T> ct = tessera::zeros<T>(s, {n, m});
    tessera::matmul(s, a, b2, ct.view().transpose());
    expect_matches<T>(ct.view().transpose(), reference_product<T>(a, b2, {m, n}), k, what + " into out^T");

    tensor<T> wide = tessera::zeros<T>(s, {2 * m, 2 * n});
    const tensor_view<T> out = wide.view().slice(0, 0, tessera::slice_end, 2).slice(1, 1, tessera::slice_end, 2);
    tessera::matmul(s, b2.transpose(), at.view(), out.transpose());
    expect_matches<T>(out.transpose(), reference_product<T>(b2.transpose(), at.view(), {n, m}), k,
                      what + " into a stepped view");
    // The elements between the output's were not touched.
    for (std::size_t i = 0; i < 2 * m; i += 2)
        for (std::size_t j = 0; j < 2 * n; j += 2) ASSERT_EQ(wide(i, j), T{}) << what;
}

TEST_P(MatmulTest, ReadsAndWritesStridedTransposedAndReversedViews) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        for (const mkn& z : {mkn{2, 2, 2}, mkn{3, 3, 3}, mkn{4, 4, 4}, mkn{3, 5, 2}, mkn{8, 8, 8},
                             mkn{40, 50, 60}, mkn{70, 65, 90}}) {
            check_strided<float>(s, rng, z.m, z.k, z.n);
            check_strided<double>(s, rng, z.m, z.k, z.n);
            check_strided<cf>(s, rng, z.m, z.k, z.n);
            check_strided<cd>(s, rng, z.m, z.k, z.n);
        }
    });
}

template <class T>
void check_accumulate(session& s, std::mt19937_64& rng, std::size_t m, std::size_t k, std::size_t n, T alpha, T beta) {
    const tensor<T> a = random_tensor<T>(s, {m, k}, rng);
    const tensor<T> bt = random_tensor<T>(s, {n, k}, rng);
    const tensor_view<const T> b = bt.view().transpose();
    tensor<T> c = random_tensor<T>(s, {m, n}, rng);
    tensor<T> c0 = tessera::empty<T>(s, c.shape());
    std::copy(c.values().begin(), c.values().end(), c0.data());
    tessera::matmul(s, a, b, c, alpha, beta);
    reference<T> ref = reference_product<T>(a, b, {m, n});
    for (std::size_t i = 0; i < ref.value.size(); ++i) {
        ref.value[i] = widen(alpha) * ref.value[i] + widen(beta) * widen(c0.values()[i]);
        ref.magnitude[i] = std::abs(widen(alpha)) * ref.magnitude[i] + std::abs(widen(beta)) * std::abs(widen(c0.values()[i]));
    }
    expect_matches<T>(c, ref, k, "accumulate " + text(a.shape()) + " x " + text(bt.shape()) + "^T");
}

TEST_P(MatmulTest, AccumulateFormComputesAlphaTimesProductPlusBetaTimesOut) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        for (const mkn& z : {mkn{2, 2, 2}, mkn{3, 3, 3}, mkn{4, 4, 4}, mkn{8, 8, 8}, mkn{3, 5, 2},
                             mkn{33, 20, 17}, mkn{130, 150, 140}}) {
            check_accumulate<float>(s, rng, z.m, z.k, z.n, 0.5f, -1.25f);
            check_accumulate<float>(s, rng, z.m, z.k, z.n, 2.0f, 1.0f);
            check_accumulate<double>(s, rng, z.m, z.k, z.n, -1.5, 0.75);
            check_accumulate<cf>(s, rng, z.m, z.k, z.n, cf(0.5f, 1.0f), cf(-1.0f, 0.25f));
            check_accumulate<cd>(s, rng, z.m, z.k, z.n, cd(2.0, -1.0), cd(0.0, 1.0));
        }
        // beta = 0 writes without reading: NaNs already in out do not survive.
        for (std::size_t n : {2u, 4u, 7u, 64u}) {
            const tensor<double> a = random_tensor<double>(s, {n, n}, rng);
            tensor<double> c = tessera::full<double>(s, {n, n}, std::numeric_limits<double>::quiet_NaN());
            tessera::matmul(s, a, a, c, 1.0, 0.0);
            for (double v : c.values()) ASSERT_FALSE(std::isnan(v)) << n;
        }
    });
}

template <class T>
void check_tiny_out_forms(session& s, std::mt19937_64& rng) {
    for (std::size_t n : {2u, 3u, 4u}) {
        const tensor<T> a = random_tensor<T>(s, {n, n}, rng);
        const tensor<T> bt = random_tensor<T>(s, {n, n}, rng);
        const reference<T> ref = reference_product<T>(a, bt, {n, n});
        const std::string what = "tiny out forms n=" + std::to_string(n);
        tensor<T> c = tessera::empty<T>(s, {n, n});  // a tensor as out
        tessera::matmul(s, a, bt, c);
        expect_matches<T>(c, ref, n, what + " tensor out");
        tensor<T> ct = tessera::empty<T>(s, {n, n});  // a transposed view as out, views as inputs
        tessera::matmul(s, a.view(), bt.view(), ct.view().transpose());
        expect_matches<T>(ct.view().transpose(), ref, n, what + " view out");
        // bt^T as an input: the same path with strided operands.
        const reference<T> ref_t = reference_product<T>(a, bt.view().transpose(), {n, n});
        tessera::matmul(s, a, bt.view().transpose(), c);
        expect_matches<T>(c, ref_t, n, what + " transposed b");
    }
}

TEST_P(MatmulTest, TinyOutParameterFormsMatchTheReference) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        check_tiny_out_forms<float>(s, rng);
        check_tiny_out_forms<double>(s, rng);
        check_tiny_out_forms<cf>(s, rng);
        check_tiny_out_forms<cd>(s, rng);
    });
    // Each product counted once, inline.
    EXPECT_EQ(be.stats().inline_dispatches, 4u * 3u * 3u);
    EXPECT_EQ(be.stats().parallel_dispatches, 0u);
}

TEST_P(MatmulTest, InnerDimensionZeroGivesZerosOrBetaTimesOut) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const tensor<float> a = tessera::empty<float>(s, {3, 0});
        const tensor<float> b = tessera::empty<float>(s, {0, 5});
        const tensor<float> c = tessera::matmul(s, a, b);
        ASSERT_EQ(c.shape(), (shape{3, 5}));
        for (float v : c.values()) EXPECT_EQ(v, 0.0f);
        tensor<float> d = tessera::full<float>(s, {3, 5}, 2.0f);
        tessera::matmul(s, a, b, d, 1.0f, 3.0f);
        for (float v : d.values()) EXPECT_EQ(v, 6.0f);
        const tensor<float> e = tessera::matmul(s, tessera::empty<float>(s, {0, 4}), tessera::empty<float>(s, {4, 2}));
        EXPECT_EQ(e.shape(), (shape{0, 2}));
    });
}

template <class F>
void expect_shape_error(F f, const std::string& message) {
    try {
        f();
        FAIL() << "no exception; expected: " << message;
    } catch (const tessera::shape_error& e) {
        EXPECT_EQ(std::string(e.what()), message);
    }
}

TEST_P(MatmulTest, BadInputThrowsBeforeWriting) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const tensor<float> a = tessera::full<float>(s, {2, 3}, 1.0f);
        const tensor<float> b = tessera::full<float>(s, {4, 5}, 1.0f);
        tensor<float> out = tessera::full<float>(s, {2, 5}, -1.0f);
        expect_shape_error([&] { tessera::matmul(s, a, b, out); },
                           "matmul: the inner dimensions of a [2,3] and b [4,5] differ");
        expect_shape_error([&] { tessera::matmul(s, a, b); },
                           "matmul: the inner dimensions of a [2,3] and b [4,5] differ");
        const tensor<float> v = tessera::full<float>(s, {3}, 1.0f);
        expect_shape_error([&] { tessera::matmul(s, v, b); }, "matmul: a must have rank 2 but has shape [3]");
        expect_shape_error([&] { tessera::matmul(s, a, tessera::full<float>(s, {3, 2, 2}, 1.0f)); },
                           "matmul: b must have rank 2 but has shape [3,2,2]");
        const tensor<float> b35 = tessera::full<float>(s, {3, 5}, 1.0f);
        tensor<float> wrong = tessera::full<float>(s, {5, 2}, -1.0f);
        expect_shape_error([&] { tessera::matmul(s, a, b35, wrong); },
                           "matmul: out has shape [5,2] but the result has shape [2,5]");
        for (float x : out.values()) ASSERT_EQ(x, -1.0f);
        for (float x : wrong.values()) ASSERT_EQ(x, -1.0f);

        // out overlapping an input, even exactly, is refused: a product reads after it writes.
        tensor<float> sq = tessera::full<float>(s, {3, 3}, 1.0f);
        EXPECT_THROW(tessera::matmul(s, sq, sq, sq), tessera::alias_error);
        tensor<float> big = tessera::full<float>(s, {4, 4}, 1.0f);
        const tensor_view<float> corner = big.view().slice(0, 1).slice(1, 1);
        EXPECT_THROW(tessera::matmul(s, big.view().slice(0, 0, 3).slice(1, 0, 3), sq, corner), tessera::alias_error);
        EXPECT_THROW(tessera::matmul(s, sq, big.view().slice(0, 0, 3).slice(1, 0, 3), corner, 1.0f, 1.0f),
                     tessera::alias_error);
        for (float x : big.values()) ASSERT_EQ(x, 1.0f);
        // A broadcast out (stride 0) repeats elements.
        tensor<float> row = tessera::zeros<float>(s, {1, 3});
        EXPECT_THROW(tessera::matmul(s, sq, sq, row.view().broadcast_to({3, 3})), tessera::alias_error);

        // The same for shapes past the tiny ones, whose rank-2 checks are inlined too: an out
        // that is an input, overlaps a, overlaps b, or repeats elements.
        tensor<float> sq5 = tessera::full<float>(s, {5, 5}, 1.0f);
        EXPECT_THROW(tessera::matmul(s, sq5, sq5, sq5), tessera::alias_error);
        tensor<float> big6 = tessera::full<float>(s, {6, 6}, 1.0f);
        const tensor_view<float> top = big6.view().slice(0, 0, 5).slice(1, 0, 5);
        const tensor_view<float> bottom = big6.view().slice(0, 1).slice(1, 1);
        EXPECT_THROW(tessera::matmul(s, top, sq5, bottom), tessera::alias_error);
        EXPECT_THROW(tessera::matmul(s, sq5, top, bottom), tessera::alias_error);
        EXPECT_THROW(tessera::matmul(s, sq5, top.transpose(), bottom.transpose()),
                     tessera::alias_error);
        for (float x : big6.values()) ASSERT_EQ(x, 1.0f);
        for (float x : sq5.values()) ASSERT_EQ(x, 1.0f);
        tensor<float> row5 = tessera::zeros<float>(s, {1, 5});
        EXPECT_THROW(tessera::matmul(s, sq5, sq5, row5.view().broadcast_to({5, 5})),
                     tessera::alias_error);
        for (float x : row5.values()) ASSERT_EQ(x, 0.0f);

        // Reversed operands (negative strides) span backwards from their first element: an out
        // of rows 9 down to 5 is clear of rows 0-4 and is written; rows 5 down to 1 overlap them.
        tensor<float> rows = tessera::zeros<float>(s, {10, 5});
        const tensor_view<float> upper = rows.view().slice(0, 0, 5);
        for (std::size_t i = 0; i < 25; ++i) rows.data()[i] = 1.0f;
        const tensor_view<float> lower_reversed = rows.view().slice(0, 9, 4, -1);
        tessera::matmul(s, upper, sq5, lower_reversed);
        for (std::size_t i = 0; i < 50; ++i) ASSERT_EQ(rows.data()[i], i < 25 ? 1.0f : 5.0f) << i;
        const tensor_view<float> middle_reversed = rows.view().slice(0, 5, 0, -1);
        EXPECT_THROW(tessera::matmul(s, upper, sq5, middle_reversed), tessera::alias_error);
        EXPECT_THROW(tessera::matmul(s, sq5, upper.flip(1), middle_reversed.flip(1)),
                     tessera::alias_error);
        // Only out's column span reaches below its first element here: out is rows 4-8, columns
        // 3 down to 0 (a negative column stride), and a is element (4, 0) alone, broadcast.
        const tensor_view<float> columns_reversed =
            rows.view().slice(0, 4, 9).slice(1, 3, tessera::slice_end, -1);
        const tensor_view<float> corner_element =
            rows.view().slice(0, 4, 5).slice(1, 0, 1).broadcast_to({5, 1});
        const tensor<float> b14 = tessera::full<float>(s, {1, 4}, 1.0f);
        EXPECT_THROW(tessera::matmul(s, corner_element, b14, columns_reversed),
                     tessera::alias_error);
        for (std::size_t i = 0; i < 50; ++i) ASSERT_EQ(rows.data()[i], i < 25 ? 1.0f : 5.0f) << i;
    });
}

TEST_P(MatmulTest, SmallProductsRunInlineAndLargeOnesDispatchOnceInParallel) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    be.run([](session& s) {
        const tensor<float> a = tessera::full<float>(s, {2, 2}, 1.0f);
        const tensor<float> b = tessera::full<float>(s, {24, 24}, 1.0f);
        tensor<float> c2 = tessera::zeros<float>(s, {2, 2});
        tensor<float> c24 = tessera::zeros<float>(s, {24, 24});
        for (int i = 0; i < 50; ++i) {
            tessera::matmul(s, a, a, c2);
            tessera::matmul(s, b, b, c24);
        }
    });
    tessera::stats st = be.stats();
    EXPECT_EQ(st.parallel_dispatches, 0u);
    EXPECT_EQ(st.inline_dispatches, 100u);

    // 256^3 multiply-adds is 128 grains of work: split into tiles on a multi-thread backend.
    const std::size_t n = 256;
    const tessera::stats before = be.stats();
    be.run([&](session& s) {
        std::mt19937_64 rng(fresh_seed());
        const tensor<double> a = random_tensor<double>(s, {n, n}, rng);
        const tensor<double> b = random_tensor<double>(s, {n, n}, rng);
        const tensor<double> c = tessera::matmul(s, a, b);
        expect_matches<double>(c, reference_product<double>(a, b, c.shape()), n, "256^3");
    });
    const tessera::stats d = be.stats() - before;
    EXPECT_EQ(d.parallel_dispatches, threads > 1 ? 1u : 0u);
    EXPECT_EQ(d.inline_dispatches, threads > 1 ? 0u : 1u);
}

TEST_P(MatmulTest, WarmProductsMakeNoHeapAllocations) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        std::mt19937_64 rng(fresh_seed());
        // GEMM sizes, one with operands Eigen cannot map (copied into the workspace), one tiled.
        const tensor<float> a = random_tensor<float>(s, {96, 200}, rng);
        const tensor<float> b = random_tensor<float>(s, {200, 300}, rng);
        tensor<float> c = tessera::zeros<float>(s, {96, 150});
        const tensor_view<const float> b_odd = b.view().slice(1, 0, tessera::slice_end, 2);
        const tensor<float> big = random_tensor<float>(s, {256, 256}, rng);
        tensor<float> big_out = tessera::zeros<float>(s, {256, 256});
        tensor<float> small = random_tensor<float>(s, {2, 2}, rng);
        tensor<float> small_out = tessera::zeros<float>(s, {2, 2});
        const auto step = [&] {
            tessera::matmul(s, a, b_odd, c);
            tessera::matmul(s, a, b_odd, c, 0.5f, 0.5f);
            tessera::matmul(s, big, big, big_out);
            tessera::matmul(s, small, small, small_out);
            tensor<float> fresh = tessera::matmul(s, a, b);  // allocating form: from the workspace
            EXPECT_EQ(fresh.shape(), (shape{96, 300}));
        };
        step();  // warm: the workspace now holds every block the loop needs
        const tessera::test::allocation_scope allocations;
        for (int i = 0; i < 5; ++i) step();
        EXPECT_EQ(allocations.count(), 0u);
    });
}

// Stands in for the kernel a workspace remembers for a product, counting its calls, and runs the
// kernel it replaced.
template <class T>
struct kernel_spy {
    static inline tessera::detail::small_gemm_plan<T> gemm{};
    static inline tessera::detail::small_batch_fn<T> fixed = nullptr;
    static inline int calls = 0;
    static void run_gemm(const tessera::detail::small_gemm_args<T>& args,
                         const tessera::detail::small_gemm_plan<T>&) noexcept {
        ++calls;
        gemm.run(args, gemm);
    }
    static void run_fixed(const tessera::detail::small_batch_args<T>& args) noexcept {
        ++calls;
        fixed(args);
    }
};

// A small product's kernel is remembered by the session's workspace (by shape, strides and
// whether alpha and beta are plain) and called again without being chosen and planned afresh.
// Products that share a shape but not a layout, or a layout but not the form, may take different
// kernels (a fixed-size kernel reads only dense operands and ignores alpha and beta): each must
// keep its own whatever ran before it. Each product has two copies of its operands at other
// addresses, run one after the other (the second finds the first's kernel, which a spy in its
// slot shows is called); every call must give the bits of its copy's first call, the plain ones
// those of a batch of the two copies (the batch loop, not the single-product path), without
// touching C's padding. Every call counts one inline dispatch; warm rounds allocate nothing.
template <class T>
void check_remembered_products(backend& be, std::mt19937_64& rng) {
    enum class form { plain, alpha_beta, plain_accumulate };
    struct layout {
        std::size_t a_pad;
        bool a_transposed;
        std::size_t b_pad, b_step, c_pad;
        form f;
    };
    const std::array<layout, 8> layouts = {{{0, false, 0, 1, 0, form::plain},
                                            {2, false, 0, 1, 0, form::plain},
                                            {0, true, 0, 1, 0, form::plain},
                                            {0, false, 3, 1, 0, form::plain},
                                            {0, false, 0, 2, 0, form::plain},
                                            {0, false, 0, 1, 2, form::plain},
                                            {0, false, 0, 1, 0, form::alpha_beta},
                                            {0, false, 0, 1, 0, form::plain_accumulate}}};
    struct product {
        tensor<T> a_store, b_store, c_store, c_start, first;  // two copies each: [2, ...]
        tensor_view<const T> a2, b2;                            // both copies, as a batch
        std::array<tensor_view<const T>, 2> a, b;
        std::array<tensor_view<T>, 2> c;
        form f = form::plain;
        std::string what;
    };
    const T alpha = T(0.5), beta = T(-1.25);
    const auto run = [&](session& s, const product& p, std::size_t copy) {
        if (p.f == form::plain)
            tessera::matmul(s, p.a[copy], p.b[copy], p.c[copy]);
        else if (p.f == form::alpha_beta)
            tessera::matmul(s, p.a[copy], p.b[copy], p.c[copy], alpha, beta);
        else
            tessera::matmul(s, p.a[copy], p.b[copy], p.c[copy], T{1}, T{0});
    };
    const auto one = [](const auto& batch, std::size_t copy) {
        const auto i = static_cast<std::ptrdiff_t>(copy);
        return batch.slice(0, i, i + 1).squeeze(0);
    };
    std::vector<product> products;
    be.run([&](session& s) {
        for (const mkn& z :
             {mkn{5, 5, 5},  mkn{6, 6, 6},   mkn{8, 8, 8}, mkn{16, 16, 16}, mkn{3, 5, 2},
              mkn{7, 7, 7},  mkn{6, 6, 1},   mkn{4, 4, 1}, mkn{3, 3, 1},    mkn{12, 12, 12},
              mkn{1, 64, 1}, mkn{20, 9, 33}, mkn{5, 5, 6}, mkn{5, 6, 5},    mkn{20, 20, 2},
              mkn{8, 8, 2},  mkn{5, 7, 1},   mkn{5, 5, 1}, mkn{20, 20, 1},  mkn{6, 12, 1}})
            for (const layout& l : layouts) {
                const auto k = static_cast<std::ptrdiff_t>(z.k);
                const auto n = static_cast<std::ptrdiff_t>(z.n);
                const auto step = static_cast<std::ptrdiff_t>(l.b_step);
                product p;
                p.a_store = l.a_transposed ? random_tensor<T>(s, {2, z.k, z.m}, rng)
                                           : random_tensor<T>(s, {2, z.m, z.k + l.a_pad}, rng);
                p.a2 = l.a_transposed ? p.a_store.view().transpose(-1, -2)
                                      : p.a_store.view().slice(2, 0, k);
                p.b_store = random_tensor<T>(s, {2, z.k, z.n * l.b_step + l.b_pad}, rng);
                p.b2 = p.b_store.view().slice(2, 0, n * step, step);
                p.c_start = random_tensor<T>(s, {2, z.m, z.n + l.c_pad}, rng);
                p.c_store = tessera::empty<T>(s, p.c_start.shape());
                p.first = tessera::empty<T>(s, p.c_start.shape());
                for (std::size_t copy = 0; copy < 2; ++copy) {
                    p.a[copy] = one(p.a2, copy);
                    p.b[copy] = one(p.b2, copy);
                    p.c[copy] = one(p.c_store.view().slice(2, 0, n), copy);
                }
                p.f = l.f;
                p.what = std::string(sizeof(T) == 4 ? "float " : "double ") + text(p.a[0].shape()) +
                         " x " + text(p.b[0].shape()) + (l.a_pad != 0 ? ", a rows padded" : "") +
                         (l.a_transposed ? ", a transposed" : "") +
                         (l.b_pad != 0 ? ", b rows padded" : "") +
                         (l.b_step != 1 ? ", b columns stepped" : "") +
                         (l.c_pad != 0 ? ", c rows padded" : "") +
                         (l.f == form::alpha_beta         ? ", alpha and beta"
                          : l.f == form::plain_accumulate ? ", accumulate with 1 and 0"
                                                          : "");
                products.push_back(std::move(p));
            }
    });
    const auto bytes = [](const tensor<T>& t) { return t.size() * sizeof(T); };
    std::size_t spied = 0;
    for (int round = 0; round < 3; ++round) {
        const tessera::stats before = be.stats();
        std::uint64_t allocations = 0;
        be.run([&](session& s) {
            const tessera::test::allocation_scope scope;
            for (product& p : products) {
                const std::size_t half = p.c_start.size() / 2;  // one copy's C
                for (std::size_t copy = 0; copy < 2; ++copy) {
                    std::memcpy(p.c_store.data(), p.c_start.data(), bytes(p.c_start));
                    // In round 1, the second copy through a spy where the first left its kernel.
                    auto& slot = tessera::detail::session_access::workspace_of(s)
                                     .products->template slot<T>(
                                         static_cast<std::ptrdiff_t>(p.a[0].extent(0)),
                                         static_cast<std::ptrdiff_t>(p.b[0].extent(1)),
                                         static_cast<std::ptrdiff_t>(p.a[0].extent(1)));
                    using tessera::detail::matrix_of;
                    const auto key =
                        tessera::detail::key_of<T>(matrix_of(p.a[copy]), matrix_of(p.b[copy]),
                                                   matrix_of(p.c[copy]), p.f != form::alpha_beta);
                    const auto saved = slot;
                    const bool spy =
                        round == 1 && copy == 1 && tessera::detail::same_key(slot.key, key);
                    const int calls = kernel_spy<T>::calls;
                    if (spy) {
                        kernel_spy<T>::gemm = slot.gemm;
                        kernel_spy<T>::fixed = slot.fixed;
                        if (slot.fixed != nullptr)
                            slot.fixed = &kernel_spy<T>::run_fixed;
                        else
                            slot.gemm.run = &kernel_spy<T>::run_gemm;
                    }
                    run(s, p, copy);
                    if (spy) {
                        slot = saved;
                        ++spied;
                        ASSERT_EQ(kernel_spy<T>::calls, calls + 1) << p.what << ", not remembered";
                    }
                    T* const result = p.c_store.data() + copy * half;
                    T* const first = p.first.data() + copy * half;
                    if (round == 0) {
                        std::memcpy(first, result, half * sizeof(T));
                        continue;
                    }
                    ASSERT_EQ(std::memcmp(result, first, half * sizeof(T)), 0)
                        << p.what << ", copy " << copy << ", round " << round;
                }
            }
            allocations = scope.count();
        });
        const tessera::stats d = be.stats() - before;
        EXPECT_EQ(d.inline_dispatches, 2 * products.size()) << "round " << round;
        EXPECT_EQ(d.parallel_dispatches, 0u) << "round " << round;
        if (round > 0) {
            EXPECT_EQ(allocations, 0u) << "round " << round;
        }
    }
    // Most products are remembered: all but those with B's columns stepped (copied first) and
    // the fixed-size shapes read through strides they do not take.
    EXPECT_GE(spied, products.size() / 2);
    // Round 0's results: right, C's padding untouched, the plain ones the batch's bits.
    be.run([&](session& s) {
        for (const product& p : products) {
            const std::size_t m = p.c[0].extent(0), n = p.c[0].extent(1), k = p.a[0].extent(1);
            const std::size_t row = p.c_start.extent(2);  // C's row stride, padding included
            const tensor<T> batched = tessera::batched_matmul(s, p.a2, p.b2);
            for (std::size_t copy = 0; copy < 2; ++copy) {
                const T* const first = p.first.data() + copy * m * row;
                const T* const start = p.c_start.data() + copy * m * row;
                for (std::size_t i = 0; i < m; ++i)
                    for (std::size_t j = n; j < row; ++j)
                        ASSERT_EQ(first[i * row + j], start[i * row + j]) << p.what << ", padding";
                reference<T> ref = reference_product<T>(p.a[copy], p.b[copy], {m, n});
                if (p.f == form::alpha_beta)
                    for (std::size_t i = 0; i < m; ++i)
                        for (std::size_t j = 0; j < n; ++j) {
                            const std::size_t f = i * n + j;
                            const wide_t<T> c0 = widen(start[i * row + j]);
                            ref.value[f] = widen(alpha) * ref.value[f] + widen(beta) * c0;
                            ref.magnitude[f] = std::abs(widen(alpha)) * ref.magnitude[f] +
                                               std::abs(widen(beta) * c0);
                        }
                const tensor_view<const T> got =
                    one(p.first.view().slice(2, 0, static_cast<std::ptrdiff_t>(n)), copy);
                expect_matches<T>(got, ref, k, p.what);
                if (p.f == form::alpha_beta) continue;
                for (std::size_t i = 0; i < m; ++i)
                    ASSERT_EQ(std::memcmp(batched.data() + (copy * m + i) * n, first + i * row,
                                          n * sizeof(T)),
                              0)
                        << p.what << ", copy " << copy << ", against the batch";
            }
        }
    });
}

TEST_P(MatmulTest, RepeatedSmallProductsKeepTheKernelOfTheirShapeLayoutAndForm) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    check_remembered_products<float>(be, rng);
    check_remembered_products<double>(be, rng);
}

INSTANTIATE_TEST_SUITE_P(Threads, MatmulTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// --- batched_matmul -----------------------------------------------------------------------------

class BatchedMatmulTest : public ::testing::TestWithParam<int> {};

const std::vector<mkn> batched_sizes = {
    {2, 2, 2},   {3, 3, 3},   {4, 4, 4},   {5, 5, 5},   {6, 6, 6},    {8, 8, 8},  {16, 16, 16},
    {32, 32, 32}, {4, 4, 1}, {3, 3, 1},   {7, 7, 7},   {9, 9, 9},    {3, 5, 2},  {33, 33, 33},
    {64, 64, 64}, {1, 1, 1}, {2, 3, 4}};

template <class T>
void check_batched_sizes(session& s, std::mt19937_64& rng) {
    for (const mkn& z : batched_sizes) {
        const std::size_t batch = z.m >= 32 ? 3 : 11;
        const tensor<T> a = random_tensor<T>(s, {batch, z.m, z.k}, rng);
        const tensor<T> b = random_tensor<T>(s, {batch, z.k, z.n}, rng);
        const tensor<T> c = tessera::batched_matmul(s, a, b);
        ASSERT_EQ(c.shape(), (shape{batch, z.m, z.n}));
        const std::string what = "batched " + text(a.shape()) + " x " + text(b.shape());
        expect_matches<T>(c, reference_product<T>(a, b, c.shape()), z.k, what);
        // A shared b, and a 2-level batch with a shared a.
        const tensor<T> b1 = random_tensor<T>(s, {z.k, z.n}, rng);
        tensor<T> c1 = tessera::empty<T>(s, {batch, z.m, z.n});
        tessera::batched_matmul(s, a, b1, c1);
        expect_matches<T>(c1, reference_product<T>(a, b1, c1.shape()), z.k, what + " shared b");
        const tensor<T> a1 = random_tensor<T>(s, {1, z.m, z.k}, rng);
        const tensor<T> b2 = random_tensor<T>(s, {2, 3, z.k, z.n}, rng);
        const tensor<T> c2 = tessera::batched_matmul(s, a1, b2);
        ASSERT_EQ(c2.shape(), (shape{2, 3, z.m, z.n}));
        expect_matches<T>(c2, reference_product<T>(a1, b2, c2.shape()), z.k, what + " shared a");
    }
}

TEST_P(BatchedMatmulTest, MatchesTheReferenceForEverySizeClassAndType) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        check_batched_sizes<float>(s, rng);
        check_batched_sizes<double>(s, rng);
        check_batched_sizes<cf>(s, rng);
        check_batched_sizes<cd>(s, rng);
    });
}

// White-box: every compiled variant this CPU can run, not only the one it picks, for every
// kernel shape, with dense, shared-b and strided batches (a gap after each matrix of A, B and
// C). A, B and C each end where an inaccessible page begins, so a read or write past the last
// matrix faults; guard elements before C and in its gaps catch writes outside each matrix.
template <class T>
void check_variants(session& s, std::mt19937_64& rng) {
    using tessera::detail::kernel_isa;
    using tessera::detail::small_size;
    const auto host = static_cast<unsigned>(tessera::detail::host_kernel_isa());
    const auto sz = [](std::size_t v) { return static_cast<std::ptrdiff_t>(v); };
    for (const mkn& z : {mkn{2, 2, 2}, mkn{3, 3, 3}, mkn{4, 4, 4}, mkn{5, 5, 5}, mkn{6, 6, 6}, mkn{8, 8, 8},
                         mkn{16, 16, 16}, mkn{32, 32, 32}, mkn{4, 4, 1}, mkn{3, 3, 1}}) {
        const small_size size = tessera::detail::classify_small(z.m, z.k, z.n);
        ASSERT_NE(size, small_size::none);
        constexpr std::size_t batch = 7;
        const std::size_t mk = z.m * z.k, kn = z.k * z.n, mn = z.m * z.n;
        const tensor<T> a = random_tensor<T>(s, {batch, z.m, z.k}, rng);
        const tensor<T> b = random_tensor<T>(s, {batch, z.k, z.n}, rng);
        const reference<T> dense = reference_product<T>(a, b, {batch, z.m, z.n});
        const reference<T> shared = reference_product<T>(a, b.view().slice(0, 0, 1), {batch, z.m, z.n});
        for (const std::size_t gap : {0u, 3u}) {
            // The operands in memory that ends after the last matrix, `gap` elements between
            // matrices; a shared B is one matrix, likewise at the end.
            const std::size_t sa = mk + gap, sb = kn + gap, sc = mn + gap;
            const std::size_t c_size = 1 + (batch - 1) * sc + mn;  // a guard, then the matrices
            const tessera::test::guarded<T> ga((batch - 1) * sa + mk), gb((batch - 1) * sb + kn),
                gb1(kn), gc(c_size);
            ASSERT_NE(ga.data(), nullptr);
            ASSERT_NE(gb.data(), nullptr);
            ASSERT_NE(gb1.data(), nullptr);
            ASSERT_NE(gc.data(), nullptr);
            for (std::size_t q = 0; q < batch; ++q) {
                std::copy_n(a.data() + q * mk, mk, ga.data() + q * sa);
                std::copy_n(b.data() + q * kn, kn, gb.data() + q * sb);
            }
            std::copy_n(b.data(), kn, gb1.data());
            T* const cp = gc.data() + 1;  // one guard element before the first matrix
            const tensor_view<const T> got(cp, {batch, z.m, z.n}, {sz(sc), sz(z.n), 1});
            // Every element of C's memory outside its matrices still holds the guard.
            const auto guards_kept = [&] {
                for (std::size_t e = 0; e < c_size; ++e)
                    if ((e == 0 || (e - 1) % sc >= mn) && gc.data()[e] != T{7}) return false;
                return true;
            };
            for (unsigned isa = 0; isa <= host; ++isa) {
                const std::string what =
                    std::string(tessera::detail::kernel_isa_name(static_cast<kernel_isa>(isa))) +
                    " " + text(a.shape()) + " x " + text(b.shape()) + (gap > 0 ? " strided" : "");
                for (const bool share : {false, true}) {
                    std::fill_n(gc.data(), c_size, T{7});
                    tessera::detail::run_small_batch<T>(
                        static_cast<kernel_isa>(isa), size,
                        {ga.data(), sz(sa), share ? gb1.data() : gb.data(), share ? 0 : sz(sb), cp,
                         sz(sc), batch});
                    const std::string run = what + (share ? " shared b" : "");
                    expect_matches<T>(got, share ? shared : dense, z.k, run);
                    EXPECT_TRUE(guards_kept()) << run << ": wrote outside the matrices";
                }
            }
        }
    }
}

TEST_P(BatchedMatmulTest, EveryKernelVariantTheCpuSupportsMatchesTheReference) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        check_variants<float>(s, rng);
        check_variants<double>(s, rng);
        check_variants<cf>(s, rng);
        check_variants<cd>(s, rng);
    });
}

// White-box: the register-blocked kernel (any shape up to 64 without a fixed-size kernel) for
// every (m, n, k) of the listed sides and every variant this CPU can run, with A read through
// its strides (row-major, and transposed with B shared), B dense (where the AVX-512 variant
// reads a row's last vector whole into the next rows, and masked at the last rows) or with its
// rows n + 2 apart (shared, with A transposed or not, or one per matrix), and C dense (the
// AVX-512 variant's dot products of one or two columns store a block of rows as one vector) or
// with its rows padded, with guard elements after C's rows and after the batch that must
// survive: a block that writes one column or row too many, or a remainder path that skips one,
// fails here. Each batch runs in one call and again as one call a matrix (single products take a
// path of their own); the dense C's values and both runs' must have the bits of the batch in one
// call with C padded.
template <class T>
void check_blocked_shapes(session& s, std::mt19937_64& rng, const std::vector<std::size_t>& ms,
                          const std::vector<std::size_t>& ns, const std::vector<std::size_t>& ks,
                          bool accumulate, T beta) {
    using tessera::detail::kernel_isa;
    const auto host = static_cast<unsigned>(tessera::detail::host_kernel_isa());
    constexpr std::size_t batch = 2, pad = 3;
    const T guard{-7};
    // Not powers of two: the products round, so a different fusing of alpha s + beta c shows.
    const T alpha = accumulate ? T{0.7} : T{1};
    for (const std::size_t m : ms)
        for (const std::size_t n : ns)
            for (const std::size_t k : ks) {
                const tensor<T> a = random_tensor<T>(s, {batch, m, k}, rng);
                const tensor<T> at = random_tensor<T>(s, {batch, k, m}, rng);
                const tensor<T> b = random_tensor<T>(s, {batch, k, n}, rng);
                // B's rows n + 2 apart (the first matrix's shared, or one per matrix): the kernel
                // must step by B's row stride, not by n.
                const tensor<T> bw = random_tensor<T>(s, {batch, k, n + 2}, rng);
                const tensor_view<const T> b1 = bw.view().slice(0, 0, 1).slice(2, 0, n);
                const tensor_view<const T> bp = bw.view().slice(2, 0, n);
                const tensor<T> c0 = random_tensor<T>(s, {batch, m, n}, rng);
                const tensor_view<const T> a_t = at.view().transpose(-1, -2);
                const reference<T> dense = reference_product<T>(a, b, c0.shape());
                const reference<T> transposed = reference_product<T>(a_t, b1, c0.shape());
                const reference<T> padded = reference_product<T>(a, bp, c0.shape());
                const reference<T> shared = reference_product<T>(a, b1, c0.shape());
                // The values of the batch in one call with C padded, which every other run must
                // give bit for bit.
                std::vector<T> padded_bits;
                for (unsigned isa = 0; isa <= host; ++isa)
                    // B dense; A^T, B shared; B padded; B shared (the dot products copy it once)
                    for (const int layout : {0, 1, 2, 3})
                        for (const int pass : {0, 1, 2, 3}) {
                            // C padded, then dense; the batch in one call, then a call a matrix
                            // (single products take a path of their own).
                            const bool dense_c = pass % 2 == 1, single = pass >= 2;
                            const bool trans = layout == 1;
                            const reference<T>& ref = layout == 0   ? dense
                                                      : trans       ? transposed
                                                      : layout == 2 ? padded
                                                                    : shared;
                            // C's rows padded with guard columns and a guard row after each matrix,
                            // or dense with guard elements after the batch (one flat run of
                            // (m + 1) (n + pad) elements per matrix either way, read as [m, n] at
                            // C's strides).
                            const std::size_t row = dense_c ? n : n + pad;
                            const std::size_t matrix = dense_c ? m * n : (m + 1) * (n + pad);
                            tensor<T> c = tessera::full<T>(s, {batch, m + 1, n + pad}, guard);
                            T* const into = c.data();
                            for (std::size_t q = 0; q < batch; ++q)
                                for (std::size_t i = 0; i < m; ++i)
                                    for (std::size_t j = 0; j < n; ++j)
                                        into[q * matrix + i * row + j] = c0(q, i, j);
                            const auto sz = [](std::size_t v) {
                                return static_cast<std::ptrdiff_t>(v);
                            };
                            const T* const a_data = trans ? at.data() : a.data();
                            const std::ptrdiff_t a_rs = trans ? 1 : sz(k), a_cs = trans ? sz(m) : 1;
                            const T* const b_data = layout == 0 ? b.data() : bw.data();
                            const std::ptrdiff_t b_rs = sz(layout == 0 ? n : n + 2);
                            const std::ptrdiff_t b_step = trans || layout == 3 ? 0 : b_rs * sz(k);
                            const tessera::detail::small_gemm_args<T> args{
                                sz(m),      sz(n),  sz(k),      a_data, a_rs, a_cs,
                                sz(m * k),  b_data, b_rs,       b_step, into, sz(row),
                                sz(matrix), batch,  accumulate, alpha,  beta};
                            if (!single)
                                tessera::detail::run_small_gemm<T>(static_cast<kernel_isa>(isa),
                                                                   args);
                            for (std::size_t q = 0; single && q < batch; ++q) {
                                tessera::detail::small_gemm_args<T> one = args;
                                one.a += sz(q) * args.sa;
                                one.b += sz(q) * args.sb;
                                one.c += sz(q) * args.sc;
                                one.count = 1;
                                tessera::detail::run_small_gemm<T>(static_cast<kernel_isa>(isa),
                                                                   one);
                            }
                            const std::string what =
                                std::string(tessera::detail::kernel_isa_name(
                                    static_cast<kernel_isa>(isa))) +
                                " " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                                std::to_string(n) +
                                (trans         ? " a^T, shared b"
                                 : layout == 2 ? " b rows padded"
                                 : layout == 3 ? " shared b, rows padded"
                                               : "") +
                                (dense_c ? " dense c" : "") + (single ? ", a call a matrix" : "") +
                                (accumulate ? " accumulate, beta " + std::to_string(beta) : "");
                            reference<T> want = ref;
                            for (std::size_t e = 0; e < want.value.size(); ++e) {
                                const wide_t<T> old = widen(c0.data()[e]);
                                want.value[e] = widen(alpha) * want.value[e] + widen(beta) * old;
                                want.magnitude[e] = std::abs(widen(alpha)) * want.magnitude[e] +
                                                    std::abs(widen(beta)) * std::abs(old);
                            }
                            const std::array<std::ptrdiff_t, 3> strides{sz(matrix), sz(row), 1};
                            const tensor_view<const T> got(into, tessera::shape{batch, m, n},
                                                           strides);
                            expect_matches<T>(got, want, k, what);
                            std::vector<T> bits;
                            for (std::size_t q = 0; q < batch; ++q)
                                for (std::size_t i = 0; i < m; ++i)
                                    for (std::size_t j = 0; j < n; ++j)
                                        bits.push_back(into[q * matrix + i * row + j]);
                            if (pass == 0)
                                padded_bits = bits;
                            else
                                EXPECT_EQ(std::memcmp(bits.data(), padded_bits.data(),
                                                      bits.size() * sizeof(T)),
                                          0)
                                    << what << ": other bits than the batch in one call with C's "
                                    << "rows padded";
                            for (std::size_t e = 0; e < c.size(); ++e) {
                                const std::size_t q = e / matrix, i = e % matrix / row,
                                                  j = e % matrix % row;
                                if (q >= batch || i >= m || j >= n) {
                                    ASSERT_EQ(into[e], guard) << what << " wrote at element " << e;
                                }
                            }
                        }
            }
}

TEST(BlockedKernelTest, EveryShapeUpToTwentyAndEveryVariantMatchesTheReference) {
    backend be{backend_options{}.with_threads(1)};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        // Written only (the last vector of a row may overlap the one before it), every side
        // 1..20; then on both sides of the block widths and heights up to 20 (AVX-512: blocks of
        // up to 16, 12, 8 or 6 rows by one to four vectors), read and written (each column once)
        // and scaled with beta = 0 (written only again); then the wide panels (three and four
        // vectors of 16 floats, up to eight of 8 doubles, with tails of a quarter, half and all
        // of a vector), the row groups of tall matrices (blocks of unequal height), the largest
        // sides and low blocks of wide rows (every height of a four-vector block).
        std::vector<std::size_t> every(20);
        for (std::size_t i = 0; i < every.size(); ++i) every[i] = i + 1;
        const std::vector<std::size_t> edges = {1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 15, 16, 17, 20};
        const std::vector<std::size_t> tall = {23, 25, 37, 64}, deep = {1, 3, 64},
                                       wide = {21, 24, 25, 31, 33, 36, 37,
                                               40, 47, 48, 49, 55, 58, 64},
                                       narrow = {1, 5, 8, 9, 16}, taller = {23, 25, 35};
        check_blocked_shapes<float>(s, rng, every, every, every, false, 0.0f);
        check_blocked_shapes<double>(s, rng, every, every, every, false, 0.0);
        check_blocked_shapes<float>(s, rng, edges, edges, edges, true, -1.3f);
        check_blocked_shapes<double>(s, rng, edges, edges, edges, true, -1.3);
        check_blocked_shapes<float>(s, rng, edges, edges, edges, true, 0.0f);
        check_blocked_shapes<double>(s, rng, edges, edges, edges, true, 0.0);
        check_blocked_shapes<float>(s, rng, tall, wide, deep, true, -1.3f);
        check_blocked_shapes<double>(s, rng, tall, wide, deep, true, -1.3);
        check_blocked_shapes<float>(s, rng, tall, wide, deep, false, 0.0f);
        check_blocked_shapes<double>(s, rng, tall, wide, deep, false, 0.0);
        check_blocked_shapes<float>(s, rng, taller, narrow, deep, true, -1.3f);
        check_blocked_shapes<double>(s, rng, taller, narrow, deep, true, -1.3);
        // Low blocks of two to four vectors (float rows of 17-64 columns, double 9-32), among
        // them tails whose last row of B is read masked after rows read whole (54 floats, 27
        // doubles: the two-step loop, then a masked step).
        const std::vector<std::size_t> low = {1, 2, 3, 4, 5, 6, 7}, one_deep = {3};
        const std::vector<std::size_t> two_to_four = {12, 16, 21, 24, 26, 27, 28,
                                                      32, 36, 40, 48, 52, 54, 64};
        check_blocked_shapes<float>(s, rng, low, two_to_four, one_deep, true, -1.3f);
        check_blocked_shapes<double>(s, rng, low, two_to_four, one_deep, true, -1.3);
    });
}

// White-box: the blocked kernel's reads of A and B and its writes of C never run past their last
// elements. The AVX-512 variant reads the last vector of B's rows whole where the lanes past a
// row are B's own next rows, and its dot products of one or two columns read a block's rows past
// A's last as the last row again; neither is stored, so only a fault shows an over-read: A, B and
// C end here where an inaccessible page begins, for one product and for a batch of three whose
// matrices lie back to back (where the lanes past one matrix's B are the next one's, and past the
// last are the page). The same products with B's rows n + 2 apart (every such read masked) must
// give the same bits.
template <class T>
void check_accesses_stay_inside(std::mt19937_64& rng) {
    using tessera::detail::kernel_isa;
    const auto host = static_cast<unsigned>(tessera::detail::host_kernel_isa());
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (const std::size_t count : {1u, 3u})
        for (const std::size_t m : {1u, 3u, 6u, 9u})
            for (std::size_t n = 1; n <= tessera::detail::small_gemm_max; ++n)
                for (const std::size_t k : {1u, 2u, 3u, 4u, 5u, 8u, 17u}) {
                    const std::size_t mk = m * k, kn = k * n, mn = m * n;
                    const tessera::test::guarded<T> ga(count * mk), gb(count * kn), gc(count * mn);
                    ASSERT_NE(ga.data(), nullptr);
                    ASSERT_NE(gb.data(), nullptr);
                    ASSERT_NE(gc.data(), nullptr);
                    T* const a = ga.data();
                    T* const b = gb.data();
                    const std::size_t padded_kn = k * (n + 2);
                    std::vector<T> padded(count * padded_kn), dense_c(count * mn),
                        padded_c(count * mn);
                    for (std::size_t q = 0; q < count; ++q)
                        for (std::size_t p = 0; p < k; ++p)
                            for (std::size_t j = 0; j < n; ++j)
                                b[q * kn + p * n + j] = padded[q * padded_kn + p * (n + 2) + j] =
                                    static_cast<T>(dist(rng));
                    for (std::size_t e = 0; e < count * mk; ++e) a[e] = static_cast<T>(dist(rng));
                    const auto sz = [](std::size_t v) { return static_cast<std::ptrdiff_t>(v); };
                    for (unsigned isa = 0; isa <= host; ++isa) {
                        const auto run = [&](const T* from, std::size_t b_rs, std::size_t sb,
                                             T* c) {
                            tessera::detail::run_small_gemm<T>(
                                static_cast<kernel_isa>(isa),
                                {sz(m), sz(n), sz(k), a, sz(k), 1, sz(mk), from, sz(b_rs), sz(sb),
                                 c, sz(n), sz(mn), count, false, T{1}, T{0}});
                        };
                        run(b, n, kn, gc.data());  // C too ends at the inaccessible page
                        std::copy(gc.data(), gc.data() + count * mn, dense_c.begin());
                        run(padded.data(), n + 2, padded_kn, padded_c.data());
                        EXPECT_EQ(
                            std::memcmp(dense_c.data(), padded_c.data(), count * mn * sizeof(T)), 0)
                            << tessera::detail::kernel_isa_name(static_cast<kernel_isa>(isa)) << " "
                            << m << "x" << k << "x" << n << ", " << count << " matrices";
                    }
                }
}

// A, B and C each end where an inaccessible page begins: the kernels read and write inside them
// (a masked store of a vector's upper or lower half faults on this machine's AMD EPYC even where
// the mask leaves the page alone; GCC 12 formed such stores from the tail's narrowing before
// 2026-12-03, and 1 x 21 float rows faulted).
TEST(BlockedKernelTest, AccessesOfAAndBAndCStayInsideThemAndGiveTheBitsOfMaskedReads) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    check_accesses_stay_inside<float>(rng);
    check_accesses_stay_inside<double>(rng);
}

// White-box: each row of C has the bits of that row's product computed alone (m = 1), plain and
// in the accumulate form, whatever block the row falls in and wherever in it: the kernels cut the
// rows by m, and a result that followed the cut (say, a compiler fusing alpha s + beta c one way
// for one row of a block and the other way for the next) would change bits with the shape around
// the row. Three columns or more, and one column below the AVX-512 level (whose dot products run
// each row alone): at the AVX-512 level, products of one or two columns of four rows or more take
// paths of their own whose sums run across k. (Of these shapes, 5x4x3 float takes the outer
// products, C in one vector, which add each element's k products in the panels' order.)
template <class T>
void check_rows_alone(std::mt19937_64& rng) {
    using tessera::detail::kernel_isa;
    const auto host = static_cast<unsigned>(tessera::detail::host_kernel_isa());
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    const auto sz = [](std::size_t v) { return static_cast<std::ptrdiff_t>(v); };
    for (const std::size_t m : {5u, 9u, 13u, 16u, 17u, 25u})
        for (const std::size_t n : {1u, 3u, 5u, 12u, 20u, 28u, 33u, 40u, 56u})
            for (const std::size_t k : {4u, 17u}) {
                std::vector<T> a(m * k), b(k * n), c0(m * n);
                for (T& v : a) v = static_cast<T>(dist(rng));
                for (T& v : b) v = static_cast<T>(dist(rng));
                for (T& v : c0) v = static_cast<T>(dist(rng));
                for (unsigned isa = 0; isa <= host; ++isa)
                    for (const bool accumulate : {false, true}) {
                        if (n == 1 && static_cast<kernel_isa>(isa) == kernel_isa::avx512) continue;
                        const T alpha = accumulate ? T{0.7} : T{1};
                        const T beta = accumulate ? T{-1.3} : T{0};
                        std::vector<T> whole = c0, alone = c0;
                        tessera::detail::run_small_gemm<T>(
                            static_cast<kernel_isa>(isa),
                            {sz(m), sz(n), sz(k), a.data(), sz(k), 1, 0, b.data(), sz(n), 0,
                             whole.data(), sz(n), 0, 1, accumulate, alpha, beta});
                        for (std::size_t i = 0; i < m; ++i)
                            tessera::detail::run_small_gemm<T>(
                                static_cast<kernel_isa>(isa),
                                {1, sz(n), sz(k), a.data() + i * k, sz(k), 1, 0, b.data(), sz(n), 0,
                                 alone.data() + i * n, sz(n), 0, 1, accumulate, alpha, beta});
                        for (std::size_t i = 0; i < m; ++i)
                            EXPECT_EQ(std::memcmp(whole.data() + i * n, alone.data() + i * n,
                                                  n * sizeof(T)),
                                      0)
                                << tessera::detail::kernel_isa_name(static_cast<kernel_isa>(isa))
                                << " " << m << "x" << k << "x" << n << " row " << i
                                << (accumulate ? " (alpha, beta)" : "");
                    }
            }
}

TEST(BlockedKernelTest, EveryRowHasTheBitsOfItsProductAlone) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    check_rows_alone<float>(rng);
    check_rows_alone<double>(rng);
}

// White-box: at the AVX-512 level, a product of one column whose A is dense and whose rows hold
// two or four elements adds each row's products pairwise in lane order, p0 + p1 and (p0 + p1) +
// (p2 + p3), whether its rows fill one vector (the shifted sums) or several (the tree that adds
// two vectors into one a level): the same bits either way. Every m up to a vector of rows; a
// batch of three written, the same in the accumulate form (alpha s rounded on its own, beta c
// fused into the addition), and a planned single product.
template <class T>
void check_pairwise_row_sums(std::mt19937_64& rng) {
    using tessera::detail::kernel_isa;
    constexpr std::size_t lanes = 64 / sizeof(T), count = 3;
    constexpr T alpha = T(1.5), beta = T(-0.5);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (const std::size_t k : {2u, 4u})
        for (std::size_t m = 1; m <= lanes; ++m) {
            std::vector<T> a(count * m * k), b(count * k), c(count * m), old(count * m);
            for (T& e : a) e = static_cast<T>(dist(rng));
            for (T& e : b) e = static_cast<T>(dist(rng));
            for (T& e : old) e = static_cast<T>(dist(rng));
            const auto sz = [](std::size_t v) { return static_cast<std::ptrdiff_t>(v); };
            const auto row_sum = [&](std::size_t q, std::size_t i) {
                volatile T p[4];  // each product rounded on its own, never fused into a sum
                for (std::size_t j = 0; j < k; ++j) p[j] = a[(q * m + i) * k + j] * b[q * k + j];
                return k == 2 ? T(p[0] + p[1]) : T((p[0] + p[1]) + (p[2] + p[3]));
            };
            const auto expect_bits = [&](const char* form, std::size_t matrices, bool scaled) {
                for (std::size_t q = 0; q < matrices; ++q)
                    for (std::size_t i = 0; i < m; ++i) {
                        volatile T scaled_sum = alpha * row_sum(q, i);
                        const T expected = scaled ? std::fma(beta, old[q * m + i], scaled_sum)
                                                  : row_sum(q, i);
                        EXPECT_EQ(std::memcmp(&c[q * m + i], &expected, sizeof(T)), 0)
                            << form << " " << m << "x" << k << "x1, matrix " << q << " row " << i
                            << ": " << c[q * m + i] << " against " << expected;
                    }
            };
            const auto args = [&](std::size_t matrices, bool accumulate) {
                return tessera::detail::small_gemm_args<T>{
                    sz(m), 1, sz(k), a.data(), sz(k), 1, sz(m * k), b.data(), 1, sz(k),
                    c.data(), 1, sz(m), matrices, accumulate, accumulate ? alpha : T{1},
                    accumulate ? beta : T{0}};
            };
            tessera::detail::run_small_gemm<T>(kernel_isa::avx512, args(count, false));
            expect_bits("batch", count, false);
            c = old;
            tessera::detail::run_small_gemm<T>(kernel_isa::avx512, args(count, true));
            expect_bits("batch, alpha and beta", count, true);
            const auto single = args(1, false);
            const auto plan = tessera::detail::plan_small_gemm<T>(kernel_isa::avx512, single);
            c = old;
            plan.run(single, plan);
            expect_bits("single product", 1, false);
        }
}

TEST(BlockedKernelTest, OneColumnRowsOfTwoAndFourElementsAddTheirProductsPairwise) {
    if (tessera::detail::host_kernel_isa() != tessera::detail::kernel_isa::avx512)
        GTEST_SKIP() << "the AVX-512 level's kernels; this CPU runs "
                     << tessera::detail::matmul_kernel_isa();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    check_pairwise_row_sums<float>(rng);
    check_pairwise_row_sums<double>(rng);
}

// White-box: at the AVX2 and baseline levels, a product of one column whose A has contiguous rows
// and whose k fills a vector (AVX2: 8 floats, 4 doubles; the baseline: 4, 2) takes each row's dot
// product a vector of k at a time, each lane a chain of multiply-adds, adds the lanes by halves
// (lane l gains lane l + W / 2, then l + W / 4, ...), and adds the elements past the last whole
// vector to that sum one by one: the same for every row wherever it falls among the blocks of
// eight rows, and whether B's column is dense, strided (copied) or shared by the batch (copied
// once). The multiply-adds are fused where the level has FMA (AVX2; the baseline where the build's
// target has it), else each product is rounded before it is added. A batch of three written, the
// same in the accumulate form, both against these sums worked out here.
template <class T>
void check_dot_sums(std::mt19937_64& rng, tessera::detail::kernel_isa isa) {
    using tessera::detail::kernel_isa;
    const std::size_t W = (isa == kernel_isa::avx2 ? 32 : 16) / sizeof(T), count = 3;
#if defined(__FMA__)
    const bool fused = true;
#else
    const bool fused = isa == kernel_isa::avx2;
#endif
    // beta c is exact, so it is the same fused or not: the library leaves that fusing to the
    // compiler's contraction (from -O2), and the suite also runs at -O1.
    constexpr T alpha = T(1.5), beta = T(-0.5);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    const auto sz = [](std::size_t v) { return static_cast<std::ptrdiff_t>(v); };
    const auto multiply_add = [fused](T x, T y, T sum) {
        if (fused) return std::fma(x, y, sum);
        volatile T product = x * y;  // rounded on its own
        return T(sum + product);
    };
    for (const std::size_t k : {W, W + 1, 2 * W + 3, std::size_t{64}})
        for (std::size_t m = 1; m <= 9; ++m)
            for (const std::size_t b_rs : {1u, 3u})
                for (const bool shared : {false, true}) {
                    const std::size_t sb = shared ? 0 : k * b_rs;
                    std::vector<T> a(count * m * k), b(count * k * b_rs), c(count * m),
                        old(count * m);
                    for (T& e : a) e = static_cast<T>(dist(rng));
                    for (T& e : b) e = static_cast<T>(dist(rng));
                    for (T& e : old) e = static_cast<T>(dist(rng));
                    const auto row_sum = [&](std::size_t q, std::size_t i) {
                        const T* const row = a.data() + (q * m + i) * k;
                        const auto column = [&](std::size_t p) { return b[q * sb + p * b_rs]; };
                        std::vector<T> lane(W, T{0});
                        std::size_t p = 0;
                        for (; p + W <= k; p += W)
                            for (std::size_t l = 0; l < W; ++l)
                                lane[l] = multiply_add(row[p + l], column(p + l), lane[l]);
                        for (std::size_t half = W / 2; half >= 1; half /= 2)
                            for (std::size_t l = 0; l < half; ++l)
                                lane[l] = lane[l] + lane[l + half];
                        T sum = lane[0];
                        for (; p < k; ++p) sum = multiply_add(row[p], column(p), sum);
                        return sum;
                    };
                    const auto run = [&](bool accumulate) {
                        tessera::detail::run_small_gemm<T>(
                            isa, {sz(m), 1, sz(k), a.data(), sz(k), 1, sz(m * k), b.data(),
                                  sz(b_rs), sz(sb), c.data(), 1, sz(m), count, accumulate,
                                  accumulate ? alpha : T{1}, accumulate ? beta : T{0}});
                    };
                    for (const bool accumulate : {false, true}) {
                        c = old;
                        run(accumulate);
                        for (std::size_t q = 0; q < count; ++q)
                            for (std::size_t i = 0; i < m; ++i) {
                                volatile T scaled = alpha * row_sum(q, i);  // rounded on its own
                                const T expected = !accumulate ? row_sum(q, i)
                                                   : fused ? std::fma(beta, old[q * m + i], scaled)
                                                           : T(scaled + T(beta * old[q * m + i]));
                                EXPECT_EQ(std::memcmp(&c[q * m + i], &expected, sizeof(T)), 0)
                                    << tessera::detail::kernel_isa_name(isa) << " "
                                    << (accumulate ? "alpha and beta, " : "") << m << "x" << k
                                    << "x1, B's rows " << b_rs << " apart"
                                    << (shared ? ", shared" : "") << ", matrix " << q << " row "
                                    << i << ": " << c[q * m + i] << " against " << expected;
                            }
                    }
                }
}

TEST(BlockedKernelTest, OneColumnBelowAvx512SumsLanesByHalvesThenTheElementsLeft) {
    using tessera::detail::kernel_isa;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    for (const kernel_isa isa : {kernel_isa::baseline, kernel_isa::avx2}) {
        if (isa > tessera::detail::host_kernel_isa()) continue;
        check_dot_sums<float>(rng, isa);
        check_dot_sums<double>(rng, isa);
    }
}

TEST(BatchedMatmulKernelTest, ReportsTheVariantTheCpuSupports) {
    const std::string isa = tessera::detail::matmul_kernel_isa();
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    EXPECT_EQ(isa, avx512 ? "avx512" : avx2 ? "avx2" : "default");
}

template <class T>
void check_batched_strided(session& s, std::mt19937_64& rng, std::size_t n) {
    // a: every other matrix of a batch, each transposed; b: broadcast over a middle axis of 1;
    // out: a permuted view (batch axes swapped) whose matrices are transposed.
    const tensor<T> aw = random_tensor<T>(s, {8, n, n}, rng);
    const tensor_view<const T> a = aw.view().slice(0, 0, tessera::slice_end, 2).transpose(-1, -2);  // [4, n, n]
    const tensor<T> b = random_tensor<T>(s, {3, 1, n, n}, rng);
    const shape result{3, 4, n, n};
    const reference<T> ref = reference_product<T>(a, b, result);
    const tensor<T> c = tessera::batched_matmul(s, a, b);
    expect_matches<T>(c, ref, n, "strided a, n=" + std::to_string(n));
    tensor<T> store = tessera::zeros<T>(s, {4, 3, n, n});
    const tensor_view<T> out = store.view().permute({1, 0, 3, 2});
    tessera::batched_matmul(s, a, b, out);
    expect_matches<T>(out, ref, n, "strided out, n=" + std::to_string(n));
}

TEST_P(BatchedMatmulTest, ReadsAndWritesStridedBroadcastAndTransposedBatches) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        for (std::size_t n : {2u, 3u, 4u, 5u, 7u, 8u, 40u}) {
            check_batched_strided<float>(s, rng, n);
            check_batched_strided<double>(s, rng, n);
            check_batched_strided<cf>(s, rng, n);
        }
    });
}

// A single small product takes a short way to the kernels (matmul_2d); it must pick the kernel
// the batch machinery picks, so the same bits come out of matmul, batched_matmul with one matrix
// and batched_matmul among others, and the accumulate form with alpha 1 and beta 0, each in one
// inline dispatch; float and double (4x4x1 float has its own kernel at the AVX-512 level).
template <class T>
void check_one_small_product(backend& be, std::mt19937_64& rng) {
    for (const mkn& z : {mkn{5, 5, 5}, mkn{6, 6, 6}, mkn{7, 7, 7}, mkn{8, 8, 8}, mkn{12, 12, 12},
                         mkn{16, 16, 16}, mkn{32, 32, 32}, mkn{6, 6, 1}, mkn{3, 5, 2}, mkn{4, 4, 1},
                         mkn{64, 64, 64}, mkn{1, 64, 1}}) {
        tensor<T> a, b, batched, one, single, acc, into, at, batched_t, single_t, into_t;
        be.run([&](session& s) {
            a = random_tensor<T>(s, {3, z.m, z.k}, rng);
            b = random_tensor<T>(s, {3, z.k, z.n}, rng);
            batched = tessera::batched_matmul(s, a, b);
            one = tessera::batched_matmul(s, a.view().slice(0, 1, 2), b.view().slice(0, 1, 2));
            acc = tessera::zeros<T>(s, {z.m, z.n});
            into = tessera::zeros<T>(s, {z.m, z.n});
            into_t = tessera::zeros<T>(s, {z.m, z.n});
            // A read through its strides (transposed): a fixed-size kernel takes a dense copy on
            // both ways, the blocked kernel reads it in place on both.
            at = random_tensor<T>(s, {3, z.k, z.m}, rng);
            batched_t = tessera::batched_matmul(s, at.view().transpose(-1, -2), b);
            single_t = tessera::matmul(s, at.view().slice(0, 1, 2).squeeze(0).transpose(),
                                       b.view().slice(0, 1, 2).squeeze(0));
            tessera::matmul(s, at.view().slice(0, 1, 2).squeeze(0).transpose(),
                            b.view().slice(0, 1, 2).squeeze(0), into_t.view());
        });
        const tensor_view<const T> a1 = a.view().slice(0, 1, 2).squeeze(0);
        const tensor_view<const T> b1 = b.view().slice(0, 1, 2).squeeze(0);
        const tessera::stats before = be.stats();
        be.run([&](session& s) {
            single = tessera::matmul(s, a1, b1);
            tessera::matmul(s, a1, b1, acc, T{1}, T{0});
            tessera::matmul(s, a1, b1, into.view());
        });
        const tessera::stats d = be.stats() - before;
        const std::string what = std::string(sizeof(T) == 4 ? "float " : "double ") +
                                 text(a1.shape()) + " x " + text(b1.shape());
        const std::size_t bytes = z.m * z.n * sizeof(T);
        EXPECT_EQ(std::memcmp(single.data(), batched.data() + z.m * z.n, bytes), 0) << what;
        EXPECT_EQ(std::memcmp(single.data(), one.data(), bytes), 0) << what;
        EXPECT_EQ(std::memcmp(single.data(), acc.data(), bytes), 0) << what;
        EXPECT_EQ(std::memcmp(single.data(), into.data(), bytes), 0) << what << ", out form";
        EXPECT_EQ(std::memcmp(single_t.data(), batched_t.data() + z.m * z.n, bytes), 0)
            << what << ", a transposed";
        EXPECT_EQ(std::memcmp(into_t.data(), batched_t.data() + z.m * z.n, bytes), 0)
            << what << ", a transposed, out form";
        EXPECT_EQ(d.inline_dispatches, 3u) << what;
        EXPECT_EQ(d.parallel_dispatches, 0u) << what;
    }
}

TEST_P(BatchedMatmulTest, OneSmallProductGivesTheBitsOfTheBatchedPath) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    check_one_small_product<float>(be, rng);
    check_one_small_product<double>(be, rng);
}

// Through the public API: shapes on both sides of every block boundary of every level (rows 4,
// 6, 8; columns 2, 4, 8, 16, 32), the largest the kernel takes and the smallest it does not,
// with transposed, stepped, reversed and broadcast operands and transposed or stepped outputs.
TEST_P(BatchedMatmulTest, BlockedKernelShapesReadAndWriteEveryLayout) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        for (const mkn& z : {mkn{6, 6, 1}, mkn{3, 2, 5}, mkn{4, 1, 4}, mkn{10, 10, 10}, mkn{12, 12, 12},
                             mkn{16, 16, 64}, mkn{20, 20, 20}, mkn{24, 24, 24}, mkn{25, 31, 33},
                             mkn{48, 48, 48}, mkn{64, 64, 64}, mkn{64, 65, 64}, mkn{1, 64, 64}}) {
            check_strided<float>(s, rng, z.m, z.k, z.n);
            check_strided<double>(s, rng, z.m, z.k, z.n);
            check_accumulate<float>(s, rng, z.m, z.k, z.n, 0.5f, -1.25f);
            check_accumulate<double>(s, rng, z.m, z.k, z.n, -1.5, 0.0);
        }
        for (std::size_t n : {7u, 10u, 12u, 24u, 64u}) {
            check_batched_strided<float>(s, rng, n);
            check_batched_strided<double>(s, rng, n);
        }
        // B with reversed rows (a negative row stride, unit column stride) and B's rows taken
        // from a wider matrix: both read in place.
        for (const mkn& z : {mkn{5, 7, 9}, mkn{12, 12, 12}, mkn{20, 33, 17}}) {
            const tensor<double> a = random_tensor<double>(s, {3, z.m, z.k}, rng);
            const tensor<double> bw = random_tensor<double>(s, {3, z.k, z.n + 5}, rng);
            for (const tensor_view<const double>& b :
                 {bw.view().slice(2, 0, z.n).flip(1), bw.view().slice(2, 2, 2 + z.n)}) {
                const tensor<double> c = tessera::batched_matmul(s, a, b);
                expect_matches<double>(c, reference_product<double>(a, b, c.shape()), z.k,
                                       "b rows reversed or from a wider matrix " + text(b.shape()));
            }
        }
    });
}

TEST_P(BatchedMatmulTest, EmptyBatchesAndEmptyMatricesGiveEmptyResults) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const tensor<float> none = tessera::empty<float>(s, {0, 4, 4});
        const tensor<float> b = tessera::full<float>(s, {4, 4}, 1.0f);
        const tensor<float> c = tessera::batched_matmul(s, none, b);
        EXPECT_EQ(c.shape(), (shape{0, 4, 4}));
        EXPECT_EQ(c.size(), 0u);
        tensor<float> out = tessera::empty<float>(s, {2, 0, 4, 4});
        tessera::batched_matmul(s, tessera::empty<float>(s, {2, 1, 4, 4}), tessera::empty<float>(s, {0, 4, 4}), out);
        const tensor<float> k0 = tessera::batched_matmul(s, tessera::empty<float>(s, {3, 2, 0}),
                                                         tessera::empty<float>(s, {3, 0, 5}));
        EXPECT_EQ(k0.shape(), (shape{3, 2, 5}));
        for (float v : k0.values()) EXPECT_EQ(v, 0.0f);
    });
    EXPECT_EQ(be.stats().parallel_dispatches, 0u);
}

TEST_P(BatchedMatmulTest, BadInputThrowsBeforeWriting) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const tensor<double> a = tessera::full<double>(s, {2, 3, 4}, 1.0);
        tensor<double> out = tessera::full<double>(s, {2, 3, 5}, -1.0);
        expect_shape_error([&] { tessera::batched_matmul(s, a, tessera::full<double>(s, {2, 5, 5}, 1.0), out); },
                           "batched_matmul: the inner dimensions of a [2,3,4] and b [2,5,5] differ");
        expect_shape_error([&] { tessera::batched_matmul(s, a, tessera::full<double>(s, {3, 4, 5}, 1.0), out); },
                           "batched_matmul: the batch axes of a [2,3,4] and b [3,4,5] do not broadcast");
        expect_shape_error([&] { tessera::batched_matmul(s, tessera::full<double>(s, {4}, 1.0), a); },
                           "batched_matmul: a must have rank >= 2 but has shape [4]");
        expect_shape_error([&] { tessera::batched_matmul(s, a, tessera::full<double>(s, {4}, 1.0)); },
                           "batched_matmul: b must have rank >= 2 but has shape [4]");
        const tensor<double> b = tessera::full<double>(s, {4, 5}, 1.0);
        tensor<double> wrong = tessera::full<double>(s, {3, 3, 5}, -1.0);
        expect_shape_error([&] { tessera::batched_matmul(s, a, b, wrong); },
                           "batched_matmul: out has shape [3,3,5] but the result has shape [2,3,5]");
        for (double x : out.values()) ASSERT_EQ(x, -1.0);
        for (double x : wrong.values()) ASSERT_EQ(x, -1.0);
        tensor<double> sq = tessera::full<double>(s, {2, 4, 4}, 1.0);
        EXPECT_THROW(tessera::batched_matmul(s, sq, sq.view().slice(0, 0, 1), sq), tessera::alias_error);
        // Disjoint matrices of one tensor are fine.
        tessera::batched_matmul(s, sq.view().slice(0, 1, 2), sq.view().slice(0, 1, 2), sq.view().slice(0, 0, 1));
        for (std::size_t i = 0; i < 16; ++i) ASSERT_EQ(sq.values()[i], 4.0);
    });
}

TEST_P(BatchedMatmulTest, WarmSmallMatrixLoopMakesNoHeapAllocations) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        std::mt19937_64 rng(fresh_seed());
        const tensor<float> a = random_tensor<float>(s, {256, 4, 4}, rng);
        const tensor<float> b = random_tensor<float>(s, {256, 4, 4}, rng);
        const tensor<float> shared = random_tensor<float>(s, {4, 4}, rng);
        tensor<float> c = tessera::empty<float>(s, {256, 4, 4});
        const tensor<double> a7 = random_tensor<double>(s, {64, 7, 7}, rng);
        tensor<double> c7 = tessera::empty<double>(s, {64, 7, 7});
        const auto step = [&] {
            tessera::batched_matmul(s, a, b, c);
            tessera::batched_matmul(s, a, shared, c);
            tessera::batched_matmul(s, a.view().transpose(-1, -2), b, c);  // copied into the workspace
            tessera::batched_matmul(s, a7, a7, c7);
        };
        step();
        const tessera::test::allocation_scope allocations;
        for (int i = 0; i < 100; ++i) step();
        EXPECT_EQ(allocations.count(), 0u);
    });
}

TEST_P(BatchedMatmulTest, SmallBatchRunsInlineAndLargeBatchDispatchesOnceInParallel) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    be.run([](session& s) {
        const tensor<float> a = tessera::full<float>(s, {16, 4, 4}, 1.0f);
        tensor<float> c = tessera::empty<float>(s, {16, 4, 4});
        for (int i = 0; i < 10; ++i) tessera::batched_matmul(s, a, a, c);
    });
    EXPECT_EQ(be.stats().parallel_dispatches, 0u);
    EXPECT_EQ(be.stats().inline_dispatches, 10u);

    // 100,000 4x4 products are 6.4M multiply-adds, far above the grain.
    const tessera::stats before = be.stats();
    be.run([&](session& s) {
        std::mt19937_64 rng(fresh_seed());
        const tensor<float> a = random_tensor<float>(s, {100000, 4, 4}, rng);
        const tensor<float> b = random_tensor<float>(s, {4, 4}, rng);
        const tensor<float> c = tessera::batched_matmul(s, a, b);
        const tensor_view<const float> tail = c.view().slice(0, 99990);
        expect_matches<float>(tail, reference_product<float>(a.view().slice(0, 99990), b, tail.shape()), 4,
                              "last matrices of 100000");
    });
    const tessera::stats d = be.stats() - before;
    EXPECT_EQ(d.parallel_dispatches, threads > 1 ? 1u : 0u);
    EXPECT_EQ(d.inline_dispatches, threads > 1 ? 0u : 1u);
}

INSTANTIATE_TEST_SUITE_P(Threads, BatchedMatmulTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// --- tensordot, dot, vdot, outer --------------------------------------------------------------

class ContractionTest : public ::testing::TestWithParam<int> {};

TEST_P(ContractionTest, TensordotMatchesLoopsOverNamedAxisPairs) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        const tensor<double> a = random_tensor<double>(s, {3, 4, 5}, rng);
        const tensor<double> b = random_tensor<double>(s, {5, 3, 6}, rng);
        // Contract a's axes 0 and 2 with b's axes 1 and 0 (not a contiguous block of either).
        const tensor<double> c = tessera::tensordot(s, a, b, {0, -1}, {1, 0});
        ASSERT_EQ(c.shape(), (shape{4, 6}));
        for (std::size_t j = 0; j < 4; ++j)
            for (std::size_t l = 0; l < 6; ++l) {
                double want = 0, mag = 0;
                for (std::size_t i = 0; i < 3; ++i)
                    for (std::size_t p = 0; p < 5; ++p) {
                        want += a(i, j, p) * b(p, i, l);
                        mag += std::abs(a(i, j, p) * b(p, i, l));
                    }
                ASSERT_NEAR(c(j, l), want, 40 * epsilon_of<double>() * mag) << j << "," << l;
            }
        // No axes: the outer product, shape a + b.
        const tensor<double> o = tessera::tensordot(s, a, b, {}, {});
        ASSERT_EQ(o.shape(), (shape{3, 4, 5, 5, 3, 6}));
        EXPECT_DOUBLE_EQ(o(2, 1, 3, 4, 0, 5), a(2, 1, 3) * b(4, 0, 5));
        // Into a transposed out; complex operands.
        const tensor<cf> x = random_tensor<cf>(s, {2, 3, 4}, rng);
        const tensor<cf> y = random_tensor<cf>(s, {4, 3, 5}, rng);
        tensor<cf> store = tessera::zeros<cf>(s, {5, 2});
        const std::array<std::ptrdiff_t, 2> ax{1, 2}, ay{1, 0};
        tessera::tensordot(s, x, y, ax, ay, store.view().transpose());
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t l = 0; l < 5; ++l) {
                cd want{};
                double mag = 0;
                for (std::size_t j = 0; j < 3; ++j)
                    for (std::size_t p = 0; p < 4; ++p) {
                        want += widen(x(i, j, p)) * widen(y(p, j, l));
                        mag += std::abs(widen(x(i, j, p))) * std::abs(widen(y(p, j, l)));
                    }
                ASSERT_LE(std::abs(widen(store(l, i)) - want), 40 * epsilon_of<cf>() * mag) << i << "," << l;
            }
    });
}

TEST_P(ContractionTest, DotFollowsNumPyForEveryRankPair) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        const tensor<double> v = random_tensor<double>(s, {7}, rng);
        const tensor<double> w = random_tensor<double>(s, {7}, rng);
        const tensor<double> m = random_tensor<double>(s, {5, 7}, rng);
        const tensor<double> mt = random_tensor<double>(s, {7, 4}, rng);
        const tensor<double> t3 = random_tensor<double>(s, {2, 7, 3}, rng);

        const tensor<double> vv = tessera::dot(s, v, w);
        ASSERT_EQ(vv.rank(), 0u);
        double want = 0;
        for (std::size_t i = 0; i < 7; ++i) want += v(i) * w(i);
        EXPECT_NEAR(vv.values()[0], want, 1e-14);

        const tensor<double> mv = tessera::dot(s, m, v);  // [5]
        ASSERT_EQ(mv.shape(), shape{5});
        for (std::size_t i = 0; i < 5; ++i) {
            double x = 0;
            for (std::size_t p = 0; p < 7; ++p) x += m(i, p) * v(p);
            EXPECT_NEAR(mv(i), x, 1e-14);
        }
        const tensor<double> vm = tessera::dot(s, v, mt);  // [4]
        ASSERT_EQ(vm.shape(), shape{4});
        for (std::size_t j = 0; j < 4; ++j) {
            double x = 0;
            for (std::size_t p = 0; p < 7; ++p) x += v(p) * mt(p, j);
            EXPECT_NEAR(vm(j), x, 1e-14);
        }
        const tensor<double> mm = tessera::dot(s, m, mt);  // [5, 4]
        expect_matches<double>(mm, reference_product<double>(m, mt, {5, 4}), 7, "dot 2-D");
        const tensor<double> m3 = tessera::dot(s, m, t3);  // [5, 2, 3]: sum over m's last, t3's -2
        ASSERT_EQ(m3.shape(), (shape{5, 2, 3}));
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t k = 0; k < 2; ++k)
                for (std::size_t l = 0; l < 3; ++l) {
                    double x = 0;
                    for (std::size_t p = 0; p < 7; ++p) x += m(i, p) * t3(k, p, l);
                    EXPECT_NEAR(m3(i, k, l), x, 1e-14);
                }
        tensor<double> scalar = tessera::zeros<double>(s, shape{});
        tessera::dot(s, v, w, scalar);
        EXPECT_NEAR(scalar.values()[0], want, 1e-14);

        expect_shape_error([&] { tessera::dot(s, v, tessera::zeros<double>(s, {6})); },
                           "dot: the inner dimensions of a [7] and b [6] differ");
        expect_shape_error([&] { tessera::dot(s, m, m); }, "dot: the inner dimensions of a [5,7] and b [5,7] differ");
        expect_shape_error([&] { tessera::dot(s, tessera::zeros<double>(s, shape{}), v); },
                           "dot: a must have rank >= 1 but has shape []");
    });
}

TEST_P(ContractionTest, VdotConjugatesAndFlattensAndOuterFlattens) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        const tensor<cd> a = random_tensor<cd>(s, {3, 4}, rng);
        const tensor<cd> b = random_tensor<cd>(s, {4, 3}, rng);
        // b.transpose() is not contiguous: it is flattened in its own row-major order.
        const cd got = tessera::vdot(s, a, b.view().transpose());
        cd want{};
        for (std::size_t i = 0; i < 3; ++i)
            for (std::size_t j = 0; j < 4; ++j) want += std::conj(a(i, j)) * b(j, i);
        EXPECT_LE(std::abs(got - want), 1e-13);
        const cd flat = tessera::vdot(s, a, b);  // [3,4] and [4,3]: 12 elements each
        cd want_flat{};
        for (std::size_t i = 0; i < 12; ++i) want_flat += std::conj(a.values()[i]) * b.values()[i];
        EXPECT_LE(std::abs(flat - want_flat), 1e-13);
        expect_shape_error([&] { static_cast<void>(tessera::vdot(s, a, tessera::zeros<cd>(s, {5}))); },
                           "vdot: a [3,4] has 12 elements but b [5] has 5");

        // A long vdot is split into blocks; the sum does not depend on the thread count.
        const tensor<double> x = random_tensor<double>(s, {300001}, rng);
        double wx = 0;
        for (double v : x.values()) wx += v * v;
        EXPECT_NEAR(tessera::vdot(s, x, x), wx, 1e-12 * wx);

        const tensor<float> u = random_tensor<float>(s, {2, 3}, rng);
        const tensor<float> v = random_tensor<float>(s, {9}, rng);
        const tensor<float> o = tessera::outer(s, u, v.view().flip(0).slice(0, 0, tessera::slice_end, 2));
        ASSERT_EQ(o.shape(), (shape{6, 5}));
        for (std::size_t i = 0; i < 6; ++i)
            for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(o(i, j), u.values()[i] * v(8 - 2 * j));
        tensor<float> ot = tessera::zeros<float>(s, {5, 6});
        tessera::outer(s, u, v.view().flip(0).slice(0, 0, tessera::slice_end, 2), ot.view().transpose());
        for (std::size_t i = 0; i < 6; ++i)
            for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(ot(j, i), o(i, j));
    });
}

TEST_P(ContractionTest, TensordotRejectsBadAxes) {
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) {
        const tensor<float> a = tessera::zeros<float>(s, {2, 3, 4});
        const tensor<float> b = tessera::zeros<float>(s, {4, 3});
        expect_shape_error([&] { tessera::tensordot(s, a, b, {2}, {0, 1}); },
                           "tensordot: 1 axes given for a and 2 for b; they must pair up, at most one per axis");
        expect_shape_error([&] { tessera::tensordot(s, a, b, {1, 1}, {1, 1}); },
                           "tensordot: axis 1 appears more than once");
        expect_shape_error([&] { tessera::tensordot(s, a, b, {0}, {0}); },
                           "tensordot: axis 0 of a [2,3,4] and axis 0 of b [4,3] differ in extent");
        expect_shape_error([&] { tessera::tensordot(s, a, b, {3}, {0}); },
                           "tensordot: axis 3 is out of range for rank 3");
        tensor<float> out = tessera::full<float>(s, {2, 4}, -1.0f);
        expect_shape_error([&] {
            const std::array<std::ptrdiff_t, 1> x{2}, y{0};
            tessera::tensordot(s, a, b, x, y, out);
        }, "tensordot: out has shape [2,4] but the result has shape [2,3,3]");
        for (float v : out.values()) ASSERT_EQ(v, -1.0f);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, ContractionTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// Products give the same bits whatever the backend's thread count and grain: their work is split
// by the shapes alone (docs/reliability.md). The products below sit on both sides of every
// tiling decision (src/matmul_engine.hpp: tiled from m n k = 2^19 in batches of fewer than 64,
// about one tile per 2^22 multiply-adds, sides of at least 64, at most about 64 items): one
// matrix just below and at the size that is tiled, tiles limited by the smallest tile side,
// sides that are not multiples of the 16-row rounding, batches of 63 and 64 tiled-size
// matrices, a short batch of tiled ones, the same through tensordot and einsum, and the blocked
// sums of dot and vdot of two vectors.
template <class T>
std::vector<std::vector<T>> products_on(backend& be, std::uint64_t seed) {
    return be.run([&](session& s) {
        std::mt19937_64 rng(seed);
        std::vector<std::vector<T>> results;
        const auto keep = [&](const tensor<T>& c) {
            results.emplace_back(c.data(), c.data() + c.size());
        };
        const std::array<std::array<std::size_t, 3>, 9> sizes{{{127, 64, 64},
                                                               {128, 64, 64},
                                                               {256, 256, 256},
                                                               {520, 130, 300},
                                                               {64, 1000, 200},
                                                               {1000, 64, 150},
                                                               {333, 257, 129},
                                                               {256, 256, 2048},
                                                               {96, 640, 1500}}};
        for (const auto& [m, n, k] : sizes) {
            const tensor<T> a = random_tensor<T>(s, {m, k}, rng);
            const tensor<T> b = random_tensor<T>(s, {k, n}, rng);
            keep(tessera::matmul(s, a, b));
        }
        const tensor<T> a2 = random_tensor<T>(s, {2, 256, 256}, rng);
        const tensor<T> b2 = random_tensor<T>(s, {256, 256}, rng);  // broadcast over the batch
        keep(tessera::batched_matmul(s, a2, b2));
        for (const std::size_t count : {std::size_t{63}, std::size_t{64}}) {
            const tensor<T> a = random_tensor<T>(s, {count, 128, 64}, rng);
            const tensor<T> b = random_tensor<T>(s, {count, 64, 64}, rng);
            keep(tessera::batched_matmul(s, a, b));
        }
        const tensor<T> a8 = random_tensor<T>(s, {8, 128, 64}, rng);
        const tensor<T> b8 = random_tensor<T>(s, {8, 64, 64}, rng);
        keep(tessera::batched_matmul(s, a8, b8));
        // Long batches of one and two columns (the AVX-512 level's dot products), the second with
        // one B shared by the batch.
        const tensor<T> a1 = random_tensor<T>(s, {1000, 6, 6}, rng);
        const tensor<T> b1 = random_tensor<T>(s, {1000, 6, 1}, rng);
        keep(tessera::batched_matmul(s, a1, b1));
        const tensor<T> a20 = random_tensor<T>(s, {500, 20, 20}, rng);
        const tensor<T> b20 = random_tensor<T>(s, {20, 2}, rng);
        keep(tessera::batched_matmul(s, a20, b20));
        const tensor<T> x = random_tensor<T>(s, {16, 16, 256}, rng);
        const tensor<T> y = random_tensor<T>(s, {256, 16, 16}, rng);
        keep(tessera::tensordot(s, x, y, {2}, {0}));
        keep(tessera::einsum(s, "ijk,klm->ijlm", x, y));
        const tensor<T> u = random_tensor<T>(s, {100'000}, rng);
        const tensor<T> v = random_tensor<T>(s, {100'000}, rng);
        results.push_back({tessera::vdot(s, u, v)});
        keep(tessera::dot(s, u, v));
        return results;
    });
}

template <class T>
void expect_same_bits_at_every_thread_count() {
    const std::uint64_t seed = fresh_seed();
    backend reference_backend{backend_options{}.with_threads(1)};
    const std::vector<std::vector<T>> reference = products_on<T>(reference_backend, seed);
    for (const int threads : {1, 2, 3, 4}) {
        for (const std::size_t grain : {std::size_t{1}, std::size_t{1} << 15, std::size_t{1} << 40}) {
            backend be{backend_options{}.with_threads(threads).with_grain(grain)};
            const std::vector<std::vector<T>> got = products_on<T>(be, seed);
            ASSERT_EQ(got.size(), reference.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(got[i].size(), reference[i].size());
                const bool same = std::memcmp(got[i].data(), reference[i].data(),
                                              got[i].size() * sizeof(T)) == 0;
                EXPECT_TRUE(same) << "product " << i << " differs from the one-thread result with "
                                  << threads << " threads, grain " << grain;
            }
        }
    }
}

TEST(ProductBitsTest, FloatProductsAreTheSameAtEveryThreadCountAndGrain) {
    expect_same_bits_at_every_thread_count<float>();
}

TEST(ProductBitsTest, DoubleProductsAreTheSameAtEveryThreadCountAndGrain) {
    expect_same_bits_at_every_thread_count<double>();
}

}  // namespace
