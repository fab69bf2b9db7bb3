// einsum (allocating and out forms), prepare/einsum_plan: results against a float64
// (complex<double>) index-loop reference written here, for every notation feature on fresh random
// shapes; strided operands and outputs; contraction paths; runtime operand lists against the argument forms; the plan cache's
// hit, miss and eviction counts; heap allocations of warm calls; every kind of bad input, before
// anything is written.
#include "support/messages.hpp"
#include "support/alloc_counter.hpp"
#include "support/backends.hpp"
#include "support/random.hpp"

#include <tessera/backend.hpp>
#include <tessera/error.hpp>
#include <tessera/ops/einsum.hpp>
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
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;
using tessera::test::fresh_seed;
using tessera::test::random_tensor;
using tessera::test::wide_t;
using tessera::test::widen;

using cd = std::complex<double>;

// Walks every index of `extents` in row-major order.
void for_each_index(const std::vector<std::size_t>& extents, const std::function<void(const std::vector<std::size_t>&)>& fn) {
    for (std::size_t e : extents)
        if (e == 0) return;
    std::vector<std::size_t> idx(extents.size(), 0);
    while (true) {
        fn(idx);
        std::size_t a = extents.size();
        while (a > 0) {
            --a;
            if (++idx[a] < extents[a]) break;
            idx[a] = 0;
            if (a == 0) return;
        }
        if (extents.empty()) return;
    }
}

template <class T>
T& at(const tensor_view<T>& v, const std::vector<std::size_t>& idx) {
    std::ptrdiff_t offset = 0;
    for (std::size_t a = 0; a < v.rank(); ++a) offset += static_cast<std::ptrdiff_t>(idx[a]) * v.stride(a);
    return v.data()[offset];
}

shape shape_of(const std::vector<std::size_t>& dims) { return shape(std::span<const std::size_t>(dims)); }

// The reference: its own reading of the spec (with '...' spelled out as letters from "STUVWXYZ",
// which the specs in these tests do not use, aligned at the right) and a loop over every index.
struct reference_spec {
    std::vector<std::string> inputs;  // letters per axis
    std::string output;
};

reference_spec expand(const std::string& spec, const std::vector<shape>& shapes) {
    const std::string pool = "STUVWXYZ";
    std::vector<std::string> terms;
    std::string out;
    bool has_output = false;
    {
        const std::size_t arrow = spec.find("->");
        const std::string lhs = arrow == std::string::npos ? spec : spec.substr(0, arrow);
        if (arrow != std::string::npos) {
            has_output = true;
            out = spec.substr(arrow + 2);
        }
        std::string cur;
        for (char c : lhs) {
            if (c == ',') {
                terms.push_back(cur);
                cur.clear();
            } else {
                cur += c;
            }
        }
        terms.push_back(cur);
    }
    std::size_t broadcast = 0;
    std::vector<std::size_t> spans(terms.size(), 0);
    for (std::size_t i = 0; i < terms.size(); ++i) {
        const std::size_t dots = terms[i].find("...");
        if (dots == std::string::npos) continue;
        spans[i] = shapes[i].rank() - (terms[i].size() - 3);
        broadcast = std::max(broadcast, spans[i]);
    }
    reference_spec r;
    for (std::size_t i = 0; i < terms.size(); ++i) {
        std::string t = terms[i];
        const std::size_t dots = t.find("...");
        if (dots != std::string::npos)
            t = t.substr(0, dots) + pool.substr(broadcast - spans[i], spans[i]) + t.substr(dots + 3);
        r.inputs.push_back(t);
    }
    const std::string all_broadcast = pool.substr(0, broadcast);
    if (has_output) {
        const std::size_t dots = out.find("...");
        r.output = dots == std::string::npos ? out : out.substr(0, dots) + all_broadcast + out.substr(dots + 3);
    } else {
        std::map<char, int> uses;
        for (const std::string& t : r.inputs)
            for (char c : t) ++uses[c];
        r.output = all_broadcast;
        for (const auto& [c, n] : uses)  // std::map orders by ASCII: upper case first
            if (n == 1 && pool.find(c) == std::string::npos) r.output += c;
    }
    return r;
}

template <class T>
std::vector<wide_t<T>> reference(const std::string& spec, const std::vector<tensor_view<const T>>& in,
                                 std::vector<std::size_t>& out_extents) {
    std::vector<shape> shapes;
    for (const auto& v : in) shapes.push_back(v.shape());
    const reference_spec r = expand(spec, shapes);
    std::string labels;
    std::map<char, std::size_t> extent;
    for (std::size_t i = 0; i < in.size(); ++i)
        for (std::size_t a = 0; a < r.inputs[i].size(); ++a) {
            const char c = r.inputs[i][a];
            if (labels.find(c) == std::string::npos) labels += c;
            extent[c] = std::max(extent[c], in[i].extent(a));
        }
    std::vector<std::size_t> extents;
    for (char c : labels) extents.push_back(extent[c]);
    out_extents.clear();
    for (char c : r.output) out_extents.push_back(extent[c]);
    std::size_t count = 1;
    for (std::size_t e : out_extents) count *= e;
    std::vector<wide_t<T>> out(count, wide_t<T>{});
    for_each_index(extents, [&](const std::vector<std::size_t>& idx) {
        const auto value_of = [&](char c) { return idx[labels.find(c)]; };
        wide_t<T> term{1};
        for (std::size_t i = 0; i < in.size(); ++i) {
            std::vector<std::size_t> at_idx;
            for (std::size_t a = 0; a < r.inputs[i].size(); ++a)
                at_idx.push_back(in[i].extent(a) == 1 ? 0 : value_of(r.inputs[i][a]));  // broadcast
            term *= widen(at(in[i], at_idx));
        }
        std::size_t flat = 0;
        for (char c : r.output) flat = flat * extent[c] + value_of(c);
        out[flat] += term;
    });
    return out;
}

template <class T>
void expect_matches(const std::string& spec, const std::vector<tensor_view<const T>>& in, const tensor_view<const T>& got,
                    double terms) {
    std::vector<std::size_t> extents;
    const std::vector<wide_t<T>> want = reference<T>(spec, in, extents);
    ASSERT_EQ(got.shape(), shape_of(extents)) << spec;
    const double eps = static_cast<double>(std::numeric_limits<tessera::real_type_t<T>>::epsilon());
    std::size_t flat = 0;
    for_each_index(extents, [&](const std::vector<std::size_t>& idx) {
        EXPECT_LE(std::abs(widen(at(got, idx)) - want[flat]), 8 * eps * std::max(1.0, terms))
            << spec << " at flat index " << flat;
        ++flat;
    });
}

// A spec, and for each operand the shape of its '...' axes (empty when it has none).
struct notation_case {
    std::string spec;
    std::vector<std::vector<std::size_t>> broadcast;
};

