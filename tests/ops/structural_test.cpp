// contiguous, clone, copy, fill, concat and stack: results against reference loops on random data
// of every element type, strided and broadcast operands, the blocked transpose at ragged sizes,
// every error (with the out-parameter left unchanged), dispatch counts and heap allocations.
#include "support/alloc_counter.hpp"
#include "support/backends.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;

// ---- reference helpers: index arithmetic written out, independent of tessera's loops ----------

using index_span = std::span<const std::size_t>;

// Calls fn(index) for every multi-index of `s` in row-major order.
template <class Fn>
void for_each_index(const shape& s, Fn fn) {
    std::array<std::size_t, tessera::max_rank> idx{};
    for (std::size_t n = 0; n < s.count(); ++n) {
        fn(index_span(idx.data(), s.rank()));
        for (std::size_t a = s.rank(); a-- > 0;) {
            if (++idx[a] < s[a]) break;
            idx[a] = 0;
        }
    }
}

// The element of `v` at `index`, where `index` may have more leading axes than `v` and extent-1
// axes of `v` repeat (NumPy broadcasting read by hand).
template <class T>
T read(const tensor_view<T>& v, index_span index) {
    const std::size_t lead = index.size() - v.rank();
    std::ptrdiff_t offset = 0;
    for (std::size_t a = 0; a < v.rank(); ++a) {
        const std::size_t i = v.extent(a) == 1 ? 0 : index[lead + a];
        offset += static_cast<std::ptrdiff_t>(i) * v.stride(a);
    }
    return v.data()[offset];
}

std::string text(index_span index) {
    std::ostringstream o;
    o << '[';
    for (std::size_t i = 0; i < index.size(); ++i) o << (i ? "," : "") << index[i];
    o << ']';
    return o.str();
}

// Expects got[i] == want[i] (want broadcast to got's shape) for every index; reports the count
// and the first mismatch instead of one failure per element.
template <class T, class U>
void expect_elements(const tensor_view<T>& got, const tensor_view<U>& want,
                     const std::string& what) {
    std::size_t bad = 0;
    std::string first;
    for_each_index(got.shape(), [&](index_span i) {
        if (!(read(got, i) == read(want, i)) && bad++ == 0) first = text(i);
    });
    EXPECT_EQ(bad, 0u) << what << ": first mismatch at " << first;
}

template <class T>
T draw(std::mt19937_64& rng) {
    if constexpr (std::is_same_v<T, bool>) {
        return (rng() & 1u) != 0;
    } else if constexpr (tessera::is_complex_v<T>) {
        std::uniform_real_distribution<typename T::value_type> d(-100, 100);
        const auto re = d(rng);
        return T(re, d(rng));
    } else if constexpr (std::is_floating_point_v<T>) {
        return std::uniform_real_distribution<T>(-100, 100)(rng);
    } else {
        return std::uniform_int_distribution<T>(-1000000, 1000000)(rng);
    }
}

template <class T>
tensor<T> random_tensor(session& s, const shape& sh, std::mt19937_64& rng) {
    auto t = tessera::empty<T>(s, sh);
    for (T& v : t.values()) v = draw<T>(rng);
    return t;
}

// A copy of every element of `t` (its whole storage), to prove later that nothing changed.
template <class T>
std::vector<T> snapshot(const tensor<T>& t) {
    return {t.values().begin(), t.values().end()};
}

template <class T>
bool unchanged(const tensor<T>& t, const std::vector<T>& before) {
    for (std::size_t i = 0; i < before.size(); ++i)
        if (!(t.values()[i] == before[i])) return false;
    return true;
}

// Calls fn(std::type_identity<T>{}) for every element type.
template <class Fn>
void for_each_element_type(Fn fn) {
    fn(std::type_identity<float>{});
    fn(std::type_identity<double>{});
    fn(std::type_identity<std::complex<float>>{});
    fn(std::type_identity<std::complex<double>>{});
    fn(std::type_identity<std::int32_t>{});
    fn(std::type_identity<std::int64_t>{});
    fn(std::type_identity<bool>{});
}

template <class T>
std::string type_name() {
    if constexpr (std::is_same_v<T, float>) return "float";
    else if constexpr (std::is_same_v<T, double>) return "double";
    else if constexpr (std::is_same_v<T, std::complex<float>>) return "complex<float>";
    else if constexpr (std::is_same_v<T, std::complex<double>>) return "complex<double>";
    else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
    else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
    else return "bool";
}

