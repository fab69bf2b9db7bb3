// Fault injection: pool allocations fail after N; every op throws std::bad_alloc cleanly, its
// out-parameters are untouched, the session is restored and the next session works.
#include "support/backends.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <span>
#include <vector>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;
using tessera::tensor;
using tessera::detail::fail_block_allocations_after;
using tessera::detail::no_injected_failure;

struct reset_injection {
    ~reset_injection() { fail_block_allocations_after(no_injected_failure); }
};

class FaultTest : public ::testing::TestWithParam<int> {};

// A session that needs six fresh blocks, with the heap failing after 0..5 of them: each attempt
// throws bad_alloc out of run, leaves no session open, and the backend works afterwards.
TEST_P(FaultTest, AllocationFailureUnwindsCleanly) {
    reset_injection reset;
    for (std::size_t budget = 0; budget < 6; ++budget) {
        backend be{backend_options{}.with_threads(GetParam())};
        fail_block_allocations_after(budget);
        EXPECT_THROW(be.run([](session& s) mutable {
            auto a = tessera::full<float>(s, {16}, 1.0f);
            auto b = tessera::full<float>(s, {32}, 2.0f);
            auto c = tessera::full<float>(s, {64}, 3.0f);
            auto d = tessera::exp(s, a);
            auto e = tessera::relu(s, b);
            auto f = tessera::add(s, c, c);
        }), std::bad_alloc) << budget;
        fail_block_allocations_after(no_injected_failure);
        EXPECT_EQ(tessera::detail::this_thread.innermost, nullptr);  // the thread's markers restored
        EXPECT_EQ(tessera::detail::this_thread.chunk_of, nullptr);
        const tessera::stats st = be.stats();
        EXPECT_EQ(st.open_sessions, 0u);
        EXPECT_EQ(st.pool_misses, budget + 1);  // the failed attempt counts as a miss
        EXPECT_EQ(be.run([](session& s) mutable { return tessera::add(s, tessera::full<float>(s, {4}, 1.0f),
                                                              tessera::full<float>(s, {4}, 2.0f))(3); }),
                  3.0f);
    }
}

// An out-parameter op never allocates, so a failing heap cannot touch it; the allocating form
// fails before writing anything.
TEST_P(FaultTest, OutParameterFormIsUnaffectedAndAllocatingFormWritesNothing) {
    reset_injection reset;
    backend be{backend_options{}.with_threads(GetParam())};
    be.run([](session& s) mutable {
        auto a = tessera::full<float>(s, {8}, 1.0f);
        auto out = tessera::full<float>(s, {8}, -1.0f);
        fail_block_allocations_after(0);
        tessera::add(s, a, a, out);
        EXPECT_EQ(out(0), 2.0f);
        EXPECT_THROW((void)tessera::add(s, a, a), std::bad_alloc);  // a and out hold the free blocks
        fail_block_allocations_after(no_injected_failure);
    });
}

// The bytes of the tensors an op may write, compared before and after a failed call.
class byte_watch {
public:
    template <class T>
    void add(const tensor<T>& t) {
        regions_.push_back(std::as_bytes(t.values()));
    }
    void snapshot() {
        before_.clear();
        for (auto r : regions_) before_.emplace_back(r.begin(), r.end());
    }
    bool unchanged() const {
        for (std::size_t i = 0; i < regions_.size(); ++i)
            if (std::memcmp(regions_[i].data(), before_[i].data(), regions_[i].size()) != 0) return false;
        return true;
    }

private:
    std::vector<std::span<const std::byte>> regions_;
    std::vector<std::vector<std::byte>> before_;
};

