// tessera::mpi under mpiexec (2 and 3 ranks): every transfer with contiguous and strided views of
// every element type, exact results; the mismatch and MPI errors on every rank, without a hang.
//
// Every rank runs every test in the same order, so a test may not return early on one rank: after
// the first transfer only EXPECT_* is used (an ASSERT_* that fires on one rank would leave the
// others waiting in the next collective). mpi_main.cpp puts a watchdog around each test.
#include <tessera/mpi.hpp>
#include <tessera/tessera.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "support/alloc_counter.hpp"
#include "support/messages.hpp"

namespace {

namespace mpi = tessera::mpi;
using tessera::shape;
using tessera::tensor_view;

}  // namespace

// The communicator every test uses; mpi_main.cpp owns it inside MPI's lifetime.
tessera::mpi::communicator& world();

namespace {

// The value rank `rank` puts at flat index `i`: exact in every element type.
template <class T>
T value(int rank, std::size_t i) {
    const auto v = static_cast<double>(rank * 1000 + static_cast<int>(i));
    if constexpr (tessera::is_complex_v<T>) {
        using R = typename T::value_type;
        return T(static_cast<R>(v), static_cast<R>(-v - 0.5));
    } else {
        return static_cast<T>(v);
    }
}

// A buffer that holds a view's elements with room around them, so strided views can be made
// (make_view sizes it).
template <class T>
struct storage {
    std::vector<T> data;
};

// A dense row-major array and its view (the transfers need no session, so no tensor here).
template <class T>
struct dense {
    std::vector<T> values;
    tensor_view<T> view;
    explicit dense(const shape& s, T fill = T{})
        : values(std::max<std::size_t>(s.count(), 1), fill), view(values.data(), s) {}
    T* data() { return values.data(); }
    std::size_t size() const { return view.size(); }
};

// The layouts a transfer is tested with: the view `v` of shape [rows, cols] is built over `s`.
enum class layout { contiguous, transposed, stepped, reversed };
const layout all_layouts[] = {layout::contiguous, layout::transposed, layout::stepped,
                              layout::reversed};

const char* name_of(layout l) {
    switch (l) {
        case layout::contiguous: return "contiguous";
        case layout::transposed: return "transposed";
        case layout::stepped: return "stepped";
        case layout::reversed: return "reversed";
    }
    return "?";
}

template <class T>
tensor_view<T> make_view(storage<T>& s, layout l, std::size_t rows, std::size_t cols) {
    s.data.assign(4 * rows * cols + 8, T{});
    T* p = s.data.data();
    const auto r = static_cast<std::ptrdiff_t>(rows), c = static_cast<std::ptrdiff_t>(cols);
    switch (l) {
        case layout::contiguous: return tensor_view<T>(p, shape{rows, cols});
        case layout::transposed: return tensor_view<T>(p, shape{rows, cols}, {1, r});
        case layout::stepped: return tensor_view<T>(p + 1, shape{rows, cols}, {3 * c, 2});
        case layout::reversed:
            return tensor_view<T>(p + (r - 1) * c, shape{rows, cols}, {-c, 1});
    }
    return {};
}

// Writes value(rank, i) at row-major index i of v.
template <class T>
void fill_values(const tensor_view<T>& v, int rank, std::size_t offset = 0) {
    for (std::size_t i = 0; i < v.extent(0); ++i)
        for (std::size_t j = 0; j < v.extent(1); ++j)
            v(i, j) = value<T>(rank, offset + i * v.extent(1) + j);
}

// Counts the elements of v that differ from value(rank, offset + row-major index).
template <class T>
int wrong_values(const tensor_view<T>& v, int rank, std::size_t offset = 0) {
    int wrong = 0;
    for (std::size_t i = 0; i < v.extent(0); ++i)
        for (std::size_t j = 0; j < v.extent(1); ++j)
            if (!(v(i, j) == value<T>(rank, offset + i * v.extent(1) + j))) ++wrong;
    return wrong;
}

// Elements of the storage outside the view: they must stay as they were (zero).
template <class T>
int touched_outside(const storage<T>& s, const tensor_view<T>& v) {
    std::set<const T*> inside;
    for (std::size_t i = 0; i < v.extent(0); ++i)
        for (std::size_t j = 0; j < v.extent(1); ++j) inside.insert(&v(i, j));
    int touched = 0;
    for (const T& x : s.data)
        if (inside.count(&x) == 0 && !(x == T{})) ++touched;
    return touched;
}

template <class T>
class MpiTransferTest : public ::testing::Test {};
using element_types = ::testing::Types<float, double, std::complex<float>, std::complex<double>,
                                       std::int32_t, std::int64_t>;
TYPED_TEST_SUITE(MpiTransferTest, element_types);

TYPED_TEST(MpiTransferTest, SendAndRecvEveryLayoutPair) {
    using T = TypeParam;
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    for (layout from : all_layouts) {
        for (layout to : all_layouts) {
            storage<T> src, dst;
            const tensor_view<T> a = make_view(src, from, 5, 7);
            const tensor_view<T> b = make_view(dst, to, 5, 7);
            fill_values(a, r);
            if (r % 2 == 0) {
                mpi::send(comm, a, right, 4);
                mpi::recv(comm, b, left, 4);
            } else {
                mpi::recv(comm, b, left, 4);
                mpi::send(comm, a, right, 4);
            }
            EXPECT_EQ(wrong_values(b, left), 0) << name_of(from) << " -> " << name_of(to);
            EXPECT_EQ(touched_outside(dst, b), 0) << name_of(from) << " -> " << name_of(to);
        }
    }
}

TYPED_TEST(MpiTransferTest, BroadcastSourceAndScalarAndEmptyTravel) {
    using T = TypeParam;
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    // A broadcast view (stride 0) may be sent: each row repeats the same elements.
    std::vector<T> row(6);
    for (std::size_t j = 0; j < row.size(); ++j) row[j] = value<T>(r, j);
    const tensor_view<const T> repeated(row.data(), shape{4, 6}, {0, 1});
    dense<T> got(shape{4, 6});
    dense<T> scalar(shape{});
    scalar.data()[0] = value<T>(r, 9);
    dense<T> scalar_got(shape{});
    dense<T> nothing(shape{0, 3});
    mpi::request sends[3] = {mpi::isend(comm, repeated, right),
                             mpi::isend(comm, scalar.view, right),
                             mpi::isend(comm, nothing.view, right)};
    mpi::recv(comm, got.view, left);
    mpi::recv(comm, scalar_got.view, left);
    mpi::recv(comm, nothing.view, left);
    for (mpi::request& q : sends) q.wait();
    int wrong = 0;
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 6; ++j)
            wrong += got.data()[i * 6 + j] == value<T>(left, j) ? 0 : 1;
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(scalar_got.data()[0], value<T>(left, 9));
}

