// The Eigen bridge: view_of, as_eigen, as_eigen_vector and from_eigen, on random data of several
// element types and layouts, against element-by-element reads and float64 reference loops.
#include "support/backends.hpp"

#include <tessera/eigen.hpp>
#include <tessera/tessera.hpp>

#include <Eigen/Core>
#include <Eigen/LU>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;

template <class T>
using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using row_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// ---- compile-time facts: element constness follows the object, temporaries do not compile -------

static_assert(std::is_same_v<decltype(tessera::view_of(std::declval<Eigen::MatrixXd&>())),
                             tensor_view<double>>);
static_assert(std::is_same_v<decltype(tessera::view_of(std::declval<const Eigen::MatrixXd&>())),
                             tensor_view<const double>>);
static_assert(std::is_same_v<decltype(tessera::view_of(
                                 std::declval<Eigen::Map<const Eigen::MatrixXf>&>())),
                             tensor_view<const float>>);
static_assert(std::is_same_v<decltype(tessera::view_of(
                                 std::declval<Eigen::Ref<Eigen::MatrixXf>&>())),
                             tensor_view<float>>);
static_assert(std::is_same_v<decltype(tessera::as_eigen(std::declval<tensor_view<const float>>())),
                             tessera::eigen_map<const float>>);
template <class E>
constexpr bool viewable = requires(E&& e) { tessera::view_of(std::forward<E>(e)); };
static_assert(viewable<Eigen::MatrixXd&>);
static_assert(!viewable<Eigen::MatrixXd&&>, "a view of a temporary matrix would dangle");
static_assert(viewable<Eigen::Block<Eigen::MatrixXd>&&>, "a temporary block refers to its matrix");
static_assert(!viewable<decltype(Eigen::MatrixXd() * Eigen::MatrixXd())>, "no direct access");
template <class V>
constexpr bool mappable = requires(V&& v) { tessera::as_eigen(std::forward<V>(v)); };
static_assert(mappable<tensor<float>&> && mappable<const tensor<float>&>);
static_assert(!mappable<tensor<float>&&>, "a map of a temporary tensor would dangle");
static_assert(mappable<tensor_view<float>&&>, "a temporary view refers to lasting storage");

// ---- helpers ------------------------------------------------------------------------------------

template <class T>
T draw(std::mt19937_64& rng) {
    if constexpr (std::is_same_v<T, bool>) {
        return (rng() & 1u) != 0;
    } else if constexpr (tessera::is_complex_v<T>) {
        std::uniform_real_distribution<typename T::value_type> d(-1, 1);
        const auto re = d(rng);
        return T(re, d(rng));
    } else if constexpr (std::is_floating_point_v<T>) {
        return std::uniform_real_distribution<T>(-1, 1)(rng);
    } else {
        return std::uniform_int_distribution<T>(-1000, 1000)(rng);
    }
}

template <class M>
void randomize(M& m, std::mt19937_64& rng) {
    for (Eigen::Index j = 0; j < m.cols(); ++j)
        for (Eigen::Index i = 0; i < m.rows(); ++i) m(i, j) = draw<typename M::Scalar>(rng);
}

template <class T>
tensor<T> random_tensor(session& s, const shape& sh, std::mt19937_64& rng) {
    auto t = tessera::empty<T>(s, sh);
    for (T& v : t.values()) v = draw<T>(rng);
    return t;
}

// Expects view(i, j) == m(i, j) everywhere (rank 2), or view(i) == m(i) (rank 1).
template <class V, class M>
void expect_same(const V& view, const M& m, const std::string& what) {
    std::size_t bad = 0;
    if constexpr (M::IsVectorAtCompileTime) {
        ASSERT_EQ(view.rank(), 1u) << what;
        ASSERT_EQ(static_cast<Eigen::Index>(view.extent(0)), m.size()) << what;
        for (Eigen::Index i = 0; i < m.size(); ++i)
            if (!(view(static_cast<std::size_t>(i)) == m(i))) ++bad;
    } else {
        ASSERT_EQ(view.rank(), 2u) << what;
        ASSERT_EQ(static_cast<Eigen::Index>(view.extent(0)), m.rows()) << what;
        ASSERT_EQ(static_cast<Eigen::Index>(view.extent(1)), m.cols()) << what;
        for (Eigen::Index i = 0; i < m.rows(); ++i)
            for (Eigen::Index j = 0; j < m.cols(); ++j)
                if (!(view(static_cast<std::size_t>(i), static_cast<std::size_t>(j)) == m(i, j)))
                    ++bad;
    }
    EXPECT_EQ(bad, 0u) << what;
}