// Calls the op that `prepare` sets up with the heap failing after 0, 1, 2, ... pool blocks, each
// attempt on a fresh backend (so every attempt needs the same blocks), until the call succeeds.
// Every failed attempt must throw bad_alloc or allocation_error (anything else escapes and fails
// the test), leave the watched out-parameters as they were, leave this session the thread's
// innermost one and usable, and leave no session open. Returns how many attempts failed.
template <class Prepare>
std::size_t failed_attempts(int threads, Prepare prepare) {
    reset_injection reset;
    constexpr std::size_t limit = 256;
    for (std::size_t budget = 0; budget < limit; ++budget) {
        backend be{backend_options{}.with_threads(threads)};
        bool succeeded = false;
        be.run([&](session& s) mutable {
            byte_watch watch;
            auto call = prepare(s, watch);  // operands and outs are made with a healthy heap
            watch.snapshot();
            fail_block_allocations_after(budget);
            try {
                call(s);
                succeeded = true;
            } catch (const std::bad_alloc&) {
            } catch (const tessera::allocation_error&) {
            }
            fail_block_allocations_after(no_injected_failure);
            EXPECT_EQ(tessera::detail::this_thread.innermost, &s) << "after " << budget << " blocks";
            EXPECT_EQ(tessera::detail::this_thread.chunk_of, nullptr) << "after " << budget << " blocks";
            if (!succeeded) {
                EXPECT_TRUE(watch.unchanged()) << "an out was written; failed after " << budget << " blocks";
            }
            EXPECT_EQ(tessera::sum_all(s, tessera::full<double>(s, {3}, 1.0)), 3.0);
        });
        EXPECT_EQ(be.stats().open_sessions, 0u);
        EXPECT_EQ(be.run([](session& s) mutable { return tessera::full<double>(s, {2}, 4.0)(1); }), 4.0);
        if (succeeded) return budget;
    }
    ADD_FAILURE() << "the op still failed with " << limit << " blocks allowed";
    return limit;
}

tensor<double> random(session& s, const tessera::shape& shape, std::uint64_t seed) {
    return tessera::uniform<double>(s, shape, -1.0, 1.0, seed);
}

// A symmetric, strictly diagonally dominant n x n matrix: positive definite (for cholesky, eigh
// and eigvalsh). Made in place, so no freed block is left in the pool for the op to reuse.
tensor<double> spd(session& s, std::size_t n) {
    auto a = random(s, {n, n}, 7);
    const std::span<double> v = a.values();
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < i; ++j) v[j * n + i] = v[i * n + j];
        v[i * n + i] += 2.0 * static_cast<double>(n);
    }
    return a;
}

