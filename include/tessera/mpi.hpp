// tessera/mpi.hpp - tessera::mpi, tensors and views between MPI ranks without staging copies.
// Start with `communicator` (tessera's own duplicate of an MPI communicator); the transfers take
// it first. `rank_backend_options` sizes one backend per rank to the rank's share of the node.
// An optional component: link the CMake target tessera::mpi (built when CMake finds MPI).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <cstdlib>
#include <memory>
#include <string>
#include <tessera/backend.hpp>
#include <tessera/dtype.hpp>
#include <tessera/error.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>
#include <utility>
#include <vector>

namespace tessera::mpi {

/// Thrown when an MPI call fails; the message names the op, the rank and MPI's own error string.
class mpi_error : public error {
public:
    mpi_error(const std::string& what, int code) : error(what), code_(code) {}
    /// Returns MPI's error code (MPI_ERR_RANK, MPI_ERR_TRUNCATE, ...).
    int code() const noexcept { return code_; }

private:
    int code_;
};

/// Thrown when ranks disagree about a transfer: the collective called, element types, shapes, the
/// root, the reduction, or one rank's operands were rejected there. A collective throws it on every
/// rank whose own operands passed, all with the same message, e.g. "mpi::allreduce: rank 1 has
/// float [4,3] but rank 0 has float [3,4]" (a rank whose own operands failed throws its own
/// error); a point-to-point transfer throws it on the receiving rank (see recv).
class mismatch_error : public shape_error {
public:
    using shape_error::shape_error;
};

/// MPI_Init_thread and MPI_Finalize as a scope, for a main that owns MPI. Asks for
/// MPI_THREAD_FUNNELED: tessera calls MPI only from the thread that calls its transfers, and a
/// session's worker threads never do. An exception unwinding through the scope, and one that
/// escapes main (std::terminate, whose handler it replaces while it lives), calls MPI_Abort, so
/// the other ranks stop instead of waiting forever in their next transfer.
///
///     int main(int argc, char** argv) {
///         tessera::mpi::environment env{argc, argv};
///         tessera::mpi::communicator world{MPI_COMM_WORLD};
class environment {
public:
    /// Initialises MPI (it must not be initialised yet); throws mpi_error if that fails or MPI
    /// cannot provide MPI_THREAD_FUNNELED (MPI is then finalised again).
    environment(int& argc, char**& argv);
    /// Finalises MPI, or aborts every rank when an exception is unwinding through this scope;
    /// restores the std::terminate handler.
    ~environment();
    environment(const environment&) = delete;
    environment& operator=(const environment&) = delete;
    /// Returns the thread level MPI provides (MPI_THREAD_FUNNELED or higher).
    int thread_level() const noexcept { return provided_; }

private:
    int provided_ = 0;
    int uncaught_ = 0;
    std::terminate_handler previous_ = nullptr;
};

namespace detail {
struct comm_state;
struct comm_state_deleter {
    void operator()(comm_state* s) const noexcept;
};
[[noreturn]] void throw_moved_from();
}  // namespace detail

/// tessera's communicator: duplicates of an MPI communicator, so that tessera's messages never
/// match the application's, with errors returned rather than aborting (they become mpi_error).
/// Building and destroying one are collective over the parent's ranks. Not thread-safe: one
/// thread at a time per communicator. It must outlive its pending requests (destroying it with
/// one pending is a checked error: TESSERA_CHECK, which aborts by default).
///
///     tessera::mpi::communicator world{MPI_COMM_WORLD};
///     tessera::mpi::allreduce(world, local, total, tessera::mpi::reduction::sum);
class communicator {
public:
    /// Duplicates `parent` (collective); throws mpi_error for MPI_COMM_NULL or if MPI refuses
    /// (MPI reports an invalid handle through `parent`'s own error handler, which by default
    /// aborts).
    explicit communicator(MPI_Comm parent);
    /// Moves the duplicates; `other` is left with none (size() 0), and any call but size(),
    /// rank() and destruction on it throws mpi_error.
    communicator(communicator&& other) noexcept
        : state_(std::move(other.state_)),
          rank_(std::exchange(other.rank_, 0)),
          size_(std::exchange(other.size_, 0)) {}
    communicator& operator=(communicator&& other) noexcept {
        state_ = std::move(other.state_);
        rank_ = std::exchange(other.rank_, 0);
        size_ = std::exchange(other.size_, 0);
        return *this;
    }
    /// Frees the duplicates (collective).
    ~communicator() = default;

