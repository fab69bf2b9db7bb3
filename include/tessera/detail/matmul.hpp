// tessera/detail/matmul.hpp - what the matrix-product ops keep inline: validation, the contraction
// plan behind tensordot and dot, the 2x2-4x4 fast path of the out-parameter matmul (plain loops),
// and the declarations of the engines, which are compiled in the library for the four element
// types (src/matmul_engine.hpp: operand copies, the tiny-matrix kernels, Eigen's GEMM, tiling and
// the parallel split). Part of ops/matmul.hpp; it includes neither Eigen nor oneTBB.
#pragma once

#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/product_slots.hpp>
#include <tessera/detail/small_matmul.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera::detail {

[[noreturn]] void throw_matmul_rank(const char* op, const char* operand, const shape& s,
                                    std::size_t rank, bool exact);
[[noreturn]] void throw_matmul_inner(const char* op, const shape& a, const shape& b);
[[noreturn]] void throw_tensordot_axis_count(std::size_t given_a, std::size_t given_b);
[[noreturn]] void throw_tensordot_extent(std::size_t axis_a, std::size_t axis_b, const shape& a,
                                         const shape& b);
[[noreturn]] void throw_result_rank(const char* op, std::size_t rank);
[[noreturn]] void throw_vdot_size(const char* op, const shape& a, const shape& b);

/// A strided matrix: element (i, j) is data[i*rs + j*cs]. Never owns.
template <class T>
struct matrix_ref {
    T* data = nullptr;
    // Each extent beside its stride: a view keeps its extents together and its strides together,
    // and with fields in that order GCC copies two at a time with one 16-byte load, which cannot
    // take its value from the caller's two pending 8-byte stores (a store-forwarding stall, about
    // 5 ns per matmul call on views just built).
    std::ptrdiff_t rows = 0, rs = 0, cols = 0, cs = 0;

    matrix_ref() = default;
    constexpr matrix_ref(T* d, std::ptrdiff_t r, std::ptrdiff_t c, std::ptrdiff_t row_stride,
                         std::ptrdiff_t col_stride) noexcept
        : data(d), rows(r), rs(row_stride), cols(c), cs(col_stride) {}

    T& operator()(std::ptrdiff_t i, std::ptrdiff_t j) const noexcept { return data[i * rs + j * cs]; }
    /// The rows x cols block whose top-left element is (i, j).
    matrix_ref block(std::ptrdiff_t i, std::ptrdiff_t j, std::ptrdiff_t r, std::ptrdiff_t c) const noexcept {
        return {data + i * rs + j * cs, r, c, rs, cs};
    }
    operator matrix_ref<const T>() const noexcept { return {data, rows, cols, rs, cs}; }
};

/// Tiny square products with any strides, inline: no plan, no workspace.
template <int N, bool Accumulate, class T>
[[gnu::always_inline]] inline void tiny_square(const T* a, std::ptrdiff_t ar, std::ptrdiff_t ac,
                                               const T* b, std::ptrdiff_t br, std::ptrdiff_t bc, T* c,
                                               std::ptrdiff_t cr, std::ptrdiff_t cc, T alpha, T beta) noexcept {
    T acc[N][N];
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < N; ++j) {
            T sum = a[i * ar] * b[j * bc];
#pragma GCC unroll 16
            for (int p = 1; p < N; ++p) sum += a[i * ar + p * ac] * b[p * br + j * bc];
            acc[i][j] = sum;
        }
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < N; ++j) {
            T& out = c[i * cr + j * cc];
            if constexpr (Accumulate)
                out = beta == T{0} ? alpha * acc[i][j] : alpha * acc[i][j] + beta * out;
            else
                out = acc[i][j];
        }
}

