// linalg: every op against float64-or-better references on fresh random inputs (reconstruction
// checks where the factors are not unique), broadcast batches, strided inputs and outputs, per-item
// failures (exceptions and the info form), bad input, dispatch counts and heap allocations.
#include "support/messages.hpp"
#include "support/alloc_counter.hpp"
#include "support/backends.hpp"
#include "support/random.hpp"

#include <tessera/backend.hpp>
#include <tessera/ops/linalg.hpp>
#include <tessera/tensor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <numeric>
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
using tessera::test::fresh_seed;

template <class T>
using real_t = tessera::real_type_t<T>;

// The reference arithmetic: long double complex, whatever the type under test.
using W = std::complex<long double>;
using wide = std::vector<W>;  // a row-major matrix

template <class T>
W widen(T x) {
    return W(static_cast<long double>(std::real(x)), static_cast<long double>(std::imag(x)));
}

template <class T>
double eps() {
    return static_cast<double>(std::numeric_limits<real_t<T>>::epsilon());
}

// Normwise relative tolerances for well-conditioned inputs (condition numbers below ~10).
template <class T>
double tol(std::size_t n) {
    return 64.0 * static_cast<double>(n + 1) * eps<T>();
}

template <class T>
T conj_of(T x) {
    if constexpr (tessera::is_complex_v<T>) return std::conj(x);
    else return x;
}

template <class T>
T draw(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    if constexpr (tessera::is_complex_v<T>) {
        const double re = d(rng);
        return T(static_cast<real_t<T>>(re), static_cast<real_t<T>>(d(rng)));
    } else {
        return static_cast<T>(d(rng));
    }
}

enum class kind {
    general,    // a row permutation of M + c I: well-conditioned, and LU must pivot
    spd,        // M M^H + n I
    hermitian,  // (M + M^H) / 2
};

/// Fills the contiguous [..., n, n] tensor `a` with fresh random matrices of `k`.
template <class T>
void fill_matrices(tensor<T>& a, kind k, std::mt19937_64& rng) {
    const std::size_t n = a.extent(a.rank() - 1);
    const std::size_t items = n == 0 ? 0 : a.size() / (n * n);
    std::vector<T> m(n * n);
    std::vector<std::size_t> perm(n);
    for (std::size_t b = 0; b < items; ++b) {
        T* out = a.data() + b * n * n;
        for (T& v : m) v = draw<T>(rng);
        switch (k) {
            case kind::general: {
                const auto c = static_cast<real_t<T>>(2.0 * std::sqrt(static_cast<double>(n)) + 1.0);
                for (std::size_t i = 0; i < n; ++i) m[i * n + i] += T(c);
                std::iota(perm.begin(), perm.end(), std::size_t{0});
                std::shuffle(perm.begin(), perm.end(), rng);
                for (std::size_t i = 0; i < n; ++i)
                    for (std::size_t j = 0; j < n; ++j) out[i * n + j] = m[perm[i] * n + j];
                break;
            }
            case kind::spd:
                for (std::size_t i = 0; i < n; ++i)
                    for (std::size_t j = 0; j < n; ++j) {
                        T acc = i == j ? T(static_cast<real_t<T>>(n)) : T(0);
                        for (std::size_t l = 0; l < n; ++l) acc += m[i * n + l] * conj_of(m[j * n + l]);
                        out[i * n + j] = i == j ? T(std::real(acc)) : acc;
                    }
                break;
            case kind::hermitian:
                for (std::size_t i = 0; i < n; ++i)
                    for (std::size_t j = 0; j < n; ++j)
                        out[i * n + j] = i == j ? T(std::real(m[i * n + i]))
                                                : (m[i * n + j] + conj_of(m[j * n + i])) / real_t<T>(2);
                break;
        }
    }
}

template <class T>
tensor<T> random_matrices(session& s, const shape& sh, kind k, std::mt19937_64& rng) {
    tensor<T> a = tessera::empty<T>(s, sh);
    fill_matrices(a, k, rng);
    return a;
}

template <class T>
tensor<T> random_values(session& s, const shape& sh, std::mt19937_64& rng) {
    tensor<T> a = tessera::empty<T>(s, sh);
    for (T& v : a.values()) v = draw<T>(rng);
    return a;
}

/// Item `item` (rows x cols) of a contiguous tensor, widened.
template <class T>
wide item_of(const tensor<T>& t, std::size_t item, std::size_t rows, std::size_t cols) {
    wide w(rows * cols);
    const T* p = t.data() + item * rows * cols;
    for (std::size_t i = 0; i < rows * cols; ++i) w[i] = widen(p[i]);
    return w;
}

wide matmul(const wide& a, const wide& b, std::size_t n, std::size_t m, std::size_t k) {
    wide c(n * k);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < k; ++j) {
            W acc = 0;
            for (std::size_t l = 0; l < m; ++l) acc += a[i * m + l] * b[l * k + j];
            c[i * k + j] = acc;
        }
    return c;
}

wide adjoint(const wide& a, std::size_t rows, std::size_t cols) {
    wide r(rows * cols);
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) r[j * rows + i] = std::conj(a[i * cols + j]);
    return r;
}

wide identity(std::size_t n) {
    wide r(n * n);
    for (std::size_t i = 0; i < n; ++i) r[i * n + i] = 1;
    return r;
}

double norm(const wide& a) {
    long double s = 0;
    for (const W& v : a) s += std::norm(v);
    return static_cast<double>(std::sqrt(s));
}

double distance(const wide& a, const wide& b) {
    long double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += std::norm(a[i] - b[i]);
    return static_cast<double>(std::sqrt(s));
}

/// X with A X = B by Gaussian elimination with partial pivoting, in long double.
wide ref_solve(wide a, wide b, std::size_t n, std::size_t k) {
    for (std::size_t c = 0; c < n; ++c) {
        std::size_t p = c;
        for (std::size_t r = c + 1; r < n; ++r)
            if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
        for (std::size_t j = 0; j < n; ++j) std::swap(a[c * n + j], a[p * n + j]);
        for (std::size_t j = 0; j < k; ++j) std::swap(b[c * k + j], b[p * k + j]);
        for (std::size_t r = c + 1; r < n; ++r) {
            const W f = a[r * n + c] / a[c * n + c];
            for (std::size_t j = c; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
            for (std::size_t j = 0; j < k; ++j) b[r * k + j] -= f * b[c * k + j];
        }
    }
    for (std::size_t c = n; c-- > 0;)
        for (std::size_t j = 0; j < k; ++j) {
            W acc = b[c * k + j];
            for (std::size_t l = c + 1; l < n; ++l) acc -= a[c * n + l] * b[l * k + j];
            b[c * k + j] = acc / a[c * n + c];
        }
    return b;
}

W ref_det(wide a, std::size_t n) {
    W det = 1;
    for (std::size_t c = 0; c < n; ++c) {
        std::size_t p = c;
        for (std::size_t r = c + 1; r < n; ++r)
            if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
        if (p != c) {
            for (std::size_t j = 0; j < n; ++j) std::swap(a[c * n + j], a[p * n + j]);
            det = -det;
        }
        det *= a[c * n + c];
        if (a[c * n + c] == W(0)) return 0;
        for (std::size_t r = c + 1; r < n; ++r) {
            const W f = a[r * n + c] / a[c * n + c];
            for (std::size_t j = c; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
        }
    }
    return det;
}

/// The (unique) Cholesky factor with a positive diagonal, from the lower triangle.
wide ref_cholesky(const wide& a, std::size_t n) {
    wide l(n * n);
    for (std::size_t k = 0; k < n; ++k) {
        W x = std::real(a[k * n + k]);
        for (std::size_t j = 0; j < k; ++j) x -= std::norm(l[k * n + j]);
        l[k * n + k] = std::sqrt(std::real(x));
        for (std::size_t i = k + 1; i < n; ++i) {
            W v = a[i * n + k];
            for (std::size_t j = 0; j < k; ++j) v -= l[i * n + j] * std::conj(l[k * n + j]);
            l[i * n + k] = v / l[k * n + k];
        }
    }
    return l;
}

template <class T>
bool all_nan(const tensor<T>& t, std::size_t begin, std::size_t count) {
    for (std::size_t i = begin; i < begin + count; ++i)
        if (!std::isnan(std::real(t.data()[i]))) return false;
    return true;
}

template <class T>
bool bitwise_equal(const tensor<T>& a, const tensor<T>& b) {
    if (!(a.shape() == b.shape())) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const T x = a.data()[i], y = b.data()[i];
        if (!(x == y) && !(std::isnan(std::real(x)) && std::isnan(std::real(y)))) return false;
    }
    return true;
}

/// A dense copy of any view (row-major), for comparing strided results.
template <class V, class T = std::remove_const_t<V>>
tensor<T> dense_copy(session& s, const tensor_view<V>& v) {
    tensor<T> out = tessera::empty<T>(s, v.shape());
    std::size_t i = 0;
    const std::size_t r = v.rank();
    std::array<std::size_t, tessera::max_rank> index{};
    for (; i < v.size(); ++i) {
        std::ptrdiff_t off = 0;
        for (std::size_t a = 0; a < r; ++a) off += static_cast<std::ptrdiff_t>(index[a]) * v.stride(a);
        out.data()[i] = v.data()[off];
        for (std::size_t a = r; a-- > 0;) {
            if (++index[a] < v.extent(a)) break;
            index[a] = 0;
        }
    }
    return out;
}

const std::vector<std::size_t> all_sizes{1, 2, 3, 4, 5, 8, 16, 32};

struct type_names {
    template <class T>
    static std::string GetName(int) {
        if constexpr (std::is_same_v<T, float>) return "float";
        else if constexpr (std::is_same_v<T, double>) return "double";
        else if constexpr (std::is_same_v<T, std::complex<float>>) return "cfloat";
        else return "cdouble";
    }
};

template <class T>
class LinalgTypedTest : public ::testing::Test {};
using linalg_types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(LinalgTypedTest, linalg_types, type_names);

// ---- numerical results ---------------------------------------------------------------------------

TYPED_TEST(LinalgTypedTest, InverseMatchesReference) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const std::size_t batch = 4;
            auto a = random_matrices<T>(s, {2, 2, n, n}, kind::general, rng);
            auto x = tessera::inverse(s, a);
            ASSERT_EQ(x.shape(), a.shape());
            for (std::size_t i = 0; i < batch; ++i) {
                const wide ai = item_of(a, i, n, n), xi = item_of(x, i, n, n);
                const wide want = ref_solve(ai, identity(n), n, n);
                EXPECT_LE(distance(xi, want), tol<T>(n) * norm(want)) << "item " << i;
                EXPECT_LE(distance(matmul(ai, xi, n, n, n), identity(n)),
                          tol<T>(n) * norm(ai) * norm(xi))
                    << "item " << i;
            }
        }
    });
}