template <class Fn>
void for_each_element_type(Fn fn) {
    fn(std::type_identity<float>{});
    fn(std::type_identity<double>{});
    fn(std::type_identity<std::complex<double>>{});
    fn(std::type_identity<std::int32_t>{});
    fn(std::type_identity<std::int64_t>{});
    fn(std::type_identity<bool>{});
}

class EigenTest : public ::testing::TestWithParam<int> {
protected:
    backend be{backend_options{}.with_threads(GetParam())};
    std::uint64_t seed{std::random_device{}()};
    ::testing::ScopedTrace trace{__FILE__, __LINE__, "seed " + std::to_string(seed)};
    std::mt19937_64 rng{seed};
};

// ---- view_of ------------------------------------------------------------------------------------

TEST_P(EigenTest, ViewOfCarriesTheStridesOfEveryDenseLayoutWithoutCopying) {
    for_each_element_type([&]<class T>(std::type_identity<T>) {
        matrix<T> cm(7, 5);
        row_matrix<T> rm(7, 5);
        randomize(cm, rng);
        randomize(rm, rng);
        const tensor_view<T> cv = tessera::view_of(cm);
        EXPECT_EQ(cv.data(), cm.data());
        EXPECT_EQ(cv.stride(0), 1);
        EXPECT_EQ(cv.stride(1), 7);
        expect_same(cv, cm, "column-major");
        const tensor_view<T> rv = tessera::view_of(rm);
        EXPECT_EQ(rv.stride(0), 5);
        EXPECT_EQ(rv.stride(1), 1);
        EXPECT_TRUE(rv.is_contiguous());
        expect_same(rv, rm, "row-major");
        // Blocks keep the outer stride of their matrix.
        auto block = cm.block(1, 2, 4, 3);
        const tensor_view<T> bv = tessera::view_of(block);
        EXPECT_EQ(bv.data(), &cm(1, 2));
        EXPECT_EQ(bv.stride(1), 7);
        expect_same(bv, block, "column-major block");
        expect_same(tessera::view_of(rm.block(2, 1, 3, 4)), rm.block(2, 1, 3, 4),
                    "row-major block");
        // A transposed expression is still direct access, with the strides swapped.
        expect_same(tessera::view_of(cm.transpose()), cm.transpose(), "transpose");
        // Maps with explicit inner and outer strides.
        auto storage = std::make_unique<T[]>(200);  // not std::vector: vector<bool> has no data()
        T* const buffer = storage.get();
        for (std::size_t i = 0; i < 200; ++i) buffer[i] = draw<T>(rng);
        Eigen::Map<matrix<T>, Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>> sm(
            buffer, 4, 6, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(30, 3));
        const tensor_view<T> sv = tessera::view_of(sm);
        EXPECT_EQ(sv.stride(0), 3);
        EXPECT_EQ(sv.stride(1), 30);
        expect_same(sv, sm, "strided map");
        Eigen::Map<const row_matrix<T>, Eigen::Unaligned, Eigen::OuterStride<>> om(
            buffer, 5, 4, Eigen::OuterStride<>(9));
        const tensor_view<const T> ov = tessera::view_of(om);
        EXPECT_EQ(ov.stride(0), 9);
        expect_same(ov, om, "outer-stride map of const");
        // Ref, and a const object.
        Eigen::Ref<matrix<T>> ref = cm.block(0, 1, 7, 3);
        expect_same(tessera::view_of(ref), ref, "ref");
        const matrix<T>& ccm = cm;
        const tensor_view<const T> ccv = tessera::view_of(ccm);
        expect_same(ccv, cm, "const matrix");
    });
}

TEST_P(EigenTest, ViewOfAVectorIsRankOneWithItsIncrement) {
    Eigen::VectorXd v(9);
    Eigen::RowVectorXf r(6);
    Eigen::MatrixXd cm(5, 8);
    randomize(v, rng);
    randomize(r, rng);
    randomize(cm, rng);
    const tensor_view<double> vv = tessera::view_of(v);
    EXPECT_EQ(vv.shape(), shape{9});
    expect_same(vv, v, "vector");
    expect_same(tessera::view_of(r), r, "row vector");
    const auto col = tessera::view_of(cm.col(3));
    EXPECT_EQ(col.rank(), 1u);
    EXPECT_EQ(col.stride(0), 1);
    expect_same(col, cm.col(3), "column of a column-major matrix");
    const auto row = tessera::view_of(cm.row(2));
    EXPECT_EQ(row.stride(0), 5);
    expect_same(row, cm.row(2), "row of a column-major matrix");
    Eigen::Map<Eigen::VectorXd, Eigen::Unaligned, Eigen::InnerStride<3>> every_third(cm.data(), 13);
    EXPECT_EQ(tessera::view_of(every_third).stride(0), 3);
    expect_same(tessera::view_of(every_third), every_third, "inner-stride vector map");
    // A matrix with one column stays rank 2: only compile-time vectors become rank 1.
    Eigen::MatrixXd one(4, 1);
    EXPECT_EQ(tessera::view_of(one).rank(), 2u);
}