    /// Returns this process's rank in the communicator.
    int rank() const noexcept { return rank_; }
    /// Returns the number of ranks (0 for a moved-from communicator).
    int size() const noexcept { return size_; }
    /// Returns the duplicate tessera runs its collectives on, for the application's own
    /// collective calls (its point-to-point messages belong on a communicator of its own, where
    /// tessera's receives cannot take them).
    MPI_Comm handle() const noexcept;
    /// Waits until every rank has called it.
    void barrier() const;

    /// The communicator's state, for tessera's transfers; throws mpi_error when moved from.
    detail::comm_state& state() const {
        if (!state_) [[unlikely]]
            detail::throw_moved_from();
        return *state_;
    }

private:
    std::unique_ptr<detail::comm_state, detail::comm_state_deleter> state_;
    int rank_ = 0;
    int size_ = 0;
};

/// The reductions allreduce offers; max and min need a real element type.
enum class reduction { sum, prod, max, min };

/// Receives from whichever rank sends first (recv, irecv).
inline constexpr int any_source = MPI_ANY_SOURCE;

namespace detail {

/// The element types on the wire; the codes travel in shape headers.
enum class element_code : std::int32_t { f32 = 1, f64, c64, c128, i32, i64 };

template <class T>
constexpr element_code code_of() noexcept {
    if constexpr (std::is_same_v<T, float>) return element_code::f32;
    else if constexpr (std::is_same_v<T, double>) return element_code::f64;
    else if constexpr (std::is_same_v<T, std::complex<float>>) return element_code::c64;
    else if constexpr (std::is_same_v<T, std::complex<double>>) return element_code::c128;
    else if constexpr (std::is_same_v<T, std::int32_t>) return element_code::i32;
    else return element_code::i64;
}

/// A view without its element type: what the compiled transfers take.
struct buffer {
    void* data = nullptr;
    element_code type{};
    tessera::shape extents;
    stride_array strides{};  // in elements
};

template <class T>
buffer buffer_of(const tensor_view<T>& v) noexcept {
    return {const_cast<std::remove_const_t<T>*>(v.data()), code_of<std::remove_const_t<T>>(),
            v.shape(), v.stride_values()};
}

/// What a rooted or gathering collective does; selects its checks and its MPI call.
enum class collective { bcast, allreduce, allgather, scatter, gather };

void send(const communicator& comm, const buffer& data, int dest, int tag);
void recv(const communicator& comm, const buffer& out, int source, int tag);
void run_collective(const communicator& comm, collective op, const buffer& in, const buffer& out,
                    int root, reduction how);

struct request_state;
struct request_state_deleter {
    void operator()(request_state* s) const noexcept;
};
std::unique_ptr<request_state, request_state_deleter> start_send(const communicator& comm,
                                                                 const buffer& data, int dest,
                                                                 int tag);
std::unique_ptr<request_state, request_state_deleter> start_recv(const communicator& comm,
                                                                 const buffer& out, int source,
                                                                 int tag);

}  // namespace detail

/// A pending isend or irecv. wait() completes it and throws what the transfer found
/// (mismatch_error, mpi_error). An irecv checks the sender's header as soon as it arrives, in any
/// tessera call on the same communicator (every blocking one progresses pending irecvs while it
/// waits), and then posts the payload's receive, so a peer sending a large payload to it is not
/// held up by this rank's next blocking tessera call on that communicator. Blocking calls
/// elsewhere (another communicator, the application's own MPI calls) do not progress it. Each
/// progress step tests every pending irecv, so it costs in proportion to their number.
/// Destroying a pending request cancels an irecv whose header has not arrived and otherwise waits
/// for the transfer (MPI may still be using the buffer; an isend nobody receives then waits
/// forever), dropping any error (call wait() to see it). Movable, not copyable.
class request {
public:
    /// An empty request: done() is true and wait() returns at once.
    request() = default;
    /// Completes the transfer; throws mismatch_error or mpi_error. Later calls return at once.
    void wait();
    /// Makes progress without blocking; returns true once the transfer is complete (then as
    /// wait(), it throws what the transfer found).
    bool test();
    /// Returns true when nothing is pending.
    bool done() const noexcept { return state_ == nullptr; }

private:
    friend request make_request(
        std::unique_ptr<detail::request_state, detail::request_state_deleter> state) noexcept;
    std::unique_ptr<detail::request_state, detail::request_state_deleter> state_;
};

/// Wraps a started transfer; used by isend and irecv.
inline request make_request(
    std::unique_ptr<detail::request_state, detail::request_state_deleter> state) noexcept {
    request r;
    r.state_ = std::move(state);
    return r;
}

// Every transfer checks its operands before any data moves: its own (an out that repeats elements,
// an in that shares bytes with the out) and, against the other ranks, the collective, element
// types, shapes and the root. Point-to-point transfers send a shape header ahead of the data;
// collectives first exchange one small record per rank (a non-blocking allgather), so that every
// rank takes the same decision. Strided views travel as MPI derived datatypes (hvectors over the
// axes), never through a packed copy (allreduce, whose out must be dense, copies a strided in into
// it). None of them needs a session; tessera allocates nothing per transfer apart from isend's and
// irecv's request state (MPI may, for derived datatypes and large messages).

/// Sends `data` to rank `dest`: a shape header, then the elements (contiguous as they are, strided
/// through a derived datatype). Returns when the buffer may be reused (MPI_Send). The receiver
/// checks the header; a mismatch is thrown there, not here, as with MPI's own truncation errors.
template <tensor_like V, class T = value_of_t<V>>
    requires numeric<T>
void send(const communicator& comm, const V& data, int dest, int tag = 0) {
    detail::send(comm, detail::buffer_of(as_view(data)), dest, tag);
}

/// Receives into `out` from rank `source` (or any_source). Checks the sender's header against
/// `out` before any element is written: a different element type or shape throws mismatch_error
/// naming both, and the sender's elements are discarded; `out` is left untouched.
template <writable_tensor O, class T = writable_value_t<O>>
    requires numeric<T>
void recv(const communicator& comm, O&& out, int source, int tag = 0) {
    detail::recv(comm, detail::buffer_of(as_writable_view(out)), source, tag);
}

/// Starts sending `data` to rank `dest`; `data` must stay valid and unchanged until the request
/// completes.
template <tensor_like V, class T = value_of_t<V>>
    requires numeric<T>
[[nodiscard]] request isend(const communicator& comm, const V& data, int dest, int tag = 0) {
    return make_request(detail::start_send(comm, detail::buffer_of(as_view(data)), dest, tag));
}

/// Starts receiving into `out` from rank `source` (or any_source); `out` must stay valid until the
/// request completes. The header is checked when it arrives (in wait or test), before the elements
/// are received, with recv's errors.
template <writable_tensor O, class T = writable_value_t<O>>
    requires numeric<T>
[[nodiscard]] request irecv(const communicator& comm, O&& out, int source, int tag = 0) {
    return make_request(
        detail::start_recv(comm, detail::buffer_of(as_writable_view(out)), source, tag));
}

/// Copies `data` on rank `root` into `data` on every other rank; every rank passes the same
/// element type and shape.
template <writable_tensor O, class T = writable_value_t<O>>
    requires numeric<T>
void bcast(const communicator& comm, O&& data, int root) {
    const detail::buffer b = detail::buffer_of(as_writable_view(data));
    detail::run_collective(comm, detail::collective::bcast, b, b, root, reduction::sum);
}

/// Writes the element-wise reduction of every rank's `in` into every rank's `out` (same element
/// type, shape and reduction everywhere; max and min of a complex type throw tessera::error on
/// every rank). `out` must be dense and row-major: MPI's reductions take plain elements, in the
/// same order on every rank. `in` may have any layout (one that is not `out`'s own is copied into
/// `out` first and reduced there) and may be `out` itself (reduced in place), but may not
/// otherwise share bytes with it.
template <tensor_like V, class T = value_of_t<V>>
    requires numeric<T>
void allreduce(const communicator& comm, const V& in,
               const std::type_identity_t<tensor_view<T>>& out, reduction how) {
    detail::run_collective(comm, detail::collective::allreduce, detail::buffer_of(as_view(in)),
                           detail::buffer_of(out), 0, how);
}

/// Writes every rank's `in` ([n_r, ...], trailing axes alike everywhere), in rank order, into every
/// rank's `out` ([n_0 + n_1 + ..., ...]).
template <tensor_like V, class T = value_of_t<V>>
    requires numeric<T>
void allgather(const communicator& comm, const V& in,
               const std::type_identity_t<tensor_view<T>>& out) {
    detail::run_collective(comm, detail::collective::allgather, detail::buffer_of(as_view(in)),
                           detail::buffer_of(out), 0, reduction::sum);
}

/// Splits `in` on rank `root` along its leading axis: rank r receives the next out.extent(0) rows
/// into its `out`, in rank order, so each rank chooses its share (split_rows gives an even one) and
/// the shares add up to in.extent(0). Ranks other than the root pass an empty `in` (it is not
/// read). The root's `in` needs a positive stride along its leading axis.
template <tensor_like V, class T = value_of_t<V>>
    requires numeric<T>
void scatter(const communicator& comm, const V& in, const std::type_identity_t<tensor_view<T>>& out,
             int root) {
    detail::run_collective(comm, detail::collective::scatter, detail::buffer_of(as_view(in)),
                           detail::buffer_of(out), root, reduction::sum);
}

/// The inverse of scatter: every rank's `in` ([n_r, ...]) lands, in rank order, in `out` on rank
/// `root` ([n_0 + n_1 + ..., ...]); other ranks pass an empty `out` (it is not written). The
/// root's `out` needs a positive stride along its leading axis.
template <tensor_like V, class T = value_of_t<V>>
    requires numeric<T>
void gather(const communicator& comm, const V& in, const std::type_identity_t<tensor_view<T>>& out,
            int root) {
    detail::run_collective(comm, detail::collective::gather, detail::buffer_of(as_view(in)),
                           detail::buffer_of(out), root, reduction::sum);
}

/// Returns rank `rank`'s share of `rows` rows split as evenly as possible over `ranks` ranks (the
/// first rows % ranks ranks get one more) and, in `first`, where it starts.
std::size_t split_rows(std::size_t rows, int ranks, int rank, std::size_t* first = nullptr);

/// Where a rank sits on its node, and the CPUs it may use without oversubscribing.
struct placement {
    int local_rank = 0;      ///< rank among the processes on this node
    int local_size = 1;      ///< processes of the communicator on this node
    int affinity_cpus = 0;   ///< CPUs in this process's affinity mask
    std::vector<int> cpus;   ///< this rank's share of them (see rank_placement)
};

/// Finds this rank's share of its node (collective over `comm`). Each CPU in the rank's affinity
/// mask goes to exactly one of the node's ranks whose masks contain it (round robin in local-rank
/// order), so ranks that mpiexec bound to disjoint cores keep all of theirs, and unbound ranks,
/// which all see the whole node, split it instead of each starting a thread per CPU. A rank left
/// with none still gets one (its first CPU): a node with more ranks than CPUs is oversubscribed.
placement rank_placement(const communicator& comm);

/// Backend options for this rank: `threads` is its share of the node (rank_placement's cpus),
/// unless TESSERA_NUM_THREADS is set, which then decides as for any backend. Collective.
///
///     tessera::backend be{tessera::mpi::rank_backend_options(world)};
backend_options rank_backend_options(const communicator& comm);

}  // namespace tessera::mpi
