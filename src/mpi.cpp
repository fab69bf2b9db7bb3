// tessera::mpi's compiled part: the shape headers and records, the derived datatypes that carry
// strided views, and the checks every rank runs before any data moves.
//
// Point-to-point: a transfer is two messages. The header (element type, shape, and the tag of the
// payload) goes on the communicator's main duplicate under the caller's tag; the payload goes on a
// second duplicate under a tag the sender numbers per communicator. The receiver matches headers in
// MPI's order, checks one against its out, and only then receives the payload by its own tag, so a
// mismatch never writes into out, and receives started in any order (irecv) each get the payload of
// the header they matched. An irecv's header is checked, and its payload's receive posted, by
// whichever tessera call on the communicator runs when it arrives: every blocking one progresses
// the pending irecvs while it waits (see `complete`).
//
// Collectives: every rank contributes one record (the collective, its operands' headers, the
// root, the reduction, whether its own operands passed its local checks, whether it has irecvs
// pending) to a non-blocking allgather, and every rank then takes the same decision from the same
// records: all go ahead or all throw.
#include <tessera/mpi.hpp>

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tessera/detail/check.hpp>
#include <tessera/detail/copy.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/print.hpp>

namespace tessera::mpi {
namespace detail {
namespace {

constexpr std::int32_t header_magic = 0x7e55e7a1;

// What travels ahead of a point-to-point payload, and twice in each collective record.
struct wire_header {
    std::int32_t magic = header_magic;
    std::int32_t type = 0;  // element_code
    std::int32_t rank = 0;
    std::int32_t payload_tag = 0;
    std::array<std::uint64_t, max_rank> extents{};
};

struct record {
    wire_header part;   // the operand every rank contributes
    wire_header whole;  // allreduce's and allgather's out, the root's side of scatter and gather
    std::int32_t root = 0;
    std::int32_t how = 0;
    std::int32_t rejected = 0;  // 1 when this rank's local checks failed
    std::int32_t op = 0;        // the collective called
    std::int32_t pending = 0;   // 1 when irecvs of this rank wait for their header
    std::int32_t unused = 0;
};

wire_header header_of(const buffer& b) noexcept {
    wire_header h;
    h.type = static_cast<std::int32_t>(b.type);
    h.rank = static_cast<std::int32_t>(b.extents.rank());
    for (std::size_t i = 0; i < b.extents.rank(); ++i) h.extents[i] = b.extents[i];
    return h;
}

bool same_shape(const wire_header& a, const wire_header& b) noexcept {
    return a.type == b.type && a.rank == b.rank && a.extents == b.extents;
}

// Same type and rank, and the same extents after the leading one: rows that fit together.
bool same_rows(const wire_header& a, const wire_header& b) noexcept {
    return a.type == b.type && a.rank == b.rank &&
           std::equal(a.extents.begin() + 1, a.extents.end(), b.extents.begin() + 1);
}

const char* type_name(std::int32_t code) noexcept {
    switch (static_cast<element_code>(code)) {
        case element_code::f32: return "float";
        case element_code::f64: return "double";
        case element_code::c64: return "complex<float>";
        case element_code::c128: return "complex<double>";
        case element_code::i32: return "int32";
        case element_code::i64: return "int64";
    }
    return "an unknown type";
}

std::string describe_header(const wire_header& h) {
    if (h.rank < 0 || h.rank > static_cast<std::int32_t>(max_rank)) return "an invalid header";
    std::string s = fmt::format("{} [", type_name(h.type));
    for (std::size_t i = 0; i < static_cast<std::size_t>(h.rank); ++i)
        s += fmt::format(fmt::runtime(i == 0 ? "{}" : ",{}"), h.extents[i]);
    return s + "]";
}

// The header with the leading extent replaced by `rows`: what the parts add up to.
wire_header with_rows(wire_header h, std::uint64_t rows) noexcept {
    h.extents[0] = rows;
    return h;
}

MPI_Datatype mpi_type(element_code code) noexcept {
    switch (code) {
        case element_code::f32: return MPI_FLOAT;
        case element_code::f64: return MPI_DOUBLE;
        case element_code::c64: return MPI_C_FLOAT_COMPLEX;
        case element_code::c128: return MPI_C_DOUBLE_COMPLEX;
        case element_code::i32: return MPI_INT32_T;
        case element_code::i64: return MPI_INT64_T;
    }
    return MPI_DATATYPE_NULL;
}

std::size_t element_size(element_code code) noexcept {
    switch (code) {
        case element_code::f32: return 4;
        case element_code::f64: return 8;
        case element_code::c64: return 8;
        case element_code::c128: return 16;
        case element_code::i32: return 4;
        case element_code::i64: return 8;
    }
    return 0;
}

MPI_Op mpi_op(reduction how) noexcept {
    switch (how) {
        case reduction::sum: return MPI_SUM;
        case reduction::prod: return MPI_PROD;
        case reduction::max: return MPI_MAX;
        case reduction::min: return MPI_MIN;
    }
    return MPI_OP_NULL;
}

bool is_complex_code(element_code code) noexcept {
    return code == element_code::c64 || code == element_code::c128;
}

const char* op_name(collective op) noexcept {
    switch (op) {
        case collective::bcast: return "mpi::bcast";
        case collective::allreduce: return "mpi::allreduce";
        case collective::allgather: return "mpi::allgather";
        case collective::scatter: return "mpi::scatter";
        case collective::gather: return "mpi::gather";
    }
    return "mpi";
}

}  // namespace

struct request_state;

// The communicator's two duplicates, the payload tag counter and the collectives' scratch, sized
// once so that no transfer allocates.
struct comm_state {
    MPI_Comm main = MPI_COMM_NULL;     // headers and collectives
    MPI_Comm payload = MPI_COMM_NULL;  // point-to-point payloads
    int rank = 0;
    int size = 0;
    int tag_limit = 32767;  // MPI_TAG_UB: at least this
    int next_payload_tag = 0;
    std::vector<record> records;
    std::vector<int> counts, displacements;
    // irecvs whose header has not arrived yet (an intrusive list: no allocation). While it is not
    // empty, every blocking call progresses them (see `complete`).
    request_state* awaiting_header = nullptr;
    // isends and irecvs not yet complete, which point here: the communicator must outlive them.
    std::size_t live_requests = 0;
};

void comm_state_deleter::operator()(comm_state* s) const noexcept {
    // A pending request would go on to use this state (and its buffer, MPI): a checked error, like
    // a backend destroyed with a session open.
    TESSERA_CHECK(s->live_requests == 0,
                  "tessera::mpi::communicator destroyed while requests on it are pending; wait "
                  "for them (or destroy them) first");
    // After MPI_Finalize (a communicator that outlived the environment) MPI has freed them.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized != 0) {
        delete s;
        return;
    }
    if (s->payload != MPI_COMM_NULL) MPI_Comm_free(&s->payload);
    if (s->main != MPI_COMM_NULL) MPI_Comm_free(&s->main);
    delete s;
}

namespace {

// Throws mpi_error for a failed MPI call.
void check_mpi(int rc, const char* op, const comm_state& c) {
    if (rc == MPI_SUCCESS) [[likely]]
        return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
    throw mpi_error(fmt::format("{}: {} (MPI error {}) on rank {}", op,
                                std::string_view(text, static_cast<std::size_t>(length)), rc,
                                c.rank),
                    rc);
}

// Progresses the irecvs of `c` whose header has not arrived (defined with point to point).
void progress(comm_state& c) noexcept;

// Runs an MPI call that blocks: `call(nullptr)` makes the blocking call, `call(&request)` its
// non-blocking form, which is then waited for, progressing `c`'s irecvs meanwhile (a peer may be
// blocked sending a large payload to one of them, whose receive is posted once its header is
// checked, and so never reach the call this rank waits in). `status` receives the call's status.
template <class Call>
int complete_as(comm_state& c, bool non_blocking, Call&& call,
                MPI_Status* status = MPI_STATUS_IGNORE) {
    if (!non_blocking) return call(nullptr);
    MPI_Request r = MPI_REQUEST_NULL;
    if (const int rc = call(&r); rc != MPI_SUCCESS) return rc;
    if (c.awaiting_header == nullptr) return MPI_Wait(&r, status);
    for (;;) {
        int done = 0;
        if (const int rc = MPI_Test(&r, &done, status); rc != MPI_SUCCESS) return rc;
        if (done != 0) return MPI_SUCCESS;
        progress(c);
    }
}

// A point-to-point call: non-blocking only while irecvs of this communicator wait for their
// headers, otherwise the blocking call, MPI's fastest path (the two forms match each other).
template <class Call>
int complete(comm_state& c, Call&& call, MPI_Status* status = MPI_STATUS_IGNORE) {
    return complete_as(c, c.awaiting_header != nullptr, call, status);
}

// A collective. A blocking collective on one rank never matches a non-blocking one on another
// (Open MPI runs them in different components), so every rank must choose alike: `progressing`
// comes from the agreement records (some rank has irecvs waiting), or is true for the calls that
// are always non-blocking (the records' own allgather, barrier).
template <class Call>
int complete_collective(comm_state& c, bool progressing, Call&& call) {
    return complete_as(c, progressing, call);
}

// A view as MPI sees it: a base address, a count and a datatype (derived, and freed here, for a
// strided view). Axes of extent 1 are dropped and axes that continue each other are merged first,
// so a contiguous view is `count` plain elements and most strided ones need one or two levels.
class wire_layout {
public:
    wire_layout(const buffer& b, const char* op, const comm_state& c)
        : base_(b.data), type_(mpi_type(b.type)) {
        if (b.extents.count() == 0) return;  // count_ 0
        const auto size = static_cast<MPI_Aint>(element_size(b.type));
        std::array<std::size_t, max_rank> extent{};
        std::array<std::ptrdiff_t, max_rank> stride{};
        std::size_t axes = 0;  // merged axes, outermost first
        for (std::size_t i = 0; i < b.extents.rank(); ++i) {
            if (b.extents[i] == 1) continue;
            if (axes > 0 && stride[axes - 1] ==
                                b.strides[i] * static_cast<std::ptrdiff_t>(b.extents[i])) {
                extent[axes - 1] *= b.extents[i];
                stride[axes - 1] = b.strides[i];
                continue;
            }
            extent[axes] = b.extents[i];
            stride[axes] = b.strides[i];
            ++axes;
        }
        if (axes == 0) {
            count_ = 1;
            return;
        }
        if (axes == 1 && stride[0] == 1) {
            count_ = static_cast<int>(extent[0]);  // checked by fits_mpi_counts
            return;
        }
        MPI_Datatype t = MPI_DATATYPE_NULL;
        int rc = MPI_SUCCESS;
        for (std::size_t a = axes; a-- > 0 && rc == MPI_SUCCESS;) {
            MPI_Datatype next = MPI_DATATYPE_NULL;
            const int n = static_cast<int>(extent[a]);
            if (a + 1 == axes)
                rc = stride[a] == 1
                         ? MPI_Type_contiguous(n, type_, &next)
                         : MPI_Type_create_hvector(n, 1, stride[a] * size, type_, &next);
            else
                rc = MPI_Type_create_hvector(n, 1, stride[a] * size, t, &next);
            if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
            t = next;
        }
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&t);
        if (rc != MPI_SUCCESS && t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
        check_mpi(rc, op, c);
        type_ = t;
        derived_ = true;
        count_ = 1;
    }
    wire_layout(const wire_layout&) = delete;
    wire_layout& operator=(const wire_layout&) = delete;
    ~wire_layout() {
        if (derived_) MPI_Type_free(&type_);
    }

