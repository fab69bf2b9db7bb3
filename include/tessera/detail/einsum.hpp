// tessera/detail/einsum.hpp - the engine under einsum: the plan a spec and its shapes compile to
// (einsum_program), its look-up (a workspace slot, then the backend's cache, then the planner in
// src/einsum.cpp), and the executor that runs a plan's steps as batched matrix products or as
// strided loops. Part of ops/einsum.hpp; it includes Eigen and oneTBB through detail/matmul.hpp.
#pragma once

#include <tessera/detail/matmul.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/plan_cache.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::detail {

/// Labels a spec can use: the 52 letters, then one per broadcast ('...') axis.
inline constexpr std::size_t letter_labels = 52;
/// A step's loop runs over at most the labels of two operands.
inline constexpr std::size_t max_loop_labels = 2 * max_rank;

/// How an input's axes become the axes of its normalized view, which has one axis per distinct
/// label: a repeated label (`ii`) reads a diagonal (the strides add up), and a '...' axis of
/// extent 1 that broadcasts gets stride 0.
struct einsum_input {
    std::uint8_t rank = 0;
    std::array<std::uint8_t, max_rank> axis_to{};
    std::array<bool, max_rank> broadcast{};
};

/// A step run as a strided loop: `outer` labels index the result (in the order of its axes),
/// the `inner` labels after them are summed. Axis -1: the label is not an axis of that operand.
struct einsum_loop {
    std::uint8_t outer = 0, inner = 0;
    std::array<std::int8_t, max_loop_labels> axis_x{}, axis_y{}, axis_o{};
    std::array<std::size_t, max_loop_labels> extent{};
};

/// A step run as batched matrix products: x is read as [batch..., m-axes, k-axes] and y as
/// [batch..., k-axes, n-axes] (each group merged into one axis when the strides allow, else
/// copied), the result is written as [batch..., m-axes, n-axes].
struct einsum_product {
    std::uint8_t batch = 0, m = 0, k = 0, n = 0;
    std::array<std::uint8_t, max_rank> perm_x{}, perm_y{};
};

enum class einsum_kind : std::uint8_t { loop, product };

/// One step of a plan. Slots number the normalized inputs 0..n-1, then step j's result n + j;
/// the last step writes the caller's output, whose axes it visits in `out_perm` order.
struct einsum_op {
    einsum_kind kind = einsum_kind::loop;
    bool binary = false;
    std::uint16_t x = 0, y = 0, out = 0;
    einsum_loop loop;
    einsum_product product;
    std::array<std::uint8_t, max_rank> out_perm{};
};

/// A planned einsum: immutable once made, shared by the caches and by einsum_plan objects.
struct einsum_program {
    // What it was planned for (the cache key).
    std::string spec;
    std::uint8_t dtype = 0;
    std::vector<shape> inputs;
    std::vector<path_step> given_path;

    // The plan.
    std::vector<einsum_input> maps;   ///< one per input
    std::vector<shape> slots;         ///< the shape of every slot
    std::vector<einsum_op> ops;       ///< at least one
    shape result;
    std::vector<path_step> path;      ///< the pairwise order, in NumPy's convention
    double flops = 0;                 ///< multiply-adds of the pairwise steps
    double cost = 0;                  ///< what the path search minimised: flops + intermediate sizes

    bool matches(const plan_key& k) const noexcept {
        if (k.dtype != dtype || k.spec != spec || k.shapes.size() != inputs.size() ||
            k.path.size() != given_path.size())
            return false;
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (!(*k.shapes[i] == inputs[i])) return false;
        for (std::size_t i = 0; i < given_path.size(); ++i)
            if (k.path[i] != given_path[i]) return false;
        return true;
    }
};

/// Parses and plans `key`; throws spec_error or shape_error for bad input. Out of line.
std::shared_ptr<const einsum_program> make_einsum_program(const plan_key& key);

/// The slow half of find_plan: the backend's cache, else the planner; fills `slot`.
const std::shared_ptr<const einsum_program>& find_plan_slow(session& s, const plan_key& key,
                                                           plan_slots::entry& slot);