TYPED_TEST(MpiTransferTest, ReceivesCompletedInAnyOrderGetTheirOwnPayloads) {
    using T = TypeParam;
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    constexpr int n = 4;
    std::vector<dense<T>> out, in;
    std::vector<mpi::request> receives, sends;
    for (int k = 0; k < n; ++k) {
        out.emplace_back(shape{3, 2});
        in.emplace_back(shape{3, 2});
        fill_values(in.back().view, r, static_cast<std::size_t>(100 * k));
    }
    for (int k = 0; k < n; ++k)
        receives.push_back(mpi::irecv(comm, out[static_cast<std::size_t>(k)].view, left, 7));
    for (int k = 0; k < n; ++k)
        sends.push_back(mpi::isend(comm, in[static_cast<std::size_t>(k)].view, right, 7));
    // Completed last-first, and the first by polling: each must hold its own message.
    for (int k = n; k-- > 1;) receives[static_cast<std::size_t>(k)].wait();
    while (!receives[0].test()) {
    }
    EXPECT_TRUE(receives[0].done());
    for (mpi::request& q : sends) q.wait();
    for (int k = 0; k < n; ++k)
        EXPECT_EQ(wrong_values(out[static_cast<std::size_t>(k)].view, left,
                               static_cast<std::size_t>(100 * k)),
                  0)
            << "receive " << k;
}