    void* base() const noexcept { return base_; }
    int count() const noexcept { return count_; }
    MPI_Datatype type() const noexcept { return type_; }

private:
    void* base_;
    MPI_Datatype type_;
    int count_ = 0;
    bool derived_ = false;
};

template <class T>
tensor_view<T> typed(const buffer& b) noexcept {
    return tensor_view<T>(static_cast<T*>(b.data), b.extents,
                          std::span<const std::ptrdiff_t>(b.strides.data(), b.extents.rank()));
}

// Calls fn with the buffer as the typed view it is, for the library's own checks and copy engine.
template <class Fn>
void with_view(const buffer& b, Fn&& fn) {
    switch (b.type) {
        case element_code::f32: fn(typed<float>(b)); break;
        case element_code::f64: fn(typed<double>(b)); break;
        case element_code::c64: fn(typed<std::complex<float>>(b)); break;
        case element_code::c128: fn(typed<std::complex<double>>(b)); break;
        case element_code::i32: fn(typed<std::int32_t>(b)); break;
        case element_code::i64: fn(typed<std::int64_t>(b)); break;
    }
}

// The same for an in and an out of one element type (the transfers' templates take both as
// views of one T): fn(in as tensor_view<const T>, out as tensor_view<T>).
template <class Fn>
void with_views(const buffer& in, const buffer& out, Fn&& fn) {
    with_view(out, [&](const auto& o) {
        using T = typename std::remove_cvref_t<decltype(o)>::value_type;
        fn(typed<const T>(in), o);
    });
}

// Dense and row-major: what tensor_view::is_contiguous says.
bool is_dense(const buffer& b) {
    bool dense = false;
    with_view(b, [&](const auto& v) { dense = v.is_contiguous(); });
    return dense;
}

// One row of a [rows, ...] view as the unit the v-collectives count in. A dense row-major view
// needs no derived type: its rows are `units()` plain elements each. Otherwise a row is a derived
// type (the view without its leading axis) whose extent is the leading stride.
class row_layout {
public:
    row_layout(const buffer& b, const char* op, const comm_state& c) {
        if (is_dense(b)) {
            type_ = mpi_type(b.type);
            units_ = b.extents.rank() == 0 || b.extents[0] == 0
                         ? 0
                         : static_cast<int>(b.extents.count() / b.extents[0]);
            return;
        }
        buffer row = b;
        row.extents = shape::unchecked(
            std::span<const std::size_t>(b.extents.dims().data() + 1, b.extents.rank() - 1));
        std::copy(b.strides.begin() + 1, b.strides.end(), row.strides.begin());
        const wire_layout one(row, op, c);
        MPI_Datatype block = one.type();
        bool made = false;
        if (one.count() != 1) {  // plain elements: as one type
            check_mpi(MPI_Type_contiguous(one.count(), one.type(), &block), op, c);
            made = true;
        }
        const auto size = static_cast<MPI_Aint>(element_size(b.type));
        const MPI_Aint step = (b.extents[0] > 1 ? b.strides[0] : 1) * size;
        int rc = MPI_Type_create_resized(block, 0, step, &type_);
        if (made) MPI_Type_free(&block);
        if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(&type_)) != MPI_SUCCESS)
            MPI_Type_free(&type_);
        check_mpi(rc, op, c);
        derived_ = true;
    }
    row_layout(const row_layout&) = delete;
    row_layout& operator=(const row_layout&) = delete;
    ~row_layout() {
        if (derived_) MPI_Type_free(&type_);
    }