/// A rank-2 tensor or view as a matrix_ref; a tensor's strides are known without computing a view.
template <class T>
[[gnu::always_inline]] inline matrix_ref<T> matrix_of(tensor<T>& t) noexcept {
    const auto cols = static_cast<std::ptrdiff_t>(t.extent(1));
    return {t.data(), static_cast<std::ptrdiff_t>(t.extent(0)), cols, cols, 1};
}
template <class T>
[[gnu::always_inline]] inline matrix_ref<const T> matrix_of(const tensor<T>& t) noexcept {
    const auto cols = static_cast<std::ptrdiff_t>(t.extent(1));
    return {t.data(), static_cast<std::ptrdiff_t>(t.extent(0)), cols, cols, 1};
}
template <class T>
[[gnu::always_inline]] inline matrix_ref<T> matrix_of(const tensor_view<T>& v) noexcept {
    return {v.data(), static_cast<std::ptrdiff_t>(v.extent(0)), static_cast<std::ptrdiff_t>(v.extent(1)),
            v.stride(0), v.stride(1)};
}

/// The bytes a matrix with no empty axis can touch.
template <class T>
[[gnu::always_inline]] inline byte_range bytes_of_matrix(const matrix_ref<T>& x) noexcept {
    const std::ptrdiff_t s0 = x.rs * (x.rows - 1), s1 = x.cs * (x.cols - 1);
    const auto base = reinterpret_cast<std::uintptr_t>(x.data);
    constexpr auto size = static_cast<std::ptrdiff_t>(sizeof(T));
    // Without negative strides the range starts at the first element: one test instead of the
    // four selects below, on every single product's overlap check.
    if ((s0 | s1) >= 0) [[likely]]
        return {base, base + static_cast<std::uintptr_t>((s0 + s1 + 1) * size)};
    const std::ptrdiff_t lo = (s0 < 0 ? s0 : 0) + (s1 < 0 ? s1 : 0);
    const std::ptrdiff_t hi = (s0 > 0 ? s0 : 0) + (s1 > 0 ? s1 : 0) + 1;
    return {base + static_cast<std::uintptr_t>(lo * size),
            base + static_cast<std::uintptr_t>(hi * size)};
}

/// `x` with each field read on its own into a register. The caller has usually just stored the
/// fields one by one; GCC would otherwise copy pairs of them with 16-byte loads and stores,
/// which cannot take their value from two pending 8-byte stores, nor give it to an 8-byte load
/// of their upper half, and wait until the stores reach the cache (about 6 ns a 3x5x2 float
/// product on Zen 5).
template <class T>
[[gnu::always_inline]] inline matrix_ref<T> in_registers(const matrix_ref<T>& x) noexcept {
    T* data = x.data;
    std::ptrdiff_t rows = x.rows, rs = x.rs, cols = x.cols, cs = x.cs;
    asm("" : "+r"(data), "+r"(rows), "+r"(rs), "+r"(cols), "+r"(cs));
    return {data, rows, cols, rs, cs};
}

/// Whether a product is plain, c = a @ b: the path choice and the remembered products' key both
/// read it from here, so that they cannot disagree.
template <class T>
[[gnu::always_inline]] inline bool plain_product(bool accumulate, T alpha, T beta) noexcept {
    return !accumulate || (alpha == T{1} && beta == T{0});
}

/// What the kernel of the single product x @ y -> z depends on (see product_slots).
template <class T>
[[gnu::always_inline]] inline product_key key_of(const matrix_ref<const T>& x,
                                                 const matrix_ref<const T>& y,
                                                 const matrix_ref<T>& z, bool plain) noexcept {
    return {x.rows, y.cols, x.cols, x.rs, x.cs, y.rs, y.cs, z.rs, z.cs, plain};
}