TYPED_TEST(MpiTransferTest, BcastFromTheLastRankIntoEveryLayout) {
    using T = TypeParam;
    mpi::communicator& comm = world();
    const int root = comm.size() - 1;
    for (layout l : all_layouts) {
        storage<T> s;
        const tensor_view<T> v = make_view(s, l, 6, 3);
        if (comm.rank() == root) fill_values(v, root);
        mpi::bcast(comm, v, root);
        EXPECT_EQ(wrong_values(v, root), 0) << name_of(l);
        EXPECT_EQ(touched_outside(s, v), 0) << name_of(l);
    }
}

// The expected reduction of value-derived small numbers over the ranks.
template <class T>
T small(int rank, std::size_t i) {
    return static_cast<T>(static_cast<int>((i + static_cast<std::size_t>(rank)) % 3) + 1);
}

TYPED_TEST(MpiTransferTest, AllreduceEveryReductionEveryLayoutAndInPlace) {
    using T = TypeParam;
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    std::vector<mpi::reduction> hows = {mpi::reduction::sum, mpi::reduction::prod};
    if constexpr (!tessera::is_complex_v<T>) {
        hows.push_back(mpi::reduction::max);
        hows.push_back(mpi::reduction::min);
    }
    for (mpi::reduction how : hows) {
        auto expected = [&](std::size_t i) {
            T acc = small<T>(0, i);
            for (int k = 1; k < p; ++k) {
                const T x = small<T>(k, i);
                switch (how) {
                    case mpi::reduction::sum: acc += x; break;
                    case mpi::reduction::prod: acc *= x; break;
                    case mpi::reduction::max:
                        if constexpr (!tessera::is_complex_v<T>) acc = std::max(acc, x);
                        break;
                    case mpi::reduction::min:
                        if constexpr (!tessera::is_complex_v<T>) acc = std::min(acc, x);
                        break;
                }
            }
            return acc;
        };
        auto fill_small = [&](const tensor_view<T>& v) {
            for (std::size_t i = 0; i < 4; ++i)
                for (std::size_t j = 0; j < 5; ++j) v(i, j) = small<T>(r, i * 5 + j);
        };
        auto count_wrong = [&](const tensor_view<T>& v) {
            int wrong = 0;
            for (std::size_t i = 0; i < 4; ++i)
                for (std::size_t j = 0; j < 5; ++j) wrong += v(i, j) == expected(i * 5 + j) ? 0 : 1;
            return wrong;
        };
        for (layout from : all_layouts) {
            storage<T> si, so;
            const tensor_view<T> in = make_view(si, from, 4, 5);
            const tensor_view<T> out = make_view(so, layout::contiguous, 4, 5);
            fill_small(in);
            mpi::allreduce(comm, in, out, how);
            EXPECT_EQ(count_wrong(out), 0) << name_of(from);
            EXPECT_EQ(touched_outside(so, out), 0);
        }
        // In place: in and out the very same view.
        storage<T> s;
        const tensor_view<T> v = make_view(s, layout::contiguous, 4, 5);
        fill_small(v);
        mpi::allreduce(comm, v, v, how);
        EXPECT_EQ(count_wrong(v), 0) << "in place";
    }
}

// Rank k contributes k + 1 rows: shares differ, and a rank's share may be smaller than another's.
std::size_t rows_of(int rank) { return static_cast<std::size_t>(rank) + 1; }
std::size_t rows_before(int rank) { return static_cast<std::size_t>(rank * (rank + 1) / 2); }

TYPED_TEST(MpiTransferTest, AllgatherUnevenRowsEveryLayout) {
    using T = TypeParam;
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const std::size_t total = rows_before(p);
    for (layout from : all_layouts) {
        for (layout to : {layout::contiguous, layout::stepped, layout::transposed}) {
            storage<T> si, so;
            const tensor_view<T> in = make_view(si, from, rows_of(r), 3);
            const tensor_view<T> out = make_view(so, to, total, 3);
            fill_values(in, 0, rows_before(r) * 3);  // the rows' global indices
            mpi::allgather(comm, in, out);
            EXPECT_EQ(wrong_values(out, 0), 0) << name_of(from) << " -> " << name_of(to);
            EXPECT_EQ(touched_outside(so, out), 0);
        }
    }
}

