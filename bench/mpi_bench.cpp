// mpi_bench: tessera::mpi against raw MPI calls, under `mpiexec -n 2 mpi_bench [--summary]`.
//
// Send/recv (a ping-pong between ranks 0 and 1; the time is one round trip) and allreduce (sum of
// floats), from 1 KiB to 64 MiB of payload, each with
//   - a contiguous view: tessera against the raw MPI call on the same buffer;
//   - a strided view, the left half of every 512-byte row of a float matrix (a column block):
//     tessera's derived datatypes against packing by hand, the raw call, and unpacking.
// Targets (--summary, which alternates tessera and the baseline and compares medians): contiguous
// within 1.05x of raw MPI; strided no slower than pack + raw MPI + unpack. Every rank runs the
// same benchmarks with fixed iteration counts, so the ranks stay in step; only rank 0 prints.
#include <tessera/mpi.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_support.hpp"

namespace {

namespace mpi = tessera::mpi;
using tessera::shape;
using tessera::tensor_view;

mpi::communicator* world = nullptr;

constexpr std::size_t row_floats = 128;  // a strided view takes the first half of each row
constexpr std::size_t kept_floats = row_floats / 2;

std::int64_t iterations_for(std::int64_t bytes) {
    return std::clamp<std::int64_t>((std::int64_t{256} << 20) / bytes, 5, 10000);
}

// The payload as a contiguous [n] view and as a strided [rows, 64] view of a [rows, 128] matrix.
struct payload {
    std::vector<float> dense, wide, packed;
    std::size_t floats, rows;
    explicit payload(std::int64_t bytes)
        : floats(static_cast<std::size_t>(bytes) / sizeof(float)),
          rows(std::max<std::size_t>(floats / kept_floats, 1)) {
        dense.assign(floats, 1.0f);
        wide.assign(rows * row_floats, 1.0f);
        packed.assign(rows * kept_floats, 0.0f);
    }
    tensor_view<float> contiguous() { return {dense.data(), shape{floats}}; }
    tensor_view<float> strided() {
        return {wide.data(), shape{rows, kept_floats},
                {static_cast<std::ptrdiff_t>(row_floats), 1}};
    }
    void pack() {
        for (std::size_t r = 0; r < rows; ++r)
            std::memcpy(packed.data() + r * kept_floats, wide.data() + r * row_floats,
                        kept_floats * sizeof(float));
    }
    void unpack() {
        for (std::size_t r = 0; r < rows; ++r)
            std::memcpy(wide.data() + r * row_floats, packed.data() + r * kept_floats,
                        kept_floats * sizeof(float));
    }
};

// One step of each measured operation, on every rank: a ping-pong round trip between ranks 0 and
// 1 (other ranks idle), or one allreduce.
struct steps {
    payload p;
    std::vector<float> out;
    explicit steps(std::int64_t bytes) : p(bytes), out(std::max(p.floats, p.packed.size())) {}