// The counters one session running `fn` adds to `be`.
template <class Fn>
tessera::stats counted(backend& be, Fn fn) {
    const tessera::stats before = be.stats();
    be.run(fn);
    return be.stats() - before;
}

// Fresh random inputs on every run; a failure message names the seed that reproduces it.
class StructuralTest : public ::testing::TestWithParam<int> {
protected:
    backend be{backend_options{}.with_threads(GetParam())};
    std::uint64_t seed{std::random_device{}()};
    ::testing::ScopedTrace trace{__FILE__, __LINE__, "seed " + std::to_string(seed)};
    std::mt19937_64 rng{seed};
};

// ---- contiguous and clone -----------------------------------------------------------------------

TEST_P(StructuralTest, ContiguousMatchesAReferenceForEveryLayoutAndElementType) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            const std::string type = type_name<T>();
            auto m = random_tensor<T>(s, {40, 70}, rng);
            auto cube = random_tensor<T>(s, {6, 7, 9}, rng);
            auto row = random_tensor<T>(s, {1, 70}, rng);
            auto scalar = random_tensor<T>(s, {}, rng);
            const tensor_view<const T> mv = m, cv = cube, rv = row, sv = scalar;
            const std::vector<std::pair<std::string, tensor_view<const T>>> views = {
                {"dense", mv},
                {"transpose", mv.transpose()},
                {"row slice with step", mv.slice(0, 1, 39, 3)},
                {"column slice with step", mv.slice(1, 2, 67, 5)},
                {"negative step", mv.slice(1, 60, 3, -4)},
                {"flip rows", mv.flip(0)},
                {"flip columns", mv.flip(1)},
                {"flipped transpose", mv.transpose().flip(1)},
                {"strided transpose", mv.slice(0, 0, 40, 2).slice(1, 1, 70, 3).transpose()},
                {"permute 2,0,1", cv.permute({2, 0, 1})},
                {"permute 1,2,0", cv.permute({1, 2, 0})},
                {"permute 0,2,1", cv.permute({0, 2, 1})},
                {"reverse cube", cv.transpose()},
                {"broadcast row", rv.broadcast_to({50, 70})},
                {"broadcast column", mv.slice(1, 0, 1).broadcast_to({3, 40, 70})},
                {"broadcast scalar", sv.broadcast_to({4, 5})},
                {"diagonal", mv.diagonal()},
                {"scalar", sv},
                {"empty", mv.slice(0, 5, 5)},
            };
            for (const auto& [name, v] : views) {
                auto c = tessera::contiguous(s, v);
                ASSERT_EQ(c.shape(), v.shape()) << type << " " << name;
                EXPECT_TRUE(c.view().is_contiguous());
                expect_elements(c.view(), v, type + " " + name);
            }
        });
    });
}

TEST_P(StructuralTest, BlockedTransposeHandlesSizesThatAreNotMultiplesOfTheTile) {
    be.run([&](session& s) {
        const std::vector<std::array<std::size_t, 2>> sizes = {
            {1000, 37}, {37, 1000}, {1, 5}, {5, 1}, {0, 5}, {5, 0}, {1, 1}, {2, 3},
            {31, 33},   {32, 32},   {33, 31}, {64, 65}, {300, 257}, {129, 2}, {2, 129}};
        for (const auto& [r, c] : sizes) {
            auto a = random_tensor<float>(s, {r, c}, rng);
            auto t = tessera::contiguous(s, a.view().transpose());
            ASSERT_EQ(t.shape(), (shape{c, r}));
            const std::string size = std::to_string(r) + "x" + std::to_string(c);
            expect_elements(t.view(), a.view().transpose(), "float " + size);
            auto z = random_tensor<std::complex<double>>(s, {r, c}, rng);
            auto zt = tessera::contiguous(s, z.view().transpose());
            expect_elements(zt.view(), z.view().transpose(), "complex<double> " + size);
        }
        // A batch of transposes: the last two axes swapped under a leading batch axis.
        auto b = random_tensor<std::int64_t>(s, {3, 70, 45}, rng);
        auto bt = tessera::contiguous(s, b.view().transpose(1, 2));
        expect_elements(bt.view(), b.view().transpose(1, 2), "batched transpose");
    });
}

