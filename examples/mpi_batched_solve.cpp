// mpi_batched_solve: one million 4x4 systems A x = b solved across MPI ranks.
//
//   mpiexec -n 2 mpi_batched_solve [systems]      (default 1,000,000)
//
// Rank 0 makes the batch (well-conditioned float systems, as in batched_tiny_matmul) and scatters
// it along the batch axis, an even share per rank. Each rank builds one backend over its share of
// the node (rank_backend_options), and solves its systems and their residuals in one session;
// the residual norms are combined with allreduce and the solutions gathered on rank 0. Each phase
// prints its best time of three rounds. Rank 0 then solves the whole batch in one process and
// checks that the distributed answer is the same, bit for bit (each system is solved on its own,
// so where it was solved cannot change its bits).
#include <tessera/mpi.hpp>
#include <tessera/tessera.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace {

namespace mpi = tessera::mpi;
using tessera::session;
using tessera::tensor;

// [count, 4, 4] systems with random entries in [-1, 1) and 4 added to the diagonal: diagonally
// dominant, so every one is comfortably non-singular.
void fill_systems(tensor<float>& a, tensor<float>& b) {
    std::mt19937 rng(2026);
    std::uniform_real_distribution<float> entry(-1.0f, 1.0f);
    for (std::size_t e = 0; e < a.size(); ++e)
        a.data()[e] = entry(rng) + ((e % 16) % 5 == 0 ? 4.0f : 0.0f);
    for (std::size_t e = 0; e < b.size(); ++e) b.data()[e] = entry(rng);
}

struct residuals {
    float largest = 0;     // max over systems of |A x - b|
    double squares = 0;    // sum over systems of |A x - b|^2
};

// Solves every system of a and b into x and measures the residuals, all in one session.
residuals solve_share(session& s, const tensor<float>& a, const tensor<float>& b,
                      tensor<float>& x) {
    tessera::solve(s, a, b, x);
    const tensor<float> r = tessera::sub(s, tessera::batched_matmul(s, a, x), b);
    const tensor<float> norms = tessera::norm(s, r, {1, 2});  // one per system
    residuals out;
    if (norms.size() == 0) return out;
    out.largest = tessera::max(s, norms, tessera::all_axes).data()[0];
    for (std::size_t i = 0; i < norms.size(); ++i)
        out.squares += static_cast<double>(norms.data()[i]) * static_cast<double>(norms.data()[i]);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    mpi::environment env{argc, argv};
    mpi::communicator world{MPI_COMM_WORLD};
    const int rank = world.rank(), ranks = world.size();
    const long requested = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 1000000;
    if (requested <= 0) {
        if (rank == 0) std::fprintf(stderr, "usage: mpi_batched_solve [systems > 0]\n");
        return 2;
    }
    const auto count = static_cast<std::size_t>(requested);

    // One backend per rank, sized to this rank's share of the node's CPUs.
    tessera::backend be{mpi::rank_backend_options(world)};
    const std::size_t mine = mpi::split_rows(count, ranks, rank);

    // Rank 0 holds the whole batch; every rank holds its share. Tensors may outlive the session
    // that made them.
    tensor<float> all_a, all_b, all_x, a, b, x;
    be.run([&](session& s) {
        if (rank == 0) {
            all_a = tessera::empty<float>(s, {count, 4, 4});
            all_b = tessera::empty<float>(s, {count, 4, 1});
            all_x = tessera::empty<float>(s, {count, 4, 1});
            fill_systems(all_a, all_b);
        }
        a = tessera::empty<float>(s, {mine, 4, 4});
        b = tessera::empty<float>(s, {mine, 4, 1});
        x = tessera::empty<float>(s, {mine, 4, 1});
    });

    // Three rounds, the best time of each phase kept: the first also pays for first touches of
    // memory.
    double scatter_time = 1e300, solve_time = 1e300, combine_time = 1e300;
    residuals local;
    float largest = 0;
    double squares = 0;
    for (int round = 0; round < 3; ++round) {
        world.barrier();
        const double t0 = MPI_Wtime();
        mpi::scatter(world, all_a, a, 0);
        mpi::scatter(world, all_b, b, 0);
        const double t1 = MPI_Wtime();
        local = be.run([&](session& s) { return solve_share(s, a, b, x); });
        const double t2 = MPI_Wtime();
        // Every rank learns the largest residual and the total of the squares.
        mpi::allreduce(world, tessera::tensor_view<const float>(&local.largest, {1}),
                       tessera::tensor_view<float>(&largest, {1}), mpi::reduction::max);
        mpi::allreduce(world, tessera::tensor_view<const double>(&local.squares, {1}),
                       tessera::tensor_view<double>(&squares, {1}), mpi::reduction::sum);
        mpi::gather(world, x, all_x, 0);
        const double t3 = MPI_Wtime();
        scatter_time = std::min(scatter_time, t1 - t0);
        solve_time = std::min(solve_time, t2 - t1);
        combine_time = std::min(combine_time, t3 - t2);
    }

    // The slowest rank's solve, to show the balance.
    double slowest = 0;
    mpi::allreduce(world, tessera::tensor_view<const double>(&solve_time, {1}),
                   tessera::tensor_view<double>(&slowest, {1}), mpi::reduction::max);
    if (rank != 0) return 0;

    std::printf("%zu 4x4 systems on %d rank%s, %d thread%s on rank 0\n", count, ranks,
                ranks == 1 ? "" : "s", be.threads(), be.threads() == 1 ? "" : "s");
    std::printf("scatter %.1f ms, solve %.1f ms (slowest rank), allreduce + gather %.1f ms "
                "(best of 3)\n",
                scatter_time * 1e3, slowest * 1e3, combine_time * 1e3);
    std::printf("residuals: largest %.3g, root mean square %.3g\n", static_cast<double>(largest),
                std::sqrt(squares / static_cast<double>(count)));

    // The same batch in one process, one session (best of 3 as well).
    tensor<float> single;
    be.run([&](session& s) { single = tessera::empty<float>(s, {count, 4, 1}); });
    residuals one;
    double single_time = 1e300;
    for (int round = 0; round < 3; ++round) {
        const double t0 = MPI_Wtime();
        one = be.run([&](session& s) { return solve_share(s, all_a, all_b, single); });
        single_time = std::min(single_time, MPI_Wtime() - t0);
    }
    std::printf("single process: solve %.1f ms, largest residual %.3g\n", single_time * 1e3,
                static_cast<double>(one.largest));
    const bool same = std::memcmp(single.data(), all_x.data(), count * 4 * sizeof(float)) == 0 &&
                      one.largest == largest;
    std::printf("distributed solutions %s the single-process run\n",
                same ? "are bit-identical to" : "DIFFER from");
    return same ? 0 : 1;
}