TYPED_TEST(LinalgTypedTest, SolveMatchesReferenceWithBroadcastBatches) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            for (std::size_t k : {std::size_t{1}, std::size_t{3}}) {
                SCOPED_TRACE("n = " + std::to_string(n) + ", k = " + std::to_string(k));
                // a [2, 1, n, n] and b [3, n, k] broadcast to the batch [2, 3].
                auto a = random_matrices<T>(s, {2, 1, n, n}, kind::general, rng);
                auto b = random_values<T>(s, {3, n, k}, rng);
                auto x = tessera::solve(s, a, b);
                ASSERT_EQ(x.shape(), (shape{2, 3, n, k}));
                for (std::size_t i = 0; i < 2; ++i)
                    for (std::size_t j = 0; j < 3; ++j) {
                        const wide ai = item_of(a, i, n, n), bj = item_of(b, j, n, k);
                        const wide xij = item_of(x, i * 3 + j, n, k);
                        const wide want = ref_solve(ai, bj, n, k);
                        EXPECT_LE(distance(xij, want), tol<T>(n) * norm(want)) << i << "," << j;
                        EXPECT_LE(distance(matmul(ai, xij, n, n, k), bj),
                                  tol<T>(n) * (norm(ai) * norm(xij) + norm(bj)));
                    }
            }
        }
    });
}

TYPED_TEST(LinalgTypedTest, CholeskyMatchesReferenceAndReconstructs) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            auto a = random_matrices<T>(s, {3, n, n}, kind::spd, rng);
            auto l = tessera::cholesky(s, a);
            for (std::size_t i = 0; i < 3; ++i) {
                const wide ai = item_of(a, i, n, n), li = item_of(l, i, n, n);
                for (std::size_t r = 0; r < n; ++r) {
                    EXPECT_GT(std::real(li[r * n + r]), 0.0L);
                    EXPECT_EQ(std::imag(li[r * n + r]), 0.0L);
                    for (std::size_t c = r + 1; c < n; ++c) EXPECT_EQ(li[r * n + c], W(0));
                }
                EXPECT_LE(distance(matmul(li, adjoint(li, n, n), n, n, n), ai), tol<T>(n) * norm(ai));
                const wide want = ref_cholesky(ai, n);
                EXPECT_LE(distance(li, want), tol<T>(n) * norm(want));
            }
        }
    });
}

TYPED_TEST(LinalgTypedTest, LuPermutesAndReconstructs) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            auto a = random_matrices<T>(s, {3, n, n}, kind::general, rng);
            auto [lu, piv] = tessera::lu(s, a);
            ASSERT_EQ(piv.shape(), (shape{3, n}));
            for (std::size_t i = 0; i < 3; ++i) {
                const wide ai = item_of(a, i, n, n), f = item_of(lu, i, n, n);
                wide l(n * n), u(n * n), pa(n * n);
                std::vector<bool> seen(n, false);
                for (std::size_t r = 0; r < n; ++r) {
                    const std::int64_t p = piv.data()[i * n + r];
                    ASSERT_GE(p, 0);
                    ASSERT_LT(p, static_cast<std::int64_t>(n));
                    EXPECT_FALSE(seen[static_cast<std::size_t>(p)]) << "pivots is not a permutation";
                    seen[static_cast<std::size_t>(p)] = true;
                    for (std::size_t c = 0; c < n; ++c) {
                        pa[r * n + c] = ai[static_cast<std::size_t>(p) * n + c];
                        if (c < r) {
                            l[r * n + c] = f[r * n + c];
                            EXPECT_LE(std::abs(f[r * n + c]), 1.0L + 1e-6L) << "partial pivoting bound";
                        } else {
                            u[r * n + c] = f[r * n + c];
                        }
                    }
                    l[r * n + r] = 1;
                }
                EXPECT_LE(distance(matmul(l, u, n, n, n), pa), tol<T>(n) * norm(ai));
            }
        }
    });
}

TYPED_TEST(LinalgTypedTest, DetAndSlogdetMatchReference) {
    using T = TypeParam;
    using R = real_t<T>;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            auto a = random_matrices<T>(s, {4, n, n}, kind::general, rng);
            auto d = tessera::det(s, a);
            auto [sign, logabs] = tessera::slogdet(s, a);
            ASSERT_EQ(d.shape(), (shape{4}));
            ASSERT_EQ(logabs.shape(), (shape{4}));
            for (std::size_t i = 0; i < 4; ++i) {
                const W want = ref_det(item_of(a, i, n, n), n);
                EXPECT_LE(std::abs(widen(d.data()[i]) - want), tol<T>(n) * std::abs(want));
                EXPECT_NEAR(static_cast<double>(logabs.data()[i]), static_cast<double>(std::log(std::abs(want))),
                            tol<T>(n) * (1.0 + std::abs(static_cast<double>(std::log(std::abs(want))))));
                EXPECT_LE(std::abs(widen(sign.data()[i]) - want / std::abs(want)), tol<T>(n));
            }
        }
        // A 1 x 1 item and a 0 x 0 one.
        auto one = tessera::full<T>(s, {1, 1}, T(R(-2)));
        EXPECT_EQ(tessera::det(s, one).data()[0], T(R(-2)));
        auto empty = tessera::empty<T>(s, {3, 0, 0});
        auto d0 = tessera::det(s, empty);
        auto [s0, l0] = tessera::slogdet(s, empty);
        for (std::size_t i = 0; i < 3; ++i) {
            EXPECT_EQ(d0.data()[i], T(1));
            EXPECT_EQ(s0.data()[i], T(1));
            EXPECT_EQ(l0.data()[i], R(0));
        }
    });
}

TYPED_TEST(LinalgTypedTest, SlogdetAvoidsOverflowAndReportsSingular) {
    using T = TypeParam;
    using R = real_t<T>;
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            // det = (1e30)^n overflows float for n >= 2 and double for n >= 11; log|det| does not.
            auto a = tessera::zeros<T>(s, {n, n});
            for (std::size_t i = 0; i < n; ++i) a(i, n - 1 - i) = T(R(1e30));
            auto [sign, logabs] = tessera::slogdet(s, a);
            const double want = static_cast<double>(n) * std::log(1e30);
            EXPECT_NEAR(static_cast<double>(logabs.data()[0]), want, 1e-5 * want) << n;
            // The anti-diagonal permutation has sign (-1)^(n (n - 1) / 2).
            const R expected_sign = (n * (n - 1) / 2) % 2 == 0 ? R(1) : R(-1);
            EXPECT_NEAR(static_cast<double>(std::real(sign.data()[0])), static_cast<double>(expected_sign), 1e-6) << n;

            auto z = tessera::zeros<T>(s, {n, n});
            auto [zs, zl] = tessera::slogdet(s, z);
            EXPECT_EQ(zs.data()[0], T(0));
            EXPECT_EQ(zl.data()[0], -std::numeric_limits<R>::infinity());
            EXPECT_EQ(tessera::det(s, z).data()[0], T(0));
        }
    });
}

// ---- determinants near the ends of the range -----------------------------------------------------

/// A relative error bound for a determinant computed in T: 8 n eps times its condition number
/// under relative perturbations of the entries, sum |a_ij (A^-1)_ji| (entry a_ij enters det(A)
/// through its cofactor, and a_ij C_ij / det(A) = a_ij (A^-1)_ji).
template <class T>
double det_tolerance(const wide& a, std::size_t n) {
    const wide inv = ref_solve(a, identity(n), n, n);
    long double kappa = 0;
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) kappa += std::abs(a[i * n + j] * inv[j * n + i]);
    return 8.0 * static_cast<double>(n) * eps<T>() * static_cast<double>(kappa);
}

/// Copies the row-major n x n matrix `m` into item `item` of the contiguous [..., n, n] tensor `a`.
template <class T>
void put_item(tensor<T>& a, std::size_t item, const std::vector<T>& m) {
    std::copy(m.begin(), m.end(), a.data() + item * m.size());
}

/// A well-conditioned n x n matrix (n = 2, 3 or 4) with a representable determinant of about
/// 2^(max_exponent - 3) t, 1 <= |t| <= 6 (4.5e307 to 1.1e308 for double), whose closed form
/// overflows on the way. The closed forms expand along a line: row 0 for n <= 3, column 3 for
/// Eigen's 4 x 4 formula. On that line the first product, entry times minor, is 20 to 24 times
/// 2^(max_exponent - 3) (above the largest finite value), the middle ones are small and the last
/// cancels the first, so the first partial sum overflows even where the compiler fuses
/// multiply-adds. All terms carry the same power of two: rows are scaled by 2^(max_exponent - 3)
/// split evenly (entries around 1e154 for n = 2, 1e102 for n = 3, 1e77 for n = 4) and, for
/// complex T, turned by random unit phases.
template <class T>
std::vector<T> overflowing_closed_form(std::size_t n, std::mt19937_64& rng) {
    using R = real_t<T>;
    using L = long double;
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    auto in = [&](double lo, double hi) {  // magnitude in [lo, hi], random sign
        const double x = lo + (hi - lo) * (0.5 + 0.5 * u(rng));
        return u(rng) < 0 ? -x : x;
    };
    // Row 0 is the expansion line; rows 1.. are random in [-2, 2].
    std::vector<R> m(n * n);
    std::vector<L> minor(n);
    for (int attempt = 0;; ++attempt) {
        if (attempt == 1000) {
            ADD_FAILURE() << "no matrix with usable minors";
            break;
        }
        for (std::size_t i = n; i < n * n; ++i) m[i] = static_cast<R>(2.0 * u(rng));
        for (std::size_t j = 0; j < n; ++j) {
            wide sub;
            for (std::size_t r = 1; r < n; ++r)
                for (std::size_t c = 0; c < n; ++c)
                    if (c != j) sub.push_back(W(static_cast<L>(m[r * n + c])));
            minor[j] = std::real(ref_det(sub, n - 1));
        }
        if (std::abs(minor[0]) >= 1 && std::abs(minor[n - 1]) >= 1) break;
    }
    auto cofactor = [&](std::size_t j) { return j % 2 == 0 ? minor[j] : -minor[j]; };
    const L first = in(20.0, 24.0);
    m[0] = static_cast<R>(first / cofactor(0));
    L sum = static_cast<L>(m[0]) * cofactor(0);
    for (std::size_t j = 1; j + 1 < n; ++j) {
        m[j] = static_cast<R>(u(rng) / std::max(1.0L, std::abs(minor[j])));
        sum += static_cast<L>(m[j]) * cofactor(j);
    }
    const L t = in(1.0, 6.0);
    m[n - 1] = static_cast<R>((t - sum) / cofactor(n - 1));
    if (n == 4) {
        // Row 0 becomes column 3, in order; rows 1..3 become columns 0..2 (det changes sign only).
        std::vector<R> b(16);
        for (std::size_t i = 0; i < 4; ++i) {
            b[i * 4 + 3] = m[i];
            for (std::size_t c = 0; c < 3; ++c) b[i * 4 + c] = m[(c + 1) * 4 + i];
        }
        m = b;
    }
    const int total = std::numeric_limits<R>::max_exponent - 3;
    std::vector<T> a(n * n);
    for (std::size_t i = 0; i < n; ++i) {
        const int e = total / static_cast<int>(n) + (static_cast<int>(i) < total % static_cast<int>(n) ? 1 : 0);
        T phase = T(1);
        if constexpr (tessera::is_complex_v<T>) {
            const double theta = 3.14159265358979 * u(rng);
            phase = T(static_cast<R>(std::cos(theta)), static_cast<R>(std::sin(theta)));
        }
        for (std::size_t j = 0; j < n; ++j) a[i * n + j] = phase * T(std::ldexp(m[i * n + j], e));
    }
    return a;
}

