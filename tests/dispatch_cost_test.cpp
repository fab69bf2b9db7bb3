// The dispatch-cost guard: exact per-call costs of representative paths, as counts (never times).
// A change that adds an arena entry, a dispatch, a pool trip or a heap allocation to one of these
// paths fails here with a message naming the path and the counter. If the change is intended,
// update the row in `cost_table()` below and say why in the commit.
#include "support/alloc_counter.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;

/// What one call of a path costs.
struct cost {
    std::uint64_t arena_entries = 0;
    std::uint64_t inline_entries = 0;
    std::uint64_t nested_reuses = 0;
    std::uint64_t parallel_dispatches = 0;
    std::uint64_t inline_dispatches = 0;
    std::uint64_t pool_hits = 0;
    std::uint64_t pool_misses = 0;
    std::uint64_t plan_cache_hits = 0;
    std::uint64_t plan_cache_misses = 0;
    std::uint64_t heap_allocations = 0;
};

struct path {
    std::string name;
    int threads;
    // Called twice on the same backend: once to warm up, once measured.
    std::function<void(backend&)> call;
    cost expected;
};

// 100 tiny out-parameter ops: relu and add alternating on 8 floats.
void tiny_chain(session& s, tessera::tensor<float>& x, const tessera::tensor<float>& y) {
    for (int i = 0; i < 50; ++i) {
        tessera::relu(s, x, x);
        tessera::add(s, x, y, x);
    }
}

std::vector<path> cost_table() {
    const std::size_t large = std::size_t{1} << 20;  // well above the default grain
    std::vector<path> rows;
    rows.push_back({"empty session, multi-thread backend", 2,
                    [](backend& be) { be.run([](session&) {}); },
                    {.arena_entries = 1}});
    rows.push_back({"empty session, one-thread backend", 1,
                    [](backend& be) { be.run([](session&) {}); },
                    {.inline_entries = 1}});
    rows.push_back({"nested run on the same backend", 2,
                    [](backend& be) { be.run([&](session&) { be.run([](session&) {}); }); },
                    {.arena_entries = 1, .nested_reuses = 1}});
    for (int threads : {1, 2}) {
        rows.push_back({"100-op tiny chain, out-parameter form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto x = tessera::full<float>(s, {8}, 1.0f);
                                auto y = tessera::full<float>(s, {8}, 0.5f);
                                tiny_chain(s, x, y);
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 100,
                         .pool_hits = 2}});
        rows.push_back({"100-op tiny chain, allocating form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto x = tessera::full<float>(s, {8}, 1.0f);
                                auto y = tessera::full<float>(s, {8}, 0.5f);
                                for (int i = 0; i < 50; ++i) {
                                    x = tessera::relu(s, x);
                                    x = tessera::add(s, x, y);
                                }
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 100,
                         .pool_hits = 102}});
        rows.push_back({"large elementwise add", threads,
                        [large](backend& be) {
                            be.run([large](session& s) {
                                auto x = tessera::full<float>(s, {large}, 1.0f);
                                tessera::add(s, x, x, x);
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .parallel_dispatches = threads > 1 ? 1u : 0u,
                         .inline_dispatches = threads > 1 ? 0u : 1u,
                         .pool_hits = 1}});
        rows.push_back({"batched 4x4 matmul, 64 matrices, out-parameter form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto a = tessera::full<float>(s, {64, 4, 4}, 0.5f);
                                auto c = tessera::full<float>(s, {64, 4, 4}, 0.0f);
                                tessera::batched_matmul(s, a, a, c);
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 1,
                         .pool_hits = 2}});
        rows.push_back({"batched 4x4 matmul, 100000 matrices, out-parameter form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto a = tessera::full<float>(s, {100000, 4, 4}, 0.5f);
                                auto c = tessera::full<float>(s, {100000, 4, 4}, 0.0f);
                                tessera::batched_matmul(s, a, a, c);
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .parallel_dispatches = threads > 1 ? 1u : 0u,
                         .inline_dispatches = threads > 1 ? 0u : 1u,
                         .pool_hits = 2}});
        rows.push_back({"batched 3x3 solve, 64 systems, out-parameter form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto a = tessera::full<double>(s, {64, 3, 3}, 0.0);
                                for (std::size_t i = 0; i < 64; ++i)
                                    for (std::size_t d = 0; d < 3; ++d) a.data()[9 * i + 4 * d] = 2.0;
                                auto b = tessera::full<double>(s, {64, 3, 1}, 1.0);
                                tessera::solve(s, a, b, b);
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 1,
                         .pool_hits = 2}});
        // A warm einsum finds its plan in the workspace: one plan-cache hit, nothing parsed.
        rows.push_back({"einsum ij,jk->ik 2x2, allocating form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto a = tessera::full<double>(s, {2, 2}, 0.5);
                                auto c = tessera::einsum(s, "ij,jk->ik", a, a);
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 1,
                         .pool_hits = 2,
                         .plan_cache_hits = 1}});
        rows.push_back({"einsum ab,apc,bpd->cd (one MPS site, bond 8), out-parameter form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto e = tessera::full<double>(s, {8, 8}, 0.5);
                                auto site = tessera::full<double>(s, {8, 2, 8}, 0.25);
                                auto next = tessera::full<double>(s, {8, 8}, 0.0);
                                tessera::einsum(s, "ab,apc,bpd->cd", {e, site, site}, next);
                            });
                        },
                        // Blocks: the three tensors and the [8, 2, 8] intermediate; the two
                        // product steps (8x8 by 8x16, 16x8 by 8x8) run the register-blocked
                        // kernel, which needs no pack buffer (Eigen's GEMM took one each).
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 2,
                         .pool_hits = 4,
                         .plan_cache_hits = 1}});
        // The same with the operands as a runtime list (the span overload a std::vector goes
        // through; an array here, so that the row counts no heap allocation of its own) and
        // through a prepared plan: the same blocks and dispatches.
        rows.push_back({"einsum ab,apc,bpd->cd, out form with a runtime operand list", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto e = tessera::full<double>(s, {8, 8}, 0.5);
                                auto site = tessera::full<double>(s, {8, 2, 8}, 0.25);
                                auto next = tessera::full<double>(s, {8, 8}, 0.0);
                                const std::array<tessera::tensor_view<const double>, 3> ops{
                                    e, site, site};
                                tessera::einsum(s, "ab,apc,bpd->cd", ops, next);
                            });
                        },
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 2,
                         .pool_hits = 4,
                         .plan_cache_hits = 1}});
        rows.push_back({"einsum ab,apc,bpd->cd, a prepared plan's out form", threads,
                        [](backend& be) {
                            be.run([](session& s) {
                                auto e = tessera::full<double>(s, {8, 8}, 0.5);
                                auto site = tessera::full<double>(s, {8, 2, 8}, 0.25);
                                auto next = tessera::full<double>(s, {8, 8}, 0.0);
                                const auto plan = tessera::prepare<double>(
                                    s, "ab,apc,bpd->cd", e.shape(), site.shape(), site.shape());
                                plan(s, {e, site, site}, next);
                            });
                        },
                        // prepare is the one look-up.
                        {.arena_entries = threads > 1 ? 1u : 0u,
                         .inline_entries = threads > 1 ? 0u : 1u,
                         .inline_dispatches = 2,
                         .pool_hits = 4,
                         .plan_cache_hits = 1}});
    }
    return rows;
}