TEST_P(StructuralTest, SmallGrainSplitsTransposesAcrossManyChunksCorrectly) {
    backend fine{backend_options{}.with_threads(GetParam()).with_grain(100)};
    fine.run([&](session& s) {
        auto a = random_tensor<double>(s, {257, 131}, rng);
        auto t = tessera::contiguous(s, a.view().transpose());
        expect_elements(t.view(), a.view().transpose(), "transpose");
        auto c = random_tensor<std::int32_t>(s, {9, 33, 35}, rng);
        auto p = tessera::contiguous(s, c.view().permute({2, 0, 1}));
        expect_elements(p.view(), c.view().permute({2, 0, 1}), "permute");
        auto f = tessera::contiguous(s, c.view().flip(2).slice(1, 0, 33, 2));
        expect_elements(f.view(), c.view().flip(2).slice(1, 0, 33, 2), "flip and slice");
    });
}

TEST_P(StructuralTest, ContiguousIsAnIndependentCopyEvenOfADenseTensor) {
    be.run([&](session& s) {
        auto a = random_tensor<double>(s, {8, 9}, rng);
        auto c = tessera::contiguous(s, a);
        EXPECT_NE(c.data(), a.data());
        expect_elements(c.view(), a.view(), "copy of a dense tensor");
        const double first = a(0, 0);
        a(0, 0) = first + 1.0;
        EXPECT_EQ(c(0, 0), first);
        auto ct = tessera::contiguous(s, a.view().transpose());
        expect_elements(ct.view(), a.view().transpose(), "copy of a transpose");
    });
}

TEST_P(StructuralTest, ContiguousIsOneDispatchInlineWhenSmallAndParallelWhenLarge) {
    const int threads = GetParam();
    const std::size_t grain = be.options().grain;
    // Small: every layout runs inline, once.
    tessera::stats d = counted(be, [&](session& s) {
        auto a = random_tensor<float>(s, {20, 30}, rng);
        auto t = tessera::contiguous(s, a.view().transpose());
        auto f = tessera::contiguous(s, a.view().flip(1));
        auto c = tessera::contiguous(s, a);
    });
    EXPECT_EQ(d.inline_dispatches, 3u);
    EXPECT_EQ(d.parallel_dispatches, 0u);
    // Large (above the grain): the blocked transpose and the engine path fan out once each.
    const std::size_t cols = grain / 100 + 1;
    d = counted(be, [&](session& s) {
        auto a = random_tensor<float>(s, {100, cols}, rng);
        auto t = tessera::contiguous(s, a.view().transpose());
        auto f = tessera::contiguous(s, a.view().flip(1));
        expect_elements(t.view(), a.view().transpose(), "large transpose");
        expect_elements(f.view(), a.view().flip(1), "large flip");
    });
    EXPECT_EQ(d.parallel_dispatches, threads > 1 ? 2u : 0u);
    EXPECT_EQ(d.inline_dispatches, threads > 1 ? 0u : 2u);
    // Nothing to copy: no dispatch at all.
    d = counted(be, [&](session& s) {
        auto a = tessera::empty<float>(s, {0, 4});
        auto t = tessera::contiguous(s, a.view().transpose());
        EXPECT_EQ(t.shape(), (shape{4, 0}));
    });
    EXPECT_EQ(d.inline_dispatches + d.parallel_dispatches, 0u);
}

// ---- copy ---------------------------------------------------------------------------------------

TEST_P(StructuralTest, CopyBetweenLayoutsMatchesAReferenceAndTouchesNothingElse) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            const std::string type = type_name<T>();
            auto src = random_tensor<T>(s, {36, 50}, rng);
            auto src_t = random_tensor<T>(s, {50, 36}, rng);
            auto wide = random_tensor<T>(s, {72, 150}, rng);
            const tensor_view<const T> sv = src;
            // Destinations are views into a larger buffer; the elements they skip must survive.
            auto storage = random_tensor<T>(s, {72, 100}, rng);
            const tensor_view<T> big = storage;
            const std::vector<std::pair<std::string, tensor_view<T>>> dsts = {
                {"dense corner", big.slice(0, 0, 36).slice(1, 0, 50)},
                {"every other element", big.slice(0, 0, 72, 2).slice(1, 0, 100, 2)},
                {"flipped", big.slice(0, 10, 46).slice(1, 20, 70).flip(0)},
                {"transposed", big.slice(0, 0, 50).slice(1, 0, 36).transpose()},
                {"transposed with steps", big.slice(0, 0, 50).slice(1, 3, 75, 2).transpose()},
            };
            const std::vector<std::pair<std::string, tensor_view<const T>>> srcs = {
                {"dense", sv},
                {"transposed source", src_t.view().transpose()},
                {"flipped source", sv.flip(1)},
                {"strided source", wide.view().slice(0, 0, 72, 2).slice(1, 0, 150, 3)},
            };
            for (const auto& [dn, dst] : dsts) {
                for (const auto& [sn, from] : srcs) {
                    auto before = tessera::contiguous(s, storage);
                    tessera::copy(s, from, dst);
                    const std::string what = type + " " + sn + " into " + dn;
                    expect_elements(dst, from, what);
                    // Every element of the storage not in dst is unchanged.
                    auto mask = tessera::zeros<std::int32_t>(s, storage.shape());
                    const std::ptrdiff_t base = dst.data() - storage.data();
                    for_each_index(dst.shape(), [&](index_span i) {
                        std::ptrdiff_t off = base;
                        for (std::size_t a = 0; a < dst.rank(); ++a)
                            off += static_cast<std::ptrdiff_t>(i[a]) * dst.stride(a);
                        mask.values()[static_cast<std::size_t>(off)] = 1;
                    });
                    std::size_t touched = 0;
                    for (std::size_t k = 0; k < storage.size(); ++k)
                        if (mask.values()[k] == 0 && !(storage.values()[k] == before.values()[k]))
                            ++touched;
                    EXPECT_EQ(touched, 0u) << what;
                }
            }
        });
    });
}

