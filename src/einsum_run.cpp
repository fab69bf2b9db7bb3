// The hot half of einsum: the executor that runs a plan's steps (declared in
// tessera/detail/einsum.hpp), as batched matrix products through run_products (src/matmul_engine.hpp)
// or as strided loops, instantiated here for the four element types. The products' kernels are
// compiled elsewhere, so this file needs no Eigen.

#include "matmul_loops.hpp"

#include <tessera/detail/check.hpp>
#include <tessera/detail/einsum.hpp>
#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/matmul.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera::detail {
namespace {

/// An operand as a step sees it: its data and one stride per axis of its slot's shape (the shape
/// itself is in the plan).
template <class T>
struct operand_ref {
    T* data = nullptr;
    stride_array st{};
};

/// Input `i` of `p` with one stride per distinct label: a repeated label adds its axes' strides (a
/// diagonal), a broadcast '...' axis gets stride 0.
template <class T>
operand_ref<const T> input_ref(const einsum_program& p, std::size_t i, const tensor_view<const T>& v) noexcept {
    const einsum_input& m = p.maps[i];
    operand_ref<const T> r{v.data(), {}};
    for (std::size_t a = 0; a < m.rank; ++a)
        if (!m.broadcast[a]) r.st[m.axis_to[a]] += v.stride(a);
    return r;
}

/// `out` with its axes visited in `perm` order.
template <class T>
operand_ref<T> permuted_ref(const tensor_view<T>& out, const std::array<std::uint8_t, max_rank>& perm) noexcept {
    operand_ref<T> r{out.data(), {}};
    for (std::size_t a = 0; a < out.rank(); ++a) r.st[a] = out.stride(perm[a]);
    return r;
}

/// Merges `count` axes into one when their elements form a single strided run (extent-1 axes
/// ignored); returns false when they do not.
[[gnu::always_inline]] inline bool merge_axes(const std::size_t* extents, const std::ptrdiff_t* strides, std::size_t count,
                       std::ptrdiff_t& stride) noexcept {
    stride = 1;
    bool first = true;
    for (std::size_t a = 0; a < count; ++a) {
        if (extents[a] == 1) continue;
        if (!first && stride != strides[a] * static_cast<std::ptrdiff_t>(extents[a])) return false;
        stride = strides[a];
        first = false;
    }
    return true;
}

/// The strides of an operand read as [batch..., rows, cols]: its axes taken in `perm` order (with
/// extents `ext`), the next `rows` axes merged into one and the `cols` after them into another.
/// Returns false when a group cannot be merged.
[[gnu::always_inline]] inline bool matrix_strides(const std::array<std::uint8_t, max_rank>& perm, const std::size_t* ext,
                           const stride_array& st, std::size_t batch, std::size_t rows, std::size_t cols,
                           stride_array& out) noexcept {
    stride_array g{};
    for (std::size_t a = 0; a < batch + rows + cols; ++a) g[a] = st[perm[a]];
    for (std::size_t a = 0; a < batch; ++a) out[a] = g[a];
    return merge_axes(ext + batch, &g[batch], rows, out[batch]) &&
           merge_axes(ext + batch + rows, &g[batch + rows], cols, out[batch + 1]);
}

/// The strided view of an operand's axes in `perm` order, for a copy.
template <class T>
tensor_view<T> permuted_view(const operand_ref<T>& x, const std::array<std::uint8_t, max_rank>& perm,
                             const std::size_t* ext, std::size_t rank) noexcept {
    stride_array g{};
    for (std::size_t a = 0; a < rank; ++a) g[a] = x.st[perm[a]];
    return tensor_view<T>(x.data, shape::unchecked(std::span<const std::size_t>(ext, rank)),
                          std::span<const std::ptrdiff_t>(g.data(), rank));
}

/// An operand of a product step as a batched matrix view, copied into `keep` when its strides
/// cannot be merged.
template <class T>
tensor_view<const T> product_operand(session& s, const operand_ref<const T>& x,
                                     const std::array<std::uint8_t, max_rank>& perm, const std::size_t* ext,
                                     std::size_t batch, std::size_t rows, std::size_t cols, bool empty,
                                     const shape& matrix, tensor<T>& keep) {
    stride_array st{};
    if (matrix_strides(perm, ext, x.st, batch, rows, cols, st) || empty)
        return tensor_view<const T>(x.data, matrix, std::span<const std::ptrdiff_t>(st.data(), matrix.rank()));
    keep = contiguous_copy<T>(s, permuted_view<const T>(x, perm, ext, batch + rows + cols));
    return tensor_view<const T>(keep.data(), matrix);
}

/// Runs a product step: out ([batch..., m-axes, n-axes]) = x @ y for each batch item. A single
/// product below naive_product_limit whose operands need no copy runs right here, as one inline
/// dispatch (the 2x2-4x4 kernels, else a plain loop over the strides); the rest goes to
/// run_products (the batched kernels, Eigen's GEMM, tiling and the parallel split).
template <class T>
void run_product_step(session& s, const einsum_product& p, const operand_ref<const T>& x,
                      const operand_ref<const T>& y, const operand_ref<T>& out) {
    if (p.batch == 0) {
        // One product: when no operand needs a copy, small ones run right here on matrix_refs.
        const auto m = static_cast<std::ptrdiff_t>(p.out_matrix[0]), n = static_cast<std::ptrdiff_t>(p.out_matrix[1]),
                   k = static_cast<std::ptrdiff_t>(p.x_matrix[1]);
        stride_array sx{}, sy{}, so{};
        if (m + n + k < static_cast<std::ptrdiff_t>(naive_product_limit) &&
            matrix_strides(p.perm_x, p.ext_x.data(), x.st, 0, p.m, p.k, sx) &&
            matrix_strides(p.perm_y, p.ext_y.data(), y.st, 0, p.k, p.n, sy) &&
            matrix_strides(identity_axes, p.ext_out.data(), out.st, 0, p.m, p.n, so)) {
            ++session_access::counters(s).inline_dispatches;
            const matrix_ref<const T> a{x.data, m, k, sx[0], sx[1]}, b{y.data, k, n, sy[0], sy[1]};
            const matrix_ref<T> c{out.data, m, n, so[0], so[1]};
            if (m == n && n == k && m >= 2 && m <= 4) {
                if (m == 2)
                    tiny_square_any<2, false>(a, b, c, T{1}, T{0});
                else if (m == 3)
                    tiny_square_any<3, false>(a, b, c, T{1}, T{0});
                else
                    tiny_square_any<4, false>(a, b, c, T{1}, T{0});
            } else {
                naive_product<T>(a, b, c, false, T{1}, T{0});
            }
            return;
        }
    }
    tensor<T> x_keep, y_keep, out_temp;
    const tensor_view<const T> xm =
        product_operand<T>(s, x, p.perm_x, p.ext_x.data(), p.batch, p.m, p.k, p.x_empty, p.x_matrix, x_keep);
    const tensor_view<const T> ym =
        product_operand<T>(s, y, p.perm_y, p.ext_y.data(), p.batch, p.k, p.n, p.y_empty, p.y_matrix, y_keep);
    stride_array so{};
    tensor_view<T> om;
    if (matrix_strides(identity_axes, p.ext_out.data(), out.st, p.batch, p.m, p.n, so) || p.out_empty) {
        om = tensor_view<T>(out.data, p.out_matrix, std::span<const std::ptrdiff_t>(so.data(), p.out_matrix.rank()));
    } else {
        out_temp = empty<T>(s, p.out_matrix);
        om = out_temp.view();
    }
    run_products<T>(s, xm, ym, om, false, T{1}, T{0});
    if (out_temp.data() != nullptr) {
        const std::size_t rank = std::size_t{p.batch} + p.m + p.n;
        const shape natural = shape::unchecked(std::span<const std::size_t>(p.ext_out.data(), rank));
        copy_inline<T>(permuted_view<T>(out, identity_axes, p.ext_out.data(), rank),
                       tensor_view<const T>(out_temp.data(), natural));
    }
}

/// Runs a loop step: out[outer labels] = sum over the inner labels of x (times y when binary).
/// Output positions are split across the threads when the work is large; each position's sum
/// runs on one thread in a fixed order.
template <class T, bool Binary>
void run_loop_step(session& s, const einsum_loop& l, const operand_ref<const T>& x, const operand_ref<const T>& y,
                   const operand_ref<T>& out) {
    const std::size_t outer = l.outer, labels = std::size_t{l.outer} + l.inner;
    std::array<std::ptrdiff_t, max_loop_labels> sx{}, sy{}, so{};
    std::size_t positions = 1, inner_count = 1;
    for (std::size_t i = 0; i < labels; ++i) {
        sx[i] = l.axis_x[i] >= 0 ? x.st[static_cast<std::size_t>(l.axis_x[i])] : 0;
        if constexpr (Binary) sy[i] = l.axis_y[i] >= 0 ? y.st[static_cast<std::size_t>(l.axis_y[i])] : 0;
        so[i] = l.axis_o[i] >= 0 ? out.st[static_cast<std::size_t>(l.axis_o[i])] : 0;
        (i < outer ? positions : inner_count) *= l.extent[i];
    }
    if (positions == 0) return;
    const T* const xd = x.data;
    const T* const yd = y.data;
    T* const od = out.data;
    // The innermost summed label runs as a plain loop; the others advance an odometer.
    const std::size_t last = labels - 1;
    const std::size_t run = l.inner > 0 ? l.extent[last] : 1;
    const std::size_t runs = l.inner > 0 && run > 0 ? inner_count / run : 0;
    const auto element = [&](std::ptrdiff_t ox, std::ptrdiff_t oy) -> T {
        if (l.inner == 0) {
            if constexpr (Binary) return xd[ox] * yd[oy];
            else return xd[ox];
        }
        T acc{};
        std::array<std::size_t, max_loop_labels> idx{};
        for (std::size_t r = 0; r < runs; ++r) {
            const std::ptrdiff_t ex = sx[last], ey = sy[last];
            for (std::size_t j = 0; j < run; ++j) {
                const auto jj = static_cast<std::ptrdiff_t>(j);
                if constexpr (Binary) acc += xd[ox + jj * ex] * yd[oy + jj * ey];
                else acc += xd[ox + jj * ex];
            }
            for (std::size_t i = last; i-- > outer;) {
                ox += sx[i];
                oy += sy[i];
                if (++idx[i] < l.extent[i]) break;
                ox -= sx[i] * static_cast<std::ptrdiff_t>(l.extent[i]);
                oy -= sy[i] * static_cast<std::ptrdiff_t>(l.extent[i]);
                idx[i] = 0;
            }
        }
        return acc;
    };
    const std::size_t work = std::max<std::size_t>(1, inner_count) * (Binary ? 2 : 1);
    const std::size_t grain = std::max<std::size_t>(1, session_access::core(s).settings().grain / work);
    parallel_range(s, positions, grain, [&](std::size_t begin, std::size_t end) {
        std::array<std::size_t, max_loop_labels> idx{};
        std::ptrdiff_t ox = 0, oy = 0, oo = 0;
        std::size_t rest = begin;
        for (std::size_t i = outer; i-- > 0;) {
            idx[i] = rest % l.extent[i];
            rest /= l.extent[i];
            const auto at = static_cast<std::ptrdiff_t>(idx[i]);
            ox += at * sx[i];
            oy += at * sy[i];
            oo += at * so[i];
        }
        for (std::size_t p = begin; p < end; ++p) {
            od[oo] = element(ox, oy);
            for (std::size_t i = outer; i-- > 0;) {
                ox += sx[i];
                oy += sy[i];
                oo += so[i];
                if (++idx[i] < l.extent[i]) break;
                ox -= sx[i] * static_cast<std::ptrdiff_t>(l.extent[i]);
                oy -= sy[i] * static_cast<std::ptrdiff_t>(l.extent[i]);
                oo -= so[i] * static_cast<std::ptrdiff_t>(l.extent[i]);
                idx[i] = 0;
            }
        }
    });
}


/// The intermediates of one run, one workspace block per step but the last (none for zero
/// elements), each given back as soon as the step that reads it is done and the rest when the run
/// ends, by an exception too. Their addresses live in the caller's `room`; only the first `used`
/// slots are ever touched.
class step_blocks {
public:
    step_blocks(std::span<void*> room, std::size_t used) noexcept : payload_(room.data()), used_(used) {
        TESSERA_ASSERT(used <= room.size(), "einsum: more intermediates than the run has room for");
        for (std::size_t j = 0; j < used; ++j) payload_[j] = nullptr;
    }
    step_blocks(const step_blocks&) = delete;
    step_blocks& operator=(const step_blocks&) = delete;
    ~step_blocks() {
        for (std::size_t j = 0; j < used_; ++j) release(j);
    }

