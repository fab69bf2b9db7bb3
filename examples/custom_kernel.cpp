// custom_kernel: your own elementwise kernels and your own parallel loops, under the same
// session and parallel policy as tessera's ops.
//
//   tessera::map / zip        a lambda applied elementwise (with broadcasting for zip); a fused
//                             expression written as one lambda runs at a built-in op's speed.
//   tessera::parallel_for     the session's parallel helper: inline for small ranges, split over
//                             the backend's threads above the grain you give.
#include <tessera/tessera.hpp>

#include <cmath>
#include <cstdio>

int main() {
    tessera::backend be{tessera::backend_options{}.with_threads(2)};

    const bool ok = be.run([](tessera::session& s) {
        auto x = tessera::arange<float>(s, 0.0f, 8.0f);  // 0, 1, ..., 7
        auto w = tessera::full<float>(s, {8}, 0.5f);

        // A fused "axpy then clamp" as one pass: no temporaries.
        auto y = tessera::zip(s, [](float xi, float wi) { return std::fmin(2.0f * xi + wi, 10.0f); }, x, w);
        // map changes the element type when the lambda does.
        auto is_big = tessera::map(s, [](float v) { return v >= 10.0f; }, y);

        // A hand-written parallel kernel: a running sum per row of a [rows, cols] matrix. Rows are
        // independent, so they are the parallel range; a grain of 64 rows keeps small inputs
        // inline on this thread. The body may run on the arena's worker threads: it must only
        // touch memory that no other chunk touches.
        const std::size_t rows = 1000, cols = 16;
        auto m = tessera::full<double>(s, {rows, cols}, 1.0);
        double* data = m.data();
        tessera::parallel_for(s, rows, 64, [&](std::size_t begin, std::size_t end) {
            for (std::size_t r = begin; r < end; ++r)
                for (std::size_t c = 1; c < cols; ++c) data[r * cols + c] += data[r * cols + c - 1];
        });

        std::printf("y = %s\n", tessera::to_string(y).c_str());
        std::printf("is_big = %s\n", tessera::to_string(is_big).c_str());
        std::printf("last running sum = %g\n", data[rows * cols - 1]);
        return y.data()[7] == 10.0f && !is_big.data()[4] && is_big.data()[5] &&
               data[rows * cols - 1] == 16.0;
    });

    const tessera::stats st = be.stats();
    std::printf("parallel dispatches = %llu, inline dispatches = %llu\n",
                static_cast<unsigned long long>(st.parallel_dispatches),
                static_cast<unsigned long long>(st.inline_dispatches));
    std::printf("results %s\n", ok ? "as expected" : "WRONG");
    return ok ? 0 : 1;
}