/// The workspace slot a key maps to: the spec's address and the extents, mixed.
inline std::size_t plan_slot_index(const plan_key& key) noexcept {
    std::uint64_t h = reinterpret_cast<std::uintptr_t>(key.spec.data()) >> 3;
    for (const shape* sh : key.shapes) {
        h = h * 0x9E3779B97F4A7C15ull + sh->rank();
        for (std::size_t d : sh->dims()) h = h * 0x9E3779B97F4A7C15ull + d;
    }
    return static_cast<std::size_t>(h ^ (h >> 32)) & (plan_slots::count - 1);
}

/// Returns the plan for `key`: from the session's workspace without a lock when this spec text and
/// these shapes were used there before, else from the backend's cache, else newly planned.
/// Counts a plan-cache hit or miss. The plan stays alive while the slot holds it, which nothing
/// changes before the caller's next einsum on this session.
inline const std::shared_ptr<const einsum_program>& find_plan(session& s, const plan_key& key) {
    plan_slots::entry& slot = session_access::workspace_of(s).plans.entries[plan_slot_index(key)];
    if (slot.spec == key.spec.data() && slot.plan != nullptr && slot.plan->matches(key)) {
        ++session_access::counters(s).plan_cache_hits;
        return slot.plan;
    }
    return find_plan_slow(s, key, slot);
}

/// The code of an element type in plan keys.
template <class T>
inline constexpr std::uint8_t dtype_code = std::is_same_v<T, float>                  ? 1
                                           : std::is_same_v<T, double>               ? 2
                                           : std::is_same_v<T, std::complex<float>>  ? 3
                                           : std::is_same_v<T, std::complex<double>> ? 4
                                                                                     : 0;

[[noreturn]] void throw_einsum_out_shape(std::string_view spec, const shape& expected, const shape& got);
[[noreturn]] void throw_einsum_alias(std::string_view spec, std::size_t operand);
[[noreturn]] void throw_einsum_plan_operands(std::string_view spec, std::size_t expected, std::size_t given);
[[noreturn]] void throw_einsum_plan_shape(std::string_view spec, std::size_t operand, const shape& expected,
                                          const shape& got);

/// Checks an out-parameter against a plan's result and every input, before anything is written.
template <class T, std::size_t N>
void check_einsum_out(const einsum_program& p, const tensor_view<T>& out,
                      const std::array<tensor_view<const T>, N>& in) {
    if (!(out.shape() == p.result)) throw_einsum_out_shape(p.spec, p.result, out.shape());
    if (out.size() == 0) return;
    const byte_range o = bytes_of(out);
    for (std::size_t i = 0; i < N; ++i) {
        if (in[i].size() == 0) continue;
        const byte_range r = bytes_of(in[i]);
        if (o.lo < r.hi && r.lo < o.hi) throw_einsum_alias(p.spec, i);
    }
}

/// Input `i` of `p` as its normalized view (one axis per distinct label).
template <class T>
tensor_view<const T> normalized_input(const einsum_program& p, std::size_t i, const tensor_view<const T>& v) {
    const einsum_input& m = p.maps[i];
    stride_array st{};
    for (std::size_t a = 0; a < m.rank; ++a)
        if (!m.broadcast[a]) st[m.axis_to[a]] += v.stride(a);
    const shape& sh = p.slots[i];
    return tensor_view<const T>(v.data(), sh, std::span<const std::ptrdiff_t>(st.data(), sh.rank()));
}

/// Merges `count` axes into one when their elements form a single strided run (extent-1 axes
/// ignored); returns false when they do not.
inline bool merge_axes(const std::size_t* extents, const std::ptrdiff_t* strides, std::size_t count,
                       std::size_t& extent, std::ptrdiff_t& stride) noexcept {
    extent = 1;
    stride = 1;
    bool first = true;
    for (std::size_t a = 0; a < count; ++a) {
        if (extents[a] == 1) continue;
        if (!first && stride != strides[a] * static_cast<std::ptrdiff_t>(extents[a])) return false;
        extent *= extents[a];
        stride = strides[a];
        first = false;
    }
    return true;
}