    template <class Exchange>
    void ping_pong(Exchange&& exchange) {
        const int rank = world->rank();
        if (rank == 0) {
            exchange(true, 1);
            exchange(false, 1);
        } else if (rank == 1) {
            exchange(false, 0);
            exchange(true, 0);
        }
    }
    // A ping-pong of `v` through tessera.
    void send_recv(const tensor_view<float>& v) {
        ping_pong([&](bool sending, int peer) {
            if (sending)
                mpi::send(*world, v, peer);
            else
                mpi::recv(*world, v, peer);
        });
    }
    void send_recv_tessera() { send_recv(p.contiguous()); }
    void send_recv_raw() {
        const int n = static_cast<int>(p.floats);
        ping_pong([&](bool sending, int peer) {
            if (sending)
                MPI_Send(p.dense.data(), n, MPI_FLOAT, peer, 0, world->handle());
            else
                MPI_Recv(p.dense.data(), n, MPI_FLOAT, peer, 0, world->handle(),
                         MPI_STATUS_IGNORE);
        });
    }
    void send_recv_strided_tessera() { send_recv(p.strided()); }
    void send_recv_strided_pack_raw() {
        const int n = static_cast<int>(p.packed.size());
        ping_pong([&](bool sending, int peer) {
            if (sending) {
                p.pack();
                MPI_Send(p.packed.data(), n, MPI_FLOAT, peer, 0, world->handle());
            } else {
                MPI_Recv(p.packed.data(), n, MPI_FLOAT, peer, 0, world->handle(),
                         MPI_STATUS_IGNORE);
                p.unpack();
            }
        });
    }
    void allreduce_tessera() {
        mpi::allreduce(*world, p.contiguous(), tensor_view<float>(out.data(), shape{p.floats}),
                       mpi::reduction::sum);
    }
    void allreduce_raw() {
        MPI_Allreduce(p.dense.data(), out.data(), static_cast<int>(p.floats), MPI_FLOAT, MPI_SUM,
                      world->handle());
    }
    void allreduce_strided_tessera() {
        mpi::allreduce(*world, p.strided(),
                       tensor_view<float>(out.data(), shape{p.rows, kept_floats}),
                       mpi::reduction::sum);
    }
    void allreduce_strided_pack_raw() {
        p.pack();
        MPI_Allreduce(p.packed.data(), out.data(), static_cast<int>(p.packed.size()), MPI_FLOAT,
                      MPI_SUM, world->handle());
    }
};

using step = void (steps::*)();

struct measured {
    const char* name;    // the Google Benchmark name
    const char* label;   // the summary's
    step tessera, baseline;
    double target;       // tessera / baseline at most
};
const measured all_measures[] = {
    {"SendRecv", "send/recv contiguous", &steps::send_recv_tessera, &steps::send_recv_raw, 1.05},
    {"SendRecvStrided", "send/recv strided", &steps::send_recv_strided_tessera,
     &steps::send_recv_strided_pack_raw, 1.0},
    {"Allreduce", "allreduce contiguous", &steps::allreduce_tessera, &steps::allreduce_raw, 1.05},
    {"AllreduceStrided", "allreduce strided", &steps::allreduce_strided_tessera,
     &steps::allreduce_strided_pack_raw, 1.0},
};

constexpr std::int64_t smallest = std::int64_t{1} << 10, largest = std::int64_t{64} << 20;

void register_all() {
    for (const measured& m : all_measures) {
        for (const bool is_tessera : {true, false}) {
            const std::string name =
                fmt::format("BM_{}_{}", m.name,
                            is_tessera ? "Tessera"
                                       : (std::string_view(m.name).ends_with("Strided") ? "PackRaw"
                                                                                        : "Raw"));
            const step fn = is_tessera ? m.tessera : m.baseline;
            for (std::int64_t bytes = smallest; bytes <= largest; bytes *= 4)
                benchmark::RegisterBenchmark(name.c_str(),
                                             [fn](benchmark::State& state) {
                                                 steps st(state.range(0));
                                                 for (auto _ : state) (st.*fn)();
                                                 state.SetBytesProcessed(state.iterations() *
                                                                         state.range(0));
                                             })
                    ->Arg(bytes)
                    ->Iterations(iterations_for(bytes))
                    ->Repetitions(5)
                    ->ReportAggregatesOnly(true)
                    ->UseRealTime();
        }
    }
}

std::string size_name(std::int64_t bytes) {
    return bytes >= (1 << 20) ? fmt::format("{} MiB", bytes >> 20)
                              : fmt::format("{} KiB", bytes >> 10);
}

// Rank 0's time per step of `fn` over `count` steps, every rank starting together.
double time_steps(steps& st, step fn, std::int64_t count) {
    world->barrier();
    const double start = MPI_Wtime();
    for (std::int64_t k = 0; k < count; ++k) (st.*fn)();
    return (MPI_Wtime() - start) / static_cast<double>(count) * 1e9;
}

// --summary: tessera and its baseline alternate, seven rounds each, so that the machine's drift
// (it is shared) falls on both alike; the medians are compared.
int run_summary() {
    if (world->rank() == 0) {
        tessera_bench::print_machine_facts(stdout);
        std::printf("\n");
    }
    tessera_bench::summary_table table;
    constexpr int rounds = 7;
    for (const measured& m : all_measures) {
        for (std::int64_t bytes = smallest; bytes <= largest; bytes *= 4) {
            steps st(bytes);
            const std::int64_t count = std::max<std::int64_t>(iterations_for(bytes) / 4, 3);
            (st.*m.tessera)();  // first touches
            (st.*m.baseline)();
            std::vector<double> ours, theirs;
            for (int r = 0; r < rounds; ++r) {
                ours.push_back(time_steps(st, m.tessera, count));
                theirs.push_back(time_steps(st, m.baseline, count));
            }
            auto median = [](std::vector<double>& v) {
                std::nth_element(v.begin(), v.begin() + rounds / 2, v.end());
                return v[rounds / 2];
            };
            table.add(fmt::format("{} {}", m.label, size_name(bytes)), median(ours),
                      median(theirs), tessera_bench::goal::ratio_at_most, m.target);
            if (world->rank() == 0) std::fprintf(stderr, ".");
        }
    }
    if (world->rank() == 0) {
        std::fprintf(stderr, "\n");
        table.print(stdout);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    mpi::environment env{argc, argv};
    mpi::communicator comm{MPI_COMM_WORLD};
    world = &comm;
    if (comm.size() < 2) {
        std::fprintf(stderr, "mpi_bench: run it with at least 2 ranks (mpiexec -n 2 mpi_bench)\n");
        return 2;
    }
    // Every rank runs every benchmark, in the same order and the same number of times; only
    // rank 0's output is kept.
    if (comm.rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
    if (comm.rank() == 0)
        std::printf("mpi_bench: %d ranks; times are per round trip (send/recv) or per call\n",
                    comm.size());
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == "--summary") return run_summary();
    register_all();
    return tessera_bench::run_benchmarks(argc, argv, nullptr);
}