const std::vector<notation_case>& notation_cases() {
    static const std::vector<notation_case> cases = {
        {"ij,jk->ik", {}},
        {"ij,jk", {}},
        {"ij,kj->ik", {}},
        {"ji,jk->ki", {}},
        {"iJ,Jk->ik", {}},
        {"bA,bc", {}},  // implicit output "Ac": ASCII order puts upper case first
        {"bij,bjk->bik", {}},
        {"bij,bjk->bki", {}},
        {"ijk,jkl->il", {}},
        {"abcd,dcba->", {}},
        {"ii->", {}},
        {"ii->i", {}},
        {"ii", {}},
        {"iij->ji", {}},
        {"bii->b", {}},
        {"ij->ji", {}},
        {"ijk->kij", {}},
        {"ij->", {}},
        {"ij->j", {}},
        {"ij,ij->ij", {}},
        {"ij,ji->ij", {}},
        {"ij,ij->", {}},
        {"i,j->ij", {}},
        {"i,i->", {}},
        {"i,i->i", {}},
        {"bi,bi->b", {}},
        {"ij,j->i", {}},
        {",ij->ij", {}},
        {"i,i,i->i", {}},
        {"ij,jk,ki->", {}},
        {"abc,cd,de->abe", {}},
        {"ab,apc,bpd->cd", {}},
        {"ab,bc,cd,de->ae", {}},
        {"ab,bc,cd,de,ef->af", {}},
        {"ab,bc,cd,de,ef,fg,gh->ah", {}},
        {"ai,bi,ci,di,ei,fi->abcdef", {}},
        {"...ij,...jk->...ik", {{2, 3}, {3}}},
        {"...ij,...jk->...ik", {{1, 3}, {2, 1}}},
        {"...ij,...jk", {{2}, {2}}},
        {"...ij->...ji", {{2, 2}}},
        {"i...->...", {{3, 2}}},
        {"...i->i", {{2, 2}}},
        {"ij...,jk...->ik...", {{2}, {1}}},
        {"...,...->...", {{3}, {1}}},
    };
    return cases;
}

// Shapes for a case: a fresh extent 1-4 per letter (0-3 when `allow_empty`).
std::vector<shape> draw_shapes(const notation_case& c, std::mt19937_64& rng, bool allow_empty) {
    std::map<char, std::size_t> extent;
    std::uniform_int_distribution<std::size_t> pick(allow_empty ? 0 : 1, allow_empty ? 3 : 4);
    std::vector<shape> shapes;
    const std::string lhs = c.spec.substr(0, c.spec.find("->"));
    std::size_t operand = 0;
    std::vector<std::size_t> dims;
    for (std::size_t i = 0; i <= lhs.size(); ++i) {
        if (i == lhs.size() || lhs[i] == ',') {
            shapes.push_back(shape_of(dims));
            dims.clear();
            ++operand;
            continue;
        }
        if (lhs[i] == '.') {
            for (std::size_t e : c.broadcast[operand]) dims.push_back(e);
            i += 2;
            continue;
        }
        if (!extent.count(lhs[i])) extent[lhs[i]] = pick(rng);
        dims.push_back(extent[lhs[i]]);
    }
    return shapes;
}

template <class T, std::size_t... I>
tensor<T> einsum_of(session& s, const std::string& spec, const std::vector<tensor<T>>& ops, std::index_sequence<I...>) {
    return tessera::einsum(s, spec, ops[I]...);
}

// Calls einsum with the operands of a vector (1 to 6 of them).
template <class T>
tensor<T> einsum_vector(session& s, const std::string& spec, const std::vector<tensor<T>>& ops) {
    switch (ops.size()) {
        case 1: return einsum_of<T>(s, spec, ops, std::make_index_sequence<1>{});
        case 2: return einsum_of<T>(s, spec, ops, std::make_index_sequence<2>{});
        case 3: return einsum_of<T>(s, spec, ops, std::make_index_sequence<3>{});
        case 4: return einsum_of<T>(s, spec, ops, std::make_index_sequence<4>{});
        case 5: return einsum_of<T>(s, spec, ops, std::make_index_sequence<5>{});
        case 6: return einsum_of<T>(s, spec, ops, std::make_index_sequence<6>{});
        case 7: return einsum_of<T>(s, spec, ops, std::make_index_sequence<7>{});
        default: ADD_FAILURE() << "unsupported operand count"; return {};
    }
}

class EinsumTest : public ::testing::TestWithParam<int> {};

template <class T>
void check_every_notation(int threads, bool allow_empty) {
    backend be{backend_options{}.with_threads(threads)};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        for (const notation_case& c : notation_cases()) {
            for (int round = 0; round < 3; ++round) {
                const std::vector<shape> shapes = draw_shapes(c, rng, allow_empty);
                std::vector<tensor<T>> ops;
                std::vector<tensor_view<const T>> views;
                double terms = 1;
                for (const shape& sh : shapes) {
                    ops.push_back(random_tensor<T>(s, sh, rng));
                    for (std::size_t d : sh.dims()) terms *= static_cast<double>(std::max<std::size_t>(d, 1));
                }
                for (const auto& t : ops) views.push_back(t.view());
                const tensor<T> got = einsum_vector<T>(s, c.spec, ops);
                expect_matches<T>(c.spec, views, got.view(), terms);
            }
        }
    });
}

TEST_P(EinsumTest, EveryNotationMatchesTheReferenceOnRandomShapes) {
    check_every_notation<double>(GetParam(), false);
    check_every_notation<float>(GetParam(), false);
    check_every_notation<std::complex<double>>(GetParam(), false);
}

TEST_P(EinsumTest, EmptyAxesGiveEmptyResultsOrZeroSums) {
    check_every_notation<double>(GetParam(), true);
}

TEST_P(EinsumTest, LargeOperandsMatchTheReferenceAcrossThreads) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        // Big enough to split across threads: a GEMM, a batched product, a loop step.
        const tensor<double> a = random_tensor<double>(s, {70, 90}, rng);
        const tensor<double> b = random_tensor<double>(s, {90, 60}, rng);
        expect_matches<double>("ij,jk->ik", {a.view(), b.view()}, tessera::einsum(s, "ij,jk->ik", a, b).view(), 90);
        const tensor<double> x = random_tensor<double>(s, {40, 30, 20}, rng);
        const tensor<double> y = random_tensor<double>(s, {40, 20, 30}, rng);
        expect_matches<double>("bij,bjk->bik", {x.view(), y.view()}, tessera::einsum(s, "bij,bjk->bik", x, y).view(), 20);
        const tensor<double> u = random_tensor<double>(s, {300, 400}, rng);
        expect_matches<double>("ij,ij->i", {u.view(), u.view()}, tessera::einsum(s, "ij,ij->i", u, u).view(), 400);
    });
}