    MPI_Datatype type() const noexcept { return type_; }
    // Units of type() per row.
    int units() const noexcept { return units_; }

private:
    MPI_Datatype type_ = MPI_DATATYPE_NULL;
    int units_ = 1;
    bool derived_ = false;
};

// MPI counts are ints. A view of at most INT_MAX elements has every merged axis, every row
// count and every displacement in rows within one.
void check_counts(const char* op, const char* name, const buffer& b) {
    if (b.extents.count() > static_cast<std::size_t>(INT_MAX))
        throw shape_error(fmt::format(
            "{}: {} has {} elements; MPI counts stop at {} (send it in parts)", op, name,
            b.extents.count(), INT_MAX));
}

void check_writable(const char* op, const char* name, const buffer& b) {
    with_view(b, [&](const auto& v) { tessera::detail::check_writable(op, name, v); });
}

// out and in may share no byte.
void check_disjoint(const char* op, const buffer& in, const buffer& out) {
    with_views(in, out, [&](const auto& i, const auto& o) {
        tessera::detail::check_disjoint(op, "out", o, "in", i);
    });
}

void check_rank_at_least_one(const char* op, const char* name, const buffer& b) {
    if (b.extents.rank() == 0)
        throw shape_error(
            fmt::format("{}: {} is a scalar; it needs a leading axis of rows", op, name));
}

void check_leading_stride(const char* op, const char* name, const buffer& b) {
    if (b.extents.rank() > 0 && b.extents[0] > 1 && b.strides[0] <= 0)
        throw shape_error(fmt::format(
            "{}: {} has stride {} along its leading axis; the root's rows must lie at increasing "
            "addresses (copy it first)",
            op, name, b.strides[0]));
}

