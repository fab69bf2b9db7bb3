// tensor<T>: makers, moves, and lifetime beyond the session and the backend.
#include "support/alloc_counter.hpp"

#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

namespace {

using tessera::backend;
using tessera::backend_options;
using tessera::session;

TEST(TensorTest, MakersFillAndReportShape) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        auto z = tessera::zeros<double>(s, {2, 3});
        EXPECT_EQ(z.rank(), 2u);
        EXPECT_EQ(z.size(), 6u);
        EXPECT_EQ(z.shape(), (tessera::shape{2, 3}));
        for (double v : z.values()) EXPECT_EQ(v, 0.0);
        auto f = tessera::full<int>(s, {4}, 7);
        for (int v : f.values()) EXPECT_EQ(v, 7);
        auto scalar = tessera::full<float>(s, {}, 2.5f);
        EXPECT_EQ(scalar.rank(), 0u);
        EXPECT_EQ(scalar.size(), 1u);
        EXPECT_EQ(scalar.values()[0], 2.5f);
        auto none = tessera::empty<float>(s, {3, 0});
        EXPECT_EQ(none.size(), 0u);
        EXPECT_EQ(none.data(), nullptr);
    });
}

TEST(TensorTest, DataIsAlignedTo64Bytes) {
    backend be{backend_options{}.with_threads(2)};
    be.run([](session& s) {
        for (std::size_t n : {1u, 3u, 17u, 1000u}) {
            auto t = tessera::empty<float>(s, {n});
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u) << n;
        }
    });
}

TEST(TensorTest, MovesTransferOwnership) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        auto a = tessera::full<float>(s, {5}, 1.0f);
        const float* p = a.data();
        tessera::tensor<float> b = std::move(a);
        EXPECT_EQ(b.data(), p);
        EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
        EXPECT_EQ(a.size(), 0u);
        a = std::move(b);
        EXPECT_EQ(a.data(), p);
        EXPECT_EQ(b.size(), 0u);
    });
}

TEST(TensorTest, OutlivesItsSessionAndGoesBackToTheSharedPool) {
    backend be{backend_options{}.with_threads(2)};
    auto t = be.run([](session& s) { return tessera::full<float>(s, {100}, 3.0f); });
    for (float v : t.values()) EXPECT_EQ(v, 3.0f);
    t = tessera::tensor<float>{};  // freed outside any session: to the shared pool
    const tessera::stats before = be.stats();
    EXPECT_EQ(before.bytes_retained, 512u);
    be.run([](session& s) { auto u = tessera::empty<float>(s, {100}); });
    const tessera::stats d = be.stats() - before;
    EXPECT_EQ(d.pool_hits, 1u);
    EXPECT_EQ(d.pool_misses, 0u);
}

TEST(TensorTest, OutlivesItsBackend) {
    auto be = std::make_unique<backend>(backend_options{}.with_threads(2));
    auto t = be->run([](session& s) { return tessera::full<double>(s, {64}, 1.5); });
    auto u = be->run([](session& s) { return tessera::full<double>(s, {64}, 2.5); });
    be.reset();
    for (double v : t.values()) EXPECT_EQ(v, 1.5);
    t = tessera::tensor<double>{};  // backend gone: straight to the heap
    // Freed on another thread, inside a session of an unrelated backend.
    backend other{backend_options{}.with_threads(1)};
    std::thread th([&] { other.run([&](session&) { u = tessera::tensor<double>{}; }); });
    th.join();
    EXPECT_EQ(u.size(), 0u);
    EXPECT_EQ(other.stats().bytes_retained, 0u);
}

TEST(TensorTest, FreedInAnotherBackendsSessionGoesToItsOwnBackend) {
    backend a{backend_options{}.with_threads(2)};
    backend b{backend_options{}.with_threads(1)};
    auto t = a.run([](session& s) { return tessera::empty<float>(s, {16}); });
    b.run([&](session&) { t = tessera::tensor<float>{}; });
    EXPECT_EQ(b.stats().bytes_retained, 0u);
    EXPECT_EQ(a.stats().bytes_retained, 64u);
}

TEST(TensorTest, ReshapeTakesOverTheBlockWithoutCopyOrAllocation) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        tessera::tensor<float> t = tessera::arange<float>(s, 0, 6);
        const float* data = t.data();
        tessera::tensor<float> m;
        {
            tessera::test::allocation_scope heap;
            m = std::move(t).reshape({2, 3});
            EXPECT_EQ(heap.count(), 0u);
        }
        EXPECT_EQ(m.shape(), (tessera::shape{2, 3}));
        EXPECT_EQ(m.data(), data);
        EXPECT_EQ(m(1, 2), 5.0f);
        EXPECT_EQ(t.data(), nullptr);  // moved from
        // [1, 1] to a scalar, the case that needed contiguous(s, t.view().reshape({})) before.
        tessera::tensor<float> one = tessera::full<float>(s, {1, 1}, 4.0f);
        const tessera::tensor<float> scalar = std::move(one).reshape({});
        EXPECT_EQ(scalar.rank(), 0u);
        EXPECT_EQ(scalar.values()[0], 4.0f);
    });
}

TEST(TensorTest, ReshapeToAnotherCountIsAShapeErrorAndKeepsTheTensor) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        tessera::tensor<double> t = tessera::full<double>(s, {2, 3}, 1.0);
        const double* data = t.data();
        try {
            (void)std::move(t).reshape({4, 2});
            ADD_FAILURE() << "no shape_error";
        } catch (const tessera::shape_error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("reshape"), std::string::npos) << what;
            EXPECT_NE(what.find("[2,3]"), std::string::npos) << what;
            EXPECT_NE(what.find("[4,2]"), std::string::npos) << what;
        }
        EXPECT_EQ(t.shape(), (tessera::shape{2, 3}));
        EXPECT_EQ(t.data(), data);
    });
}

TEST(TensorTest, RankAboveEightIsAShapeError) {
    EXPECT_THROW((tessera::shape{1, 1, 1, 1, 1, 1, 1, 1, 1}), tessera::shape_error);
    EXPECT_NO_THROW((tessera::shape{1, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(TensorTest, ElementCountOverflowIsAShapeError) {
    const std::size_t big = std::size_t{1} << 40;
    EXPECT_THROW((tessera::shape{big, big}), tessera::shape_error);
    EXPECT_EQ((tessera::shape{big, big, 0}).count(), 0u);  // a zero extent makes it valid
}

TEST(TensorTest, ByteCountOverflowIsAnAllocationError) {
    backend be{backend_options{}.with_threads(1)};
    be.run([](session& s) {
        const std::size_t n = (std::size_t{1} << 62) + 1;
        EXPECT_THROW(tessera::empty<double>(s, {n}), tessera::allocation_error);
        EXPECT_THROW(tessera::empty<double>(s, {std::size_t{1} << 50}), tessera::allocation_error);
    });
    EXPECT_EQ(be.stats().pool_misses, 0u);
}

}  // namespace