/// How scaled_pivots scales a well-conditioned matrix so that the product of its LU pivots, taken
/// plainly, leaves the range on the way while the determinant does not.
enum class pivot_scaling {
    columns_up,    // Q diag(2^p, 2^p, 2^-q, 2^-q, 1, ...): det(Q) 2^20, overflows after two pivots
    columns_down,  // Q diag(2^-p, 2^-p, 2^q, 2^q, 1, ...): det(Q) 2^-20, underflows after two
    rows_up,       // diag(2^h, 2^h, 1, ..., 1, 2^-r, 2^-r) Q: det(Q) 2^68, overflows after two
};

/// A random well-conditioned n x n Q scaled per `how`, with p = 600 and q = 590 for double (75
/// and 65 for float). Scaling columns by powers of two scales LU's pivots exactly (partial
/// pivoting picks the same rows), so the diag(2^600, 2^600, 2^-590, 2^-590, 1) case is posed with
/// its columns scaled: scaling rows that far apart makes the multipliers 2^-1190 underflow, and
/// then no double LU (LAPACK's neither) can reach the determinant. Rows are scaled by 2^h with
/// h = max_exponent / 2 + 1 (513, 65) and 2^-r with h + r = 30 less than the normal range's
/// exponent (r = 479, 31), so that the multipliers stay normal even for entries of 2^-30; that Q
/// is diagonally dominant and unpermuted, so that partial pivoting keeps the natural order (the
/// scaling forces the pivot rows, and another order would let the error grow past the bound).
template <class T>
std::vector<T> scaled_pivots(session& s, std::size_t n, pivot_scaling how, std::mt19937_64& rng) {
    using R = real_t<T>;
    const int p = std::numeric_limits<R>::max_exponent * 600 / 1024, q = p - 10;
    const int h = std::numeric_limits<R>::max_exponent / 2 + 1;
    const int r = -std::numeric_limits<R>::min_exponent + 1 - h - 30;
    const auto qm = random_matrices<T>(s, {n, n}, kind::general, rng);
    std::vector<T> a(qm.data(), qm.data() + n * n);
    if (how == pivot_scaling::rows_up) {
        const auto c = static_cast<real_t<T>>(2.0 * std::sqrt(static_cast<double>(n)) + 1.0);
        for (std::size_t i = 0; i < n * n; ++i) a[i] = draw<T>(rng) + (i % (n + 1) == 0 ? T(c) : T(0));
    }
    auto power = [&](std::size_t k) {
        switch (how) {
            case pivot_scaling::columns_up: return k < 2 ? p : (k < 4 ? -q : 0);
            case pivot_scaling::columns_down: return k < 2 ? -p : (k < 4 ? q : 0);
            case pivot_scaling::rows_up: return k < 2 ? h : (k + 2 >= n ? -r : 0);
        }
        return 0;
    };
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            const int e = power(how == pivot_scaling::rows_up ? i : j);
            if constexpr (tessera::is_complex_v<T>)
                a[i * n + j] = T(std::ldexp(a[i * n + j].real(), e), std::ldexp(a[i * n + j].imag(), e));
            else
                a[i * n + j] = std::ldexp(a[i * n + j], e);
        }
    return a;
}

/// c times a random well-conditioned n x n matrix, for a power of two c = 2^e (exact scaling).
template <class T>
std::vector<T> scaled_general(session& s, std::size_t n, int e, std::mt19937_64& rng) {
    const auto qm = random_matrices<T>(s, {n, n}, kind::general, rng);
    std::vector<T> a(qm.data(), qm.data() + n * n);
    for (T& x : a) {
        if constexpr (tessera::is_complex_v<T>) x = T(std::ldexp(x.real(), e), std::ldexp(x.imag(), e));
        else x = std::ldexp(x, e);
    }
    return a;
}

/// Expects det `got` to be within det_tolerance of the long double reference for `m`.
template <class T>
void expect_det_near(T got, const std::vector<T>& m, std::size_t n) {
    wide w(m.size());
    for (std::size_t i = 0; i < m.size(); ++i) w[i] = widen(m[i]);
    const W want = ref_det(w, n);
    const double tol = det_tolerance<T>(w, n);
    EXPECT_LE(static_cast<double>(std::abs(widen(got) - want) / std::abs(want)), tol)
        << "det " << widen(got) << ", want " << want;
}

// Reported: 2 x 2, 3 x 3 and 4 x 4 determinants of about 1e305 to 1e308, with entries of 1e77 to
// 1e154, came out NaN or inf from the closed forms; they are redone with LU.
TYPED_TEST(LinalgTypedTest, DetIsFiniteWhenClosedFormsOverflowOnTheWay) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{2}, std::size_t{3}, std::size_t{4}}) {
            for (int rep = 0; rep < 20; ++rep) {
                SCOPED_TRACE("n = " + std::to_string(n) + ", rep " + std::to_string(rep));
                const std::vector<T> m = overflowing_closed_form<T>(n, rng);
                auto a = tessera::empty<T>(s, {n, n});
                put_item(a, 0, m);
                const T d = tessera::det(s, a).data()[0];
                ASSERT_TRUE(std::isfinite(std::real(d)) && std::isfinite(std::imag(d))) << widen(d);
                expect_det_near(d, m, n);
                // slogdet, inverse and solve already redo such items with LU.
                const wide ai = item_of(a, 0, n, n);
                const W want = ref_det(ai, n);
                auto [sign, logabs] = tessera::slogdet(s, a);
                EXPECT_NEAR(static_cast<double>(logabs.data()[0]), static_cast<double>(std::log(std::abs(want))),
                            det_tolerance<T>(ai, n) * 710.0);
                EXPECT_LE(std::abs(widen(sign.data()[0]) - want / std::abs(want)), det_tolerance<T>(ai, n));
                const wide xi = item_of(tessera::inverse(s, a), 0, n, n);
                EXPECT_LE(distance(matmul(ai, xi, n, n, n), identity(n)), tol<T>(n) * norm(ai) * norm(xi));
            }
        }
    });
}

// For n >= 5 the determinant is the product of the LU pivots; when that product leaves the range
// on the way it is redone with a separate binary exponent, so that pivots of 2^600, 2^600, 2^-590,
// 2^-590 and 1 give 2^20, not inf (and their reciprocals 2^-20, not 0).
TYPED_TEST(LinalgTypedTest, DetOfLuKeepsThePivotProductInRange) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{5}, std::size_t{8}, std::size_t{12}}) {
            for (pivot_scaling how : {pivot_scaling::columns_up, pivot_scaling::columns_down, pivot_scaling::rows_up}) {
                SCOPED_TRACE("n = " + std::to_string(n) + ", scaling " + std::to_string(static_cast<int>(how)));
                const std::vector<T> m = scaled_pivots<T>(s, n, how, rng);
                auto a = tessera::empty<T>(s, {n, n});
                put_item(a, 0, m);
                expect_det_near(tessera::det(s, a).data()[0], m, n);
            }
        }
    });
}

// Items whose closed form or pivot product overflows sit among ordinary ones; each is right, in
// the allocating form and written into a strided out.
TYPED_TEST(LinalgTypedTest, DetBatchesMixOverflowingAndOrdinaryItems) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5}, std::size_t{9}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const std::size_t items = 7;
            auto a = random_matrices<T>(s, {items, n, n}, kind::general, rng);
            std::vector<std::vector<T>> m(items);
            for (std::size_t i = 0; i < items; ++i) {
                if (i == 1 || i == 4 || i == 5)
                    put_item(a, i, n <= 4 ? overflowing_closed_form<T>(n, rng)
                                          : scaled_pivots<T>(s, n, i == 1 ? pivot_scaling::columns_up
                                                                   : i == 4 ? pivot_scaling::columns_down
                                                                            : pivot_scaling::rows_up, rng));
                m[i].assign(a.data() + i * n * n, a.data() + (i + 1) * n * n);
            }
            const auto d = tessera::det(s, a);
            auto storage = tessera::full<T>(s, {2 * items}, T(-7));
            const tensor_view<T> out = storage.view().slice(0, 1, tessera::slice_end, 2);
            tessera::det(s, a, out);
            for (std::size_t i = 0; i < items; ++i) {
                SCOPED_TRACE("item " + std::to_string(i));
                expect_det_near(d.data()[i], m[i], n);
                EXPECT_EQ(storage.data()[2 * i + 1], d.data()[i]);
                EXPECT_EQ(storage.data()[2 * i], T(-7));
            }
        }
    });
}