TEST_P(StructuralTest, CopyBroadcastsTheSourceLikeCopyto) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            const std::string type = type_name<T>();
            auto dst = random_tensor<T>(s, {4, 30, 50}, rng);
            auto row = random_tensor<T>(s, {50}, rng);
            auto col = random_tensor<T>(s, {30, 1}, rng);
            auto one = random_tensor<T>(s, {}, rng);
            auto plane = random_tensor<T>(s, {1, 30, 50}, rng);
            for (const auto& [name, v] :
                 std::vector<std::pair<std::string, tensor_view<const T>>>{
                     {"row", row}, {"column", col}, {"scalar", one}, {"plane", plane},
                     {"transposed column", col.view().transpose().transpose()}}) {
                tessera::copy(s, v, dst);
                expect_elements(dst.view(), v, type + " " + name);
            }
            // Into a transposed destination as well.
            const tensor_view<T> dt = dst.view().transpose();
            auto r30 = random_tensor<T>(s, {30, 1}, rng);
            tessera::copy(s, r30, dt);
            expect_elements(dt, r30.view(), type + " into a transposed destination");
        });
    });
}

TEST_P(StructuralTest, CopyOntoItselfIsANoOpWithoutADispatch) {
    tensor<float> kept;
    const tessera::stats d = counted(be, [&](session& s) {
        auto a = random_tensor<float>(s, {6, 7}, rng);
        const std::vector<float> before = snapshot(a);
        tessera::copy(s, a, a);
        tessera::copy(s, a.view().transpose(), a.view().transpose());
        // The same elements reached through a reshape of a higher-rank view: only the strides
        // within the rank may matter.
        auto b = random_tensor<float>(s, {6, 7, 1}, rng);
        const std::vector<float> b_before = snapshot(b);
        const tensor_view<float> flat = b.view().reshape({6, 7});
        tessera::copy(s, flat, tensor_view<float>(b.data(), {6, 7}));
        EXPECT_TRUE(unchanged(a, before));
        EXPECT_TRUE(unchanged(b, b_before));
    });
    EXPECT_EQ(d.inline_dispatches + d.parallel_dispatches, 0u);
}