// Copies `in` into `out` (same shape and element type) with the library's copy engine, on this
// thread; nothing to do when they are the very same elements.
void copy_elements(const buffer& in, const buffer& out) {
    with_views(in, out, [](const auto& i, const auto& o) { tessera::detail::copy_inline(o, i); });
}

// The operand checks each rank can make alone. Throws what the op would throw on this rank.
void check_locally(const comm_state& c, collective op, const buffer& in, const buffer& out,
                   int root, reduction how) {
    const char* name = op_name(op);
    const bool rooted =
        op == collective::bcast || op == collective::scatter || op == collective::gather;
    if (rooted && (root < 0 || root >= c.size))
        throw shape_error(fmt::format("{}: root {} is not a rank of a communicator of {}", name,
                                      root, c.size));
    const bool is_root = root == c.rank;
    switch (op) {
        case collective::bcast:
            if (!is_root) check_writable(name, "data", out);
            check_counts(name, "data", out);
            break;
        case collective::allreduce:
            if (is_complex_code(in.type) && (how == reduction::max || how == reduction::min))
                throw error(fmt::format("{}: max and min need a real element type, not {}", name,
                                        type_name(static_cast<std::int32_t>(in.type))));
            if (in.type != out.type || !(in.extents == out.extents))
                throw shape_error(fmt::format("{}: out is {} but in is {}", name,
                                              describe_header(header_of(out)),
                                              describe_header(header_of(in))));
            if (!is_dense(out))
                throw shape_error(fmt::format(
                    "{}: out must be dense and row-major (MPI's reductions take plain elements "
                    "in one order on every rank); reduce into a contiguous tensor and copy from it",
                    name));
            with_views(in, out, [&](const auto& i, const auto& o) {
                tessera::detail::check_in_place(name, "out", o, "in", i);
            });
            check_counts(name, "in", in);
            break;
        case collective::allgather:
        case collective::gather: {
            check_rank_at_least_one(name, "in", in);
            check_counts(name, "in", in);
            const bool writes_out = op == collective::allgather || is_root;
            if (writes_out) {
                check_rank_at_least_one(name, "out", out);
                check_writable(name, "out", out);
                check_counts(name, "out", out);
                if (op == collective::gather) check_leading_stride(name, "out", out);
                check_disjoint(name, in, out);
            }
            break;
        }
        case collective::scatter:
            check_rank_at_least_one(name, "out", out);
            check_writable(name, "out", out);
            check_counts(name, "out", out);
            if (is_root) {
                check_rank_at_least_one(name, "in", in);
                check_counts(name, "in", in);
                check_leading_stride(name, "in", in);
                check_disjoint(name, in, out);
            }
            break;
    }
}

}  // namespace
}  // namespace detail

