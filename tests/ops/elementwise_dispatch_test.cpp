// Elementwise ops' pinned counts: the inline-or-parallel decision (dispatches per op at each
// thread count, the transcendental grain), pool traffic and heap allocations of warm sessions.
#include "elementwise_support.hpp"

namespace {

using namespace tessera::test::elementwise;

// ---------------------------------------------------------------------------------------------
// Dispatch counts: the inline-or-parallel decision, pinned exactly.

struct dispatches {
    std::uint64_t parallel = 0, inlined = 0;
    friend bool operator==(const dispatches&, const dispatches&) = default;
};
void PrintTo(const dispatches& d, std::ostream* os) {
    *os << "{parallel " << d.parallel << ", inline " << d.inlined << "}";
}

/// The dispatches made by one session running `fn`.
template <class Fn>
dispatches dispatches_of(backend& be, Fn fn) {
    const tessera::stats before = be.stats();
    be.run([&](session& s) { fn(s); });
    const tessera::stats d = be.stats() - before;
    return {d.parallel_dispatches, d.inline_dispatches};
}

constexpr dispatches one_inline{0, 1};
constexpr dispatches one_parallel{1, 0};

/// An op on n elements, in whichever of float and complex<float> it accepts.
template <class Case>
void run_binary_on(session& s, const Case& c, std::size_t n) {
    auto a = filled<float>(s, {n}, 1.5f);
    auto r = c.op(s, a, a);
}
template <class Case>
void run_unary_on(session& s, const Case& c, std::size_t n) {
    using T = std::conditional_t<Case::accepts_type::template value<float>, float, cf>;
    auto a = filled<T>(s, {n}, T{1.5f});
    auto r = c.op(s, a);
}

class ElementwiseDispatchTest : public ::testing::TestWithParam<int> {};

TEST_P(ElementwiseDispatchTest, TinyOpsRunInline) {
    backend be{backend_options{}.with_threads(GetParam())};
    auto d = dispatches_of(be, [](session& s) {
        auto a = filled<float>(s, {8}, 1.0f);
        auto m = filled<bool>(s, {8}, true);
        for (int i = 0; i < 10; ++i) {
            tessera::add(s, a, a, a);
            tessera::exp(s, a, a);
            tessera::where(s, m, a, a, a.view());
            tessera::map(
                s, [](float x) { return x * 0.5f; }, a, a.view());
            tessera::zip(s, [](float x, bool on) { return on ? x : 0.0f; }, std::tie(a, m), a.view());
        }
    });
    EXPECT_EQ(d, (dispatches{0, 50}));
}

TEST(ElementwiseGrainTest, TinyOpsOnASixteenThreadBackendNeverDispatchInParallel) {
    backend be{backend_options{}.with_threads(16)};
    auto d = dispatches_of(be, [](session& s) {
        std::apply([&](const auto&... c) { (run_binary_on(s, c, 8), ...); }, binary_cases);
        std::apply([&](const auto&... c) { (run_unary_on(s, c, 8), ...); }, unary_cases);
    });
    constexpr auto ops =
        std::tuple_size_v<decltype(binary_cases)> + std::tuple_size_v<decltype(unary_cases)>;
    EXPECT_EQ(d, (dispatches{0, ops}));
}

TEST_P(ElementwiseDispatchTest, LargeOpsDispatchOnceInParallelOnlyOnAMultiThreadBackend) {
    const int threads = GetParam();
    backend be{backend_options{}.with_threads(threads)};
    const std::size_t n = be.options().grain + 1;
    const dispatches want = threads > 1 ? one_parallel : one_inline;
    float one = 1.0f;
    const tensor_view<const float> scalar(&one, shape{});
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n}, 1.0f);
                                auto r = tessera::add(s, a, a);
                            }),
              want);
    // The count is the result's: a scalar against n elements.
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n}, 1.0f);
                                auto r = tessera::mul(s, scalar, a);
                            }),
              want);
    // Strided operands take the strided kernel, still in one dispatch.
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n, 2}, 1.0f);
                                auto b = filled<float>(s, {2, 2 * n}, 1.0f);
                                auto out = filled<float>(s, {n, 2}, 0.0f);
                                tessera::sub(s, a.view().transpose(),
                                             b.view().slice(1, 0, tessera::slice_end, 2),
                                             out.view().transpose().flip(1));
                            }),
              want);
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n, 2}, 1.0f);
                                auto m = filled<bool>(s, {n, 1}, true);
                                auto r =
                                    tessera::where(s, m, a.view().transpose().transpose(), scalar);
                            }),
              want);
    EXPECT_EQ(dispatches_of(be,
                            [&](session& s) {
                                auto a = filled<float>(s, {n}, 1.0f);
                                auto r = tessera::zip(
                                    s, [](float x, float y, float z) { return x + y * z; }, a, a,
                                    scalar);
                            }),
              want);
    // A one-thread backend stays inline however large the op and however small the grain.
    if (threads == 1) {
        backend tiny_grain{backend_options{}.with_threads(1).with_grain(1)};
        EXPECT_EQ(dispatches_of(tiny_grain,
                                [&](session& s) {
                                    auto a = filled<float>(s, {4096}, 1.0f);
                                    auto r = tessera::exp(s, a);
                                }),
                  one_inline);
    }
}