TYPED_TEST(MpiTransferTest, ScatterAndGatherUnevenRowsFromEitherEnd) {
    using T = TypeParam;
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const std::size_t total = rows_before(p);
    for (int root : {0, p - 1}) {
        for (layout whole_layout : {layout::contiguous, layout::stepped, layout::transposed}) {
            for (layout part_layout : all_layouts) {
                storage<T> sw, sp, sb;
                const bool is_root = r == root;
                const tensor_view<T> whole =
                    is_root ? make_view(sw, whole_layout, total, 3) : tensor_view<T>();
                const tensor_view<T> part = make_view(sp, part_layout, rows_of(r), 3);
                if (is_root) fill_values(whole, 0);
                mpi::scatter(comm, whole, part, root);
                EXPECT_EQ(wrong_values(part, 0, rows_before(r) * 3), 0)
                    << "scatter " << name_of(whole_layout) << " -> " << name_of(part_layout);
                const tensor_view<T> back =
                    is_root ? make_view(sb, whole_layout, total, 3) : tensor_view<T>();
                mpi::gather(comm, part, back, root);
                if (is_root) {
                    EXPECT_EQ(wrong_values(back, 0), 0)
                        << "gather " << name_of(part_layout) << " -> " << name_of(whole_layout);
                    EXPECT_EQ(touched_outside(sb, back), 0);
                }
            }
        }
    }
}

// --- errors -------------------------------------------------------------------------------------

using tessera::test::message_of;

// Every rank's message, gathered on every rank (to check they are the same).
std::vector<std::string> messages_of_all(const std::string& mine) {
    mpi::communicator& comm = world();
    const int p = comm.size();
    std::vector<char> text(512, '\0');
    std::copy_n(mine.begin(), std::min<std::size_t>(mine.size(), 511), text.begin());
    std::vector<char> all(512 * static_cast<std::size_t>(p));
    MPI_Allgather(text.data(), 512, MPI_CHAR, all.data(), 512, MPI_CHAR, comm.handle());
    std::vector<std::string> out;
    for (int k = 0; k < p; ++k) out.emplace_back(all.data() + 512 * k);
    return out;
}

// After an error, the communicator still works: a plain allreduce gives the right answer.
void expect_communicator_still_works() {
    mpi::communicator& comm = world();
    dense<std::int64_t> one(shape{3}, 1);
    dense<std::int64_t> total(shape{3});
    mpi::allreduce(comm, one.view, total.view, mpi::reduction::sum);
    EXPECT_EQ(total.data()[2], comm.size());
}

TEST(MpiErrorTest, AllreduceShapeMismatchThrowsTheSameMessageOnEveryRank) {
    mpi::communicator& comm = world();
    const shape s = comm.rank() == 1 ? shape{4, 3} : shape{3, 4};
    dense<float> in(s), out(s);
    out.data()[0] = 42;
    const std::string m = message_of<mpi::mismatch_error>(
        [&] { mpi::allreduce(comm, in.view, out.view, mpi::reduction::sum); });
    EXPECT_EQ(m, "mpi::allreduce: rank 1 has float [4,3] but rank 0 has float [3,4]");
    for (const std::string& other : messages_of_all(m)) EXPECT_EQ(other, m);
    EXPECT_EQ(out.data()[0], 42.0f);  // nothing written
    expect_communicator_still_works();
}

TEST(MpiErrorTest, ElementTypeMismatchThrowsOnEveryRank) {
    mpi::communicator& comm = world();
    std::string m;
    if (comm.rank() == comm.size() - 1) {
        dense<double> v(shape{5});
        m = message_of<mpi::mismatch_error>([&] { mpi::bcast(comm, v.view, 0); });
    } else {
        dense<float> v(shape{5});
        m = message_of<mpi::mismatch_error>([&] { mpi::bcast(comm, v.view, 0); });
    }
    EXPECT_EQ(m, "mpi::bcast: rank " + std::to_string(comm.size() - 1) +
                     " has double [5] but rank 0 has float [5]");
    for (const std::string& other : messages_of_all(m)) EXPECT_EQ(other, m);
    expect_communicator_still_works();
}