namespace detail {
namespace {

[[noreturn]] void throw_mismatch(const char* op, int rank_a, const std::string& a, int rank_b,
                                 const std::string& b) {
    throw mismatch_error(
        fmt::format("{}: rank {} has {} but rank {} has {}", op, rank_a, a, rank_b, b));
}

// Every rank runs this on the same records and so reaches the same verdict; it returns only when
// the transfer may go ahead. `local` is this rank's own failure, if any.
void agree(const comm_state& c, collective op, int root, const std::exception_ptr& local) {
    const char* name = op_name(op);
    const std::vector<record>& r = c.records;
    for (int k = 0; k < c.size; ++k) {
        if (r[static_cast<std::size_t>(k)].rejected == 0) continue;
        if (local) std::rethrow_exception(local);
        throw mismatch_error(fmt::format(
            "{}: rank {} rejected its operands (its own error says why); no data moved", name, k));
    }
    const record& first = r[0];
    for (int k = 1; k < c.size; ++k) {
        const record& x = r[static_cast<std::size_t>(k)];
        if (x.op != first.op)
            // Named without this rank's op, so that every rank throws the same message.
            throw mismatch_error(fmt::format("mpi: rank {} called {} but rank 0 called {}", k,
                                             op_name(static_cast<collective>(x.op)),
                                             op_name(static_cast<collective>(first.op))));
        if (x.root != first.root)
            throw mismatch_error(fmt::format("{}: rank {} names root {} but rank 0 names root {}",
                                             name, k, x.root, first.root));
        if (x.how != first.how)
            throw mismatch_error(fmt::format(
                "{}: rank {} asks for a different reduction than rank 0", name, k));
    }
    // The rank whose operands the others are compared with: the root where there is one.
    const int ref = op == collective::bcast || op == collective::scatter ? root : 0;
    const record& base = r[static_cast<std::size_t>(ref)];
    const bool by_rows = op == collective::allgather || op == collective::scatter ||
                         op == collective::gather;
    std::uint64_t rows = 0;
    for (int k = 0; k < c.size; ++k) {
        const wire_header& part = r[static_cast<std::size_t>(k)].part;
        if (!(by_rows ? same_rows(part, base.part) : same_shape(part, base.part))) {
            const char* role = op == collective::scatter ? "out " : by_rows ? "in " : "";
            throw_mismatch(name, k, role + describe_header(part), ref,
                           role + describe_header(base.part));
        }
        rows += part.extents[0];
    }
    if (!by_rows) return;
    const char* whole_name = op == collective::scatter ? "in" : "out";
    const char* part_name = op == collective::scatter ? "out" : "in";
    for (int k = 0; k < c.size; ++k) {
        if (op != collective::allgather && k != root) continue;
        const wire_header& whole = r[static_cast<std::size_t>(k)].whole;
        const wire_header expected = with_rows(base.part, rows);
        if (!same_shape(whole, expected))
            throw mismatch_error(fmt::format(
                "{}: {} on rank {} is {} but the ranks' {} add up to {}", name, whole_name, k,
                describe_header(whole), part_name, describe_header(expected)));
    }
}

}  // namespace

void run_collective(const communicator& comm, collective op, const buffer& in, const buffer& out,
                    int root, reduction how) {
    comm_state& c = comm.state();
    const char* name = op_name(op);
    std::exception_ptr local;
    try {
        check_locally(c, op, in, out, root, how);
    } catch (const error&) {
        local = std::current_exception();
    }
    // scatter's part is each rank's out; the others' is each rank's in (bcast: its one buffer).
    const bool scatter = op == collective::scatter;
    record mine;
    mine.part = header_of(scatter ? out : in);
    mine.whole = header_of(scatter ? in : out);
    mine.root = root;
    mine.how = static_cast<std::int32_t>(how);
    mine.rejected = local ? 1 : 0;
    mine.op = static_cast<std::int32_t>(op);
    mine.pending = c.awaiting_header != nullptr ? 1 : 0;
    check_mpi(complete_collective(c, true, [&](MPI_Request* r) {
                  return r ? MPI_Iallgather(&mine, sizeof(record), MPI_BYTE, c.records.data(),
                                            sizeof(record), MPI_BYTE, c.main, r)
                           : MPI_Allgather(&mine, sizeof(record), MPI_BYTE, c.records.data(),
                                           sizeof(record), MPI_BYTE, c.main);
              }),
              name, c);
    agree(c, op, root, local);
    bool progressing = false;  // alike on every rank: from the records
    for (const record& x : c.records) progressing = progressing || x.pending != 0;

    switch (op) {
        case collective::bcast: {
            const wire_layout data(out, name, c);
            check_mpi(complete_collective(c, progressing, [&](MPI_Request* r) {
                          return r ? MPI_Ibcast(data.base(), data.count(), data.type(), root,
                                                c.main, r)
                                   : MPI_Bcast(data.base(), data.count(), data.type(), root,
                                               c.main);
                      }),
                      name, c);
            return;
        }
        case collective::allreduce: {
            // out is dense and row-major (checked): the same element order on every rank, and
            // plain elements, which MPI's predefined reductions need (Open MPI rejects them on
            // derived datatypes). An in of another layout is first copied into out (the caller's
            // own buffer, not a staging one) and reduced there in place.
            const auto count = static_cast<int>(out.extents.count());
            const MPI_Datatype type = mpi_type(out.type);
            const MPI_Op reduce = mpi_op(how);
            if (is_dense(in) && in.data != out.data) {
                check_mpi(complete_collective(c, progressing, [&](MPI_Request* r) {
                              return r ? MPI_Iallreduce(in.data, out.data, count, type, reduce,
                                                        c.main, r)
                                       : MPI_Allreduce(in.data, out.data, count, type, reduce,
                                                       c.main);
                          }),
                          name, c);
                return;
            }
            copy_elements(in, out);  // nothing when in is out
            check_mpi(complete_collective(c, progressing, [&](MPI_Request* r) {
                          return r ? MPI_Iallreduce(MPI_IN_PLACE, out.data, count, type, reduce,
                                                    c.main, r)
                                   : MPI_Allreduce(MPI_IN_PLACE, out.data, count, type, reduce,
                                                   c.main);
                      }),
                      name, c);
            return;
        }
        default: break;
    }

    // The v-collectives count in rows of the buffer that holds every rank's rows (out, or the
    // root's in for scatter); only the ranks that have one pass counts.
    const bool is_root = root == c.rank;
    const buffer& whole = op == collective::scatter ? in : out;
    const bool has_whole = op == collective::allgather || is_root;
    std::optional<row_layout> rows;
    std::size_t rows_before_mine = 0;
    if (has_whole) {
        rows.emplace(whole, name, c);
        int offset = 0;
        for (int k = 0; k < c.size; ++k) {
            const auto n = static_cast<int>(c.records[static_cast<std::size_t>(k)].part.extents[0]);
            if (k == c.rank) rows_before_mine = static_cast<std::size_t>(offset);
            c.counts[static_cast<std::size_t>(k)] = n * rows->units();
            c.displacements[static_cast<std::size_t>(k)] = offset * rows->units();
            offset += n;
        }
    }
    const int* counts = has_whole ? c.counts.data() : nullptr;
    const int* displacements = has_whole ? c.displacements.data() : nullptr;
    const MPI_Datatype row_type = has_whole ? rows->type() : MPI_DATATYPE_NULL;
    switch (op) {
        case collective::allgather: {
            // Each rank places its own rows in its out, then the others' arrive in place. Open
            // MPI 4.1's allgatherv hangs on 3 or more ranks when a rank's send type nests
            // hvectors of 16-byte elements (a transposed complex<double> in); in place, only the
            // row types of out travel, which it handles.
            with_views(in, out, [&](const auto& i, const auto& o) {
                const auto first = static_cast<std::ptrdiff_t>(rows_before_mine);
                const auto own_rows = static_cast<std::ptrdiff_t>(i.extent(0));
                tessera::detail::copy_inline(o.slice(0, first, first + own_rows), i);
            });
            check_mpi(complete_collective(c, progressing, [&](MPI_Request* r) {
                          return r ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out.data,
                                                     counts, displacements, row_type, c.main, r)
                                   : MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out.data,
                                                    counts, displacements, row_type, c.main);
                      }),
                      name, c);
            return;
        }
        case collective::gather: {
            const wire_layout from(in, name, c);
            check_mpi(complete_collective(c, progressing, [&](MPI_Request* r) {
                          return r ? MPI_Igatherv(from.base(), from.count(), from.type(), out.data,
                                                  counts, displacements, row_type, root, c.main, r)
                                   : MPI_Gatherv(from.base(), from.count(), from.type(), out.data,
                                                 counts, displacements, row_type, root, c.main);
                      }),
                      name, c);
            return;
        }
        case collective::scatter: {
            const wire_layout to(out, name, c);
            check_mpi(complete_collective(c, progressing, [&](MPI_Request* r) {
                          return r ? MPI_Iscatterv(in.data, counts, displacements, row_type,
                                                   to.base(), to.count(), to.type(), root, c.main,
                                                   r)
                                   : MPI_Scatterv(in.data, counts, displacements, row_type,
                                                  to.base(), to.count(), to.type(), root, c.main);
                      }),
                      name, c);
            return;
        }
        default: return;
    }
}