TEST_P(EigenTest, WritesThroughAViewLandInTheMatrix) {
    be.run([&](session& s) {
        Eigen::MatrixXf m(6, 4);
        randomize(m, rng);
        const Eigen::MatrixXf before = m;
        auto src = random_tensor<float>(s, {3, 4}, rng);
        tessera::copy(s, src, tessera::view_of(m.middleRows(2, 3)));
        for (Eigen::Index i = 0; i < 6; ++i)
            for (Eigen::Index j = 0; j < 4; ++j) {
                const bool inside = i >= 2 && i < 5;
                const auto r = static_cast<std::size_t>(i - 2), c = static_cast<std::size_t>(j);
                const float want = inside ? src(r, c) : before(i, j);
                EXPECT_EQ(m(i, j), want) << i << "," << j;
            }
    });
}

// ---- as_eigen -----------------------------------------------------------------------------------

TEST_P(EigenTest, AsEigenMapsEveryNonNegativeLayoutWithoutCopying) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            auto t = random_tensor<T>(s, {9, 12}, rng);
            const tensor_view<const T> v = t;
            auto dense = tessera::as_eigen(t);
            EXPECT_EQ(dense.data(), t.data());
            EXPECT_EQ(dense.outerStride(), 12);
            EXPECT_EQ(dense.innerStride(), 1);
            expect_same(v, dense, "dense");
            const auto tv = v.transpose();
            auto transposed = tessera::as_eigen(tv);
            EXPECT_EQ(transposed.outerStride(), 1);
            EXPECT_EQ(transposed.innerStride(), 12);
            expect_same(tv, transposed, "transposed");
            const auto stepped = v.slice(0, 1, 9, 2).slice(1, 0, 12, 3);
            expect_same(stepped, tessera::as_eigen(stepped), "slices with steps");
            const auto column = v.slice(1, 4, 5).squeeze(1);  // rank 1, stride 12
            auto as_column = tessera::as_eigen(column);
            EXPECT_EQ(as_column.rows(), 9);
            EXPECT_EQ(as_column.cols(), 1);
            for (Eigen::Index i = 0; i < 9; ++i)
                EXPECT_TRUE(as_column(i, 0) == column(static_cast<std::size_t>(i)));
            auto vec = tessera::as_eigen_vector(column);
            EXPECT_EQ(vec.innerStride(), 12);
            expect_same(column, vec, "vector map");
            // Round trip: tensor -> Eigen map -> view -> tensor.
            auto back = tessera::contiguous(s, tessera::view_of(transposed));
            expect_same(back.view(), transposed, "round trip");
            // Broadcast views map with stride 0 (read-only use).
            auto row = random_tensor<T>(s, {12}, rng);
            const auto wide = row.view().broadcast_to({4, 12});
            expect_same(tensor_view<const T>(wide), tessera::as_eigen(tensor_view<const T>(wide)),
                        "broadcast");
        });
    });
}