TEST_P(EinsumTest, ReadsStridedOperandsAndWritesStridedOutputs) {
    backend be{backend_options{}.with_threads(GetParam())};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        const tensor<double> a = random_tensor<double>(s, {6, 5, 4}, rng);
        const tensor<double> b = random_tensor<double>(s, {4, 10}, rng);
        const tensor_view<const double> at = a.view().transpose(0, 2);                 // [4, 5, 6]
        const tensor_view<const double> bs = b.view().slice(1, 0, tessera::slice_end, 2);  // [4, 5]
        for (const std::string spec : {"kji,kj->ji", "kji,kl->jil", "kji,kj->ij", "kji,kj->ijk", "kji,kj->"}) {
            const tensor<double> got = tessera::einsum(s, spec, at, bs);
            expect_matches<double>(spec, {at, bs}, got.view(), 24);
        }
        expect_matches<double>("kji->ijk", {at}, tessera::einsum(s, "kji->ijk", at).view(), 1);
        expect_matches<double>("kji->j", {at}, tessera::einsum(s, "kji->j", at).view(), 24);
        // Out-parameter form into a transposed view of a buffer, and into a reversed one.
        tensor<double> buffer = tessera::zeros<double>(s, {6, 5});
        tessera::einsum(s, "kji,kj->ji", {at, bs}, buffer.view().transpose());
        expect_matches<double>("kji,kj->ji", {at, bs}, buffer.view().transpose(), 4);
        tessera::einsum(s, "kji,kj->ij", {at, bs}, buffer.view().flip(0));
        expect_matches<double>("kji,kj->ij", {at, bs}, buffer.view().flip(0), 4);
        // Grouped axes that cannot be merged: the operand is copied into the workspace.
        const tensor<double> c = random_tensor<double>(s, {3, 4, 5}, rng);
        const tensor_view<const double> cp = c.view().permute({2, 0, 1});  // [5, 3, 4]
        const tensor<double> d = random_tensor<double>(s, {3, 4, 2}, rng);
        expect_matches<double>("kab,abn->kn", {cp, d.view()}, tessera::einsum(s, "kab,abn->kn", cp, d).view(), 12);
    });
}

// The spec of a chain of k matrices multiplied in order, built at run time: "ab,bc,cd->ad"
// ("ab->ab" for one matrix).
std::string chain_spec(std::size_t k) {
    std::string spec;
    for (std::size_t i = 0; i < k; ++i) {
        if (i > 0) spec += ',';
        spec += static_cast<char>('a' + i);
        spec += static_cast<char>('a' + i + 1);
    }
    return spec + "->a" + static_cast<char>('a' + k);
}

// Expects two dense tensors of one shape to hold the same bytes.
template <class T>
void expect_same_bits(const tensor_view<const T>& got, const tensor_view<const T>& want, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(T)), 0) << what;
}

template <class T>
void check_list_against_arguments(int threads) {
    backend be{backend_options{}.with_threads(threads)};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> extent(1, 5);
    be.run([&](session& s) {
        for (std::size_t k = 1; k <= 6; ++k) {
            // The chain as a program reading a network would hold it: shapes, tensors, views.
            const std::string spec = chain_spec(k);
            std::vector<std::size_t> bonds(k + 1);
            for (std::size_t& b : bonds) b = extent(rng);
            std::vector<shape> shapes;
            std::vector<tensor<T>> ops;
            std::vector<tensor_view<const T>> views;
            double terms = 1;
            for (std::size_t i = 0; i < k; ++i) {
                shapes.push_back(shape{bonds[i], bonds[i + 1]});
                ops.push_back(random_tensor<T>(s, shapes.back(), rng));
                terms *= static_cast<double>(bonds[i] * bonds[i + 1]);
            }
            for (const auto& t : ops) views.push_back(t.view());
            SCOPED_TRACE(spec);

            const tensor<T> want = einsum_vector<T>(s, spec, ops);  // the argument form
            expect_matches<T>(spec, views, want.view(), terms);
            expect_same_bits<T>(tessera::einsum<T>(s, spec, views).view(), want.view(), "einsum, vector");
            const std::span<const tensor_view<const T>> list(views);
            expect_same_bits<T>(tessera::einsum(s, spec, list).view(), want.view(), "einsum, span (T deduced)");
            tensor<T> out = tessera::zeros<T>(s, want.shape());
            tessera::einsum(s, spec, views, out);
            expect_same_bits<T>(out.view(), want.view(), "einsum out form, vector");

            const tessera::einsum_plan<T> plan = tessera::prepare<T>(s, spec, shapes);
            expect_same_bits<T>(plan(s, views).view(), want.view(), "plan, vector");
            tensor<T> plan_out = tessera::zeros<T>(s, want.shape());
            plan(s, views, plan_out);
            expect_same_bits<T>(plan_out.view(), want.view(), "plan out form, vector");
            if (k > 1) {  // the caller's order, as a runtime list too
                const std::vector<tessera::einsum_step> left_to_right(k - 1, tessera::einsum_step{0, 1});
                const auto ordered = tessera::prepare<T>(s, spec, left_to_right, shapes);
                EXPECT_EQ(std::vector<tessera::einsum_step>(ordered.path().begin(), ordered.path().end()), left_to_right);
                expect_matches<T>(spec, views, ordered(s, views).view(), terms);
            }
            if (k == 3) {  // braced lists
                expect_same_bits<T>(tessera::einsum<T>(s, spec, {ops[0], ops[1], ops[2]}).view(), want.view(),
                                    "einsum, braced list");
                tessera::einsum(s, spec, {views[0], views[1], views[2]}, out);
                expect_same_bits<T>(out.view(), want.view(), "einsum out form, braced list");
                expect_same_bits<T>(plan(s, {ops[0], ops[1], ops[2]}).view(), want.view(), "plan, braced list");
                plan(s, {views[0], views[1], views[2]}, plan_out);
                expect_same_bits<T>(plan_out.view(), want.view(), "plan out form, braced list");
            }
        }
    });
}

TEST_P(EinsumTest, RuntimeListsMatchTheArgumentFormBitForBit) {
    check_list_against_arguments<float>(GetParam());
    check_list_against_arguments<double>(GetParam());
    check_list_against_arguments<std::complex<double>>(GetParam());
}

TEST_P(EinsumTest, RingNetworkWithARuntimeOperandCount) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> bond(1, 2);
    be.run([&](session& s) {
        // A ring of k sites, site i holding bonds i and i + 1 (mod k) and a free index of its own:
        // "aAb,bBc,cCa->ABC". k = 1 closes on itself ("aAa->A", a trace).
        for (std::size_t k = 1; k <= tessera::max_rank; ++k) {
            std::string spec, out;
            std::vector<std::size_t> bonds(k);
            for (std::size_t& b : bonds) b = bond(rng);
            std::vector<tensor<double>> sites;
            std::vector<tensor_view<const double>> views;
            std::vector<shape> shapes;
            double terms = 1;
            for (std::size_t i = 0; i < k; ++i) {
                if (i > 0) spec += ',';
                spec += {static_cast<char>('a' + i), static_cast<char>('A' + i), static_cast<char>('a' + (i + 1) % k)};
                out += static_cast<char>('A' + i);
                shapes.push_back(shape{bonds[i], 2, bonds[(i + 1) % k]});
                sites.push_back(random_tensor<double>(s, shapes.back(), rng));
                terms *= static_cast<double>(shapes.back().count());
            }
            spec += "->" + out;
            for (const auto& t : sites) views.push_back(t.view());
            SCOPED_TRACE(spec);
            const tensor<double> got = tessera::einsum<double>(s, spec, views);
            expect_matches<double>(spec, views, got.view(), terms);
            const auto plan = tessera::prepare<double>(s, spec, shapes);
            EXPECT_EQ(plan.path().size(), k - 1);
            expect_same_bits<double>(plan(s, views).view(), got.view(), "plan");
        }
    });
}