TEST(MpiErrorTest, DifferentRootsThrowOnEveryRank) {
    mpi::communicator& comm = world();
    dense<std::int32_t> v(shape{2});
    const std::string m = message_of<mpi::mismatch_error>(
        [&] { mpi::bcast(comm, v.view, comm.rank() == 1 ? 1 : 0); });
    EXPECT_EQ(m, "mpi::bcast: rank 1 names root 1 but rank 0 names root 0");
    expect_communicator_still_works();
}

TEST(MpiErrorTest, OneRanksRejectedOperandsStopEveryRank) {
    mpi::communicator& comm = world();
    // Rank 1's out overlaps its in without being it: rank 1 gets the local error, every other
    // rank a mismatch that names rank 1.
    std::vector<float> values(8, 1.0f);
    const tensor_view<const float> in(values.data(), shape{4});
    const tensor_view<float> out(values.data() + (comm.rank() == 1 ? 2 : 4), shape{4});
    if (comm.rank() == 1) {
        const std::string m = message_of<tessera::alias_error>(
            [&] { mpi::allreduce(comm, in, out, mpi::reduction::sum); });
        EXPECT_EQ(m, "mpi::allreduce: out overlaps in without being the same view; in-place use "
                     "must pass the very same elements");
    } else {
        const std::string m = message_of<mpi::mismatch_error>(
            [&] { mpi::allreduce(comm, in, out, mpi::reduction::sum); });
        EXPECT_EQ(m, "mpi::allreduce: rank 1 rejected its operands (its own error says why); no "
                     "data moved");
    }
    expect_communicator_still_works();
}

TEST(MpiErrorTest, GatherRowsThatDoNotAddUpThrowOnEveryRank) {
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    dense<double> part(shape{rows_of(r), 2});
    dense<double> whole(shape{r == 0 ? rows_before(p) + 1 : 0, 2});
    const std::string m =
        message_of<mpi::mismatch_error>([&] { mpi::gather(comm, part.view, whole.view, 0); });
    EXPECT_EQ(m, "mpi::gather: out on rank 0 is double [" + std::to_string(rows_before(p) + 1) +
                     ",2] but the ranks' in add up to double [" + std::to_string(rows_before(p)) +
                     ",2]");
    // Rows of different widths.
    dense<double> odd(shape{2, r == 1 ? 3 : 2});
    const std::string w =
        message_of<mpi::mismatch_error>([&] { mpi::allgather(comm, odd.view, whole.view); });
    EXPECT_EQ(w, "mpi::allgather: rank 1 has in double [2,3] but rank 0 has in double [2,2]");
    expect_communicator_still_works();
}

TEST(MpiErrorTest, AllreduceIntoAStridedOutIsRejectedOnEveryRank) {
    mpi::communicator& comm = world();
    storage<double> si, so;
    const tensor_view<double> in = make_view(si, layout::contiguous, 3, 4);
    // Only the last rank's out is strided: the others learn it from the records.
    const bool last = comm.rank() == comm.size() - 1;
    const tensor_view<double> out =
        make_view(so, last ? layout::transposed : layout::contiguous, 3, 4);
    std::string m;
    if (last) {
        m = message_of<tessera::shape_error>(
            [&] { mpi::allreduce(comm, in, out, mpi::reduction::sum); });
        EXPECT_EQ(m, "mpi::allreduce: out must be dense and row-major (MPI's reductions take "
                     "plain elements in one order on every rank); reduce into a contiguous tensor "
                     "and copy from it");
    } else {
        m = message_of<mpi::mismatch_error>(
            [&] { mpi::allreduce(comm, in, out, mpi::reduction::sum); });
        EXPECT_EQ(m, "mpi::allreduce: rank " + std::to_string(comm.size() - 1) +
                         " rejected its operands (its own error says why); no data moved");
    }
    EXPECT_EQ(touched_outside(so, out), 0);
    expect_communicator_still_works();
}

