// batched_tiny_matmul: the workload tessera is built for. 100,000 rigid 4x4 transforms applied to
// 100,000 points, and 100,000 small 3x3 solves, done three ways:
//
//   1. one session per matrix  - what a per-call API costs: one pool entry for every matrix;
//   2. one session, a loop     - one entry, then one small op call per matrix;
//   3. one session, batched    - one entry, one call per workload: batched_matmul and solve run
//                                size-specialised kernels over the whole stack, split across the
//                                backend's threads.
//
// It prints the time per matrix for each way (best of three runs) and checks that all three give the same results.
// Usage: batched_tiny_matmul [count]   (default 100000)
#include <tessera/tessera.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace {

using tessera::session;
using tessera::tensor;

// Fills [count, 4, 4] with rigid transforms: a random rotation (from a random unit quaternion)
// and a random translation, in homogeneous form.
void fill_rigid_transforms(tensor<float>& t, std::mt19937& rng) {
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::uniform_real_distribution<float> shift(-10.0f, 10.0f);
    const std::size_t count = t.shape()[0];
    for (std::size_t i = 0; i < count; ++i) {
        float w = gauss(rng), x = gauss(rng), y = gauss(rng), z = gauss(rng);
        const float norm = std::sqrt(w * w + x * x + y * y + z * z);
        w /= norm, x /= norm, y /= norm, z /= norm;
        const float m[16] = {
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),     shift(rng),
            2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),     shift(rng),
            2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y), shift(rng),
            0,                       0,                       0,                       1};
        std::copy(m, m + 16, t.data() + 16 * i);
    }
}

// Fills [count, 3, 3] with well-conditioned matrices: random entries plus 4 on the diagonal.
void fill_solvable(tensor<float>& a, std::mt19937& rng) {
    std::uniform_real_distribution<float> entry(-1.0f, 1.0f);
    for (std::size_t e = 0; e < a.size(); ++e) a.data()[e] = entry(rng) + ((e % 9) % 4 == 0 ? 4.0f : 0.0f);
}

// The largest |x - y| over two tensors of the same shape.
float max_difference(const tensor<float>& x, const tensor<float>& y) {
    float worst = 0;
    for (std::size_t e = 0; e < x.size(); ++e) worst = std::max(worst, std::abs(x.data()[e] - y.data()[e]));
    return worst;
}

// The workload's inputs and the results of one way of computing it.
struct inputs {
    tensor<float> transforms;  // [count, 4, 4]
    tensor<float> points;      // [count, 4, 1]: homogeneous (x, y, z, 1)
    tensor<float> a;           // [count, 3, 3]
    tensor<float> b;           // [count, 3, 1]
};
struct results {
    tensor<float> moved;   // [count, 4, 1]
    tensor<float> solved;  // [count, 3, 1]
};

// The best of three runs of fn, in seconds: the first run also pays for first touches of memory
// and for waking the worker threads.
template <class Fn>
double best_seconds(Fn&& fn) {
    double best = 1e300;
    for (int run = 0; run < 3; ++run) {
        const auto start = std::chrono::steady_clock::now();
        fn();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    const long requested = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 100000;
    if (requested <= 0) {
        std::fprintf(stderr, "usage: batched_tiny_matmul [count > 0]\n");
        return 2;
    }
    const auto count = static_cast<std::size_t>(requested);

    // One backend for the program: threads default to the CPU-affinity count.
    tessera::backend be;

    // Tensors take their storage from a session but may outlive it: the inputs and the three
    // result sets are made once, up front.
    inputs in;
    results way[3];
    be.run([&](session& s) {
        std::mt19937 rng(42);
        in.transforms = empty<float>(s, {count, 4, 4});
        fill_rigid_transforms(in.transforms, rng);
        in.points = tessera::uniform<float>(s, {count, 4, 1}, -100.0f, 100.0f, 7);
        for (std::size_t i = 0; i < count; ++i) in.points.data()[4 * i + 3] = 1.0f;
        in.a = empty<float>(s, {count, 3, 3});
        fill_solvable(in.a, rng);
        in.b = tessera::uniform<float>(s, {count, 3, 1}, -1.0f, 1.0f, 9);
        for (results& r : way) {
            r.moved = empty<float>(s, {count, 4, 1});
            r.solved = empty<float>(s, {count, 3, 1});
        }
    });

    // select(0, i) views the i-th matrix of a stack without copying.
    const auto one_matrix = [&](session& s, std::size_t i, results& r) {
        const auto item = static_cast<std::ptrdiff_t>(i);
        tessera::matmul(s, in.transforms.view().select(0, item), in.points.view().select(0, item),
                        r.moved.view().select(0, item));
        tessera::solve(s, in.a.view().select(0, item), in.b.view().select(0, item),
                       r.solved.view().select(0, item));
    };

    const tessera::stats before = be.stats();
    const double t1 = best_seconds([&] {
        for (std::size_t i = 0; i < count; ++i) be.run([&](session& s) { one_matrix(s, i, way[0]); });
    });
    const tessera::stats after1 = be.stats();
    const double t2 = best_seconds([&] {
        be.run([&](session& s) {
            for (std::size_t i = 0; i < count; ++i) one_matrix(s, i, way[1]);
        });
    });
    const tessera::stats after2 = be.stats();
    const double t3 = best_seconds([&] {
        be.run([&](session& s) {
            tessera::batched_matmul(s, in.transforms, in.points, way[2].moved);
            tessera::solve(s, in.a, in.b, way[2].solved);
        });
    });
    const tessera::stats after3 = be.stats();

    const auto per_matrix_ns = [&](double t) { return t * 1e9 / static_cast<double>(count); };
    std::printf("%zu rigid transforms of points and %zu 3x3 solves, %d threads\n", count, count,
                be.threads());
    // Sessions per run (each way ran three times).
    const auto sessions = [](const tessera::stats& d) { return static_cast<unsigned long long>(d.sessions / 3); };
    std::printf("1. one session per matrix:       %8.1f ns per matrix (%llu sessions)\n",
                per_matrix_ns(t1), sessions(after1 - before));
    std::printf("2. one session, loop of ops:     %8.1f ns per matrix (%llu session)\n",
                per_matrix_ns(t2), sessions(after2 - after1));
    std::printf("3. one session, batched ops:     %8.1f ns per matrix (%llu session)\n",
                per_matrix_ns(t3), sessions(after3 - after2));
    std::printf("batched is %.1fx faster than a session per matrix, %.1fx faster than a loop\n",
                t1 / t3, t2 / t3);

    // Same kernels up to rounding order: the three ways agree to float precision.
    const float moved_diff = std::max(max_difference(way[0].moved, way[2].moved),
                                      max_difference(way[1].moved, way[2].moved));
    const float solved_diff = std::max(max_difference(way[0].solved, way[2].solved),
                                       max_difference(way[1].solved, way[2].solved));
    const bool agree = moved_diff <= 1e-3f && solved_diff <= 1e-4f;
    std::printf("results %s (largest difference: points %.2g, solutions %.2g)\n",
                agree ? "agree" : "DIFFER", static_cast<double>(moved_diff),
                static_cast<double>(solved_diff));
    return agree ? 0 : 1;
}