// --- point to point -----------------------------------------------------------------------------

// A pending isend (both messages posted) or irecv (the header's receive posted; the payload's once
// the header has arrived and passed its check). An irecv waiting for its header is linked into
// its communicator's awaiting_header list, so that any blocking call on the communicator, and
// any wait or test, checks the header as soon as it arrives and posts the payload's receive.
struct request_state {
    comm_state* comm = nullptr;
    bool receiving = false;
    bool header_done = false;
    std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    wire_header header;
    buffer out;
    std::exception_ptr failure;  // what the header's check found, thrown by wait or test
    request_state* prev = nullptr;
    request_state* next = nullptr;
};

namespace {

int take_payload_tag(comm_state& c) noexcept {
    const int tag = c.next_payload_tag;
    c.next_payload_tag = tag == c.tag_limit ? 0 : tag + 1;
    return tag;
}

// Checks a received header against out; on a mismatch the payload is taken off the wire and the
// mismatch is thrown.
void accept_header(comm_state& c, const char* op, const wire_header& h, const MPI_Status& status,
                   const buffer& out) {
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    if (bytes != static_cast<int>(sizeof(wire_header)) || h.magic != header_magic ||
        h.rank < 0 || h.rank > static_cast<std::int32_t>(max_rank) ||
        element_size(static_cast<element_code>(h.type)) == 0)
        throw mismatch_error(fmt::format(
            "{}: the message from rank {} (tag {}) is not a tessera transfer; only tessera's "
            "send and isend pair with recv and irecv",
            op, status.MPI_SOURCE, status.MPI_TAG));
    const wire_header mine = header_of(out);
    std::exception_ptr problem;
    if (!same_shape(h, mine)) {
        problem = std::make_exception_ptr(mismatch_error(fmt::format(
            "{}: rank {} sent {} but out on rank {} is {}; nothing was written", op,
            status.MPI_SOURCE, describe_header(h), c.rank, describe_header(mine))));
    } else {
        try {
            check_writable(op, "out", out);
        } catch (const error&) {
            problem = std::current_exception();
        }
    }
    if (!problem) return;
    // The payload must still be taken off the wire. Into a scratch buffer, as the header describes
    // it: a zero-count receive (a truncation) would do, but Open MPI's single-copy path then
    // reads a large payload into the null buffer. This allocation happens on the error path only.
    std::size_t count = 1;
    for (std::size_t i = 0; i < static_cast<std::size_t>(h.rank); ++i) count *= h.extents[i];
    const auto type = static_cast<element_code>(h.type);
    std::vector<unsigned char> scratch(std::max<std::size_t>(count * element_size(type), 1));
    MPI_Recv(scratch.data(), static_cast<int>(count), mpi_type(type), status.MPI_SOURCE,
             h.payload_tag, c.payload, MPI_STATUS_IGNORE);
    std::rethrow_exception(problem);
}

void unlink(request_state& s) noexcept {
    comm_state& c = *s.comm;
    if (s.prev != nullptr) s.prev->next = s.next;
    else if (c.awaiting_header == &s) c.awaiting_header = s.next;
    if (s.next != nullptr) s.next->prev = s.prev;
    s.prev = s.next = nullptr;
}

// An irecv's header has arrived: checks it and posts the payload's receive, or records the
// failure (thrown later by wait or test, never by the call that happened to progress it).
void on_header(request_state& s, const MPI_Status& status) noexcept {
    unlink(s);
    s.header_done = true;
    if (status.MPI_SOURCE == MPI_PROC_NULL) return;
    comm_state& c = *s.comm;
    try {
        accept_header(c, "mpi::irecv", s.header, status, s.out);
        const wire_layout payload(s.out, "mpi::irecv", c);
        check_mpi(MPI_Irecv(payload.base(), payload.count(), payload.type(), status.MPI_SOURCE,
                            s.header.payload_tag, c.payload, &s.requests[1]),
                  "mpi::irecv", c);
    } catch (...) {
        s.failure = std::current_exception();
    }
}

// Tests an irecv's header once; returns true once it has been handled.
bool test_header(request_state& s) noexcept {
    if (s.header_done) return true;
    int arrived = 0;
    MPI_Status status;
    const int rc = MPI_Test(&s.requests[0], &arrived, &status);
    if (rc != MPI_SUCCESS) {
        unlink(s);
        s.header_done = true;
        try {
            check_mpi(rc, "mpi::irecv", *s.comm);
        } catch (...) {
            s.failure = std::current_exception();
        }
        return true;
    }
    if (arrived == 0) return false;
    on_header(s, status);
    return true;
}

void progress(comm_state& c) noexcept {
    for (request_state* s = c.awaiting_header; s != nullptr;) {
        request_state* const next = s->next;  // test_header may unlink s
        test_header(*s);
        s = next;
    }
}

}  // namespace