TEST(MpiErrorTest, ComplexMaxIsRejectedOnEveryRank) {
    mpi::communicator& comm = world();
    dense<std::complex<float>> v(shape{3});
    const std::string m =
        message_of<tessera::error>(
            [&] { mpi::allreduce(comm, v.view, v.view, mpi::reduction::max); });
    EXPECT_EQ(m, "mpi::allreduce: max and min need a real element type, not complex<float>");
    expect_communicator_still_works();
}

TEST(MpiErrorTest, RecvOfAnotherShapeThrowsThereAndLeavesOutAlone) {
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    // Small (sent eagerly) and large (sent by rendezvous) payloads are both discarded.
    for (std::size_t n : {std::size_t{12}, std::size_t{3} << 18}) {
        dense<float> a(shape{3, n / 3}, 1.0f);
        dense<float> b(shape{n / 3, 3}, 7.0f);
        mpi::request sent = mpi::isend(comm, a.view, right);
        const std::string m =
            message_of<mpi::mismatch_error>([&] { mpi::recv(comm, b.view, left); });
        EXPECT_EQ(m, "mpi::recv: rank " + std::to_string(left) + " sent float [3," +
                         std::to_string(n / 3) + "] but out on rank " + std::to_string(r) +
                         " is float [" + std::to_string(n / 3) + ",3]; nothing was written");
        sent.wait();  // the sender's side completes
        EXPECT_EQ(std::count(b.data(), b.data() + b.size(), 7.0f), static_cast<std::ptrdiff_t>(n));
    }
    // A type mismatch through irecv: thrown by wait.
    dense<double> d(shape{4});
    dense<std::int64_t> i(shape{4});
    mpi::request sent = mpi::isend(comm, d.view, right);
    mpi::request got = mpi::irecv(comm, i.view, left);
    const std::string m = message_of<mpi::mismatch_error>([&] { got.wait(); });
    EXPECT_EQ(m, "mpi::irecv: rank " + std::to_string(left) + " sent double [4] but out on rank " +
                     std::to_string(r) + " is int64 [4]; nothing was written");
    EXPECT_TRUE(got.done());
    sent.wait();
    // The next transfer between the same ranks is unaffected.
    dense<float> x(shape{2}, static_cast<float>(r));
    dense<float> y(shape{2});
    mpi::request again = mpi::isend(comm, x.view, right);
    mpi::recv(comm, y.view, left);
    again.wait();
    EXPECT_EQ(y.data()[1], static_cast<float>(left));
    expect_communicator_still_works();
}

TEST(MpiErrorTest, MpiErrorsBecomeExceptions) {
    mpi::communicator& comm = world();
    dense<float> v(shape{2});
    try {
        mpi::send(comm, v.view, comm.size() + 5);
        ADD_FAILURE() << "no error for a rank that does not exist";
    } catch (const mpi::mpi_error& e) {
        int cls = 0;
        MPI_Error_class(e.code(), &cls);
        EXPECT_EQ(cls, MPI_ERR_RANK);
        EXPECT_NE(std::string(e.what()).find("mpi::send: "), std::string::npos) << e.what();
    }
    const std::string m =
        message_of<tessera::shape_error>([&] { mpi::bcast(comm, v.view, comm.size()); });
    EXPECT_EQ(m, "mpi::bcast: root " + std::to_string(comm.size()) +
                     " is not a rank of a communicator of " + std::to_string(comm.size()));
    expect_communicator_still_works();
}

// --- progress: large payloads to pending irecvs --------------------------------------------------

// Payloads this large go by rendezvous: the sender waits until the receiver has posted the
// payload's receive, which an irecv does once it has checked the header.
constexpr std::size_t large = std::size_t{1} << 20;

TEST(MpiProgressTest, IrecvThenBlockingSendOfLargePayloadsCompletes) {
    // The usual exchange: post the receive, send, wait. Every rank sends to its right neighbour.
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    dense<double> a(shape{large}, static_cast<double>(r)), b(shape{large}, -1.0);
    mpi::request q = mpi::irecv(comm, b.view, left);
    mpi::send(comm, a.view, right);
    q.wait();
    EXPECT_EQ(std::count(b.values.begin(), b.values.end(), static_cast<double>(left)),
              static_cast<std::ptrdiff_t>(large));
}