// The renormalised product gives inf or 0 only when the determinant itself is out of range, and a
// subnormal determinant to within the subnormal spacing.
TYPED_TEST(LinalgTypedTest, DetOverflowsAndUnderflowsOnlyWhenTheTrueValueDoes) {
    using T = TypeParam;
    using R = real_t<T>;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const int max_e = std::numeric_limits<R>::max_exponent, min_e = std::numeric_limits<R>::min_exponent;
    const int digits = std::numeric_limits<R>::digits;
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5}, std::size_t{9}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const int ni = static_cast<int>(n);
            auto a = tessera::empty<T>(s, {n, n});
            // |det| >= 2^(max_exponent + 4 n) |det Q|, far above the largest finite value.
            const std::vector<T> big = scaled_general<T>(s, n, max_e / ni + 4, rng);
            put_item(a, 0, big);
            const T d_big = tessera::det(s, a).data()[0];
            wide w(n * n);
            for (std::size_t i = 0; i < n * n; ++i) w[i] = widen(big[i]);
            const W want_big = ref_det(w, n);
            if constexpr (tessera::is_complex_v<T>) {
                EXPECT_TRUE(std::isinf(std::abs(d_big))) << widen(d_big);
                EXPECT_FALSE(std::isnan(d_big.real()) || std::isnan(d_big.imag())) << widen(d_big);
            } else {
                EXPECT_EQ(d_big, std::real(want_big) < 0 ? -std::numeric_limits<R>::infinity()
                                                         : std::numeric_limits<R>::infinity());
            }
            // |det| <= 2^-(max_exponent + digits + 6 n) |det Q|, far below the smallest subnormal.
            put_item(a, 0, scaled_general<T>(s, n, -((max_e + digits) / ni + 6), rng));
            EXPECT_EQ(tessera::det(s, a).data()[0], T(0));
            // |det| about 2^(min_exponent - 1 - digits / 2): subnormal, with about half the digits.
            std::vector<T> sub = scaled_general<T>(s, n, 0, rng);
            for (std::size_t i = 0; i < n * n; ++i) w[i] = widen(sub[i]);
            const int log2_det_q = static_cast<int>(std::floor(std::log2(std::abs(ref_det(w, n)))));
            const int e = (min_e - 1 - digits / 2 - log2_det_q) / ni;
            for (T& x : sub) {
                if constexpr (tessera::is_complex_v<T>) x = T(std::ldexp(x.real(), e), std::ldexp(x.imag(), e));
                else x = std::ldexp(x, e);
            }
            put_item(a, 0, sub);
            const T d_sub = tessera::det(s, a).data()[0];
            for (std::size_t i = 0; i < n * n; ++i) w[i] = widen(sub[i]);
            const W want_sub = ref_det(w, n);
            ASSERT_LT(std::abs(want_sub), static_cast<long double>(std::numeric_limits<R>::min()));
            ASSERT_GT(std::abs(want_sub), 1e3L * std::numeric_limits<R>::denorm_min());
            const long double spacing = std::numeric_limits<R>::denorm_min();
            EXPECT_LE(std::abs(widen(d_sub) - want_sub), 2 * spacing + det_tolerance<T>(w, n) * std::abs(want_sub))
                << widen(d_sub) << " vs " << want_sub;
        }
    });
}

TYPED_TEST(LinalgTypedTest, QrReconstructsWithUnitaryQ) {
    using T = TypeParam;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            auto a = random_values<T>(s, {3, n, n}, rng);
            auto [q, r] = tessera::qr(s, a);
            for (std::size_t i = 0; i < 3; ++i) {
                const wide ai = item_of(a, i, n, n), qi = item_of(q, i, n, n), ri = item_of(r, i, n, n);
                for (std::size_t row = 0; row < n; ++row)
                    for (std::size_t c = 0; c < row; ++c) EXPECT_EQ(ri[row * n + c], W(0));
                EXPECT_LE(distance(matmul(qi, ri, n, n, n), ai), tol<T>(n) * norm(ai));
                EXPECT_LE(distance(matmul(adjoint(qi, n, n), qi, n, n, n), identity(n)),
                          tol<T>(n) * std::sqrt(static_cast<double>(n)));
            }
        }
    });
}

TYPED_TEST(LinalgTypedTest, SvdReconstructsWithDescendingValues) {
    using T = TypeParam;
    using R = real_t<T>;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            auto a = random_values<T>(s, {3, n, n}, rng);
            auto [u, sv, vh] = tessera::svd(s, a);
            auto values = tessera::svdvals(s, a);
            ASSERT_EQ(sv.shape(), (shape{3, n}));
            ASSERT_EQ(values.shape(), (shape{3, n}));
            for (std::size_t i = 0; i < 3; ++i) {
                const wide ai = item_of(a, i, n, n), ui = item_of(u, i, n, n), vi = item_of(vh, i, n, n);
                wide us = ui;
                for (std::size_t r = 0; r < n; ++r)
                    for (std::size_t c = 0; c < n; ++c) us[r * n + c] *= static_cast<long double>(sv.data()[i * n + c]);
                const double scale = norm(ai);
                EXPECT_LE(distance(matmul(us, vi, n, n, n), ai), tol<T>(n) * scale);
                EXPECT_LE(distance(matmul(adjoint(ui, n, n), ui, n, n, n), identity(n)), tol<T>(n) * std::sqrt(static_cast<double>(n)));
                EXPECT_LE(distance(matmul(vi, adjoint(vi, n, n), n, n, n), identity(n)), tol<T>(n) * std::sqrt(static_cast<double>(n)));
                for (std::size_t c = 0; c < n; ++c) {
                    const R v = sv.data()[i * n + c];
                    EXPECT_GE(v, R(0));
                    if (c > 0) {
                        EXPECT_LE(v, sv.data()[i * n + c - 1]);
                    }
                    EXPECT_NEAR(static_cast<double>(values.data()[i * n + c]), static_cast<double>(v), tol<T>(n) * scale);
                }
            }
        }
    });
}

TYPED_TEST(LinalgTypedTest, EighReconstructsFromTheLowerTriangleOnly) {
    using T = TypeParam;
    using R = real_t<T>;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            auto a = random_matrices<T>(s, {3, n, n}, kind::hermitian, rng);
            // Garbage above the diagonal must not matter.
            auto poisoned = dense_copy(s, a.view());
            for (std::size_t i = 0; i < 3; ++i)
                for (std::size_t r = 0; r < n; ++r)
                    for (std::size_t c = r + 1; c < n; ++c) poisoned.data()[(i * n + r) * n + c] = T(R(1e3));
            auto [w, v] = tessera::eigh(s, poisoned);
            ASSERT_EQ(w.shape(), (shape{3, n}));
            for (std::size_t i = 0; i < 3; ++i) {
                const wide ai = item_of(a, i, n, n), vi = item_of(v, i, n, n);
                wide vw = vi;
                for (std::size_t r = 0; r < n; ++r)
                    for (std::size_t c = 0; c < n; ++c) vw[r * n + c] *= static_cast<long double>(w.data()[i * n + c]);
                EXPECT_LE(distance(matmul(ai, vi, n, n, n), vw), tol<T>(n) * norm(ai));
                EXPECT_LE(distance(matmul(adjoint(vi, n, n), vi, n, n, n), identity(n)), tol<T>(n) * std::sqrt(static_cast<double>(n)));
                for (std::size_t c = 1; c < n; ++c) EXPECT_LE(w.data()[i * n + c - 1], w.data()[i * n + c]);
                // The trace is the sum of the eigenvalues.
                long double trace = 0, sum = 0;
                for (std::size_t c = 0; c < n; ++c) {
                    trace += std::real(ai[c * n + c]);
                    sum += static_cast<long double>(w.data()[i * n + c]);
                }
                EXPECT_NEAR(static_cast<double>(trace), static_cast<double>(sum), tol<T>(n) * norm(ai));
            }
        }
    });
}

/// A random unitary n x n matrix (real orthogonal for real T), exact in long double up to
/// rounding: the product of two Householder reflections I - 2 v v^H / (v^H v).
template <class T>
wide random_unitary(std::size_t n, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    wide q = identity(n);
    for (int r = 0; r < 2; ++r) {
        wide v(n);
        long double vv = 0;
        for (W& x : v) {
            x = tessera::is_complex_v<T> ? W(d(rng), d(rng)) : W(d(rng));
            vv += std::norm(x);
        }
        wide h = identity(n);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < n; ++j) h[i * n + j] -= 2.0L * v[i] * std::conj(v[j]) / vv;
        q = matmul(q, h, n, n, n);
    }
    return q;
}

TYPED_TEST(LinalgTypedTest, EigvalshMatchesEighAndKnownSpectra) {
    using T = TypeParam;
    using R = real_t<T>;
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : all_sizes) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const double root_n = std::sqrt(static_cast<double>(n));
            // Random Hermitian items with garbage above the diagonal: eigh's values, and the trace
            // and the sum of squares (squared Frobenius norm) of the true matrices.
            auto a = random_matrices<T>(s, {3, n, n}, kind::hermitian, rng);
            auto poisoned = dense_copy(s, a.view());
            for (std::size_t i = 0; i < 3; ++i)
                for (std::size_t r = 0; r < n; ++r)
                    for (std::size_t c = r + 1; c < n; ++c) poisoned.data()[(i * n + r) * n + c] = T(R(1e3));
            const auto w = tessera::eigvalsh(s, poisoned);
            ASSERT_EQ(w.shape(), (shape{3, n}));
            const auto full = tessera::eigh(s, poisoned);
            for (std::size_t i = 0; i < 3; ++i) {
                const wide ai = item_of(a, i, n, n);
                const double scale = norm(ai);
                long double trace = 0, sum = 0, squares = 0;
                for (std::size_t c = 0; c < n; ++c) {
                    const R v = w.data()[i * n + c];
                    EXPECT_NEAR(static_cast<double>(v), static_cast<double>(full.w.data()[i * n + c]), tol<T>(n) * scale);
                    if (c > 0) {
                        EXPECT_LE(w.data()[i * n + c - 1], v);
                    }
                    trace += std::real(ai[c * n + c]);
                    sum += v;
                    squares += static_cast<long double>(v) * v;
                }
                EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(trace), tol<T>(n) * scale * root_n);
                EXPECT_NEAR(static_cast<double>(squares), scale * scale, 2.0 * tol<T>(n) * scale * scale * root_n);
            }
            // Known spectra: Q diag(lambda) Q^H with Q unitary, formed in long double and rounded.
            auto b = tessera::empty<T>(s, {3, n, n});
            std::vector<std::vector<long double>> lambda(3);
            for (std::size_t i = 0; i < 3; ++i) {
                std::uniform_real_distribution<double> d(-4.0, 4.0);
                for (std::size_t c = 0; c < n; ++c) lambda[i].push_back(d(rng));
                std::sort(lambda[i].begin(), lambda[i].end());
                const wide q = random_unitary<T>(n, rng);
                wide qd = q;
                for (std::size_t r = 0; r < n; ++r)
                    for (std::size_t c = 0; c < n; ++c) qd[r * n + c] *= lambda[i][c];
                const wide bi = matmul(qd, adjoint(q, n, n), n, n, n);
                for (std::size_t e = 0; e < n * n; ++e) {
                    if constexpr (tessera::is_complex_v<T>)
                        b.data()[i * n * n + e] = T(static_cast<R>(bi[e].real()), static_cast<R>(bi[e].imag()));
                    else
                        b.data()[i * n * n + e] = static_cast<R>(bi[e].real());
                }
            }
            const auto wb = tessera::eigvalsh(s, b);
            for (std::size_t i = 0; i < 3; ++i) {
                const double scale = norm(item_of(b, i, n, n));
                for (std::size_t c = 0; c < n; ++c)
                    EXPECT_NEAR(static_cast<double>(wb.data()[i * n + c]), static_cast<double>(lambda[i][c]), tol<T>(n) * scale)
                        << "item " << i << ", eigenvalue " << c;
            }
        }
    });
}