TEST_P(EigenTest, EigenRoutinesOnMappedViewsMatchAFloat64Reference) {
    be.run([&](session& s) {
        const std::size_t n = 24, k = 17, m = 9;
        auto a = random_tensor<double>(s, {k, n}, rng);  // used transposed: [n, k]
        auto b = random_tensor<float>(s, {k, m}, rng);
        // sum of a strided view
        const auto at = a.view().transpose();
        double ref_sum = 0.0;
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < k; ++j) ref_sum += at(i, j);
        EXPECT_NEAR(tessera::as_eigen(at).sum(), ref_sum, 1e-12 * static_cast<double>(n * k));
        // a product of a transposed and a sliced view, into a tessera tensor through a map
        auto bd = tessera::empty<double>(s, {k, m});
        for (std::size_t i = 0; i < k; ++i)
            for (std::size_t j = 0; j < m; ++j) bd(i, j) = static_cast<double>(b(i, j));
        auto c = tessera::empty<double>(s, {n, m});
        tessera::as_eigen(c).noalias() = tessera::as_eigen(at) * tessera::as_eigen(bd);
        double worst = 0.0;
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < m; ++j) {
                double ref = 0.0;
                for (std::size_t p = 0; p < k; ++p) ref += at(i, p) * bd(p, j);
                worst = std::max(worst, std::abs(c(i, j) - ref));
            }
        EXPECT_LT(worst, 1e-12);
        // float product vs a float64 reference
        auto bf = tessera::as_eigen(b);
        const Eigen::MatrixXf gram = bf.transpose() * bf;
        for (Eigen::Index i = 0; i < gram.rows(); ++i)
            for (Eigen::Index j = 0; j < gram.cols(); ++j) {
                double ref = 0.0;
                for (std::size_t p = 0; p < k; ++p)
                    ref += static_cast<double>(b(p, static_cast<std::size_t>(i))) *
                           static_cast<double>(b(p, static_cast<std::size_t>(j)));
                EXPECT_NEAR(static_cast<double>(gram(i, j)), ref, 1e-5 * (1.0 + std::abs(ref)));
            }
        // an LU solve on a transposed, diagonally dominant system
        auto sys = random_tensor<double>(s, {n, n}, rng);
        for (std::size_t i = 0; i < n; ++i) sys(i, i) += static_cast<double>(n);
        auto rhs = random_tensor<double>(s, {n}, rng);
        const auto sys_t = sys.view().transpose();
        const Eigen::VectorXd x =
            tessera::as_eigen(sys_t).lu().solve(tessera::as_eigen_vector(rhs));
        double residual = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            double row = -rhs(i);
            for (std::size_t j = 0; j < n; ++j)
                row += sys_t(i, j) * x(static_cast<Eigen::Index>(j));
            residual = std::max(residual, std::abs(row));
        }
        EXPECT_LT(residual, 1e-10);
        // dot product of two strided vectors
        const auto u = a.view().slice(1, 2, 3).squeeze(1);
        const auto w = a.view().slice(1, 7, 8).squeeze(1).flip(0).flip(0);
        double ref_dot = 0.0;
        for (std::size_t i = 0; i < k; ++i) ref_dot += u(i) * w(i);
        EXPECT_NEAR(tessera::as_eigen_vector(u).dot(tessera::as_eigen_vector(w)), ref_dot, 1e-12);
    });
}

TEST_P(EigenTest, WritesThroughAMapLandInTheTensor) {
    be.run([&](session& s) {
        auto t = random_tensor<std::complex<double>>(s, {5, 8}, rng);
        std::vector<std::complex<double>> before(t.values().begin(), t.values().end());
        auto mt = tessera::as_eigen(t.view().transpose());  // [8, 5]
        const std::complex<double> x(3.0, -4.0);
        mt(6, 2) = x;
        EXPECT_EQ(t(2, 6), x);
        // Zero a strided block: every other column of rows 1..3.
        auto block = tessera::as_eigen(t.view().slice(0, 1, 4).slice(1, 0, 8, 2));
        block.setZero();
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t j = 0; j < 8; ++j) {
                const bool zeroed = i >= 1 && i < 4 && j % 2 == 0;
                const std::complex<double> want =
                    zeroed ? std::complex<double>{} : (i == 2 && j == 6 ? x : before[i * 8 + j]);
                EXPECT_EQ(t(i, j), want) << i << "," << j;
            }
        auto v = random_tensor<float>(s, {10}, rng);
        tessera::as_eigen_vector(v.view().slice(0, 0, 10, 3)).setConstant(7.0f);
        for (std::size_t i = 0; i < 10; i += 3) EXPECT_EQ(v(i), 7.0f);
    });
}

TEST_P(EigenTest, AsEigenRejectsNegativeStridesAndOtherRanks) {
    be.run([&](session& s) {
        auto t = random_tensor<float>(s, {4, 5}, rng);
        try {
            (void)tessera::as_eigen(t.view().flip(1));
            FAIL() << "no exception";
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()),
                      "as_eigen: axis 1 has the negative stride -1, which Eigen maps do not "
                      "support; make the view contiguous first (tessera::contiguous)");
        }
        EXPECT_THROW((void)tessera::as_eigen(t.view().flip(0)), tessera::shape_error);
        EXPECT_THROW((void)tessera::as_eigen_vector(t.view().slice(0, 0, 1).squeeze(0).flip(0)),
                     tessera::shape_error);
        // The suggested remedy works.
        auto fixed = tessera::contiguous(s, t.view().flip(1));
        expect_same(fixed.view(), tessera::as_eigen(fixed), "contiguous copy of a flip");
        // A negative stride on an axis of extent 1 walks nowhere and is fine.
        auto one = random_tensor<float>(s, {1, 5}, rng);
        EXPECT_EQ(tessera::as_eigen(one.view().flip(0))(0, 3), one(0, 3));
        auto cube = random_tensor<float>(s, {2, 3, 4}, rng);
        try {
            (void)tessera::as_eigen(cube);
            FAIL() << "no exception";
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()),
                      "as_eigen: a view of rank 3 cannot be mapped; as_eigen takes rank 1 or 2");
        }
        auto scalar = random_tensor<float>(s, {}, rng);
        EXPECT_THROW((void)tessera::as_eigen(scalar), tessera::shape_error);
        EXPECT_THROW((void)tessera::as_eigen_vector(t), tessera::shape_error);
    });
}