void send(const communicator& comm, const buffer& data, int dest, int tag) {
    comm_state& c = comm.state();
    wire_header h = header_of(data);
    check_counts("mpi::send", "data", data);
    const wire_layout payload(data, "mpi::send", c);
    h.payload_tag = take_payload_tag(c);
    check_mpi(complete(c, [&](MPI_Request* r) {
                  return r ? MPI_Isend(&h, sizeof h, MPI_BYTE, dest, tag, c.main, r)
                           : MPI_Send(&h, sizeof h, MPI_BYTE, dest, tag, c.main);
              }),
              "mpi::send", c);
    check_mpi(complete(c, [&](MPI_Request* r) {
                  return r ? MPI_Isend(payload.base(), payload.count(), payload.type(), dest,
                                       h.payload_tag, c.payload, r)
                           : MPI_Send(payload.base(), payload.count(), payload.type(), dest,
                                      h.payload_tag, c.payload);
              }),
              "mpi::send", c);
}

void recv(const communicator& comm, const buffer& out, int source, int tag) {
    comm_state& c = comm.state();
    wire_header h;
    MPI_Status status;
    check_mpi(complete(
                  c,
                  [&](MPI_Request* r) {
                      return r ? MPI_Irecv(&h, sizeof h, MPI_BYTE, source, tag, c.main, r)
                               : MPI_Recv(&h, sizeof h, MPI_BYTE, source, tag, c.main, &status);
                  },
                  &status),
              "mpi::recv", c);
    if (status.MPI_SOURCE == MPI_PROC_NULL) return;
    accept_header(c, "mpi::recv", h, status, out);
    const wire_layout payload(out, "mpi::recv", c);
    check_mpi(complete(c, [&](MPI_Request* r) {
                  return r ? MPI_Irecv(payload.base(), payload.count(), payload.type(),
                                       status.MPI_SOURCE, h.payload_tag, c.payload, r)
                           : MPI_Recv(payload.base(), payload.count(), payload.type(),
                                      status.MPI_SOURCE, h.payload_tag, c.payload,
                                      MPI_STATUS_IGNORE);
              }),
              "mpi::recv", c);
}

void request_state_deleter::operator()(request_state* s) const noexcept {
    // MPI may still read or write the caller's buffer. A receive whose header has not arrived is
    // cancelled (nothing of it reached the buffer, and no peer waits for it); anything further
    // along is completed, its errors dropped.
    if (s->receiving && !s->header_done) {
        unlink(*s);
        s->header_done = true;
        MPI_Cancel(&s->requests[0]);
        MPI_Status status;
        int cancelled = 0;
        if (MPI_Wait(&s->requests[0], &status) == MPI_SUCCESS &&
            MPI_Test_cancelled(&status, &cancelled) == MPI_SUCCESS && cancelled == 0) {
            s->header_done = false;
            on_header(*s, status);  // it had arrived: its payload is on the way
        }
    }
    for (MPI_Request& q : s->requests)
        if (q != MPI_REQUEST_NULL) MPI_Wait(&q, MPI_STATUS_IGNORE);
    --s->comm->live_requests;
    delete s;
}

std::unique_ptr<request_state, request_state_deleter> start_send(const communicator& comm,
                                                                 const buffer& data, int dest,
                                                                 int tag) {
    comm_state& c = comm.state();
    check_counts("mpi::isend", "data", data);
    std::unique_ptr<request_state, request_state_deleter> s(new request_state);
    s->comm = &c;
    ++c.live_requests;
    s->header = header_of(data);
    s->header.payload_tag = take_payload_tag(c);
    s->header_done = true;
    const wire_layout payload(data, "mpi::isend", c);  // MPI keeps the type alive while in use
    check_mpi(MPI_Isend(&s->header, sizeof(wire_header), MPI_BYTE, dest, tag, c.main,
                        &s->requests[0]),
              "mpi::isend", c);
    check_mpi(MPI_Isend(payload.base(), payload.count(), payload.type(), dest,
                        s->header.payload_tag, c.payload, &s->requests[1]),
              "mpi::isend", c);
    return s;
}

std::unique_ptr<request_state, request_state_deleter> start_recv(const communicator& comm,
                                                                 const buffer& out, int source,
                                                                 int tag) {
    comm_state& c = comm.state();
    std::unique_ptr<request_state, request_state_deleter> s(new request_state);
    s->comm = &c;
    ++c.live_requests;
    s->receiving = true;
    s->out = out;
    s->header.magic = 0;
    s->header_done = true;  // until the receive is posted, nothing is pending
    check_mpi(MPI_Irecv(&s->header, sizeof(wire_header), MPI_BYTE, source, tag, c.main,
                        &s->requests[0]),
              "mpi::irecv", c);
    s->header_done = false;
    s->next = c.awaiting_header;
    if (s->next != nullptr) s->next->prev = s.get();
    c.awaiting_header = s.get();
    return s;
}

}  // namespace detail

void request::wait() {
    while (!test()) {
    }
}

bool request::test() {
    if (!state_) return true;
    detail::request_state& s = *state_;
    detail::comm_state& c = *s.comm;
    const char* op = s.receiving ? "mpi::irecv" : "mpi::isend";
    try {
        if (!detail::test_header(s)) {
            detail::progress(c);  // the others; a peer may wait on one of them
            return false;
        }
        if (s.failure) std::rethrow_exception(s.failure);
        int complete = 0;
        detail::check_mpi(MPI_Testall(2, s.requests.data(), &complete, MPI_STATUSES_IGNORE), op,
                          c);
        if (complete == 0) {
            detail::progress(c);
            return false;
        }
    } catch (...) {
        state_.reset();
        throw;
    }
    state_.reset();
    return true;
}

// --- communicator, environment, placement -------------------------------------------------------

namespace detail {
void throw_moved_from() {
    throw mpi_error("mpi: the communicator was moved from; it holds no MPI communicator",
                    MPI_ERR_COMM);
}
}  // namespace detail