/// Runs the single real product of checked operands (z = x @ y; with `accumulate`, z = alpha *
/// x @ y + beta * z) with the kernel the session's workspace remembers for its shape, strides and
/// form, when it remembers one (product_2d fills the slots): no path choice, no planning, the bits
/// of the first such product. Returns false, having written nothing, otherwise.
template <class T>
[[gnu::always_inline]] inline bool run_if_remembered(session& s, const matrix_ref<const T>& x,
                                                     const matrix_ref<const T>& y,
                                                     const matrix_ref<T>& z, bool accumulate,
                                                     T alpha, T beta) noexcept {
    if constexpr (std::is_floating_point_v<T>) {
        const bool plain = plain_product(accumulate, alpha, beta);
        const product_slot<T>& slot =
            session_access::workspace_of(s).products->template slot<T>(x.rows, y.cols, x.cols);
        if (!same_key(slot.key, key_of(x, y, z, plain))) return false;
        ++session_access::counters(s).inline_dispatches;
        if (slot.fixed != nullptr)
            slot.fixed({x.data, 0, y.data, 0, z.data, 0, 1});
        else
            slot.gemm.run({x.rows, y.cols, x.cols, x.data, x.rs, x.cs, 0, y.data, y.rs, 0, z.data,
                           z.rs, 0, 1, accumulate, alpha, beta},
                          slot.gemm);
        return true;
    } else {
        return false;
    }
}

/// The 2-D product of checked operands (c = a @ b; with `accumulate`, c = alpha * a @ b + beta *
/// c): 2x2, 3x3 and 4x4 by plain loops, other small real shapes straight to the kernel a batch of
/// them would run where it reads their strides as they are (so the same bits), remembered by the
/// session's workspace for the next product of the same shape, strides and form; the rest through
/// run_products. Compiled in the library (src/matmul_engine.hpp) for the four element types.
template <class T>
void matmul_2d(session& s, const matrix_ref<const T>& a, const matrix_ref<const T>& b,
               const matrix_ref<T>& c, bool accumulate, T alpha, T beta);

/// The out-parameter form's fast path for rank-2 operands: the general path's checks specialised
/// for rank 2 and inlined, on (data, extents, strides) alone, then the product: 2x2, 3x3 and 4x4
/// inline, a product the workspace remembers straight to its kernel (run_if_remembered; 3x5x2
/// float on views built for the call, Zen 5: about 31 -> 26 ns), every other shape through
/// matmul_2d. Operands may be tensors (whose strides need no computing) or views. Returns false,
/// having written nothing, for other ranks, an empty product, an out with a zero stride or a
/// failed check: the general path then handles the operands or throws its error.
template <class T, class A, class B, class C>
[[gnu::always_inline]] inline bool try_matrix_product(session& s, const A& a, const B& b, C& c) {
    if (a.rank() != 2 || b.rank() != 2 || c.rank() != 2) return false;
    const matrix_ref<const T> x = matrix_of(a), y = matrix_of(b);
    const matrix_ref<T> z = matrix_of(c);
    const std::ptrdiff_t n = x.rows;
    // Dense tiny operands (always, for tensors: the compiler folds these tests) need only pointer
    // compares for the overlap check, and run with compile-time strides.
    if (n >= 2 && n <= 4 && x.cols == n && y.rows == n && y.cols == n && z.rows == n &&
        z.cols == n && x.rs == n && x.cs == 1 && y.rs == n && y.cs == 1 && z.rs == n && z.cs == 1) {
        const auto bytes = static_cast<std::uintptr_t>(n * n) * sizeof(T);
        const auto pz = reinterpret_cast<std::uintptr_t>(z.data), px = reinterpret_cast<std::uintptr_t>(x.data),
                   py = reinterpret_cast<std::uintptr_t>(y.data);
        if ((pz < px + bytes && px < pz + bytes) || (pz < py + bytes && py < pz + bytes)) return false;
        ++session_access::counters(s).inline_dispatches;
        if (n == 2)
            tiny_square<2, false>(x.data, 2, 1, y.data, 2, 1, z.data, 2, 1, T{1}, T{0});
        else if (n == 3)
            tiny_square<3, false>(x.data, 3, 1, y.data, 3, 1, z.data, 3, 1, T{1}, T{0});
        else
            tiny_square<4, false>(x.data, 4, 1, y.data, 4, 1, z.data, 4, 1, T{1}, T{0});
        return true;
    }
    if (x.cols != y.rows || z.rows != x.rows || z.cols != y.cols) return false;
    if (z.rows == 0 || z.cols == 0 || x.cols == 0 || z.rs == 0 || z.cs == 0) return false;
    const byte_range rz = bytes_of_matrix(z), rx = bytes_of_matrix(x), ry = bytes_of_matrix(y);
    if ((rz.lo < rx.hi && rx.lo < rz.hi) || (rz.lo < ry.hi && ry.lo < rz.hi)) return false;
    if (n < 2 || n > 4 || x.cols != n || y.cols != n) {
        if (run_if_remembered<T>(s, in_registers(x), in_registers(y), in_registers(z), false, T{1},
                                 T{0}))
            return true;
        // Fresh matrices for the call: passing x, y and z themselves makes GCC keep them in
        // memory on every path, the tiny products' included (1.5 ns a call there).
        matmul_2d<T>(s, matrix_of(a), matrix_of(b), matrix_of(c), false, T{1}, T{0});
        return true;
    }
    ++session_access::counters(s).inline_dispatches;
    if (n == 2)
        tiny_square<2, false>(x.data, x.rs, x.cs, y.data, y.rs, y.cs, z.data, z.rs, z.cs, T{1}, T{0});
    else if (n == 3)
        tiny_square<3, false>(x.data, x.rs, x.cs, y.data, y.rs, y.cs, z.data, z.rs, z.cs, T{1}, T{0});
    else
        tiny_square<4, false>(x.data, x.rs, x.cs, y.data, y.rs, y.cs, z.data, z.rs, z.cs, T{1}, T{0});
    return true;
}