/// Views `v`, visited in `perm` order, as [batch..., rows, cols] where the rows are the next
/// `row_axes` axes and the cols the `col_axes` after them. Returns false when a group cannot be
/// merged without a copy.
template <class T>
bool as_batched_matrix(const tensor_view<T>& v, const std::array<std::uint8_t, max_rank>& perm,
                       std::size_t batch, std::size_t row_axes, std::size_t col_axes, tensor_view<T>& matrix) noexcept {
    std::array<std::size_t, max_rank> e{};
    std::array<std::ptrdiff_t, max_rank> st{};
    const std::size_t rank = batch + row_axes + col_axes;
    for (std::size_t a = 0; a < rank; ++a) {
        e[a] = v.extent(perm[a]);
        st[a] = v.stride(perm[a]);
    }
    std::array<std::size_t, max_rank> dims{};
    stride_array ms{};
    for (std::size_t a = 0; a < batch; ++a) {
        dims[a] = e[a];
        ms[a] = st[a];
    }
    const bool empty = v.size() == 0;  // any strides describe an empty view
    if (!merge_axes(&e[batch], &st[batch], row_axes, dims[batch], ms[batch]) && !empty) return false;
    if (!merge_axes(&e[batch + row_axes], &st[batch + row_axes], col_axes, dims[batch + 1], ms[batch + 1]) &&
        !empty)
        return false;
    if (empty) {
        dims[batch] = dims[batch + 1] = 1;
        for (std::size_t a = 0; a < row_axes; ++a) dims[batch] *= e[batch + a];
        for (std::size_t a = 0; a < col_axes; ++a) dims[batch + 1] *= e[batch + row_axes + a];
    }
    const shape ms_shape = shape::unchecked(std::span<const std::size_t>(dims.data(), batch + 2));
    matrix = tensor_view<T>(v.data(), ms_shape, std::span<const std::ptrdiff_t>(ms.data(), batch + 2));
    return true;
}

/// The permuted view of `v` ([perm[0]], [perm[1]], ...), for a copy.
template <class T>
tensor_view<T> gathered(const tensor_view<T>& v, const std::array<std::uint8_t, max_rank>& perm) noexcept {
    std::array<std::size_t, max_rank> dims{};
    stride_array st{};
    for (std::size_t a = 0; a < v.rank(); ++a) {
        dims[a] = v.extent(perm[a]);
        st[a] = v.stride(perm[a]);
    }
    return tensor_view<T>(v.data(), shape::unchecked(std::span<const std::size_t>(dims.data(), v.rank())),
                          std::span<const std::ptrdiff_t>(st.data(), v.rank()));
}

/// An operand of a product step as a batched matrix, copied into `keep` when its strides cannot
/// be merged.
template <class T>
tensor_view<const T> product_operand(session& s, const tensor_view<const T>& v,
                                     const std::array<std::uint8_t, max_rank>& perm, std::size_t batch,
                                     std::size_t rows, std::size_t cols, tensor<T>& keep) {
    tensor_view<const T> matrix;
    if (as_batched_matrix<const T>(v, perm, batch, rows, cols, matrix)) return matrix;
    keep = contiguous_copy<T>(s, gathered<const T>(v, perm));
    std::array<std::uint8_t, max_rank> identity{};
    for (std::size_t a = 0; a < max_rank; ++a) identity[a] = static_cast<std::uint8_t>(a);
    const bool merged = as_batched_matrix<const T>(keep.view(), identity, batch, rows, cols, matrix);
    TESSERA_ASSERT(merged, "einsum: a dense copy merges into a batched matrix");
    static_cast<void>(merged);
    return matrix;
}

