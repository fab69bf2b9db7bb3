// A program built against an installed tessera::mpi: one rank (a singleton, no mpiexec) reduces a
// tensor computed in a session of a backend placed by rank_backend_options.
#include <tessera/mpi.hpp>
#include <tessera/tessera.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    tessera::mpi::environment env{argc, argv};
    tessera::mpi::communicator world{MPI_COMM_WORLD};
    tessera::backend be{tessera::mpi::rank_backend_options(world)};
    const double partial = be.run([](tessera::session& s) {
        return tessera::sum_all(s, tessera::full<double>(s, {4}, 2.5));
    });
    double total = 0;
    tessera::mpi::allreduce(world, tessera::tensor_view<const double>(&partial, {1}),
                            tessera::tensor_view<double>(&total, {1}),
                            tessera::mpi::reduction::sum);
    std::printf("tessera::mpi consumer: %d rank, total %g\n", world.size(), total);
    return total == 10.0 * world.size() ? 0 : 1;
}