/// Validates a 2-D product and returns the result shape [m, n].
template <class T>
shape check_matmul_2d(const char* op, const tensor_view<const T>& a, const tensor_view<const T>& b) {
    if (a.rank() != 2) throw_matmul_rank(op, "a", a.shape(), 2, true);
    if (b.rank() != 2) throw_matmul_rank(op, "b", b.shape(), 2, true);
    if (a.extent(1) != b.extent(0)) throw_matmul_inner(op, a.shape(), b.shape());
    return shape{a.extent(0), b.extent(1)};
}

/// Validates a batched product and returns the result shape [batch..., m, n].
template <class T>
shape check_batched(const char* op, const tensor_view<const T>& a, const tensor_view<const T>& b) {
    if (a.rank() < 2) throw_matmul_rank(op, "a", a.shape(), 2, false);
    if (b.rank() < 2) throw_matmul_rank(op, "b", b.shape(), 2, false);
    const std::size_t ra = a.rank(), rb = b.rank();
    if (a.extent(ra - 1) != b.extent(rb - 2)) throw_matmul_inner(op, a.shape(), b.shape());
    return batch_and(broadcast_shapes(op, a.shape(), b.shape(), 2),
                     {a.extent(ra - 2), b.extent(rb - 1)});
}

/// Checks an out-parameter against the result shape and the inputs, before anything is written.
template <class T>
void check_product_out(const char* op, const tensor_view<T>& out, const shape& expected,
                       const tensor_view<const T>& a, const tensor_view<const T>& b) {
    check_out(op, "out", out, expected);
    check_disjoint(op, "out", out, "a", a);
    check_disjoint(op, "out", out, "b", b);
}

/// The out-parameter form's general path, for what try_matrix_product leaves: other ranks, empty
/// products, failed checks (which throw here). Out of line, so that the fast path's frame stays
/// small (the views and their copies took 700 bytes of its stack and forced spills).
template <class T, class A, class B, class C>
[[gnu::noinline]] void matmul_general(session& s, const A& a, const B& b, C& c) {
    const tensor_view<T> o = as_writable_view(c);
    const auto av = as_view(a);
    const auto bv = as_view(b);
    check_product_out<T>("matmul", o, check_matmul_2d<T>("matmul", av, bv), av, bv);
    matmul_2d<T>(s, matrix_of(av), matrix_of(bv), matrix_of(o), false, T{1}, T{0});
}