TEST_P(StructuralTest, CopyRejectsBadOperandsAndWritesNothing) {
    be.run([&](session& s) {
        auto a = random_tensor<float>(s, {3, 4}, rng);
        auto dst = random_tensor<float>(s, {4, 3}, rng);
        const std::vector<float> before = snapshot(dst);
        try {
            tessera::copy(s, a, dst);
            FAIL() << "no exception";
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()), "copy: shape [3,4] does not broadcast to [4,3]");
        }
        EXPECT_TRUE(unchanged(dst, before));
        // A source of higher rank never broadcasts down.
        auto wide = random_tensor<float>(s, {1, 4, 3}, rng);
        EXPECT_THROW(tessera::copy(s, wide, dst), tessera::shape_error);
        EXPECT_TRUE(unchanged(dst, before));
        // A destination that repeats elements cannot be written.
        auto row = random_tensor<float>(s, {3}, rng);
        const std::vector<float> row_before = snapshot(row);
        auto src = random_tensor<float>(s, {4, 3}, rng);
        const tensor_view<float> repeated = row.view().broadcast_to({4, 3});
        EXPECT_THROW(tessera::copy(s, src, repeated), tessera::alias_error);
        EXPECT_TRUE(unchanged(row, row_before));
        // Partial overlap: shifted by one, and a square matrix into its own transpose.
        auto v = random_tensor<float>(s, {10}, rng);
        const std::vector<float> v_before = snapshot(v);
        try {
            tessera::copy(s, v.view().slice(0, 0, 9), v.view().slice(0, 1, 10));
            FAIL() << "no exception";
        } catch (const tessera::alias_error& e) {
            EXPECT_NE(std::string(e.what()).find("copy: out overlaps input 0"), std::string::npos)
                << e.what();
        }
        EXPECT_TRUE(unchanged(v, v_before));
        auto sq = random_tensor<float>(s, {5, 5}, rng);
        const std::vector<float> sq_before = snapshot(sq);
        EXPECT_THROW(tessera::copy(s, sq.view().transpose(), sq), tessera::alias_error);
        EXPECT_THROW(tessera::copy(s, sq.view().flip(0), sq), tessera::alias_error);
        EXPECT_TRUE(unchanged(sq, sq_before));
        // Disjoint views of one buffer are fine.
        tessera::copy(s, v.view().slice(0, 0, 5), v.view().slice(0, 5, 10));
        for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(v(i + 5), v_before[i]);
    });
}

// ---- fill ---------------------------------------------------------------------------------------

TEST_P(StructuralTest, FillWritesEveryElementOfAnyLayoutAndNothingElse) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            const std::string type = type_name<T>();
            for (int layout = 0; layout < 4; ++layout) {
                auto storage = random_tensor<T>(s, {40, 60}, rng);
                const std::vector<T> before = snapshot(storage);
                const tensor_view<T> all = storage;
                tensor_view<T> dst = all;
                if (layout == 1) dst = all.transpose();
                if (layout == 2) dst = all.slice(0, 1, 40, 3).slice(1, 59, 0, -2);
                if (layout == 3) dst = all.slice(1, 5, 6);
                const T value = draw<T>(rng);
                tessera::fill(s, value, dst);
                auto expected = tessera::full<T>(s, dst.shape(), value);
                expect_elements(dst, expected.view(), type + " layout " + std::to_string(layout));
                // Count the elements that differ from before: exactly those in dst that did not
                // already hold the value.
                std::size_t in_dst_changed = 0, changed = 0;
                for_each_index(dst.shape(), [&](index_span i) {
                    std::ptrdiff_t off = dst.data() - storage.data();
                    for (std::size_t a = 0; a < dst.rank(); ++a)
                        off += static_cast<std::ptrdiff_t>(i[a]) * dst.stride(a);
                    if (!(before[static_cast<std::size_t>(off)] == value)) ++in_dst_changed;
                });
                for (std::size_t k = 0; k < storage.size(); ++k)
                    if (!(storage.values()[k] == before[k])) ++changed;
                EXPECT_EQ(changed, in_dst_changed) << type << " layout " << layout;
            }
            auto t = tessera::empty<T>(s, {3, 3});
            const T value = draw<T>(rng);
            tessera::fill(s, value, t);  // a tensor as out
            for (const T& x : t.values()) EXPECT_TRUE(x == value) << type;
        });
    });
}

TEST_P(StructuralTest, FillRejectsARepeatingViewAndCountsOneDispatch) {
    tessera::stats d = counted(be, [&](session& s) {
        auto row = tessera::full<double>(s, {5}, 1.5);
        try {
            tessera::fill(s, 2.0, row.view().broadcast_to({3, 5}));
            FAIL() << "no exception";
        } catch (const tessera::alias_error& e) {
            EXPECT_EQ(std::string(e.what()),
                      "fill: out repeats elements (an axis with stride 0); it cannot be written");
        }
        for (double v : row.values()) EXPECT_EQ(v, 1.5);
        tessera::fill(s, 4.0, row);
        auto none = tessera::empty<double>(s, {0, 3});
        tessera::fill(s, 1.0, none);
    });
    EXPECT_EQ(d.inline_dispatches, 1u);
    EXPECT_EQ(d.parallel_dispatches, 0u);
    const std::size_t n = be.options().grain + 1;
    d = counted(be, [&](session& s) {
        auto big = tessera::empty<float>(s, {n});
        tessera::fill(s, 3.0f, big);
        for (float v : big.values()) ASSERT_EQ(v, 3.0f);
    });
    EXPECT_EQ(d.parallel_dispatches, GetParam() > 1 ? 1u : 0u);
    EXPECT_EQ(d.inline_dispatches, GetParam() > 1 ? 0u : 1u);
}