// The out form takes the operands as one list (braced, or a std::vector whose length is known
// only at run time) and the destination last, as a tensor or a view of any strides; the element
// type comes from the destination.
TEST_P(EinsumTest, OutFormTakesAnOperandListAndWritesAnyWritableTensor) {
    backend be{backend_options{}.with_threads(GetParam())};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    be.run([&](session& s) {
        const tensor<double> a = random_tensor<double>(s, {3, 4}, rng);
        const tensor<double> b = random_tensor<double>(s, {4, 5}, rng);
        const std::string spec = "ij,jk->ik";
        const tensor<double> want = tessera::einsum(s, spec, a, b);
        expect_matches<double>(spec, {a.view(), b.view()}, want.view(), 4);

        // A braced list of tensors into a tensor, without naming the element type.
        tensor<double> out = tessera::zeros<double>(s, {3, 5});
        tessera::einsum(s, spec, {a, b}, out);
        expect_same_bits<double>(out.view(), want.view(), "braced list into a tensor");

        // Into a strided view (every other column of a transposed buffer, strides (2, 6)), by
        // einsum and by a plan; the elements between stay untouched.
        const auto plan = tessera::prepare<double>(s, spec, a.shape(), b.shape());
        const auto into_strided = [&](const auto& write, const char* what) {
            SCOPED_TRACE(what);
            tensor<double> buffer = tessera::full<double>(s, {5, 6}, -7.0);
            const tensor_view<double> every_other =
                buffer.view().transpose().slice(0, 0, tessera::slice_end, 2);
            ASSERT_EQ(every_other.shape(), (shape{3, 5}));
            ASSERT_EQ(every_other.stride(0), 2);
            write(every_other);
            for (std::size_t i = 0; i < 3; ++i)
                for (std::size_t k = 0; k < 5; ++k)
                    EXPECT_EQ(every_other(i, k), want(i, k)) << i << ", " << k;
            std::size_t untouched = 0;
            for (std::size_t i = 0; i < buffer.size(); ++i) untouched += buffer.data()[i] == -7.0;
            EXPECT_EQ(untouched, buffer.size() - every_other.size());
        };
        into_strided([&](const tensor_view<double>& o) { tessera::einsum(s, spec, {a, b}, o); },
                     "einsum, braced list");
        into_strided([&](const tensor_view<double>& o) { plan(s, {a, b}, o); }, "plan, braced list");

        // A runtime-length list: a chain of k matrices, k drawn at run time, as a std::vector of
        // views, in the allocating and the out forms (the result also into a strided view).
        const std::size_t k = std::uniform_int_distribution<std::size_t>(3, 7)(rng);
        const std::string chain = chain_spec(k);
        SCOPED_TRACE(chain);
        std::vector<tensor<double>> matrices;
        std::vector<tensor_view<const double>> views;
        double terms = 1;
        for (std::size_t i = 0; i < k; ++i) {
            matrices.push_back(random_tensor<double>(s, {3, 3}, rng));
            terms *= 9;
        }
        for (const auto& m : matrices) views.push_back(m.view());
        const tensor<double> fresh = tessera::einsum<double>(s, chain, views);
        expect_matches<double>(chain, views, fresh.view(), terms);
        tensor<double> chain_out = tessera::zeros<double>(s, {3, 3});
        tessera::einsum(s, chain, views, chain_out);
        expect_same_bits<double>(chain_out.view(), fresh.view(), "vector into a tensor");
        tensor<double> wide = tessera::full<double>(s, {3, 6}, -7.0);
        const tensor_view<double> odd_columns = wide.view().slice(1, 1, tessera::slice_end, 2);
        tessera::einsum(s, chain, views, odd_columns);
        for (std::size_t i = 0; i < 3; ++i)
            for (std::size_t j = 0; j < 3; ++j) {
                EXPECT_EQ(odd_columns(i, j), fresh(i, j));
                EXPECT_EQ(wide(i, 2 * j), -7.0);
            }
        const auto chain_plan = tessera::prepare<double>(s, chain, std::vector<shape>(k, shape{3, 3}));
        tensor<double> plan_out = tessera::zeros<double>(s, {3, 3});
        chain_plan(s, views, plan_out);
        expect_same_bits<double>(plan_out.view(), fresh.view(), "plan, vector into a tensor");
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, EinsumTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

TEST(EinsumPathTest, PicksTheCheapOrderAndHonoursAnExplicitOne) {
    backend be{backend_options{}.with_threads(1)};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        const tensor<double> a = random_tensor<double>(s, {64, 64}, rng);
        const tensor<double> b = random_tensor<double>(s, {64, 64}, rng);
        const tensor<double> v = random_tensor<double>(s, {64}, rng);
        const auto planned = tessera::prepare<double>(s, "ij,jk,k->i", a.shape(), b.shape(), v.shape());
        // b @ v first (positions 1 and 2), then a @ (b v): 2 * 64^2 multiply-adds, not 64^3 + 64^2.
        ASSERT_EQ(planned.path().size(), 2u);
        EXPECT_EQ(planned.path()[0], (tessera::einsum_step{1, 2}));
        EXPECT_EQ(planned.path()[1], (tessera::einsum_step{0, 1}));
        EXPECT_EQ(planned.flops(), 2.0 * 64 * 64);

        const tessera::einsum_step left_to_right[] = {{0, 1}, {0, 1}};
        const auto naive = tessera::prepare<double>(s, "ij,jk,k->i", left_to_right, a.shape(), b.shape(), v.shape());
        EXPECT_EQ(naive.flops(), 64.0 * 64 * 64 + 64 * 64);
        EXPECT_EQ(std::vector<tessera::einsum_step>(naive.path().begin(), naive.path().end()),
                  std::vector<tessera::einsum_step>(std::begin(left_to_right), std::end(left_to_right)));
        const tensor<double> x = planned(s, a, b, v), y = naive(s, a, b, v);
        expect_matches<double>("ij,jk,k->i", {a.view(), b.view(), v.view()}, x.view(), 64 * 64);
        expect_matches<double>("ij,jk,k->i", {a.view(), b.view(), v.view()}, y.view(), 64 * 64);

        // A plan's own path fed back gives the same plan; more than 5 operands use the greedy search.
        const auto again = tessera::prepare<double>(s, "ij,jk,k->i", planned.path(), a.shape(), b.shape(), v.shape());
        EXPECT_EQ(again.flops(), planned.flops());
        const shape m{8, 8};
        const auto chain = tessera::prepare<double>(s, "ab,bc,cd,de,ef,fg,g->a", m, m, m, m, m, m, shape{8});
        EXPECT_EQ(chain.flops(), 6.0 * 64);  // matrix-vector products from the right
    });
}

TEST(EinsumPlanTest, PreparedPlansRunAnyStridesAndCheckShapes) {
    backend be{backend_options{}.with_threads(2)};
    std::mt19937_64 rng(fresh_seed());
    be.run([&](session& s) {
        const tensor<float> a = random_tensor<float>(s, {3, 4}, rng);
        const tensor<float> b = random_tensor<float>(s, {4, 3}, rng);
        const auto plan = tessera::prepare<float>(s, "ij,jk->ik", a.shape(), b.shape());
        EXPECT_EQ(plan.spec(), "ij,jk->ik");
        EXPECT_EQ(plan.result_shape(), (shape{3, 3}));
        expect_matches<float>("ij,jk->ik", {a.view(), b.view()}, plan(s, a, b).view(), 4);
        const tensor<float> bt = random_tensor<float>(s, {3, 4}, rng);
        expect_matches<float>("ij,jk->ik", {a.view(), bt.view().transpose()}, plan(s, a, bt.view().transpose()).view(), 4);
        tensor<float> out = tessera::zeros<float>(s, {3, 3});
        plan(s, {a, b}, out);
        expect_matches<float>("ij,jk->ik", {a.view(), b.view()}, out.view(), 4);
        EXPECT_THROW(plan(s, a, a), tessera::shape_error);
        EXPECT_THROW(plan(s, a), tessera::spec_error);
        EXPECT_THROW(plan(s, a, b, b), tessera::spec_error);
        try {
            static_cast<void>(plan(s, a, a));
        } catch (const tessera::shape_error& e) {
            EXPECT_EQ(std::string(e.what()),
                      "einsum \"ij,jk->ik\": operand 1 has shape [3,4] but the plan was prepared for [4,3]");
        }
    });
    // A plan outlives its session and its backend's cache.
    std::optional<tessera::einsum_plan<float>> kept;
    {
        backend other{backend_options{}.with_threads(1)};
        other.run([&](session& s) { kept = tessera::prepare<float>(s, "i,i->", shape{3}, shape{3}); });
    }
    be.run([&](session& s) {
        const tensor<float> x = tessera::from<float>(s, {1, 2, 3});
        EXPECT_EQ((*kept)(s, x, x).data()[0], 14.0f);
    });
}

TEST(EinsumCacheTest, CountsHitsMissesAndEvictions) {
    backend be{backend_options{}.with_threads(2).with_plan_cache_capacity(2)};
    const auto d = [&](const std::function<void(session&)>& fn) {
        const tessera::stats before = be.stats();
        be.run(fn);
        return be.stats() - before;
    };
    tessera::stats st = d([](session& s) {
        const tensor<double> a = tessera::zeros<double>(s, {2, 3});
        const tensor<double> b = tessera::zeros<double>(s, {3, 4});
        for (int i = 0; i < 5; ++i) static_cast<void>(tessera::einsum(s, "ij,jk->ik", a, b));
    });
    EXPECT_EQ(st.plan_cache_misses, 1u);
    EXPECT_EQ(st.plan_cache_hits, 4u);
    EXPECT_EQ(st.plan_cache_evictions, 0u);

    // The same spec text in another buffer and the same shapes: a hit in the backend's cache.
    st = d([](session& s) {
        const tensor<double> a = tessera::zeros<double>(s, {2, 3});
        const tensor<double> b = tessera::zeros<double>(s, {3, 4});
        const std::string spec = "ij,jk->ik";
        static_cast<void>(tessera::einsum(s, spec, a, b));
        static_cast<void>(tessera::prepare<double>(s, spec, a.shape(), b.shape()));
    });
    EXPECT_EQ(st.plan_cache_misses, 0u);
    EXPECT_EQ(st.plan_cache_hits, 2u);

    // Two new shapes and a new element type: three plans, the cache holds two, so two evictions.
    st = d([](session& s) {
        static_cast<void>(tessera::einsum(s, "ij,jk->ik", tessera::zeros<double>(s, {5, 3}), tessera::zeros<double>(s, {3, 4})));
        static_cast<void>(tessera::einsum(s, "ij,jk->ik", tessera::zeros<double>(s, {6, 3}), tessera::zeros<double>(s, {3, 4})));
        static_cast<void>(tessera::einsum(s, "ij,jk->ik", tessera::zeros<float>(s, {6, 3}), tessera::zeros<float>(s, {3, 4})));
    });
    EXPECT_EQ(st.plan_cache_misses, 3u);
    EXPECT_EQ(st.plan_cache_hits, 0u);
    EXPECT_EQ(st.plan_cache_evictions, 2u);

    // The first plan was evicted from the backend: a thread with its own workspace plans it again.
    std::thread([&] {
        st = d([](session& s) {
            static_cast<void>(tessera::einsum(s, "ij,jk->ik", tessera::zeros<double>(s, {2, 3}), tessera::zeros<double>(s, {3, 4})));
        });
    }).join();
    EXPECT_EQ(st.plan_cache_misses, 1u);
    EXPECT_EQ(st.plan_cache_evictions, 1u);

    // Bad input is never cached.
    st = d([](session& s) {
        const tensor<double> a = tessera::zeros<double>(s, {2, 3});
        for (int i = 0; i < 2; ++i) EXPECT_THROW(static_cast<void>(tessera::einsum(s, "ij,jk->ik", a, a)), tessera::shape_error);
    });
    EXPECT_EQ(st.plan_cache_misses, 0u);
    EXPECT_EQ(st.plan_cache_hits, 0u);
    EXPECT_THROW(backend(backend_options{}.with_plan_cache_capacity(0)), tessera::config_error);
}

TEST(EinsumCacheTest, ConcurrentSessionsShareOnePlan) {
    backend be{backend_options{}.with_threads(2).with_session_slots(4)};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 50; ++i)
                be.run([](session& s) {
                    const tensor<float> a = tessera::full<float>(s, {3, 3}, 1.0f);
                    EXPECT_EQ(tessera::einsum(s, "ij,jk->ik", a, a).data()[0], 3.0f);
                });
        });
    for (auto& t : threads) t.join();
    const tessera::stats st = be.stats();
    EXPECT_EQ(st.plan_cache_hits + st.plan_cache_misses, 200u);
    EXPECT_GE(st.plan_cache_misses, 1u);
    EXPECT_LE(st.plan_cache_misses, 4u);  // at most one per thread racing to plan first
}