// Strided inputs (transposed, batch-sliced, broadcast) and strided outs give bitwise the results of
// dense operands: each item is copied in before it is computed.
TYPED_TEST(LinalgTypedTest, StridedInputsAndOutputsMatchDenseOnes) {
    using T = TypeParam;
    using R = real_t<T>;
    std::mt19937_64 rng(fresh_seed());
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{6}, std::size_t{12}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            // Six matrices; the view takes every other one, transposed.
            auto storage = random_matrices<T>(s, {6, n, n}, kind::spd, rng);
            for (T& x : storage.values()) x += T(R(0.25)) * T(std::real(x));  // not symmetric any more
            for (std::size_t i = 0; i < 6; ++i)
                for (std::size_t r = 0; r < n; ++r) storage.data()[(i * n + r) * n + r] += T(R(n));
            const tensor_view<const T> strided = storage.view().slice(0, 0, tessera::slice_end, 2).transpose(1, 2);
            auto dense = dense_copy(s, strided);
            auto rhs_storage = random_values<T>(s, {2, n, 3}, rng);
            const tensor_view<const T> rhs = rhs_storage.view().slice(2, 0, 3, 2);  // [2, n, 2], column stride 2

            EXPECT_TRUE(bitwise_equal(tessera::inverse(s, strided), tessera::inverse(s, dense)));
            EXPECT_TRUE(bitwise_equal(tessera::det(s, strided), tessera::det(s, dense)));
            // a broadcast over b's batch: a's batch [3] against b's [2, 1] -> [2, 3].
            auto rhs_b = dense_copy(s, rhs.unsqueeze(1));
            EXPECT_TRUE(bitwise_equal(tessera::solve(s, strided, rhs.unsqueeze(1)),
                                      tessera::solve(s, dense, rhs_b)));
            {
                auto [q1, r1] = tessera::qr(s, strided);
                auto [q2, r2] = tessera::qr(s, dense);
                EXPECT_TRUE(bitwise_equal(q1, q2));
                EXPECT_TRUE(bitwise_equal(r1, r2));
            }
            {
                auto [u1, s1, v1] = tessera::svd(s, strided);
                auto [u2, s2, v2] = tessera::svd(s, dense);
                EXPECT_TRUE(bitwise_equal(u1, u2));
                EXPECT_TRUE(bitwise_equal(s1, s2));
                EXPECT_TRUE(bitwise_equal(v1, v2));
            }
            {
                auto [l1, p1] = tessera::lu(s, strided);
                auto [l2, p2] = tessera::lu(s, dense);
                EXPECT_TRUE(bitwise_equal(l1, l2));
                EXPECT_TRUE(bitwise_equal(p1, p2));
            }
            // Hermitian input read through a transposed view: the lower triangle of the view.
            auto h_storage = random_matrices<T>(s, {3, n, n}, kind::spd, rng);
            const tensor_view<const T> h = h_storage.view().transpose(1, 2);
            auto h_dense = dense_copy(s, h);
            EXPECT_TRUE(bitwise_equal(tessera::cholesky(s, h), tessera::cholesky(s, h_dense)));
            {
                auto [w1, v1] = tessera::eigh(s, h);
                auto [w2, v2] = tessera::eigh(s, h_dense);
                EXPECT_TRUE(bitwise_equal(w1, w2));
                EXPECT_TRUE(bitwise_equal(v1, v2));
            }
            EXPECT_TRUE(bitwise_equal(tessera::eigvalsh(s, h), tessera::eigvalsh(s, h_dense)));
            // Strided outs: into the transpose of a dense tensor.
            auto out_storage = tessera::empty<T>(s, {3, n, n});
            tessera::inverse(s, dense, out_storage.view().transpose(1, 2));
            EXPECT_TRUE(bitwise_equal(dense_copy(s, out_storage.view().transpose(1, 2)),
                                      tessera::inverse(s, dense)));
        }
    });
}

TYPED_TEST(LinalgTypedTest, OutParameterFormsMatchAllocatingOnes) {
    using T = TypeParam;
    using R = real_t<T>;
    std::mt19937_64 rng(fresh_seed());
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{2}, std::size_t{4}, std::size_t{7}, std::size_t{9}}) {
            auto a = random_matrices<T>(s, {3, n, n}, kind::spd, rng);
            auto b = random_values<T>(s, {3, n, 2}, rng);
            auto x = tessera::empty<T>(s, {3, n, 2});
            tessera::solve(s, a, b, x);
            EXPECT_TRUE(bitwise_equal(x, tessera::solve(s, a, b)));
            auto inv = tessera::empty<T>(s, {3, n, n});
            tessera::inverse(s, a, inv);
            EXPECT_TRUE(bitwise_equal(inv, tessera::inverse(s, a)));
            auto l = tessera::empty<T>(s, {3, n, n});
            tessera::cholesky(s, a, l);
            EXPECT_TRUE(bitwise_equal(l, tessera::cholesky(s, a)));
            auto f = tessera::empty<T>(s, {3, n, n});
            auto p = tessera::empty<std::int64_t>(s, {3, n});
            tessera::lu(s, a, f, p);
            auto [f2, p2] = tessera::lu(s, a);
            EXPECT_TRUE(bitwise_equal(f, f2));
            EXPECT_TRUE(bitwise_equal(p, p2));
            auto d = tessera::empty<T>(s, {3});
            tessera::det(s, a, d);
            EXPECT_TRUE(bitwise_equal(d, tessera::det(s, a)));
            auto sg = tessera::empty<T>(s, {3});
            auto la = tessera::empty<R>(s, {3});
            tessera::slogdet(s, a, sg, la);
            auto [sg2, la2] = tessera::slogdet(s, a);
            EXPECT_TRUE(bitwise_equal(sg, sg2));
            EXPECT_TRUE(bitwise_equal(la, la2));
            auto q = tessera::empty<T>(s, {3, n, n});
            auto r = tessera::empty<T>(s, {3, n, n});
            tessera::qr(s, a, q, r);
            auto [q2, r2] = tessera::qr(s, a);
            EXPECT_TRUE(bitwise_equal(q, q2));
            EXPECT_TRUE(bitwise_equal(r, r2));
            auto u = tessera::empty<T>(s, {3, n, n});
            auto sv = tessera::empty<R>(s, {3, n});
            auto vh = tessera::empty<T>(s, {3, n, n});
            tessera::svd(s, a, u, sv, vh);
            auto [u2, sv2, vh2] = tessera::svd(s, a);
            EXPECT_TRUE(bitwise_equal(u, u2));
            EXPECT_TRUE(bitwise_equal(sv, sv2));
            EXPECT_TRUE(bitwise_equal(vh, vh2));
            auto vals = tessera::empty<R>(s, {3, n});
            tessera::svdvals(s, a, vals);
            EXPECT_TRUE(bitwise_equal(vals, tessera::svdvals(s, a)));
            auto w = tessera::empty<R>(s, {3, n});
            auto v = tessera::empty<T>(s, {3, n, n});
            tessera::eigh(s, a, w, v);
            auto [w2, v2] = tessera::eigh(s, a);
            EXPECT_TRUE(bitwise_equal(w, w2));
            EXPECT_TRUE(bitwise_equal(v, v2));
            auto ev = tessera::empty<R>(s, {3, n});
            tessera::eigvalsh(s, a, ev);
            EXPECT_TRUE(bitwise_equal(ev, tessera::eigvalsh(s, a)));
            auto ev_info = tessera::empty<R>(s, {3, n});
            auto info = tessera::full<std::int32_t>(s, {3}, -7);
            tessera::eigvalsh(s, a, ev_info, info);
            EXPECT_TRUE(bitwise_equal(ev_info, ev));
            for (std::int32_t code : info.values()) EXPECT_EQ(code, 0);
        }
    });
}

// ---- in place ------------------------------------------------------------------------------------

TEST(LinalgTest, OutMayBeExactlyAnInput) {
    std::mt19937_64 rng(fresh_seed());
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{6}, std::size_t{10}}) {
            auto a = random_matrices<double>(s, {5, n, n}, kind::spd, rng);
            auto b = random_values<double>(s, {5, n, 2}, rng);
            auto want_x = tessera::solve(s, a, b);
            tessera::solve(s, a, b, b);
            EXPECT_TRUE(bitwise_equal(b, want_x)) << n;
            auto want_inv = tessera::inverse(s, a);
            auto c = dense_copy(s, a.view());
            tessera::inverse(s, c, c);
            EXPECT_TRUE(bitwise_equal(c, want_inv)) << n;
            auto want_l = tessera::cholesky(s, a);
            tessera::cholesky(s, a, a);
            EXPECT_TRUE(bitwise_equal(a, want_l)) << n;
        }
    });
}

// ---- failures per item ---------------------------------------------------------------------------

/// Zeroes column `col` of item `item`: LU then meets an exact zero pivot at step `col`, and the
/// closed forms an exact zero determinant.
template <class T>
void make_singular(tensor<T>& a, std::size_t item, std::size_t col) {
    const std::size_t n = a.extent(a.rank() - 1);
    for (std::size_t r = 0; r < n; ++r) a.data()[(item * n + r) * n + col] = T(0);
}