// ---- concat and stack ---------------------------------------------------------------------------

// The reference concat: output index i along `axis` comes from the input whose range holds it.
template <class T>
void expect_concat(const tensor_view<const T>& got, const std::vector<tensor_view<const T>>& in,
                   std::size_t axis, const std::string& what) {
    std::size_t bad = 0;
    std::string first;
    for_each_index(got.shape(), [&](index_span i) {
        std::array<std::size_t, tessera::max_rank> j{};
        std::copy(i.begin(), i.end(), j.begin());
        std::size_t k = 0;
        while (j[axis] >= in[k].extent(axis)) j[axis] -= in[k++].extent(axis);
        if (!(read(got, i) == read(in[k], index_span(j.data(), i.size()))) && bad++ == 0)
            first = text(i);
    });
    EXPECT_EQ(bad, 0u) << what << ": first mismatch at " << first;
}

// The reference stack: output index i takes input i[axis] at the index without that axis.
template <class T>
void expect_stack(const tensor_view<const T>& got, const std::vector<tensor_view<const T>>& in,
                  std::size_t axis, const std::string& what) {
    std::size_t bad = 0;
    std::string first;
    for_each_index(got.shape(), [&](index_span i) {
        std::array<std::size_t, tessera::max_rank> j{};
        std::size_t r = 0;
        for (std::size_t a = 0; a < i.size(); ++a)
            if (a != axis) j[r++] = i[a];
        if (!(read(got, i) == read(in[i[axis]], index_span(j.data(), r))) && bad++ == 0)
            first = text(i);
    });
    EXPECT_EQ(bad, 0u) << what << ": first mismatch at " << first;
}

TEST_P(StructuralTest, ConcatMatchesAReferenceOnEveryAxisAndElementType) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            const std::string type = type_name<T>();
            for (std::ptrdiff_t axis : {0, 1, 2, -1, -3}) {
                const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
                auto extents = [&](std::size_t n) {
                    std::array<std::size_t, 3> e{5, 6, 7};
                    e[a] = n;
                    return shape{e[0], e[1], e[2]};
                };
                auto x = random_tensor<T>(s, extents(3), rng);
                auto y = random_tensor<T>(s, extents(0), rng);
                // A transposed input of the right shape: permute a differently shaped tensor.
                const shape ez = extents(4);
                auto z_store = random_tensor<T>(s, {ez[2], ez[0], ez[1]}, rng);
                const tensor_view<const T> z = z_store.view().permute({1, 2, 0});
                auto w = random_tensor<T>(s, extents(2), rng);
                const tensor_view<const T> wf = w.view().flip(static_cast<std::ptrdiff_t>(a));
                const std::vector<tensor_view<const T>> in = {x, y, z, wf};
                auto c = tessera::concat(s, std::span<const tensor_view<const T>>(in), axis);
                ASSERT_EQ(c.shape(), extents(9)) << type << " axis " << axis;
                expect_concat<T>(c, in, a, type + " axis " + std::to_string(axis));
                // The initializer-list and out-parameter forms, into a transposed out.
                const shape e9 = extents(9);
                auto out_store = tessera::empty<T>(s, {e9[2], e9[1], e9[0]});
                const tensor_view<T> out = out_store.view().transpose();
                tessera::concat<T>(s, {x, y, z, wf}, axis, out);
                expect_concat<T>(out, in, a, type + " out axis " + std::to_string(axis));
            }
        });
    });
}

TEST_P(StructuralTest, StackMatchesAReferenceOnEveryAxisAndElementType) {
    be.run([&](session& s) {
        for_each_element_type([&]<class T>(std::type_identity<T>) {
            const std::string type = type_name<T>();
            auto p = random_tensor<T>(s, {4, 6}, rng);
            auto q_store = random_tensor<T>(s, {6, 4}, rng);
            auto r_store = random_tensor<T>(s, {8, 6}, rng);
            const std::vector<tensor_view<const T>> in = {
                p, q_store.view().transpose(), r_store.view().slice(0, 0, 8, 2)};
            for (std::ptrdiff_t axis : {0, 1, 2, -1, -2, -3}) {
                const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
                auto st = tessera::stack(s, std::span<const tensor_view<const T>>(in), axis);
                std::array<std::size_t, 3> e{};
                for (std::size_t i = 0, j = 0; i < 3; ++i) e[i] = i == a ? 3 : (j++ == 0 ? 4 : 6);
                ASSERT_EQ(st.shape(), (shape{e[0], e[1], e[2]})) << type << " axis " << axis;
                expect_stack<T>(st, in, a, type + " axis " + std::to_string(axis));
                auto out = tessera::empty<T>(s, st.shape());
                tessera::stack<T>(s, {in[0], in[1], in[2]}, axis, out);
                expect_stack<T>(out, in, a, type + " out axis " + std::to_string(axis));
            }
            // Scalars stack into a vector.
            auto u = random_tensor<T>(s, {}, rng);
            auto v = random_tensor<T>(s, {}, rng);
            auto uv = tessera::stack<T>(s, {u, v});
            ASSERT_EQ(uv.shape(), shape{2});
            EXPECT_TRUE(uv(0) == u.values()[0] && uv(1) == v.values()[0]) << type;
        });
    });
}