TEST(EinsumAllocationTest, WarmCallsMakeNoHeapAllocations) {
    for (int threads : tessera::test::thread_counts()) {
        backend be{backend_options{}.with_threads(threads)};
        be.run([](session& s) {
            std::mt19937_64 rng(fresh_seed());
            const tensor<double> a2 = random_tensor<double>(s, {2, 2}, rng);
            const tensor<double> e = random_tensor<double>(s, {8, 8}, rng);
            const tensor<double> site = random_tensor<double>(s, {8, 2, 8}, rng);
            const tensor<double> big = random_tensor<double>(s, {96, 96}, rng);
            const tensor<double> batch = random_tensor<double>(s, {50, 3, 3}, rng);
            const tensor_view<const double> strided = big.view().slice(1, 0, tessera::slice_end, 2);  // [96, 48]
            tensor<double> out2 = tessera::zeros<double>(s, {2, 2});
            tensor<double> out_env = tessera::zeros<double>(s, {8, 8});
            tensor<double> out_big = tessera::zeros<double>(s, {48, 48});
            tensor<double> out_diag = tessera::zeros<double>(s, {50});
            tensor<double> out_elem = tessera::zeros<double>(s, {96, 96});
            const std::vector<tensor_view<const double>> env_operands{e, site, site};
            const auto env_plan =
                tessera::prepare<double>(s, "ab,apc,bpd->cd", e.shape(), site.shape(), site.shape());
            const auto step = [&] {
                tessera::einsum(s, "ij,jk->ik", {a2, a2}, out2);
                tessera::einsum(s, "ab,apc,bpd->cd", {e, site, site}, out_env);
                tessera::einsum(s, "ij,ik->jk", {strided, strided}, out_big);  // copies into the workspace
                tessera::einsum(s, "bii->b", {batch}, out_diag);
                tessera::einsum(s, "ij,ji->ij", {big, big}, out_elem);
                tessera::einsum(s, "ab,apc,bpd->cd", env_operands, out_env);  // a runtime list
                env_plan(s, env_operands, out_env);
                env_plan(s, {e, site, site}, out_env.view());
                const tensor<double> fresh = tessera::einsum(s, "ab,apc,bpd->cd", e, site, site);
                EXPECT_EQ(fresh.shape(), (shape{8, 8}));
            };
            step();
            const tessera::test::allocation_scope allocations;
            for (int i = 0; i < 3; ++i) step();
            EXPECT_EQ(allocations.count(), 0u);
        });
    }
}