class LinalgFailureTest : public ::testing::TestWithParam<int> {};

TEST_P(LinalgFailureTest, SingularItemIsReportedByIndexAndPivot) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{3}, std::size_t{4}, std::size_t{6}, std::size_t{16}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            // Large enough to be split across threads on a multi-thread backend.
            const std::size_t items = n <= 4 ? 20000 : 1000;
            auto a = random_matrices<double>(s, {items, n, n}, kind::general, rng);
            auto b = random_values<double>(s, {items, n, 1}, rng);
            make_singular(a, items - 3, 0);
            make_singular(a, 17, 2);
            make_singular(a, items / 2, 1);
            const std::string expected =
                "solve: item 17 of " + std::to_string(items) + " is singular (pivot 2 is 0)";
            try {
                tessera::solve(s, a, b);
                ADD_FAILURE() << "no exception";
            } catch (const tessera::linalg_error& e) {
                EXPECT_EQ(std::string(e.what()), expected);
                EXPECT_EQ(e.item(), 17u);
                EXPECT_EQ(e.items(), items);
                EXPECT_EQ(e.info(), 3);
                EXPECT_EQ(e.reason(), tessera::linalg_reason::singular);
            }
            try {
                tessera::inverse(s, a);
                ADD_FAILURE() << "no exception";
            } catch (const tessera::linalg_error& e) {
                EXPECT_EQ(std::string(e.what()),
                          "inverse: item 17 of " + std::to_string(items) + " is singular (pivot 2 is 0)");
            }
            // A linalg_error is a tessera::error.
            EXPECT_THROW(tessera::inverse(s, a), tessera::error);
        }
    });
}

TEST_P(LinalgFailureTest, InfoFormReportsEveryFailedItemAndFillsItWithNan) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5}, std::size_t{16}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const std::size_t items = n <= 4 ? 20000 : 1000;
            auto a = random_matrices<float>(s, {items, n, n}, kind::general, rng);
            auto b = random_values<float>(s, {items, n, 2}, rng);
            const std::size_t bad1 = 17, bad2 = items - 1;
            make_singular(a, bad1, n - 1);
            make_singular(a, bad2, 0);
            auto x = tessera::empty<float>(s, {items, n, 2});
            auto info = tessera::full<std::int32_t>(s, {items}, -7);
            tessera::solve(s, a, b, x, info);
            auto reference = tessera::empty<float>(s, {items, n, 2});
            for (std::size_t i = 0; i < items; ++i) {
                const std::int32_t want = i == bad1 ? static_cast<std::int32_t>(n) : (i == bad2 ? 1 : 0);
                ASSERT_EQ(info.data()[i], want) << "item " << i;
            }
            EXPECT_TRUE(all_nan(x, bad1 * n * 2, n * 2));
            EXPECT_TRUE(all_nan(x, bad2 * n * 2, n * 2));
            const wide x0 = item_of(x, 0, n, 2);
            EXPECT_LE(distance(x0, ref_solve(item_of(a, 0, n, n), item_of(b, 0, n, 2), n, 2)),
                      tol<float>(n) * norm(x0));

            auto inv = tessera::empty<float>(s, {items, n, n});
            tessera::inverse(s, a, inv, info);
            EXPECT_EQ(info.data()[bad1], static_cast<std::int32_t>(n));
            EXPECT_EQ(info.data()[bad2], 1);
            EXPECT_EQ(info.data()[1], 0);
            EXPECT_TRUE(all_nan(inv, bad1 * n * n, n * n));
            EXPECT_FALSE(all_nan(inv, 0, n * n));

            // lu reports the same codes but keeps the (valid) factors.
            auto f = tessera::empty<float>(s, {items, n, n});
            auto p = tessera::empty<std::int64_t>(s, {items, n});
            tessera::lu(s, a, f, p, info);
            EXPECT_EQ(info.data()[bad1], static_cast<std::int32_t>(n));
            EXPECT_EQ(info.data()[bad2], 1);
            EXPECT_FALSE(all_nan(f, bad1 * n * n, n * n));
            auto [f2, p2] = tessera::lu(s, a);  // no info: no exception either
            EXPECT_TRUE(bitwise_equal(f, f2));
        }
    });
}

TEST_P(LinalgFailureTest, IndefiniteItemIsReportedByCholesky) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{3}, std::size_t{4}, std::size_t{8}, std::size_t{20}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const std::size_t items = 5000;
            auto a = random_matrices<std::complex<double>>(s, {items, n, n}, kind::spd, rng);
            // Leading minor of order 3 of items 5 and 900 not positive definite.
            for (std::size_t item : {std::size_t{900}, std::size_t{5}})
                a.data()[(item * n + 2) * n + 2] = -1000.0;
            try {
                tessera::cholesky(s, a);
                ADD_FAILURE() << "no exception";
            } catch (const tessera::linalg_error& e) {
                EXPECT_EQ(std::string(e.what()),
                          "cholesky: item 5 of 5000 is not positive definite (its leading minor of "
                          "order 3 is not)");
                EXPECT_EQ(e.item(), 5u);
                EXPECT_EQ(e.info(), 3);
                EXPECT_EQ(e.reason(), tessera::linalg_reason::not_positive_definite);
            }
            auto l = tessera::empty<std::complex<double>>(s, {items, n, n});
            auto info = tessera::empty<std::int32_t>(s, {items});
            tessera::cholesky(s, a, l, info);
            for (std::size_t i = 0; i < items; ++i)
                ASSERT_EQ(info.data()[i], (i == 5 || i == 900) ? 3 : 0) << i;
            EXPECT_TRUE(all_nan(l, 5 * n * n, n * n));
            EXPECT_TRUE(all_nan(l, 900 * n * n, n * n));
            const wide l0 = item_of(l, 0, n, n), a0 = item_of(a, 0, n, n);
            EXPECT_LE(distance(matmul(l0, adjoint(l0, n, n), n, n, n), a0), tol<double>(n) * norm(a0));
        }
    });
}

TEST_P(LinalgFailureTest, EighInfoIsZeroOnSuccess) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        auto a = random_matrices<double>(s, {3000, 5, 5}, kind::hermitian, rng);
        auto w = tessera::empty<double>(s, {3000, 5});
        auto v = tessera::empty<double>(s, {3000, 5, 5});
        auto info = tessera::full<std::int32_t>(s, {3000}, 9);
        tessera::eigh(s, a, w, v, info);
        for (std::int32_t code : info.values()) ASSERT_EQ(code, 0);
    });
}

TEST_P(LinalgFailureTest, EigvalshReportsItemsThatDoNotConverge) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{3}, std::size_t{5}, std::size_t{12}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const std::size_t items = 3000;
            auto a = random_matrices<double>(s, {items, n, n}, kind::hermitian, rng);
            // A NaN (an inf becomes one when the solver scales the matrix by its largest entry)
            // never passes the QR iteration's deflation test, so the solver gives up.
            a.data()[(2100 * n + 1) * n] = std::numeric_limits<double>::infinity();
            a.data()[(17 * n + 1) * n] = std::numeric_limits<double>::quiet_NaN();
            try {
                (void)tessera::eigvalsh(s, a);
                ADD_FAILURE() << "no exception";
            } catch (const tessera::linalg_error& e) {
                EXPECT_EQ(std::string(e.what()), "eigvalsh: item 17 of 3000 did not converge");
                EXPECT_EQ(e.item(), 17u);
                EXPECT_EQ(e.items(), items);
                EXPECT_EQ(e.info(), 1);
                EXPECT_EQ(e.reason(), tessera::linalg_reason::no_convergence);
            }
            auto w = tessera::empty<double>(s, {items, n});
            auto info = tessera::full<std::int32_t>(s, {items}, -7);
            tessera::eigvalsh(s, a, w, info);
            for (std::size_t i = 0; i < items; ++i)
                ASSERT_EQ(info.data()[i], (i == 17 || i == 2100) ? 1 : 0) << i;
            EXPECT_TRUE(all_nan(w, 17 * n, n));
            EXPECT_TRUE(all_nan(w, 2100 * n, n));
            EXPECT_FALSE(all_nan(w, 0, n));
            // eigh fails on the same items.
            auto ew = tessera::empty<double>(s, {items, n});
            auto ev = tessera::empty<double>(s, {items, n, n});
            auto eigh_info = tessera::empty<std::int32_t>(s, {items});
            tessera::eigh(s, a, ew, ev, eigh_info);
            EXPECT_TRUE(bitwise_equal(eigh_info, info));
        }
    });
}

// Closed forms (n <= 3, 4 x 4 cofactors) fall back to LU when the determinant under- or overflows,
// so a well-conditioned but tiny or huge matrix is solved, not reported or turned into inf/NaN.
TEST(LinalgTest, ClosedFormsFallBackToLuOnTinyOrHugeDeterminants) {
    std::mt19937_64 rng(fresh_seed());
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}}) {
            for (float scale : {1e-25f, 1e25f}) {
                SCOPED_TRACE("n = " + std::to_string(n) + ", scale " + std::to_string(scale));
                auto a = random_matrices<float>(s, {8, n, n}, kind::general, rng);
                for (float& v : a.values()) v *= scale;
                auto x = tessera::inverse(s, a);
                auto b = random_values<float>(s, {8, n, 1}, rng);
                auto y = tessera::solve(s, a, b);
                auto [sign, logabs] = tessera::slogdet(s, a);
                for (std::size_t i = 0; i < 8; ++i) {
                    const wide ai = item_of(a, i, n, n), xi = item_of(x, i, n, n);
                    EXPECT_LE(distance(matmul(ai, xi, n, n, n), identity(n)), tol<float>(n) * norm(ai) * norm(xi));
                    const wide want = ref_solve(ai, item_of(b, i, n, 1), n, 1);
                    EXPECT_LE(distance(item_of(y, i, n, 1), want), tol<float>(n) * norm(want));
                    const W d = ref_det(ai, n);
                    EXPECT_NEAR(static_cast<double>(logabs.data()[i]), static_cast<double>(std::log(std::abs(d))), 1e-4 * std::abs(static_cast<double>(std::log(std::abs(d)))));
                    EXPECT_EQ(static_cast<long double>(sign.data()[i]), std::real(d) < 0 ? -1.0L : 1.0L);
                }
            }
        }
    });
}