/// The contraction behind tensordot and dot, after the caller checked `out` (shape, overlap).
struct contraction {
    shape result;
    std::array<std::size_t, max_rank> perm_a{}, perm_b{};
    std::size_t m = 1, k = 1, n = 1;
};

inline contraction plan_contraction(const shape& a, const shape& b, const axis_list& axes_a,
                                    const axis_list& axes_b) {
    if (axes_a.all() || axes_b.all()) throw_all_axes_not_accepted("tensordot");
    if (axes_a.given() != axes_b.given()) throw_tensordot_axis_count(axes_a.given(), axes_b.given());
    contraction p;
    std::array<bool, max_rank> used_a{}, used_b{};
    const std::size_t pairs = axes_a.given();
    if (pairs > a.rank() || pairs > b.rank()) throw_tensordot_axis_count(axes_a.given(), axes_b.given());
    for (std::size_t i = 0; i < pairs; ++i) {
        const std::size_t x = normalize_axis("tensordot", axes_a.values()[i], a.rank());
        const std::size_t y = normalize_axis("tensordot", axes_b.values()[i], b.rank());
        if (used_a[x]) throw_duplicate_axis("tensordot", x);
        if (used_b[y]) throw_duplicate_axis("tensordot", y);
        if (a[x] != b[y]) throw_tensordot_extent(x, y, a, b);
        used_a[x] = used_b[y] = true;
        p.perm_a[a.rank() - pairs + i] = x;
        p.perm_b[i] = y;
        p.k *= a[x];
    }
    const std::size_t rank = a.rank() + b.rank() - 2 * pairs;
    if (rank > max_rank) throw_result_rank("tensordot", rank);
    std::array<std::size_t, max_rank> dims{};
    std::size_t r = 0, fa = 0, fb = pairs;
    for (std::size_t i = 0; i < a.rank(); ++i)
        if (!used_a[i]) {
            p.perm_a[fa++] = i;
            dims[r++] = a[i];
            p.m *= a[i];
        }
    for (std::size_t i = 0; i < b.rank(); ++i)
        if (!used_b[i]) {
            p.perm_b[fb++] = i;
            dims[r++] = b[i];
            p.n *= b[i];
        }
    p.result = shape(std::span<const std::size_t>(dims.data(), r));
    return p;
}

// ---- engines: defined in the library (src/matmul_engine.hpp) and instantiated there for float,
// double, complex<float> and complex<double>, so that a user's translation unit never compiles
// Eigen's GEMM or the tiny-matrix kernels. Callers have checked every operand (shapes, out
// writable and disjoint from the inputs) before calling. ---------------------------------------

/// c = a @ b for every matrix of the batch (accumulate: c = alpha * a @ b + beta * c): a is
/// [..., m, k], b is [..., k, n] with batch axes that broadcast to c's, c is [batch..., m, n].
/// Copies operands into workspace blocks only when the kernel cannot read their strides. One
/// dispatch (inline or parallel).
template <class T>
void run_products(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b,
                  const tensor_view<T>& c, bool accumulate, T alpha, T beta);

/// out = tensordot(a, b) for a planned contraction; `out` has the result shape.
template <class T>
void run_contraction(session& s, const contraction& p, const tensor_view<const T>& a,
                     const tensor_view<const T>& b, const tensor_view<T>& out);

/// sum(f(a_i) * b_i) over two flat views of equal length, f = conj for vdot (real types are not
/// conjugated), summed in fixed blocks so that the result does not depend on the thread count.
template <bool Conjugate, class T>
T flat_dot(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b);

/// vdot: flat_dot<true> of both operands flattened in row-major order (equal element counts).
template <class T>
T run_vdot(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b);

/// out[i, j] = a[i] * b[j] for a and b flattened in row-major order and a checked out
/// [a.size(), b.size()].
template <class T>
void run_outer(session& s, const tensor_view<const T>& a, const tensor_view<const T>& b,
               const tensor_view<T>& out);

}  // namespace tessera::detail