TEST(EinsumDispatchTest, ElementwiseAndPermutationStepsAreLoopsAndContractionsAreProducts) {
    const auto kinds = [](const std::string& spec, std::vector<shape> shapes) {
        std::vector<const shape*> ptrs;
        for (const shape& sh : shapes) ptrs.push_back(&sh);
        const auto p = tessera::detail::make_einsum_program({spec, tessera::detail::dtype_code<float>, ptrs, {}});
        std::string k;
        for (const auto& op : p->ops) k += op.kind == tessera::detail::einsum_kind::product ? 'P' : 'L';
        return k;
    };
    EXPECT_EQ(kinds("ij,ij->ij", {{3, 4}, {3, 4}}), "L");
    EXPECT_EQ(kinds("ij->ji", {{3, 4}}), "L");
    EXPECT_EQ(kinds("i,j->ij", {{3}, {4}}), "L");
    EXPECT_EQ(kinds("i,i->", {{3}, {3}}), "L");
    EXPECT_EQ(kinds("ii->i", {{3, 3}}), "L");
    EXPECT_EQ(kinds("ij,jk->ik", {{3, 4}, {4, 5}}), "P");
    EXPECT_EQ(kinds("bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}), "P");
    EXPECT_EQ(kinds("ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 6}}), "PP");
    EXPECT_EQ(kinds("ijz,jk->ik", {{3, 4, 2}, {4, 5}}), "LP");  // z only in one operand: summed first
}

// Runs `fn` and expects it to throw E with a message containing every fragment.
template <class E, class Fn>
void expect_error(Fn fn, std::initializer_list<const char*> fragments) {
    try {
        fn();
        ADD_FAILURE() << "no exception; expected one mentioning " << *fragments.begin();
    } catch (const E& e) {
        const std::string what = e.what();
        for (const char* f : fragments) EXPECT_NE(what.find(f), std::string::npos) << "message: " << what;
    }
}

TEST(EinsumErrorTest, BadInputNamesTheSpecAndTheCulpritBeforeWriting) {
    backend be{backend_options{}.with_threads(2)};
    be.run([](session& s) {
        const tensor<double> a = tessera::full<double>(s, {2, 3}, 1.0);
        const tensor<double> b = tessera::full<double>(s, {3, 4}, 1.0);
        tensor<double> sq = tessera::full<double>(s, {3, 3}, 1.0);
        using tessera::shape_error;
        using tessera::spec_error;
        // Malformed specs.
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij,j$->i", a, b)); }, {"\"ij,j$->i\"", "'$' at position 4"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij.,jk->ik", a, b)); }, {"'.' at position 2"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij-jk", a)); }, {"'-' at position 2"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij,jk->ik->i", a, b)); }, {"second '->'"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij->i,j", a)); }, {"',' at position 5 is after '->'"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "......ij->ij", a)); }, {"second '...'"});
        // Operand count.
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij,jk->ik", a)); }, {"\"ij,jk->ik\"", "2 operands but 1 was given"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij->ij", a, b)); }, {"1 operand but 2 were given"});
        // Extents that disagree, within and across operands.
        expect_error<shape_error>([&] { static_cast<void>(tessera::einsum(s, "ij,jk->ik", a, a)); },
                                  {"index 'j' has extent 3 in operand 0 [2,3] (axis 1) but 2 in operand 1 [2,3] (axis 0)"});
        expect_error<shape_error>([&] { static_cast<void>(tessera::einsum(s, "ii->i", a)); }, {"index 'i' has extent 2", "but 3"});
        // Output indices.
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij,jk->iz", a, b)); }, {"output index 'z' does not appear"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum(s, "ij,jk->ii", a, b)); }, {"index 'i' appears more than once in the output"});
        // Ranks and ellipses.
        expect_error<shape_error>([&] { static_cast<void>(tessera::einsum(s, "ijk->i", a)); }, {"operand 0 has shape [2,3] but its subscripts \"ijk\" name 3 axes"});
        expect_error<shape_error>([&] { static_cast<void>(tessera::einsum(s, "...ijk->i", a)); }, {"at least 3 axes"});
        const tensor<double> b3 = tessera::full<double>(s, {4, 2, 3}, 1.0);
        const tensor<double> b5 = tessera::full<double>(s, {5, 3, 2}, 1.0);
        expect_error<shape_error>([&] { static_cast<void>(tessera::einsum(s, "...ij,...jk->...ik", b3, b5)); },
                                  {"the '...' axes of operand 0 [4,2,3] and operand 1 [5,3,2] do not broadcast"});
        // Out-parameters: wrong shape, overlap with an operand; nothing is written.
        tensor<double> out = tessera::full<double>(s, {2, 4}, 7.0);
        expect_error<shape_error>([&] { tessera::einsum(s, "ij,jk->ik", {a, b}, out.view().transpose()); },
                                  {"out has shape [4,2] but the result has shape [2,4]"});
        expect_error<tessera::alias_error>([&] { tessera::einsum(s, "ij,jk->ij", {sq, sq}, sq.view()); },
                                           {"out overlaps operand 0"});
        expect_error<shape_error>([&] { tessera::einsum(s, "ij,jk->ik", {a, a}, out); }, {"index 'j'"});
        tensor<double> row = tessera::full<double>(s, {1, 4}, 7.0);
        expect_error<tessera::alias_error>(
            [&] { tessera::einsum(s, "ij,jk->ik", {a, b}, row.view().broadcast_to({2, 4})); }, {"einsum"});
        EXPECT_EQ(row.data()[0], 7.0);
        for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out.data()[i], 7.0);
        // Paths.
        const tessera::einsum_step bad_position[] = {{0, 3}, {0, 1}};
        expect_error<spec_error>([&] { tessera::prepare<double>(s, "ij,jk,kl->il", bad_position, a.shape(), b.shape(), shape{4, 2}); },
                                 {"path step 0 (0, 3) must name two different operands among 0..2"});
        const tessera::einsum_step too_short[] = {{0, 1}};
        expect_error<spec_error>([&] { tessera::prepare<double>(s, "ij,jk,kl->il", too_short, a.shape(), b.shape(), shape{4, 2}); },
                                 {"the path has 1 step but 3 operands need 2"});
        const tessera::einsum_step same[] = {{1, 1}, {0, 1}};
        expect_error<spec_error>([&] { tessera::prepare<double>(s, "ij,jk,kl->il", same, a.shape(), b.shape(), shape{4, 2}); },
                                 {"path step 0 (1, 1)"});
        // Results above rank 8.
        const tensor<double> v = tessera::full<double>(s, {1}, 1.0);
        expect_error<shape_error>([&] { static_cast<void>(tessera::einsum(s, "a,b,c,d,e,f,g,h,i", v, v, v, v, v, v, v, v, v)); },
                                  {"rank 9, above the maximum rank 8"});
    });
}