TEST(LinalgTest, NanInputPropagatesWithoutAnError) {
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{2}, std::size_t{4}, std::size_t{6}}) {
            auto a = tessera::zeros<double>(s, {n, n});
            for (std::size_t i = 0; i < n; ++i) a(i, i) = 1.0;
            a(1, 1) = std::numeric_limits<double>::quiet_NaN();
            auto x = tessera::inverse(s, a);
            EXPECT_TRUE(std::isnan(x(1, 1))) << n;
        }
    });
}

// ---- bad input -----------------------------------------------------------------------------------

using tessera::test::message_of;

TEST(LinalgTest, BadShapesThrowBeforeAnythingIsWritten) {
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        auto rect = tessera::full<double>(s, {2, 3, 4}, 1.0);
        auto vec = tessera::full<double>(s, {4}, 1.0);
        EXPECT_EQ(message_of([&] { tessera::inverse(s, rect); }),
                  "inverse: a has shape [2,3,4]; expected [..., n, n], a stack of square matrices");
        EXPECT_EQ(message_of([&] { tessera::det(s, vec); }),
                  "det: a has shape [4]; expected [..., n, n], a stack of square matrices");
        EXPECT_THROW(tessera::cholesky(s, rect), tessera::shape_error);
        EXPECT_THROW(tessera::qr(s, rect), tessera::shape_error);
        EXPECT_THROW(tessera::svd(s, rect), tessera::shape_error);
        EXPECT_THROW(tessera::eigh(s, rect), tessera::shape_error);
        EXPECT_THROW(tessera::lu(s, rect), tessera::shape_error);
        EXPECT_THROW(tessera::slogdet(s, rect), tessera::shape_error);
        EXPECT_THROW(tessera::svdvals(s, rect), tessera::shape_error);
        EXPECT_EQ(message_of([&] { tessera::eigvalsh(s, rect); }),
                  "eigvalsh: a has shape [2,3,4]; expected [..., n, n], a stack of square matrices");

        auto a = tessera::full<double>(s, {2, 3, 3}, 1.0);
        auto b_rows = tessera::full<double>(s, {2, 4, 1}, 1.0);
        EXPECT_EQ(message_of([&] { tessera::solve(s, a, b_rows); }),
                  "solve: b has shape [2,4,1] but a has shape [2,3,3]; expected b as [..., 3, k] (a "
                  "vector as [..., 3, 1])");
        EXPECT_THROW(tessera::solve(s, a, vec), tessera::shape_error);
        auto b_batch = tessera::full<double>(s, {3, 3, 1}, 1.0);
        EXPECT_EQ(message_of([&] { tessera::solve(s, a, b_batch); }),
                  "solve: the batch axes of a [2,3,3] and b [3,3,1] do not broadcast");

        // Wrong out shapes: nothing written.
        auto out = tessera::full<double>(s, {2, 3, 2}, -5.0);
        auto b = tessera::full<double>(s, {2, 3, 1}, 1.0);
        EXPECT_EQ(message_of([&] { tessera::solve(s, a, b, out); }),
                  "solve: out has shape [2,3,2] but the result has shape [2,3,1]");
        auto q = tessera::full<double>(s, {2, 3, 3}, -5.0);
        auto r = tessera::full<double>(s, {3, 3}, -5.0);
        EXPECT_EQ(message_of([&] { tessera::qr(s, a, q, r); }),
                  "qr: r has shape [3,3] but the result has shape [2,3,3]");
        auto info = tessera::full<std::int32_t>(s, {3}, -5);
        auto x = tessera::full<double>(s, {2, 3, 1}, -5.0);
        EXPECT_EQ(message_of([&] { tessera::solve(s, a, b, x, info); }),
                  "solve: info has shape [3] but the result has shape [2]");
        for (double v : out.values()) EXPECT_EQ(v, -5.0);
        for (double v : q.values()) EXPECT_EQ(v, -5.0);
        for (double v : x.values()) EXPECT_EQ(v, -5.0);
        for (std::int32_t v : info.values()) EXPECT_EQ(v, -5);

        // Empty batches are valid and write nothing.
        auto none = tessera::empty<double>(s, {0, 3, 3});
        EXPECT_EQ(tessera::inverse(s, none).shape(), (shape{0, 3, 3}));
        EXPECT_EQ(tessera::solve(s, none, tessera::empty<double>(s, {0, 3, 2})).shape(), (shape{0, 3, 2}));
        EXPECT_EQ(tessera::det(s, none).shape(), (shape{0}));
        EXPECT_EQ(tessera::svd(s, none).s.shape(), (shape{0, 3}));
        EXPECT_EQ(tessera::eigh(s, none).w.shape(), (shape{0, 3}));
        EXPECT_EQ(tessera::eigvalsh(s, none).shape(), (shape{0, 3}));
        EXPECT_EQ(tessera::solve(s, tessera::empty<double>(s, {2, 0, 0}), tessera::empty<double>(s, {0, 2})).shape(),
                  (shape{2, 0, 2}));
    });
}

TEST(LinalgTest, EigvalshHandlesEmptyTinyBroadcastAndStridedOperands) {
    std::mt19937_64 rng(fresh_seed());
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        EXPECT_EQ(tessera::eigvalsh(s, tessera::empty<double>(s, {0, 3, 3})).shape(), (shape{0, 3}));
        EXPECT_EQ(tessera::eigvalsh(s, tessera::empty<double>(s, {2, 0, 0})).shape(), (shape{2, 0}));
        auto w0 = tessera::empty<double>(s, {2, 0});
        auto info = tessera::full<std::int32_t>(s, {2}, -7);
        tessera::eigvalsh(s, tessera::empty<double>(s, {2, 0, 0}), w0, info);
        EXPECT_EQ(info.data()[0], 0);
        EXPECT_EQ(info.data()[1], 0);
        // n = 1: the real part of the entry (a diagonal's imaginary part is ignored).
        auto one = tessera::full<std::complex<double>>(s, {3, 1, 1}, std::complex<double>(2.5, 7.0));
        const auto w1 = tessera::eigvalsh(s, one);
        ASSERT_EQ(w1.shape(), (shape{3, 1}));
        for (double v : w1.values()) EXPECT_EQ(v, 2.5);
        // A single matrix gives [n].
        auto a = random_matrices<double>(s, {1, 5, 5}, kind::hermitian, rng);
        const auto once = tessera::eigvalsh(s, a);
        EXPECT_EQ(tessera::eigvalsh(s, a.view().squeeze(0)).shape(), (shape{5}));
        // A broadcast batch (stride 0) repeats the item's values.
        const auto w = tessera::eigvalsh(s, a.view().broadcast_to({4, 5, 5}));
        ASSERT_EQ(w.shape(), (shape{4, 5}));
        for (std::size_t i = 0; i < 4; ++i)
            for (std::size_t c = 0; c < 5; ++c) EXPECT_EQ(w.data()[i * 5 + c], once.data()[c]);
        // Transposed and batch-sliced input, strided out (every other column of a wider tensor).
        auto storage = random_matrices<double>(s, {6, 5, 5}, kind::hermitian, rng);
        const tensor_view<const double> strided = storage.view().slice(0, 0, tessera::slice_end, 2).transpose(1, 2);
        auto out_storage = tessera::full<double>(s, {3, 10}, -7.0);
        const tensor_view<double> out = out_storage.view().slice(1, 0, tessera::slice_end, 2);
        tessera::eigvalsh(s, strided, out);
        const auto dense = tessera::eigvalsh(s, dense_copy(s, strided));
        for (std::size_t i = 0; i < 3; ++i)
            for (std::size_t c = 0; c < 5; ++c) {
                EXPECT_EQ(out_storage.data()[i * 10 + 2 * c], dense.data()[i * 5 + c]);
                EXPECT_EQ(out_storage.data()[i * 10 + 2 * c + 1], -7.0);
            }
    });
}

TEST(LinalgTest, EigvalshChecksItsOperandsBeforeWriting) {
    std::mt19937_64 rng(fresh_seed());
    backend be{backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        auto a = random_matrices<double>(s, {2, 3, 3}, kind::hermitian, rng);
        const auto before = dense_copy(s, a.view());
        auto w_bad = tessera::full<double>(s, {2, 4}, -5.0);
        EXPECT_EQ(message_of([&] { tessera::eigvalsh(s, a, w_bad); }),
                  "eigvalsh: w has shape [2,4] but the result has shape [2,3]");
        auto w = tessera::full<double>(s, {2, 3}, -5.0);
        auto info_bad = tessera::full<std::int32_t>(s, {3}, -5);
        EXPECT_EQ(message_of([&] { tessera::eigvalsh(s, a, w, info_bad); }),
                  "eigvalsh: info has shape [3] but the result has shape [2]");
        const tensor_view<double> inside(a.data() + 1, shape{2, 3});
        EXPECT_EQ(message_of([&] { tessera::eigvalsh(s, a, inside); }),
                  "eigvalsh: w overlaps a without being the same view; in-place use must pass the very same elements");
        auto row = tessera::full<double>(s, {1, 3}, -5.0);
        EXPECT_EQ(message_of([&] { tessera::eigvalsh(s, a, row.view().broadcast_to({2, 3})); }),
                  "eigvalsh: w repeats elements (an axis with stride 0); it cannot be written");
        const tensor_view<std::int32_t> info_in_w(reinterpret_cast<std::int32_t*>(w.data()), shape{2});
        EXPECT_EQ(message_of([&] { tessera::eigvalsh(s, a, w, info_in_w); }),
                  "eigvalsh: info overlaps w; the two must not share any element");
        for (double v : w_bad.values()) EXPECT_EQ(v, -5.0);
        for (double v : w.values()) EXPECT_EQ(v, -5.0);
        for (double v : row.values()) EXPECT_EQ(v, -5.0);
        for (std::int32_t v : info_bad.values()) EXPECT_EQ(v, -5);
        EXPECT_TRUE(bitwise_equal(a, before));
    });
}