// ---- from_eigen ---------------------------------------------------------------------------------

TEST_P(EigenTest, FromEigenCopiesObjectsAndEvaluatesExpressions) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            matrix<T> cm(13, 6);
            row_matrix<T> rm(5, 11);
            randomize(cm, rng);
            randomize(rm, rng);
            auto a = tessera::from_eigen(s, cm);
            static_assert(std::is_same_v<decltype(a), tensor<T>>);
            EXPECT_EQ(a.shape(), (shape{13, 6}));
            EXPECT_NE(static_cast<const void*>(a.data()), static_cast<const void*>(cm.data()));
            expect_same(a.view(), cm, "column-major");
            expect_same(tessera::from_eigen(s, rm).view(), rm, "row-major");
            expect_same(tessera::from_eigen(s, cm.block(2, 1, 9, 4)).view(), cm.block(2, 1, 9, 4),
                        "block");
            expect_same(tessera::from_eigen(s, cm.transpose()).view(), cm.transpose(), "transpose");
            auto col = tessera::from_eigen(s, cm.col(4));
            EXPECT_EQ(col.shape(), shape{13});
            expect_same(col.view(), cm.col(4), "column");
            // The copy is independent of the matrix.
            const T first = cm(0, 0);
            cm(0, 0) = draw<T>(rng);
            EXPECT_TRUE(a(0, 0) == first);
        });
        // Expressions without direct access are evaluated into the result.
        Eigen::MatrixXd p(7, 4), q(4, 9);
        randomize(p, rng);
        randomize(q, rng);
        auto prod = tessera::from_eigen(s, p * q);
        EXPECT_EQ(prod.shape(), (shape{7, 9}));
        for (std::size_t i = 0; i < 7; ++i)
            for (std::size_t j = 0; j < 9; ++j) {
                double ref = 0.0;
                for (Eigen::Index k = 0; k < 4; ++k)
                    ref += p(static_cast<Eigen::Index>(i), k) * q(k, static_cast<Eigen::Index>(j));
                EXPECT_NEAR(prod(i, j), ref, 1e-12);
            }
        Eigen::ArrayXXf arr(3, 5);
        randomize(arr, rng);
        auto doubled = tessera::from_eigen(s, arr * 2.0f + 1.0f);
        for (std::size_t i = 0; i < 3; ++i)
            for (std::size_t j = 0; j < 5; ++j)
                EXPECT_EQ(doubled(i, j),
                          arr(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) * 2.0f +
                              1.0f);
        Eigen::VectorXd v(6);
        Eigen::RowVectorXd r(6);
        randomize(v, rng);
        randomize(r, rng);
        auto sum = tessera::from_eigen(s, v + v);
        EXPECT_EQ(sum.shape(), shape{6});
        auto rsum = tessera::from_eigen(s, r * 3.0);
        EXPECT_EQ(rsum.shape(), shape{6});
        for (std::size_t i = 0; i < 6; ++i) {
            EXPECT_EQ(sum(i), 2.0 * v(static_cast<Eigen::Index>(i)));
            EXPECT_EQ(rsum(i), 3.0 * r(static_cast<Eigen::Index>(i)));
        }
        auto none = tessera::from_eigen(s, Eigen::MatrixXf(0, 3));
        EXPECT_EQ(none.shape(), (shape{0, 3}));
    });
}

TEST_P(EigenTest, FromEigenOfALargeColumnMajorMatrixIsOneDispatch) {
    const int threads = GetParam();
    Eigen::MatrixXf big(300, 200);  // 60000 elements, above the default grain
    randomize(big, rng);
    const tessera::stats before = be.stats();
    be.run([&](session& s) {
        auto t = tessera::from_eigen(s, big);
        expect_same(t.view(), big, "large column-major");
    });
    const tessera::stats d = be.stats() - before;
    EXPECT_EQ(d.parallel_dispatches, threads > 1 ? 1u : 0u);
    EXPECT_EQ(d.inline_dispatches, threads > 1 ? 0u : 1u);
}

INSTANTIATE_TEST_SUITE_P(Threads, EigenTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