using tessera::test::message_of;

TEST(EinsumErrorTest, ListFormsThrowWhatTheArgumentFormsThrowBeforeWriting) {
    backend be{backend_options{}.with_threads(2)};
    be.run([](session& s) {
        using tessera::alias_error;
        using tessera::shape_error;
        using tessera::spec_error;
        const tensor<double> a = tessera::full<double>(s, {2, 3}, 1.0);
        const tensor<double> b = tessera::full<double>(s, {3, 4}, 1.0);
        tensor<double> out = tessera::full<double>(s, {2, 4}, 7.0);
        const std::string spec = "ij,jk->ik";
        const auto plan = tessera::prepare<double>(s, spec, a.shape(), b.shape());

        // One operand too many: the argument form's spec_error, word for word, from every list.
        const std::string extra = message_of<spec_error>([&] {
            static_cast<void>(tessera::einsum(s, spec, a, b, b));
        });
        EXPECT_NE(extra.find("einsum \"ij,jk->ik\""), std::string::npos) << extra;
        EXPECT_NE(extra.find("2 operands but 3 were given"), std::string::npos) << extra;
        const std::vector<tensor_view<const double>> three{a, b, b};
        EXPECT_EQ(message_of<spec_error>([&] { tessera::einsum(s, spec, three, out); }), extra);
        EXPECT_EQ(message_of<spec_error>([&] { tessera::einsum(s, spec, {a, b, b}, out); }), extra);
        EXPECT_EQ(message_of<spec_error>([&] {
                      static_cast<void>(tessera::einsum<double>(s, spec, three));
                  }),
                  extra);
        const std::string plan_extra = message_of<spec_error>([&] {
            static_cast<void>(plan(s, a, b, b));
        });
        EXPECT_EQ(plan_extra, "einsum \"ij,jk->ik\": the plan takes 2 operands but 3 were given");
        EXPECT_EQ(message_of<spec_error>([&] { plan(s, three, out); }), plan_extra);
        EXPECT_EQ(message_of<spec_error>([&] { plan(s, {a, b, b}, out); }), plan_extra);

        // A wrong out shape and an out that overlaps an operand, through einsum and a plan.
        tensor<double> wrong = tessera::full<double>(s, {4, 2}, 7.0);
        const std::string out_shape = "out has shape [4,2] but the result has shape [2,4]";
        EXPECT_NE(message_of<shape_error>([&] { tessera::einsum(s, spec, {a, b}, wrong); })
                      .find(out_shape),
                  std::string::npos);
        EXPECT_NE(message_of<shape_error>([&] { plan(s, {a, b}, wrong); }).find(out_shape),
                  std::string::npos);
        tensor<double> sq = tessera::full<double>(s, {3, 3}, 1.0);
        const auto square = tessera::prepare<double>(s, "ij,jk->ik", sq.shape(), sq.shape());
        const std::vector<tensor_view<const double>> both{b.view().slice(1, 0, 3), sq};
        EXPECT_NE(message_of<alias_error>([&] { tessera::einsum(s, spec, both, sq); })
                      .find("einsum \"ij,jk->ik\": out overlaps operand 1"),
                  std::string::npos);
        EXPECT_NE(message_of<alias_error>([&] { square(s, {sq, sq}, sq.view()); })
                      .find("out overlaps operand 0"),
                  std::string::npos);
        for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out.data()[i], 7.0);
        for (std::size_t i = 0; i < wrong.size(); ++i) EXPECT_EQ(wrong.data()[i], 7.0);
        for (std::size_t i = 0; i < sq.size(); ++i) EXPECT_EQ(sq.data()[i], 1.0);
    });
}

// `count` vectors of `n` elements multiplied elementwise: "i,i,...,i->i".
std::string product_spec(std::size_t count) {
    std::string spec = "i";
    for (std::size_t i = 1; i < count; ++i) spec += ",i";
    return spec + "->i";
}

template <std::size_t... I>
tessera::einsum_plan<double> prepare_of(session& s, const std::string& spec, const std::vector<shape>& shapes,
                                        std::index_sequence<I...>) {
    return tessera::prepare<double>(s, spec, shapes[I]...);
}