communicator::communicator(MPI_Comm parent) : state_(new detail::comm_state) {
    detail::comm_state& c = *state_;
    if (parent == MPI_COMM_NULL)
        throw mpi_error("mpi::communicator: the parent is MPI_COMM_NULL", MPI_ERR_COMM);
    const int dup = MPI_Comm_dup(parent, &c.main);
    if (dup != MPI_SUCCESS) {
        c.main = MPI_COMM_NULL;
        detail::check_mpi(dup, "mpi::communicator", c);
    }
    MPI_Comm_set_errhandler(c.main, MPI_ERRORS_RETURN);
    detail::check_mpi(MPI_Comm_dup(c.main, &c.payload), "mpi::communicator", c);
    MPI_Comm_set_errhandler(c.payload, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c.main, &c.rank);
    MPI_Comm_size(c.main, &c.size);
    int* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(c.main, MPI_TAG_UB, &tag_ub, &found);
    if (found != 0 && tag_ub != nullptr) c.tag_limit = *tag_ub;
    c.records.resize(static_cast<std::size_t>(c.size));
    c.counts.resize(static_cast<std::size_t>(c.size));
    c.displacements.resize(static_cast<std::size_t>(c.size));
    rank_ = c.rank;
    size_ = c.size;
}

MPI_Comm communicator::handle() const noexcept {
    return state_ ? state_->main : MPI_COMM_NULL;
}

void communicator::barrier() const {
    detail::comm_state& c = state();
    // Always non-blocking, so that every rank makes the same kind of call whether or not it has
    // irecvs to progress.
    detail::check_mpi(detail::complete_collective(c, true, [&](MPI_Request* r) {
                          return r ? MPI_Ibarrier(c.main, r) : MPI_Barrier(c.main);
                      }),
                      "mpi::barrier", c);
}

namespace {
// While an environment lives: an exception that escapes main ends every rank, not just this one.
[[noreturn]] void abort_every_rank() noexcept {
    std::fputs("tessera::mpi: terminate called; aborting every rank (MPI_Abort)\n", stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
}
}  // namespace

environment::environment(int& argc, char**& argv) : uncaught_(std::uncaught_exceptions()) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised != 0)
        throw mpi_error("mpi::environment: MPI is initialised already; an environment owns MPI's "
                        "whole lifetime",
                        MPI_ERR_OTHER);
    const int rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided_);
    if (rc != MPI_SUCCESS)
        throw mpi_error(fmt::format("mpi::environment: MPI_Init_thread failed (MPI error {})", rc),
                        rc);
    if (provided_ < MPI_THREAD_FUNNELED) {
        MPI_Finalize();
        throw mpi_error(fmt::format("mpi::environment: MPI provides thread level {}, below "
                                    "MPI_THREAD_FUNNELED",
                                    provided_),
                        MPI_ERR_OTHER);
    }
    previous_ = std::set_terminate(abort_every_rank);
}

environment::~environment() {
    std::set_terminate(previous_);
    if (std::uncaught_exceptions() > uncaught_) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
}

std::size_t split_rows(std::size_t rows, int ranks, int rank, std::size_t* first) {
    if (ranks < 1 || rank < 0 || rank >= ranks)
        throw shape_error(
            fmt::format("mpi::split_rows: rank {} is not one of {} ranks", rank, ranks));
    const auto p = static_cast<std::size_t>(ranks), r = static_cast<std::size_t>(rank);
    const std::size_t base = rows / p, extra = rows % p;
    if (first != nullptr) *first = r * base + std::min(r, extra);
    return base + (r < extra ? 1 : 0);
}

placement rank_placement(const communicator& comm) {
    detail::comm_state& c = comm.state();
    const char* op = "mpi::rank_placement";
    MPI_Comm node = MPI_COMM_NULL;
    detail::check_mpi(
        MPI_Comm_split_type(c.main, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &node), op, c);
    placement p;
    MPI_Comm_rank(node, &p.local_rank);
    MPI_Comm_size(node, &p.local_size);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
        MPI_Comm_free(&node);
        throw error(fmt::format("{}: sched_getaffinity failed on rank {}", op, c.rank));
    }
    p.affinity_cpus = CPU_COUNT(&mine);
    std::vector<cpu_set_t> masks(static_cast<std::size_t>(p.local_size));
    const int rc = MPI_Allgather(&mine, sizeof mine, MPI_BYTE, masks.data(), sizeof mine,
                                 MPI_BYTE, node);
    MPI_Comm_free(&node);
    detail::check_mpi(rc, op, c);
    // Each CPU goes to one of the ranks whose masks hold it: CPUs with the same set of holders are
    // dealt to those holders in turn, in CPU order, which every rank computes alike.
    std::map<std::vector<int>, std::size_t> dealt;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &mine)) continue;
        std::vector<int> holders;
        for (int k = 0; k < p.local_size; ++k)
            if (CPU_ISSET(cpu, &masks[static_cast<std::size_t>(k)])) holders.push_back(k);
        const std::size_t turn = dealt[holders]++;
        if (holders[turn % holders.size()] == p.local_rank) p.cpus.push_back(cpu);
    }
    if (p.cpus.empty()) {
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
            if (CPU_ISSET(cpu, &mine)) {
                p.cpus.push_back(cpu);
                break;
            }
    }
    return p;
}

backend_options rank_backend_options(const communicator& comm) {
    const placement p = rank_placement(comm);
    backend_options options;
    if (std::getenv("TESSERA_NUM_THREADS") == nullptr)
        options.threads = static_cast<int>(std::max<std::size_t>(p.cpus.size(), 1));
    return options;
}

}  // namespace tessera::mpi