TEST(LinalgTest, OverlappingOutsThrowBeforeAnythingIsWritten) {
    backend be{backend_options{}.with_threads(1)};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        auto big = random_matrices<double>(s, {3, 4, 4}, kind::spd, rng);
        const auto before = dense_copy(s, big.view());
        const tensor_view<double> first2 = big.view().slice(0, 0, 2);
        const tensor_view<double> last2 = big.view().slice(0, 1, 3);
        // out overlaps a without being the same view.
        EXPECT_EQ(message_of([&] { tessera::inverse(s, first2, last2); }),
                  "inverse: out overlaps a without being the same view; in-place use must pass the very same elements");
        EXPECT_THROW(tessera::cholesky(s, first2, first2.transpose(1, 2)), tessera::alias_error);
        auto b = tessera::full<double>(s, {2, 4, 4}, 1.0);
        EXPECT_EQ(message_of([&] { tessera::solve(s, first2, b, last2); }),
                  "solve: out overlaps a without being the same view; in-place use must pass the very same elements");
        // Two outs sharing memory.
        auto q = tessera::empty<double>(s, {2, 4, 4});
        EXPECT_EQ(message_of([&] { tessera::qr(s, b, q, q); }),
                  "qr: q overlaps r; the two must not share any element");
        auto u = tessera::empty<double>(s, {2, 4, 4});
        auto sv = tessera::empty<double>(s, {2, 4});
        EXPECT_THROW(tessera::svd(s, b, u, sv, u), tessera::alias_error);
        // info overlapping an out (same bytes reinterpreted).
        auto x = tessera::empty<double>(s, {2, 4, 4});
        const tensor_view<std::int32_t> info(reinterpret_cast<std::int32_t*>(x.data()), shape{2});
        EXPECT_EQ(message_of([&] { tessera::inverse(s, b, x, info); }),
                  "inverse: info overlaps out; the two must not share any element");
        // An out that repeats elements.
        auto one = tessera::empty<double>(s, {1, 4, 4});
        EXPECT_EQ(message_of([&] { tessera::inverse(s, b, one.view().broadcast_to({2, 4, 4})); }),
                  "inverse: out repeats elements (an axis with stride 0); it cannot be written");
        EXPECT_TRUE(bitwise_equal(big, before));
    });
}

// ---- dispatch and allocation counts --------------------------------------------------------------

class LinalgDispatchTest : public ::testing::TestWithParam<int> {};

/// Calls every op once on `a` (SPD, [items, n, n]) with out-parameters, eigvalsh also with info:
/// 12 op calls.
void run_every_op(session& s, const tensor<double>& a, const tensor<double>& b, std::size_t items,
                  std::size_t n, std::vector<tensor<double>>& outs, std::vector<tensor<std::int64_t>>& piv,
                  tensor<std::int32_t>& info) {
    if (outs.empty()) {
        for (int i = 0; i < 9; ++i) outs.push_back(tessera::empty<double>(s, {items, n, n}));
        outs.push_back(tessera::empty<double>(s, {items, n, 2}));
        outs.push_back(tessera::empty<double>(s, {items}));
        outs.push_back(tessera::empty<double>(s, {items}));
        outs.push_back(tessera::empty<double>(s, {items}));
        outs.push_back(tessera::empty<double>(s, {items, n}));
        outs.push_back(tessera::empty<double>(s, {items, n}));
        outs.push_back(tessera::empty<double>(s, {items, n}));
        outs.push_back(tessera::empty<double>(s, {items, n}));
        piv.push_back(tessera::empty<std::int64_t>(s, {items, n}));
        info = tessera::empty<std::int32_t>(s, {items});
    }
    tessera::solve(s, a, b, outs[9], info);
    tessera::inverse(s, a, outs[0]);
    tessera::cholesky(s, a, outs[1]);
    tessera::lu(s, a, outs[2], piv[0]);
    tessera::det(s, a, outs[10]);
    tessera::slogdet(s, a, outs[11], outs[12]);
    tessera::qr(s, a, outs[3], outs[4]);
    tessera::svd(s, a, outs[5], outs[13], outs[6]);
    tessera::svdvals(s, a, outs[14]);
    tessera::eigh(s, a, outs[15], outs[7]);
    tessera::eigvalsh(s, a, outs[16]);
    tessera::eigvalsh(s, a, outs[16], info);
}

TEST_P(LinalgDispatchTest, SmallBatchRunsInlineAndLargeBatchDispatchesOnce) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    std::mt19937_64 rng(fresh_seed());
    for (std::size_t n : {std::size_t{3}, std::size_t{4}, std::size_t{6}, std::size_t{12}}) {
        SCOPED_TRACE("n = " + std::to_string(n));
        for (std::size_t items : {std::size_t{1}, n <= 4 ? std::size_t{20000} : std::size_t{2000}}) {
            const tessera::stats before = be.stats();
            be.run([&](session& s) {
                auto a = random_matrices<double>(s, {items, n, n}, kind::spd, rng);
                auto b = random_values<double>(s, {items, n, 2}, rng);
                std::vector<tensor<double>> outs;
                std::vector<tensor<std::int64_t>> piv;
                tensor<std::int32_t> info;
                run_every_op(s, a, b, items, n, outs, piv, info);
            });
            const tessera::stats d = be.stats() - before;
            const bool parallel = items > 1 && threads > 1;
            EXPECT_EQ(d.parallel_dispatches, parallel ? 12u : 0u) << items;
            EXPECT_EQ(d.inline_dispatches, parallel ? 0u : 12u) << items;
        }
    }
}

TEST_P(LinalgDispatchTest, ParallelResultsEqualInlineOnes) {
    const int threads = GetParam();
    backend inline_be{backend_options{}.with_threads(1)};
    backend be{backend_options{}.with_threads(threads)};
    std::mt19937_64 rng(fresh_seed());
    for (std::size_t n : {std::size_t{2}, std::size_t{5}, std::size_t{12}}) {
        inline_be.run([&](session& s1) {
            auto a = random_matrices<float>(s1, {3000, n, n}, kind::spd, rng);
            auto b = random_values<float>(s1, {3000, n, 2}, rng);
            const auto x1 = tessera::solve(s1, a, b);
            const auto svd1 = tessera::svd(s1, a);
            const auto eigh1 = tessera::eigh(s1, a);
            be.run([&](session& s) {
                EXPECT_TRUE(bitwise_equal(tessera::solve(s, a, b), x1));
                const auto svd = tessera::svd(s, a);
                EXPECT_TRUE(bitwise_equal(svd.u, svd1.u));
                EXPECT_TRUE(bitwise_equal(svd.s, svd1.s));
                EXPECT_TRUE(bitwise_equal(svd.vh, svd1.vh));
                const auto eigh = tessera::eigh(s, a);
                EXPECT_TRUE(bitwise_equal(eigh.w, eigh1.w));
                EXPECT_TRUE(bitwise_equal(eigh.v, eigh1.v));
            });
        });
    }
}

// n <= 8 keeps every matrix on the stack: a warm session makes no heap allocation, in both forms.
TEST_P(LinalgDispatchTest, WarmCallsMakeNoHeapAllocationUpToEight) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5}, std::size_t{8}}) {
            SCOPED_TRACE("n = " + std::to_string(n));
            const std::size_t items = 4;  // inline on every backend
            auto a = random_matrices<double>(s, {items, n, n}, kind::spd, rng);
            auto b = random_values<double>(s, {items, n, 2}, rng);
            std::vector<tensor<double>> outs;
            std::vector<tensor<std::int64_t>> piv;
            tensor<std::int32_t> info;
            run_every_op(s, a, b, items, n, outs, piv, info);  // warm
            {
                tessera::test::allocation_scope counted;
                run_every_op(s, a, b, items, n, outs, piv, info);
                EXPECT_EQ(counted.count(), 0u) << "out-parameter forms";
            }
            const auto allocating_forms = [&] {
                const auto x = tessera::solve(s, a, b);
                const auto inv = tessera::inverse(s, a);
                const auto l = tessera::cholesky(s, a);
                const auto f = tessera::lu(s, a);
                const auto d = tessera::slogdet(s, a);
                const auto q = tessera::qr(s, a);
                const auto u = tessera::svd(s, a);
                const auto w = tessera::eigh(s, a);
                const auto ev = tessera::eigvalsh(s, a);
            };
            allocating_forms();  // warm: the workspace now holds a block of every size used
            {
                tessera::test::allocation_scope counted;
                for (int i = 0; i < 3; ++i) allocating_forms();
                EXPECT_EQ(counted.count(), 0u) << "allocating forms";
            }
        }
    });
}

// The pinned claim of the task: solve and inverse at n = 3 and 4, in a large batch on a one-thread
// backend too (a parallel dispatch may allocate inside oneTBB; see the next test).
TEST(LinalgTest, SolveAndInverseAtThreeAndFourMakeNoHeapAllocationInALargeBatch) {
    backend be{backend_options{}.with_threads(1)};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{3}, std::size_t{4}}) {
            auto a = random_matrices<float>(s, {10000, n, n}, kind::general, rng);
            auto b = random_values<float>(s, {10000, n, 1}, rng);
            auto x = tessera::empty<float>(s, {10000, n, 1});
            auto inv = tessera::empty<float>(s, {10000, n, n});
            auto info = tessera::empty<std::int32_t>(s, {10000});
            tessera::solve(s, a, b, x);
            tessera::inverse(s, a, inv, info);
            tessera::test::allocation_scope counted;
            tessera::solve(s, a, b, x);
            tessera::solve(s, a, b, x, info);
            tessera::inverse(s, a, inv);
            tessera::inverse(s, a, inv, info);
            EXPECT_EQ(counted.count(), 0u) << n;
        }
    });
}

// Above 8, eigvalsh's solver storage is allocated once per chunk of items, not per item (eigh
// also allocates per item, to form the eigenvectors).
TEST(LinalgTest, EigvalshAboveEightAllocatesPerChunkNotPerItem) {
    backend be{backend_options{}.with_threads(1)};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        for (std::size_t n : {std::size_t{9}, std::size_t{12}, std::size_t{20}}) {
            auto allocations = [&](std::size_t items) {
                auto a = random_matrices<double>(s, {items, n, n}, kind::hermitian, rng);
                auto w = tessera::empty<double>(s, {items, n});
                tessera::eigvalsh(s, a, w);  // warm
                tessera::test::allocation_scope counted;
                tessera::eigvalsh(s, a, w);
                return counted.count();
            };
            const auto one = allocations(1);
            // Eigen's per-chunk buffers come from malloc, which is not counted under a sanitizer.
            if (tessera::test::counts_malloc) {
                EXPECT_GT(one, 0u) << n;
            }
            EXPECT_EQ(allocations(50), one) << n;
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, LinalgFailureTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);
INSTANTIATE_TEST_SUITE_P(Threads, LinalgDispatchTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