TEST(EinsumListTest, WarmListCallsHitThePlanCacheAndMakeNoHeapAllocations) {
    for (int threads : tessera::test::thread_counts()) {
        SCOPED_TRACE(threads);
        backend be{backend_options{}.with_threads(threads)};
        const auto delta = [&](const std::function<void(session&)>& fn) {
            const tessera::stats before = be.stats();
            be.run(fn);
            return be.stats() - before;
        };
        const std::string chain = chain_spec(6), three = chain_spec(3);
        const std::string product = product_spec(tessera::max_einsum_operands);
        const std::vector<shape> chain_shapes(6, shape{4, 4});
        std::mt19937_64 rng(fresh_seed());
        std::vector<tensor<double>> keep;  // outlives the sessions below, which read views of it
        std::vector<tensor_view<const double>> matrices, vectors;
        be.run([&](session& s) {
            for (std::size_t i = 0; i < 6; ++i) keep.push_back(random_tensor<double>(s, {4, 4}, rng));
            for (std::size_t i = 0; i < tessera::max_einsum_operands; ++i) keep.push_back(random_tensor<double>(s, {3}, rng));
            for (std::size_t i = 0; i < keep.size(); ++i) (i < 6 ? matrices : vectors).push_back(keep[i].view());
        });
        const tensor<double>& m = keep[0];

        // The argument form plans the chain; every list form finds that plan.
        tessera::stats st = delta([&](session& s) {
            static_cast<void>(tessera::einsum(s, chain, m, m, m, m, m, m));
            for (int i = 0; i < 3; ++i) static_cast<void>(tessera::einsum<double>(s, chain, matrices));
            tensor<double> out = tessera::zeros<double>(s, {4, 4});
            tessera::einsum(s, chain, matrices, out);
            tessera::einsum(s, chain, {m, m, m, m, m, m}, out);
            static_cast<void>(tessera::prepare<double>(s, chain, chain_shapes));
        });
        EXPECT_EQ(st.plan_cache_misses, 1u);
        EXPECT_EQ(st.plan_cache_hits, 6u);
        // The other way round: a list plans, the argument forms find it.
        st = delta([&](session& s) {
            static_cast<void>(tessera::einsum<double>(s, three, {m, m, m}));
            static_cast<void>(tessera::einsum(s, three, m, m, m));
            static_cast<void>(tessera::prepare<double>(s, three, m.shape(), m.shape(), m.shape()));
        });
        EXPECT_EQ(st.plan_cache_misses, 1u);
        EXPECT_EQ(st.plan_cache_hits, 2u);

        // Warm calls through every list form, up to a list of max_einsum_operands: no heap, and
        // one plan-cache hit per call.
        st = delta([&](session& s) {
            tensor<double> out = tessera::zeros<double>(s, {4, 4});
            tensor<double> prod = tessera::zeros<double>(s, {3});
            const auto plan = tessera::prepare<double>(s, chain, chain_shapes);  // a hit
            const auto step = [&] {
                tessera::einsum(s, chain, matrices, out);
                tessera::einsum(s, chain, {matrices[0], matrices[1], matrices[2], matrices[3],
                                           matrices[4], matrices[5]}, out);
                tessera::einsum(s, product, vectors, prod);
                const tensor<double> fresh = tessera::einsum<double>(s, chain, matrices);
                EXPECT_EQ(fresh.shape(), (shape{4, 4}));
                plan(s, matrices, out);  // a plan runs without a look-up
                const tensor<double> planned = plan(s, matrices);
                EXPECT_EQ(planned.shape(), (shape{4, 4}));
            };
            step();
            const tessera::test::allocation_scope allocations;
            for (int i = 0; i < 3; ++i) step();
            EXPECT_EQ(allocations.count(), 0u);
            // The product of every vector, against a plain loop in long double.
            for (std::size_t j = 0; j < 3; ++j) {
                long double want = 1;
                for (const auto& v : vectors) want *= v.data()[j];
                EXPECT_LE(std::abs(prod.data()[j] - static_cast<double>(want)), 1e-13 * std::abs(static_cast<double>(want)));
            }
        });
        // The first step plans the product (a miss); prepare and every other call hit.
        EXPECT_EQ(st.plan_cache_misses, 1u);
        EXPECT_EQ(st.plan_cache_hits, 1u + 4u * 4u - 1u);
    }
}

TEST(EinsumListTest, WrongOperandCountsNameEinsumBeforeWriting) {
    backend be{backend_options{}.with_threads(2)};
    be.run([](session& s) {
        using tessera::spec_error;
        const tensor<double> a = tessera::full<double>(s, {2, 3}, 1.0);
        const tensor<double> b = tessera::full<double>(s, {3, 4}, 1.0);
        tensor<double> out = tessera::full<double>(s, {2, 4}, 7.0);
        const std::vector<tensor_view<const double>> one{a}, three{a, b, b}, none;
        const std::string spec = "ij,jk->ik";
        // Counts that differ from the spec's, in every list form.
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum<double>(s, spec, one)); }, {"einsum \"ij,jk->ik\"", "2 operands but 1 was given"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum<double>(s, spec, three)); }, {"einsum \"ij,jk->ik\"", "2 operands but 3 were given"});
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum<double>(s, spec, {a})); }, {"2 operands but 1 was given"});
        expect_error<spec_error>([&] { tessera::einsum(s, spec, three, out); }, {"2 operands but 3 were given"});
        expect_error<spec_error>([&] { tessera::prepare<double>(s, spec, std::vector<shape>{a.shape()}); },
                                 {"2 operands but 1 was given"});
        // Empty lists.
        for (const std::string& sp : {std::string("ij,jk->ik"), std::string("->")}) {
            const std::string quoted = "einsum \"" + sp + "\"";
            expect_error<spec_error>([&] { static_cast<void>(tessera::einsum<double>(s, sp, none)); }, {quoted.c_str(), "operand list is empty"});
            expect_error<spec_error>([&] { static_cast<void>(tessera::einsum<double>(s, sp, std::span<const tensor_view<const double>>())); },
                                     {quoted.c_str(), "operand list is empty"});
            expect_error<spec_error>([&] { tessera::einsum(s, sp, none, out); }, {quoted.c_str(), "operand list is empty"});
            expect_error<spec_error>([&] { tessera::prepare<double>(s, sp, std::vector<shape>()); },
                                     {quoted.c_str(), "operand list is empty"});
        }
        // A plan checks the list against its operand count.
        const auto plan = tessera::prepare<double>(s, spec, a.shape(), b.shape());
        expect_error<spec_error>([&] { static_cast<void>(plan(s, none)); }, {"einsum \"ij,jk->ik\"", "the plan takes 2 operands but 0 were given"});
        expect_error<spec_error>([&] { plan(s, three, out); }, {"the plan takes 2 operands but 3 were given"});
        expect_error<tessera::shape_error>([&] { static_cast<void>(plan(s, {a, a})); }, {"operand 1 has shape [2,3]"});
        for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out.data()[i], 7.0);

        // Lists longer than max_einsum_operands; the argument forms have no limit.
        const std::size_t over = tessera::max_einsum_operands + 1;
        const tensor<double> v = tessera::full<double>(s, {2}, 1.0);
        const std::vector<tensor_view<const double>> many(over, v.view());
        const std::vector<shape> many_shapes(over, v.shape());
        const std::string long_spec = product_spec(over);
        expect_error<spec_error>([&] { static_cast<void>(tessera::einsum<double>(s, long_spec, many)); },
                                 {"einsum \"i,i,", "holds 65 operands, above the limit of 64"});
        tensor<double> pair = tessera::full<double>(s, {2}, 7.0);
        expect_error<spec_error>([&] { tessera::einsum(s, long_spec, many, pair); }, {"holds 65 operands"});
        expect_error<spec_error>([&] { tessera::prepare<double>(s, long_spec, many_shapes); }, {"holds 65 operands"});
        const auto wide = prepare_of(s, long_spec, many_shapes, std::make_index_sequence<tessera::max_einsum_operands + 1>{});
        expect_error<spec_error>([&] { static_cast<void>(wide(s, many)); }, {"holds 65 operands"});
        expect_error<spec_error>([&] { wide(s, many, pair); }, {"holds 65 operands"});
        EXPECT_EQ(pair.data()[0], 7.0);
    });
}

}  // namespace