// Allocating forms: each needs at least its result block, so at least one attempt fails.
TEST_P(FaultTest, EveryAllocatingOpFailsCleanly) {
    const int threads = GetParam();
    auto expect_fails = [&](const char* name, auto make_op) {
        SCOPED_TRACE(name);
        EXPECT_GT(failed_attempts(threads, [&](session& s, byte_watch&) { return make_op(s); }), 0u);
    };
    expect_fails("add", [](session& setup) {
        return [a = random(setup, {300, 300}, 1), b = random(setup, {300}, 2)](session& s) mutable { (void)tessera::add(s, a, b); };
    });
    expect_fails("exp", [](session& setup) {
        return [a = random(setup, {8, 8}, 1)](session& s) mutable { (void)tessera::exp(s, a); };
    });
    expect_fails("where", [](session& setup) {
        return [a = random(setup, {8, 8}, 1), b = random(setup, {8, 8}, 2)](session& s) mutable {
            (void)tessera::where(s, tessera::greater(s, a, b), a, b);
        };
    });
    expect_fails("matmul", [](session& setup) {
        return [a = random(setup, {64, 64}, 1), b = random(setup, {64, 64}, 2)](session& s) mutable { (void)tessera::matmul(s, a, b); };
    });
    expect_fails("batched_matmul", [](session& setup) {
        return [a = random(setup, {32, 4, 4}, 1), b = random(setup, {32, 4, 4}, 2)](session& s) mutable {
            (void)tessera::batched_matmul(s, a, b);
        };
    });
    expect_fails("tensordot", [](session& setup) {
        return [a = random(setup, {6, 5, 4}, 1), b = random(setup, {4, 5, 3}, 2)](session& s) mutable {
            (void)tessera::tensordot(s, a, b, {1, 2}, {1, 0});
        };
    });
    expect_fails("outer", [](session& setup) {
        return [a = random(setup, {40}, 1), b = random(setup, {50}, 2)](session& s) mutable { (void)tessera::outer(s, a, b); };
    });
    expect_fails("sum", [](session& setup) {
        return [a = random(setup, {300, 300}, 1)](session& s) mutable { (void)tessera::sum(s, a, {1}); };
    });
    expect_fails("argmax", [](session& setup) {
        return [a = random(setup, {30, 30}, 1)](session& s) mutable { (void)tessera::argmax(s, a); };
    });
    expect_fails("contiguous", [](session& setup) {
        return [a = random(setup, {30, 40}, 1)](session& s) mutable { (void)tessera::contiguous(s, a.view().transpose()); };
    });
    expect_fails("concat", [](session& setup) {
        return [a = random(setup, {3, 4}, 1), b = random(setup, {5, 4}, 2)](session& s) mutable { (void)tessera::concat<double>(s, {a.view(), b.view()}, 0); };
    });
    expect_fails("stack", [](session& setup) {
        return [a = random(setup, {3, 4}, 1), b = random(setup, {3, 4}, 2)](session& s) mutable { (void)tessera::stack<double>(s, {a.view(), b.view()}, 1); };
    });
    expect_fails("inverse", [](session& setup) {
        return [a = spd(setup, 6)](session& s) mutable { (void)tessera::inverse(s, a); };
    });
    expect_fails("det", [](session& setup) {
        return [a = spd(setup, 6)](session& s) mutable { (void)tessera::det(s, a); };
    });
    expect_fails("qr", [](session& setup) {
        return [a = random(setup, {7, 7}, 1)](session& s) mutable { (void)tessera::qr(s, a); };
    });
    expect_fails("svd", [](session& setup) {
        return [a = random(setup, {7, 7}, 1)](session& s) mutable { (void)tessera::svd(s, a); };
    });
    expect_fails("eigh", [](session& setup) {
        return [a = spd(setup, 7)](session& s) mutable { (void)tessera::eigh(s, a); };
    });
    expect_fails("eigvalsh", [](session& setup) {
        return [a = spd(setup, 7)](session& s) mutable { (void)tessera::eigvalsh(s, a); };
    });
    expect_fails("einsum chain", [](session& setup) {
        return [a = random(setup, {8, 9}, 1), b = random(setup, {9, 10}, 2), c = random(setup, {10, 3}, 3)](session& s) mutable {
            (void)tessera::einsum(s, "ij,jk,kl->il", a, b, c);
        };
    });
}