TEST_P(StructuralTest, ConcatAndStackAcceptViewsDeducingTheType) {
    be.run([&](session& s) {
        auto a = random_tensor<int>(s, {2, 3}, rng);
        auto b = random_tensor<int>(s, {2, 3}, rng);
        const tensor_view<const int> av = a, bv = b;
        auto c = tessera::concat(s, {av, bv}, 1);
        EXPECT_EQ(c.shape(), (shape{2, 6}));
        expect_concat<int>(c, {av, bv}, 1, "deduced concat");
        auto st = tessera::stack(s, {av, bv, av}, -1);
        EXPECT_EQ(st.shape(), (shape{2, 3, 3}));
        expect_stack<int>(st, {av, bv, av}, 2, "deduced stack");
        // A single input is a copy.
        auto one = tessera::concat(s, {av});
        expect_elements(one.view(), av, "single input");
    });
}

TEST_P(StructuralTest, ConcatAndStackRejectBadInputsAndLeaveOutUnchanged) {
    be.run([&](session& s) {
        auto a = random_tensor<float>(s, {2, 3}, rng);
        auto b = random_tensor<float>(s, {2, 4}, rng);
        auto c = random_tensor<float>(s, {2, 3, 1}, rng);
        auto out = random_tensor<float>(s, {2, 7}, rng);
        const std::vector<float> before = snapshot(out);
        auto message = [](auto&& fn) -> std::string {
            try {
                fn();
            } catch (const tessera::shape_error& e) {
                return e.what();
            } catch (const tessera::alias_error& e) {
                return std::string("alias: ") + e.what();
            }
            return "no exception";
        };
        const std::span<const tensor_view<const float>> none;
        EXPECT_EQ(message([&] { tessera::concat(s, none, 0, out); }),
                  "concat: no inputs given; at least one is needed");
        EXPECT_EQ(message([&] { tessera::stack(s, none); }),
                  "stack: no inputs given; at least one is needed");
        EXPECT_EQ(message([&] { tessera::concat<float>(s, {a, c}, 0, out); }),
                  "concat: input 1 has rank 3 but input 0 has rank 2");
        EXPECT_EQ(message([&] { tessera::concat<float>(s, {a, b}, 0); }),
                  "concat: input 1 has shape [2,4] but input 0 has shape [2,3]; they may differ "
                  "only on axis 0");
        EXPECT_EQ(message([&] { tessera::concat<float>(s, {a, b}, 2, out); }),
                  "concat: axis 2 is out of range for rank 2");
        EXPECT_EQ(message([&] { tessera::concat<float>(s, {a, b}, -3, out); }),
                  "concat: axis -3 is out of range for rank 2");
        EXPECT_EQ(message([&] { tessera::stack<float>(s, {a, b}); }),
                  "stack: input 1 has shape [2,4] but input 0 has shape [2,3]; all must have the "
                  "same shape");
        EXPECT_EQ(message([&] { tessera::stack<float>(s, {a, c}); }),
                  "stack: input 1 has rank 3 but input 0 has rank 2");
        EXPECT_EQ(message([&] { tessera::stack<float>(s, {a, a}, 3); }),
                  "stack: axis 3 is out of range for rank 3");
        EXPECT_EQ(message([&] { tessera::stack<float>(s, {a, a}, -4); }),
                  "stack: axis -4 is out of range for rank 3");
        EXPECT_EQ(message([&] { tessera::concat<float>(s, {a, a}, 1, out); }),
                  "concat: out has shape [2,7] but the result has shape [2,6]");
        EXPECT_EQ(message([&] { tessera::stack<float>(s, {b, b}, 0, out); }),
                  "stack: out has shape [2,7] but the result has shape [2,2,4]");
        // out overlaps an input: a view into out itself, or out repeating elements.
        const tensor_view<const float> part = out.view().slice(1, 0, 3);
        EXPECT_EQ(message([&] { tessera::concat<float>(s, {b, part}, 1, out); }),
                  "alias: concat: out overlaps input 1 without being the same view; in-place use "
                  "must pass the very same elements");
        auto pair = random_tensor<float>(s, {2, 2, 3}, rng);
        const std::vector<float> pair_before = snapshot(pair);
        const tensor_view<const float> first = pair.view().slice(0, 0, 1).squeeze(0);
        EXPECT_EQ(message([&] { tessera::stack<float>(s, {first, a}, 0, pair); }),
                  "alias: stack: out overlaps input 0 without being the same view; in-place use "
                  "must pass the very same elements");
        auto row = random_tensor<float>(s, {7}, rng);
        const tensor_view<float> repeated = row.view().broadcast_to({2, 7});
        EXPECT_NE(message([&] { tessera::concat<float>(s, {a, b}, 1, repeated); })
                      .find("alias: concat: out repeats elements"),
                  std::string::npos);
        EXPECT_TRUE(unchanged(out, before));
        EXPECT_TRUE(unchanged(pair, pair_before));
        // A result above the maximum rank.
        auto deep = random_tensor<float>(s, {1, 1, 1, 1, 1, 1, 1, 2}, rng);
        EXPECT_THROW(tessera::stack<float>(s, {deep, deep}), tessera::shape_error);
        // A joined extent that overflows std::size_t (broadcast views cost no memory).
        auto one = random_tensor<float>(s, {1}, rng);
        const auto huge = one.view().broadcast_to({std::size_t{1} << 63});
        EXPECT_EQ(message([&] { tessera::concat<float>(s, {huge, huge}); }),
                  "concat: the joined extent of axis 0 overflows std::size_t");
    });
}