TEST(MpiProgressTest, LargeIrecvsWaitedInReverseOrderComplete) {
    // Rank 0 sends two large messages, blocking, in tag order; rank 1 waits for the second first.
    mpi::communicator& comm = world();
    const int r = comm.rank();
    dense<float> first(shape{large}, 1.0f), second(shape{large}, 2.0f);
    if (r == 0) {
        mpi::send(comm, first.view, 1, 1);
        mpi::send(comm, second.view, 1, 2);
    } else if (r == 1) {
        dense<float> x(shape{large}), y(shape{large});
        mpi::request q1 = mpi::irecv(comm, x.view, 0, 1);
        mpi::request q2 = mpi::irecv(comm, y.view, 0, 2);
        q2.wait();
        q1.wait();
        EXPECT_EQ(x.values[large - 1], 1.0f);
        EXPECT_EQ(y.values[large - 1], 2.0f);
    }
    expect_communicator_still_works();
}

TEST(MpiProgressTest, ABarrierBetweenIrecvAndWaitDoesNotHang) {
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    dense<std::int64_t> a(shape{large}, r), b(shape{large});
    mpi::request q = mpi::irecv(comm, b.view, left);
    mpi::request s = mpi::isend(comm, a.view, right);
    comm.barrier();  // the sends may only complete once the irecvs have taken their headers
    q.wait();
    s.wait();
    EXPECT_EQ(b.values[large / 2], left);
}

TEST(MpiProgressTest, CollectivesWhileOnlySomeRanksHaveIrecvsPendingComplete) {
    // Rank 0 alone has an irecv waiting for its header: every rank must still make the same kind
    // of collective call (MPI never matches a blocking collective with a non-blocking one).
    mpi::communicator& comm = world();
    const int r = comm.rank();
    dense<double> b(shape{large}), a(shape{large}, 3.0), x(shape{4}, 1.0), y(shape{4});
    mpi::request q;
    if (r == 0) q = mpi::irecv(comm, b.view, 1);
    comm.barrier();
    mpi::allreduce(comm, x.view, y.view, mpi::reduction::sum);
    mpi::bcast(comm, y.view, 0);
    if (r == 1) mpi::send(comm, a.view, 0);
    q.wait();
    EXPECT_EQ(y.values[3], static_cast<double>(comm.size()));
    if (r == 0) {
        EXPECT_EQ(b.values[large - 1], 3.0);
    }
}

TEST(MpiProgressTest, DestroyingAnIrecvNobodySendsToCancelsIt) {
    mpi::communicator& comm = world();
    const int p = comm.size(), r = comm.rank();
    dense<float> b(shape{4}, 7.0f);
    {
        mpi::request q = mpi::irecv(comm, b.view, (r + p - 1) % p, 99);
        EXPECT_FALSE(q.test());
    }  // no one sends with tag 99: the receive is cancelled, not waited for
    EXPECT_EQ(b.values[0], 7.0f);
    expect_communicator_still_works();
}

TEST(MpiErrorTest, DifferentCollectivesThrowOnEveryRank) {
    mpi::communicator& comm = world();
    dense<double> a(shape{4}, 1.0), b(shape{4});
    std::string m;
    if (comm.rank() == 0)
        m = message_of<mpi::mismatch_error>([&] { mpi::bcast(comm, a.view, 0); });
    else
        m = message_of<mpi::mismatch_error>(
            [&] { mpi::allreduce(comm, a.view, b.view, mpi::reduction::sum); });
    EXPECT_EQ(m, "mpi: rank 1 called mpi::allreduce but rank 0 called mpi::bcast");
    for (const std::string& other : messages_of_all(m)) EXPECT_EQ(other, m);
    expect_communicator_still_works();
}

TEST(MpiErrorTest, AMovedFromOrNullCommunicatorThrows) {
    mpi::communicator a{MPI_COMM_SELF};
    mpi::communicator b{std::move(a)};
    EXPECT_EQ(a.size(), 0);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(b.size(), 1);
    EXPECT_EQ(a.handle(), MPI_COMM_NULL);
    EXPECT_THROW(a.barrier(), mpi::mpi_error);
    dense<float> v(shape{2});
    EXPECT_THROW(mpi::bcast(a, v.view, 0), mpi::mpi_error);
    EXPECT_THROW(mpi::communicator{MPI_COMM_NULL}, mpi::mpi_error);
    mpi::bcast(b, v.view, 0);
}