TEST_P(ElementwiseDispatchTest, ZeroSizeOpsDispatchNothing) {
    backend be{backend_options{}.with_threads(GetParam()).with_grain(1)};
    EXPECT_EQ(dispatches_of(be,
                            [](session& s) {
                                auto a = tessera::empty<float>(s, {0, 3});
                                auto r = tessera::add(s, a, filled<float>(s, {3}, 1.0f));
                                tessera::exp(s, a, r);
                            }),
              (dispatches{0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseDispatchTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

// Transcendental ops count each element as 8 cheap ones: they go parallel above grain / 8
// elements, cheap ops above grain. Both sides of both thresholds, for every op.
TEST(ElementwiseGrainTest, TranscendentalOpsGoParallelAtAnEighthOfTheCheapGrain) {
    constexpr std::size_t grain = 8 * 1000;
    backend be{backend_options{}.with_threads(2).with_grain(grain)};
    auto expect_threshold = [&](const char* name, work cost, auto run) {
        SCOPED_TRACE(name);
        if (cost == work::transcendental) {
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain / 8); }), one_inline);
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain / 8 + 1); }), one_parallel);
        } else {
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain / 8 + 1); }), one_inline);
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain); }), one_inline);
            EXPECT_EQ(dispatches_of(be, [&](session& s) { run(s, grain + 1); }), one_parallel);
        }
    };
    std::apply(
        [&](const auto&... c) {
            (expect_threshold(c.name, c.cost,
                              [&](session& s, std::size_t n) { run_binary_on(s, c, n); }),
             ...);
        },
        binary_cases);
    std::apply(
        [&](const auto&... c) {
            (expect_threshold(c.name, c.cost,
                              [&](session& s, std::size_t n) { run_unary_on(s, c, n); }),
             ...);
        },
        unary_cases);
    expect_threshold("clamp", work::cheap, [](session& s, std::size_t n) {
        auto r = tessera::clamp(s, filled<float>(s, {n}, 2.0f), 0.0f, 1.0f);
    });
    expect_threshold("where", work::cheap, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 2.0f);
        auto r = tessera::where(s, filled<bool>(s, {n}, false), a, a);
    });
    expect_threshold("map", work::cheap, [](session& s, std::size_t n) {
        auto r = tessera::map(
            s, [](float x) { return std::exp(x); }, filled<float>(s, {n}, 2.0f));
    });
    expect_threshold("zip", work::cheap, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 2.0f);
        tessera::zip(s, [](float x, float y) { return x * y; }, std::tie(a, a), a.view());
    });
    // The in-place and out-parameter forms decide the same way.
    expect_threshold("exp in place", work::transcendental, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 0.5f);
        tessera::exp(s, a, a);
    });
    expect_threshold("add in place", work::cheap, [](session& s, std::size_t n) {
        auto a = filled<float>(s, {n}, 0.5f);
        tessera::add(s, a, a, a);
    });
}

// ---------------------------------------------------------------------------------------------
// Heap allocations and pool traffic: a warm session makes none.