// Out-parameter forms: whatever scratch they take, a failure must leave every out untouched.
// Elementwise, reduction and join outs never allocate, nor does linear algebra up to 8 x 8 (inline
// storage), so nothing fails there; matmul takes its pack buffers and einsum its intermediates
// and grouped copies from the pool, so at least their first attempt fails.
TEST_P(FaultTest, EveryOutParameterOpLeavesItsOutsUntouched) {
    const int threads = GetParam();
    auto failures = [&](const char* name, auto make_op) {
        SCOPED_TRACE(name);
        return failed_attempts(threads, make_op);
    };
    auto out = [](session& s, byte_watch& w, const tessera::shape& shape) {
        auto t = tessera::full<double>(s, shape, -7.0);
        w.add(t);
        return t;
    };
    EXPECT_EQ(failures("add", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {300, 300}, 1), o = out(setup, w, {300, 300})](session& s) mutable { tessera::add(s, a, a, o.view()); };
    }), 0u);
    EXPECT_EQ(failures("sum", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {300, 300}, 1), o = out(setup, w, {300})](session& s) mutable { tessera::sum(s, a, {0}, o.view()); };
    }), 0u);
    EXPECT_GT(failures("matmul, strided operands", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {96, 80}, 1), b = random(setup, {96, 80}, 2), o = out(setup, w, {80, 80})](session& s) mutable {
            tessera::matmul(s, a.view().transpose(), b, o.view());
        };
    }), 0u);
    EXPECT_GT(failures("matmul, split in tiles", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {256, 256}, 1), b = random(setup, {256, 256}, 2), o = out(setup, w, {256, 256})](session& s) mutable {
            tessera::matmul(s, a, b, o.view());
        };
    }), 0u);
    EXPECT_GT(failures("batched_matmul", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {16, 24, 24}, 1), o = out(setup, w, {16, 24, 24})](session& s) mutable {
            tessera::batched_matmul(s, a, a.view().permute({0, 2, 1}), o.view());
        };
    }), 0u);
    EXPECT_EQ(failures("concat", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {3, 4}, 1), o = out(setup, w, {6, 4})](session& s) mutable { tessera::concat<double>(s, {a.view(), a.view()}, 0, o.view()); };
    }), 0u);
    EXPECT_EQ(failures("inverse", [&](session& setup, byte_watch& w) {
        return [a = spd(setup, 6), o = out(setup, w, {6, 6})](session& s) mutable { tessera::inverse(s, a, o.view()); };
    }), 0u);
    EXPECT_EQ(failures("solve", [&](session& setup, byte_watch& w) {
        return [a = spd(setup, 6), b = random(setup, {6, 3}, 2), o = out(setup, w, {6, 3})](session& s) mutable { tessera::solve(s, a, b, o.view()); };
    }), 0u);
    EXPECT_EQ(failures("cholesky", [&](session& setup, byte_watch& w) {
        return [a = spd(setup, 6), o = out(setup, w, {6, 6})](session& s) mutable { tessera::cholesky(s, a, o.view()); };
    }), 0u);
    EXPECT_EQ(failures("lu", [&](session& setup, byte_watch& w) {
        auto piv = tessera::full<std::int64_t>(setup, {6}, -1);
        w.add(piv);
        return [a = random(setup, {6, 6}, 1), o = out(setup, w, {6, 6}), piv = std::move(piv)](session& s) mutable {
            tessera::lu(s, a, o.view(), piv.view());
        };
    }), 0u);
    EXPECT_EQ(failures("slogdet", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {3, 6, 6}, 1), sign = out(setup, w, {3}), logabs = out(setup, w, {3})](session& s) mutable {
            tessera::slogdet(s, a, sign.view(), logabs.view());
        };
    }), 0u);
    EXPECT_EQ(failures("qr", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {7, 7}, 1), q = out(setup, w, {7, 7}), r = out(setup, w, {7, 7})](session& s) mutable {
            tessera::qr(s, a, q.view(), r.view());
        };
    }), 0u);
    EXPECT_EQ(failures("svd", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {7, 7}, 1), u = out(setup, w, {7, 7}), sv = out(setup, w, {7}), vh = out(setup, w, {7, 7})](session& s) mutable {
            tessera::svd(s, a, u.view(), sv.view(), vh.view());
        };
    }), 0u);
    EXPECT_EQ(failures("eigh", [&](session& setup, byte_watch& w) {
        return [a = spd(setup, 7), ev = out(setup, w, {7}), v = out(setup, w, {7, 7})](session& s) mutable {
            tessera::eigh(s, a, ev.view(), v.view());
        };
    }), 0u);
    EXPECT_EQ(failures("eigvalsh", [&](session& setup, byte_watch& w) {
        return [a = spd(setup, 7), ev = out(setup, w, {7})](session& s) mutable { tessera::eigvalsh(s, a, ev.view()); };
    }), 0u);
    EXPECT_GT(failures("einsum chain", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {8, 9}, 1), b = random(setup, {9, 10}, 2), c = random(setup, {10, 3}, 3), o = out(setup, w, {8, 3})](session& s) mutable {
            tessera::einsum(s, "ij,jk,kl->il", {a, b, c}, o.view());
        };
    }), 0u);
    EXPECT_GT(failures("einsum, strided batched products", [&](session& setup, byte_watch& w) {
        return [a = random(setup, {20, 8, 12}, 1), b = random(setup, {20, 12, 9}, 2), o = out(setup, w, {9, 20, 8})](session& s) mutable {
            tessera::einsum(s, "bki,bkj->jbi", {a.view().permute({0, 2, 1}), b}, o.view());
        };
    }), 0u);
}

INSTANTIATE_TEST_SUITE_P(Threads, FaultTest, ::testing::ValuesIn(tessera::test::thread_counts()),
                         tessera::test::thread_count_name);

}  // namespace