// --- placement and counts -----------------------------------------------------------------------

TEST(MpiPlacementTest, RanksOfANodeShareItsCpusWithoutOverlap) {
    mpi::communicator& comm = world();
    const mpi::placement mine = mpi::rank_placement(comm);
    EXPECT_GE(mine.cpus.size(), 1u);
    EXPECT_LE(static_cast<int>(mine.cpus.size()), mine.affinity_cpus);
    // Every rank runs on this one machine here: gather the shares and count each CPU's owners.
    std::vector<int> owned(1024, 0);
    for (int cpu : mine.cpus) owned[static_cast<std::size_t>(cpu)] = 1;
    std::vector<int> owners(1024, 0);
    MPI_Allreduce(owned.data(), owners.data(), 1024, MPI_INT, MPI_SUM, comm.handle());
    auto cpus_owned_by_more_than = [&](int k) {
        return static_cast<int>(
            std::count_if(owners.begin(), owners.end(), [k](int n) { return n > k; }));
    };
    const int cpus = cpus_owned_by_more_than(0), shared = cpus_owned_by_more_than(1);
    // More ranks than CPUs: each CPU is still owned, and only the ranks left without one share.
    EXPECT_EQ(mine.local_size, comm.size());
    if (comm.size() <= cpus) {
        EXPECT_EQ(shared, 0);
    }
    const tessera::backend_options options = mpi::rank_backend_options(comm);
    if (std::getenv("TESSERA_NUM_THREADS") == nullptr) {
        EXPECT_EQ(options.threads, static_cast<int>(mine.cpus.size()));
    }
    tessera::backend be{options};
    EXPECT_EQ(be.threads(), static_cast<int>(mine.cpus.size()));
}

TEST(MpiPlacementTest, SplitRowsCoversEveryRowOnce) {
    for (std::size_t rows : {0, 1, 2, 7, 1000000}) {
        for (int ranks : {1, 2, 3, 5}) {
            std::size_t next = 0;
            for (int k = 0; k < ranks; ++k) {
                std::size_t first = 99;
                const std::size_t n = mpi::split_rows(rows, ranks, k, &first);
                EXPECT_EQ(first, next);
                EXPECT_LE(n, rows / static_cast<std::size_t>(ranks) + 1);
                next += n;
            }
            EXPECT_EQ(next, rows);
        }
    }
    EXPECT_THROW((void)mpi::split_rows(5, 2, 2), tessera::shape_error);
}

TEST(MpiAllocationTest, ContiguousTransfersAllocateNothingOfTheirOwn) {
    // MPI's own allocations depend on timing (unexpected messages, tree collectives), so the
    // transfers run where MPI moves nothing: point to point with MPI_PROC_NULL, collectives on a
    // one-rank communicator. tessera's part (headers, records, checks, layouts) runs in full.
    mpi::communicator self{MPI_COMM_SELF};
    dense<double> a(shape{8, 8}, 1.0), b(shape{8, 8}), rows(shape{8, 8});
    auto transfers = [&] {
        mpi::send(self, a.view, MPI_PROC_NULL);
        mpi::recv(self, b.view, MPI_PROC_NULL);
        mpi::allreduce(self, a.view, b.view, mpi::reduction::sum);
        mpi::allreduce(self, b.view, b.view, mpi::reduction::max);
        mpi::bcast(self, b.view, 0);
        mpi::allgather(self, a.view, rows.view);
        mpi::scatter(self, a.view, rows.view, 0);
        mpi::gather(self, rows.view, b.view, 0);
    };
    transfers();
    tessera::test::allocation_scope scope;
    for (int k = 0; k < 10; ++k) transfers();
    EXPECT_EQ(scope.count(), 0u);
    EXPECT_EQ(b.values[63], 1.0);
}

}  // namespace