constexpr std::size_t chain_length = 8;
using chain_values = std::array<float, chain_length>;

// 25 ops, each reading the previous result; run 4 times for a chain of 100.
void out_parameter_chain(session& s, tensor<float>& p, tensor<float>& q, const tensor<float>& y,
                         tensor<bool>& m) {
    auto step = [&](auto&& op) {
        op(p, q);
        std::swap(p, q);
    };
    const auto half = [](float x) { return x * 0.5f + 1.0f; };
    const auto fused = [](float x, float y2) { return x - y2 * 0.25f; };
    step([&](auto& in, auto& out) { tessera::add(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::mul(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::sub(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::div(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::maximum(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::minimum(s, in, y, out); });
    step([&](auto& in, auto& out) { tessera::neg(s, in, out); });
    step([&](auto& in, auto& out) { tessera::abs(s, in, out); });
    step([&](auto& in, auto& out) { tessera::square(s, in, out); });
    step([&](auto& in, auto& out) { tessera::relu(s, in, out); });
    step([&](auto& in, auto& out) { tessera::sqrt(s, in, out); });
    step([&](auto& in, auto& out) { tessera::tanh(s, in, out); });
    step([&](auto& in, auto& out) { tessera::sigmoid(s, in, out); });
    step([&](auto& in, auto& out) { tessera::sin(s, in, out); });
    step([&](auto& in, auto& out) { tessera::cos(s, in, out); });
    step([&](auto& in, auto& out) { tessera::exp(s, in, out); });
    step([&](auto& in, auto& out) { tessera::log(s, in, out); });
    step([&](auto& in, auto& out) { tessera::clamp(s, in, 0.5f, 2.0f, out.view()); });
    step([&](auto& in, auto& out) { tessera::rsqrt(s, in, out); });
    step([&](auto& in, auto& out) { tessera::pow(s, in, y, out); });
    tessera::less(s, p, y, m);
    step([&](auto& in, auto& out) { tessera::where(s, m, in, y, out.view()); });
    step([&](auto& in, auto& out) { tessera::map(s, half, in, out.view()); });
    step([&](auto& in, auto& out) { tessera::zip(s, fused, std::tie(in, y), out.view()); });
    step([&](auto& in, auto& out) { tessera::conj(s, in, out); });
}

// The same 25 ops in the allocating form; each result replaces (and frees) the previous one.
tensor<float> allocating_chain(session& s, tensor<float> cur, const tensor<float>& y) {
    const auto half = [](float x) { return x * 0.5f + 1.0f; };
    const auto fused = [](float x, float y2) { return x - y2 * 0.25f; };
    cur = tessera::add(s, cur, y);
    cur = tessera::mul(s, cur, y);
    cur = tessera::sub(s, cur, y);
    cur = tessera::div(s, cur, y);
    cur = tessera::maximum(s, cur, y);
    cur = tessera::minimum(s, cur, y);
    cur = tessera::neg(s, cur);
    cur = tessera::abs(s, cur);
    cur = tessera::square(s, cur);
    cur = tessera::relu(s, cur);
    cur = tessera::sqrt(s, cur);
    cur = tessera::tanh(s, cur);
    cur = tessera::sigmoid(s, cur);
    cur = tessera::sin(s, cur);
    cur = tessera::cos(s, cur);
    cur = tessera::exp(s, cur);
    cur = tessera::log(s, cur);
    cur = tessera::clamp(s, cur, 0.5f, 2.0f);
    cur = tessera::rsqrt(s, cur);
    cur = tessera::pow(s, cur, y);
    cur = tessera::where(s, tessera::less(s, cur, y), cur, y);
    cur = tessera::map(s, half, cur);
    cur = tessera::zip(s, fused, cur, y);
    cur = tessera::conj(s, cur);
    return cur;
}

class ElementwiseAllocationTest : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        const std::uint64_t seed = fresh_seed();
        trace_ = seed_text(seed);
        std::mt19937_64 rng(seed);
        for (float& v : x_) v = draw_real<float>(domain::small, rng) / 4.0f;             // [-1, 1]
        for (float& v : y_) v = 1.0f + draw_real<float>(domain::positive, rng) / 10.0f;  // [1, 2]
    }
    template <class T>
    static void load(tensor<T>& t, const std::array<T, chain_length>& values) {
        std::copy(values.begin(), values.end(), t.values().begin());
    }
    std::string trace_;
    chain_values x_{}, y_{};
};

TEST_P(ElementwiseAllocationTest, WarmOutParameterChainOfOneHundredOpsMakesNoHeapAllocation) {
    SCOPED_TRACE(trace_);
    backend be{backend_options{}.with_threads(GetParam())};
    chain_values result{};
    auto session_body = [&](session& s) {
        auto p = tessera::empty<float>(s, {chain_length});
        auto q = tessera::empty<float>(s, {chain_length});
        auto y = tessera::empty<float>(s, {chain_length});
        auto m = tessera::empty<bool>(s, {chain_length});
        load(p, x_);
        load(y, y_);
        for (int round = 0; round < 4; ++round) out_parameter_chain(s, p, q, y, m);
        std::copy(p.values().begin(), p.values().end(), result.begin());
    };
    be.run(session_body);  // cold: the workspace gets its four blocks
    const tessera::stats cold = be.stats();
    EXPECT_EQ(cold.pool_misses, 4u);
    EXPECT_EQ(cold.pool_hits, 0u);
    EXPECT_EQ(cold.inline_dispatches, 100u);
    const chain_values cold_result = result;

    tessera::test::allocation_scope counted;
    be.run(session_body);
    EXPECT_EQ(counted.count(), 0u);
    const tessera::stats warm = be.stats() - cold;
    EXPECT_EQ(warm.pool_misses, 0u);
    EXPECT_EQ(warm.pool_hits, 4u);  // the four tensors; the 100 ops borrow nothing
    EXPECT_EQ(warm.inline_dispatches, 100u);
    EXPECT_EQ(warm.parallel_dispatches, 0u);
    EXPECT_EQ(result, cold_result);
    for (float v : result) EXPECT_TRUE(std::isfinite(v)) << v;
}

TEST_P(ElementwiseAllocationTest, WarmAllocatingChainOfOneHundredOpsMakesNoHeapAllocation) {
    SCOPED_TRACE(trace_);
    backend be{backend_options{}.with_threads(GetParam())};
    chain_values result{};
    auto session_body = [&](session& s) {
        auto cur = tessera::empty<float>(s, {chain_length});
        auto y = tessera::empty<float>(s, {chain_length});
        load(cur, x_);
        load(y, y_);
        for (int round = 0; round < 4; ++round) cur = allocating_chain(s, std::move(cur), y);
        std::copy(cur.values().begin(), cur.values().end(), result.begin());
    };
    be.run(session_body);
    const tessera::stats cold = be.stats();
    // cur and y, the first result while cur lives, and where's result while cur and the mask live.
    EXPECT_EQ(cold.pool_misses, 4u);
    EXPECT_EQ(cold.pool_hits, 2u + 100u - 4u);
    EXPECT_EQ(cold.inline_dispatches, 100u);
    const chain_values cold_result = result;

    tessera::test::allocation_scope counted;
    be.run(session_body);
    EXPECT_EQ(counted.count(), 0u);
    const tessera::stats warm = be.stats() - cold;
    EXPECT_EQ(warm.pool_misses, 0u);
    EXPECT_EQ(warm.pool_hits, 2u + 100u);  // two inputs and one result per op (less makes a mask)
    EXPECT_EQ(warm.inline_dispatches, 100u);
    EXPECT_EQ(result, cold_result);

    // The out-parameter chain computes the same values, to the bit.
    chain_values by_out{};
    be.run([&](session& s) {
        auto p = tessera::empty<float>(s, {chain_length});
        auto q = tessera::empty<float>(s, {chain_length});
        auto y = tessera::empty<float>(s, {chain_length});
        auto m = tessera::empty<bool>(s, {chain_length});
        load(p, x_);
        load(y, y_);
        for (int round = 0; round < 4; ++round) out_parameter_chain(s, p, q, y, m);
        std::copy(p.values().begin(), p.values().end(), by_out.begin());
    });
    EXPECT_EQ(by_out, result);
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseAllocationTest,
                         ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