TEST_P(StructuralTest, ConcatAndStackDispatchOncePerNonEmptyInput) {
    const tessera::stats d = counted(be, [&](session& s) {
        auto a = random_tensor<float>(s, {3, 4}, rng);
        auto e = tessera::empty<float>(s, {0, 4});
        auto c = tessera::concat<float>(s, {a, e, a.view().flip(0), e}, 0);
        auto st = tessera::stack<float>(s, {a, a}, 1);
        auto none = tessera::stack<float>(s, {e, e}, 0);
        EXPECT_EQ(none.shape(), (shape{2, 0, 4}));
    });
    EXPECT_EQ(d.inline_dispatches, 4u);
    EXPECT_EQ(d.parallel_dispatches, 0u);
}

// ---- heap allocations ---------------------------------------------------------------------------

TEST_P(StructuralTest, WarmSessionMakesNoHeapAllocations) {
    be.run([&](session& s) {
        auto a = random_tensor<double>(s, {30, 40}, rng);
        auto b = random_tensor<double>(s, {30, 40}, rng);
        auto out = tessera::empty<double>(s, {40, 30});
        auto joined = tessera::empty<double>(s, {60, 40});
        auto stacked = tessera::empty<double>(s, {2, 30, 40});
        auto run_all = [&] {
            tessera::copy(s, a.view().transpose(), out);
            tessera::copy(s, a.view().flip(1), b);
            tessera::fill(s, 2.5, out.view().transpose());
            tessera::concat<double>(s, {a, b}, 0, joined);
            tessera::stack<double>(s, {a, b}, 0, stacked);
            auto c = tessera::contiguous(s, a.view().transpose());
            auto k = tessera::contiguous(s, b);
            auto j = tessera::concat<double>(s, {a, b}, 1);
            auto t = tessera::stack<double>(s, {a, b}, 2);
        };
        run_all();  // warms the workspace's free lists
        tessera::test::allocation_scope scope;
        for (int i = 0; i < 10; ++i) run_all();
        EXPECT_EQ(scope.count(), 0u);
    });
}

TEST(StructuralOneThreadTest, LargeCopiesMakeNoHeapAllocations) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {700, 300}, 1.0f);
        auto out = tessera::empty<float>(s, {300, 700});
        tessera::copy(s, a.view().transpose(), out);
        { auto warm = tessera::contiguous(s, a.view().transpose()); }  // its block stays pooled
        tessera::test::allocation_scope scope;
        tessera::copy(s, a.view().transpose(), out);
        tessera::fill(s, 2.0f, out);
        auto d = tessera::contiguous(s, a.view().transpose());
        EXPECT_EQ(scope.count(), 0u);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, StructuralTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
