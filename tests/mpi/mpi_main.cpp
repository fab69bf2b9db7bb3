// The main of mpi_test: MPI for the whole run, GoogleTest's output from rank 0 only (other ranks
// print their failures, marked with the rank), and a watchdog around every test, so a transfer
// that hangs ends the run with the test's name instead of blocking until CI's timeout.
#include <tessera/mpi.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "support/watchdog.hpp"

namespace {

// On ranks other than 0: reports failed assertions, with the rank, and nothing else.
class failures_only : public ::testing::EmptyTestEventListener {
public:
    explicit failures_only(int rank) : rank_(rank) {}
    void OnTestPartResult(const ::testing::TestPartResult& result) override {
        if (!result.failed()) return;
        std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                     result.file_name() != nullptr ? result.file_name() : "?",
                     result.line_number(), result.summary());
    }

private:
    int rank_;
};

// Starts a watchdog when a test starts and stops it when the test ends.
class watchdog_per_test : public ::testing::EmptyTestEventListener {
public:
    void OnTestStart(const ::testing::TestInfo& info) override {
        dog_.emplace(std::string(info.test_suite_name()) + "." + info.name(),
                     std::chrono::seconds(120));
    }
    void OnTestEnd(const ::testing::TestInfo&) override { dog_.reset(); }

private:
    std::optional<tessera::test::watchdog> dog_;
};

tessera::mpi::communicator* the_world = nullptr;

}  // namespace

tessera::mpi::communicator& world() { return *the_world; }

int main(int argc, char** argv) {
    tessera::mpi::environment env{argc, argv};
    ::testing::InitGoogleTest(&argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (rank != 0) {
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new failures_only(rank));
    }
    listeners.Append(new watchdog_per_test);
    tessera::mpi::communicator comm{MPI_COMM_WORLD};
    the_world = &comm;
    return RUN_ALL_TESTS();
}