std::string describe(const path& p) {
    return p.name + " (" + std::to_string(p.threads) + (p.threads == 1 ? " thread)" : " threads)");
}

TEST(DispatchCostTest, RepresentativePathsCostExactlyWhatTheTableSays) {
    for (const path& p : cost_table()) {
        backend be{backend_options{}.with_threads(p.threads)};
        p.call(be);  // warm: fills the workspace, wakes nothing twice
        const tessera::stats before = be.stats();
        tessera::test::allocation_scope heap;
        p.call(be);
        const std::uint64_t allocations = heap.count();
        const tessera::stats d = be.stats() - before;
        const cost measured{d.arena_entries,     d.inline_entries,      d.nested_reuses,
                            d.parallel_dispatches, d.inline_dispatches,  d.pool_hits,
                            d.pool_misses,       d.plan_cache_hits,     d.plan_cache_misses,
                            allocations};
        auto check = [&](const char* counter, std::uint64_t want, std::uint64_t got) {
            EXPECT_EQ(want, got) << "dispatch cost of '" << describe(p) << "' changed: " << counter
                                 << " was " << want << " per call, now " << got
                                 << ". If intended, update cost_table() in "
                                    "tests/dispatch_cost_test.cpp and say why in the commit.";
        };
        check("arena_entries", p.expected.arena_entries, measured.arena_entries);
        check("inline_entries", p.expected.inline_entries, measured.inline_entries);
        check("nested_reuses", p.expected.nested_reuses, measured.nested_reuses);
        check("parallel_dispatches", p.expected.parallel_dispatches, measured.parallel_dispatches);
        check("inline_dispatches", p.expected.inline_dispatches, measured.inline_dispatches);
        check("pool_hits", p.expected.pool_hits, measured.pool_hits);
        check("pool_misses", p.expected.pool_misses, measured.pool_misses);
        check("plan_cache_hits", p.expected.plan_cache_hits, measured.plan_cache_hits);
        check("plan_cache_misses", p.expected.plan_cache_misses, measured.plan_cache_misses);
        check("heap_allocations", p.expected.heap_allocations, measured.heap_allocations);
    }
}

}  // namespace