/// Runs a product step: out ([batch..., m-axes, n-axes], any strides) = x @ y per batch item.
template <class T>
void run_product_step(session& s, const einsum_product& p, const tensor_view<const T>& x,
                      const tensor_view<const T>& y, const tensor_view<T>& out) {
    tensor<T> x_keep, y_keep, out_temp;
    const tensor_view<const T> xm = product_operand<T>(s, x, p.perm_x, p.batch, p.m, p.k, x_keep);
    const tensor_view<const T> ym = product_operand<T>(s, y, p.perm_y, p.batch, p.k, p.n, y_keep);
    std::array<std::uint8_t, max_rank> identity{};
    for (std::size_t a = 0; a < max_rank; ++a) identity[a] = static_cast<std::uint8_t>(a);
    tensor_view<T> om;
    if (!as_batched_matrix<T>(out, identity, p.batch, p.m, p.n, om)) {
        out_temp = tensor<T>::uninitialized(s, out.shape());
        const bool merged = as_batched_matrix<T>(out_temp.view(), identity, p.batch, p.m, p.n, om);
        TESSERA_ASSERT(merged, "einsum: a dense result merges into a batched matrix");
        static_cast<void>(merged);
    }
    if (p.batch == 0)
        matmul_2d<T>(s, xm, ym, om, false, T{1}, T{0});
    else
        run_products<T>(s, xm, ym, om, false, T{1}, T{0});
    if (out_temp.data() != nullptr) copy_strided<T>(out_temp.view(), out);
}

/// Runs a loop step: out[outer labels] = sum over the inner labels of x (times y when binary).
/// Output positions are split across the threads when the work is large; each position's sum
/// runs on one thread in a fixed order.
template <class T, bool Binary>
void run_loop_step(session& s, const einsum_loop& l, const tensor_view<const T>& x, const tensor_view<const T>& y,
                   const tensor_view<T>& out) {
    const std::size_t outer = l.outer, labels = std::size_t{l.outer} + l.inner;
    std::array<std::ptrdiff_t, max_loop_labels> sx{}, sy{}, so{};
    std::size_t positions = 1, inner_count = 1;
    for (std::size_t i = 0; i < labels; ++i) {
        sx[i] = l.axis_x[i] >= 0 ? x.stride(static_cast<std::size_t>(l.axis_x[i])) : 0;
        if constexpr (Binary) sy[i] = l.axis_y[i] >= 0 ? y.stride(static_cast<std::size_t>(l.axis_y[i])) : 0;
        so[i] = l.axis_o[i] >= 0 ? out.stride(static_cast<std::size_t>(l.axis_o[i])) : 0;
        (i < outer ? positions : inner_count) *= l.extent[i];
    }
    if (positions == 0) return;
    const T* const xd = x.data();
    const T* const yd = y.data();
    T* const od = out.data();
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

/// Runs plan `p` on `in` (shapes already matched to the plan), writing `out` (checked by the
/// caller). Intermediates come from the session's workspace and go back to it as soon as the
/// step that reads them is done.
template <class T, std::size_t N>
void run_einsum(session& s, const einsum_program& p, const std::array<tensor_view<const T>, N>& in,
                const tensor_view<T>& out) {
    std::array<tensor<T>, 2 * N> temps;
    const auto slot = [&](std::size_t id) -> tensor_view<const T> {
        return id < N ? normalized_input<T>(p, id, in[id]) : tensor_view<const T>(temps[id - N].view());
    };
    const std::size_t steps = p.ops.size();
    for (std::size_t j = 0; j < steps; ++j) {
        const einsum_op& op = p.ops[j];
        const tensor_view<const T> x = slot(op.x);
        const tensor_view<const T> y = op.binary ? slot(op.y) : x;
        tensor_view<T> o;
        if (j + 1 == steps) {
            o = gathered<T>(out, op.out_perm);
        } else {
            temps[j] = tensor<T>::uninitialized(s, p.slots[op.out]);
            o = temps[j].view();
        }
        if (op.kind == einsum_kind::product)
            run_product_step<T>(s, op.product, x, y, o);
        else if (op.binary)
            run_loop_step<T, true>(s, op.loop, x, y, o);
        else
            run_loop_step<T, false>(s, op.loop, x, y, o);
        if (op.x >= N) temps[op.x - N] = tensor<T>();
        if (op.binary && op.y >= N) temps[op.y - N] = tensor<T>();
    }
}

}  // namespace tessera::detail