    void* allocate(session& s, std::size_t j, std::size_t count, std::size_t element_size) {
        if (count == 0) return nullptr;
        if (count > static_cast<std::size_t>(-1) / element_size) throw_bytes_overflow("einsum", count, element_size);
        payload_[j] = session_access::allocate(s, count * element_size);
        return payload_[j];
    }
    const void* operator[](std::size_t j) const noexcept { return payload_[j]; }
    void release(std::size_t j) noexcept {
        if (payload_[j] != nullptr) release_block(payload_[j]);
        payload_[j] = nullptr;
    }

private:
    void** payload_;
    std::size_t used_;
};

/// Runs one step of a plan.
template <class T>
void run_einsum_op(session& s, const einsum_op& op, const operand_ref<const T>& x, const operand_ref<const T>& y,
                   const operand_ref<T>& out) {
    if (op.kind == einsum_kind::product)
        run_product_step<T>(s, op.product, x, y, out);
    else if (op.binary)
        run_loop_step<T, true>(s, op.loop, x, y, out);
    else
        run_loop_step<T, false>(s, op.loop, x, y, out);
}

}  // namespace

template <class T>
void run_einsum_steps(session& s, const einsum_program& p, std::span<const tensor_view<const T>> in,
                      const tensor_view<T>& out, std::span<void*> room) {
    if (p.ops.size() == 1) {  // one step straight from the inputs: no intermediates to hold
        const einsum_op& op = p.ops.front();
        const operand_ref<const T> x = input_ref<T>(p, op.x, in[op.x]);
        run_einsum_op<T>(s, op, x, op.binary ? input_ref<T>(p, op.y, in[op.y]) : x, permuted_ref<T>(out, op.out_perm));
        return;
    }
    const std::size_t n = in.size(), steps = p.ops.size();
    step_blocks temps(room, steps - 1);
    const auto slot = [&](std::size_t id) -> operand_ref<const T> {
        if (id < n) return input_ref<T>(p, id, in[id]);
        return {static_cast<const T*>(temps[id - n]), row_major_strides(p.slots[id])};
    };
    for (std::size_t j = 0; j < steps; ++j) {
        const einsum_op& op = p.ops[j];
        const operand_ref<const T> x = slot(op.x);
        const operand_ref<const T> y = op.binary ? slot(op.y) : x;
        if (j + 1 == steps) {
            run_einsum_op<T>(s, op, x, y, permuted_ref<T>(out, op.out_perm));
            break;
        }
        T* const into = static_cast<T*>(temps.allocate(s, j, p.slots[op.out].count(), sizeof(T)));
        run_einsum_op<T>(s, op, x, y, {into, row_major_strides(p.slots[op.out])});
        if (op.x >= n) temps.release(op.x - n);
        if (op.binary && op.y >= n) temps.release(op.y - n);
    }
}

#define TESSERA_INSTANTIATE(T)                                                                     \
    template void run_einsum_steps<T>(session&, const einsum_program&,                             \
                                      std::span<const tensor_view<const T>>, const tensor_view<T>&, \
                                      std::span<void*>);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
TESSERA_INSTANTIATE(std::complex<float>)
TESSERA_INSTANTIATE(std::complex<double>)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::detail
