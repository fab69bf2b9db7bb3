// tessera/detail/reduce_runner.hpp - a reduction from validation to result: the axis checks, the
// plan (reduced axes as one walk, kept axes as the output space), and the runner that reduces
// inline or with one parallel dispatch. Part of ops/reduce.hpp.
#pragma once

#include <tessera/detail/elementwise.hpp>
#include <tessera/detail/iteration.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/reduce_leaves.hpp>
#include <tessera/detail/runtime.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera::detail {
[[noreturn]] void throw_empty_reduction(const char* op, const shape& in, std::uint32_t mask);
}  // namespace tessera::detail

namespace tessera::detail::reductions {

// ---------------------------------------------------------------------------------------------
// Validation

/// Returns the reduced axes of a rank-`rank` input as a bit mask, or throws shape_error naming
/// `op` for an axis out of range or given twice.
inline std::uint32_t reduction_mask(const char* op, const axis_list& axes, std::size_t rank) {
    if (axes.all()) return (std::uint32_t{1} << rank) - 1u;
    if (axes.given() > max_rank) throw_permutation_size(op, axes.given(), rank);
    std::uint32_t mask = 0;
    for (const any_integer& axis : axes.values()) {
        const std::size_t a = normalize_axis(op, axis, rank);
        if ((mask >> a) & 1u) throw_duplicate_axis(op, a);
        mask |= std::uint32_t{1} << a;
    }
    return mask;
}

/// Returns the shape of the result: the kept axes, with extent-1 axes in place of the reduced
/// ones when `keep_dims`.
inline shape reduced_shape(const shape& in, std::uint32_t mask, bool keep_dims) noexcept {
    std::array<std::size_t, max_rank> dims{};
    std::size_t rank = 0;
    for (std::size_t a = 0; a < in.rank(); ++a) {
        if (((mask >> a) & 1u) == 0)
            dims[rank++] = in[a];
        else if (keep_dims)
            dims[rank++] = 1;
    }
    return shape::unchecked(std::span<const std::size_t>(dims.data(), rank));
}

/// Throws shape_error when a reduction without identity (max, argmax, ...) would have to produce
/// an output from zero elements.
inline void check_nonempty(const char* op, const shape& in, std::uint32_t mask) {
    std::size_t reduced = 1, kept = 1;
    for (std::size_t a = 0; a < in.rank(); ++a) ((mask >> a) & 1u ? reduced : kept) *= in[a];
    if (reduced == 0 && kept != 0) throw_empty_reduction(op, in, mask);
}


/// The reduction after validation: reduced axes as one walk, kept axes as the output index space.
template <class T, class R>
struct reduction_plan {
    const T* in = nullptr;
    R* out = nullptr;
    strided_space red;  // reduced axes, collapsed; memory order unless the op reports indices
    iteration<2> kept;  // kept axes (without the lane axis in tile mode), collapsed: (in, out)
    std::size_t outputs = 0;  // all outputs
    bool tile = false;        // neighbouring outputs along the lane axis are reduced together
    std::size_t lane_extent = 1;
    std::ptrdiff_t lane_in = 0, lane_out = 0;
};

inline std::ptrdiff_t stride_magnitude(std::ptrdiff_t x) noexcept {
    return x < 0 ? -x : x;
}

template <class T, class R>
reduction_plan<T, R> plan_reduction(const tensor_view<const T>& in, std::uint32_t mask,
                                    bool keep_dims, const tensor_view<R>& out,
                                    bool memory_order) noexcept {
    reduction_plan<T, R> p;
    p.in = in.data();
    p.out = out.data();
    std::array<std::size_t, max_rank> rext{}, kext{};
    stride_array rst{}, kin{}, kout{};
    std::size_t rr = 0, kr = 0, n = 1, outputs = 1, out_axis = 0;
    for (std::size_t a = 0; a < in.rank(); ++a) {
        const std::size_t e = in.extent(a);
        if ((mask >> a) & 1u) {
            n *= e;
            if (keep_dims) ++out_axis;
            if (e == 1) continue;
            rext[rr] = e;
            rst[rr++] = in.stride(a);
        } else {
            const std::ptrdiff_t os = out.stride(out_axis++);
            outputs *= e;
            if (e == 1) continue;
            kext[kr] = e;
            kin[kr] = in.stride(a);
            kout[kr++] = os;
        }
    }
    p.outputs = outputs;
    p.red.count = n;
    if (outputs == 0) return p;

    // Sums, products and extrema may walk the reduced elements in any order: walking them in
    // memory order (flipped axes forward, largest stride outermost) makes a transposed or flipped
    // view read like the contiguous tensor and collapse into one dense run.
    if (memory_order && n > 0) {
        for (std::size_t i = 0; i < rr; ++i) {
            if (rst[i] < 0) {
                p.in += rst[i] * static_cast<std::ptrdiff_t>(rext[i] - 1);
                rst[i] = -rst[i];
            }
        }
        for (std::size_t i = 1; i < rr; ++i)
            for (std::size_t j = i; j > 0 && rst[j - 1] < rst[j]; --j) {
                std::swap(rst[j - 1], rst[j]);
                std::swap(rext[j - 1], rext[j]);
            }
    }
    p.red.rank = 0;
    for (std::size_t i = 0; i < rr; ++i) p.red.add_axis(rext[i], {rst[i]});
    p.red.close(n);  // nothing or only extent-1 axes reduced: one element per output

    // Tile mode when the kept axis with the smallest stride moves through memory faster than
    // the reduced axes (a column sum of a row-major matrix), or when each output has so few
    // elements that reducing outputs one by one would be all overhead.
    std::ptrdiff_t red_min = std::numeric_limits<std::ptrdiff_t>::max();
    if (n > 1)
        for (std::size_t i = 0; i < p.red.rank; ++i)
            red_min = std::min(red_min, stride_magnitude(p.red.strides[0][i]));
    std::size_t lane = kr;
    for (std::size_t i = 0; i < kr; ++i)
        if (kin[i] != 0 && (lane == kr || stride_magnitude(kin[i]) < stride_magnitude(kin[lane])))
            lane = i;
    p.tile = lane < kr && (stride_magnitude(kin[lane]) < red_min || n <= short_leaf);
    if (p.tile) {
        p.lane_extent = kext[lane];
        p.lane_in = kin[lane];
        p.lane_out = kout[lane];
        for (std::size_t i = lane; i + 1 < kr; ++i) {
            kext[i] = kext[i + 1];
            kin[i] = kin[i + 1];
            kout[i] = kout[i + 1];
        }
        --kr;
    }
    // Not closed: only looked up with offsets_at, for which rank 0 (no kept axis) is one output.
    for (std::size_t i = 0; i < kr; ++i) p.kept.add_axis(kext[i], {kin[i], kout[i]});
    return p;
}

/// Runs a validated reduction: inline, or with one parallel dispatch, as the work decides.
///
/// Scalar mode reduces each output alone with reduce_tree. Tile mode has two walks that compute
/// the same tree per output: streamed groups (up to a few hundred neighbouring outputs, leaf after
/// leaf, reading each input row of the group in one go) serve the inline path and outputs spread
/// over threads; tiles of W outputs serve outputs whose tree is itself split across threads.
template <class P, class T, class R>
class reduction_runner {
public:
    using A = typename P::acc;
    static constexpr std::size_t W = tile_width<T>;

    explicit reduction_runner(const reduction_plan<T, R>& plan) noexcept
        : p_(plan),
          leaves_((plan.red.count + leaf_size(plan.tile) - 1) / leaf_size(plan.tile)),
          levels_(static_cast<std::size_t>(std::bit_width(leaves_))) {
        if (p_.tile) {
            const std::size_t fit = stream_bytes / ((levels_ + 1) * sizeof(A));
            columns_ = std::max<std::size_t>(1, std::min(fit, p_.lane_extent));
            streams_ = p_.outputs / p_.lane_extent * ((p_.lane_extent + columns_ - 1) / columns_);
        }
    }

    void run(session& s) const {
        if (p_.outputs == 0) return;
        if (p_.tile)
            run_as<true>(s);
        else
            run_as<false>(s);
    }

private:
    struct group {
        const T* in;
        R* out;
        std::size_t width;  // outputs in this group: 1 in scalar mode
    };

    static constexpr std::size_t leaf_size(bool tile) noexcept {
        return tile ? tile_leaf<P> : scalar_leaf<P>;
    }

    // The input and output of position k of the kept axes other than the lane axis.
    group position(std::size_t k) const noexcept {
        const auto [in_off, out_off] = offsets_at(p_.kept, k);
        // An empty reduction never reads its input, whose data may be null: no offset then.
        return {p_.red.count == 0 ? p_.in : p_.in + in_off, p_.out + out_off, 1};
    }

    // Group g of `per_row` groups of `size` lane-axis outputs per position of the other kept axes.
    group columns_at(std::size_t g, std::size_t size) const noexcept {
        const std::size_t per_row = (p_.lane_extent + size - 1) / size;
        const group at = position(g / per_row);
        const std::size_t first = g % per_row * size;
        const auto f = static_cast<std::ptrdiff_t>(first);
        return {p_.red.count == 0 ? at.in : at.in + f * p_.lane_in, at.out + f * p_.lane_out,
                std::min(size, p_.lane_extent - first)};
    }

    template <bool Tile>
    using value_t = std::conditional_t<Tile, lane_values<A, W>, A>;

    template <bool Tile>
    auto leaf_of(const group& g) const noexcept {
        return [this, g](std::size_t b) {
            const std::size_t lo = b * leaf_size(Tile);
            const std::size_t hi = std::min(p_.red.count, lo + leaf_size(Tile));
            if constexpr (Tile)
                return reduce_tile_leaf<P, W>(g.in, p_.lane_in, g.width, p_.red, lo, hi);
            else
                return reduce_leaf<P>(g.in, p_.red, lo, hi);
        };
    }
    template <bool Tile>
    static auto joiner() noexcept {
        return [](const value_t<Tile>& a, const value_t<Tile>& b) {
            if constexpr (Tile) {
                value_t<Tile> r;
                for (std::size_t w = 0; w < W; ++w) r.v[w] = P::join(a.v[w], b.v[w]);
                return r;
            } else {
                return P::join(a, b);
            }
        };
    }

    void write_one(R* out, const T* in, const A& a) const noexcept {
        *out = p_.red.count == 0 ? P::empty() : P::finish(a, p_.red.count, in, p_.red);
    }

    // Scalar mode: output g alone.
    void run_single(std::size_t g) const {
        const group at = position(g);
        if (p_.red.count == 0) return write_one(at.out, at.in, A{});
        write_one(at.out, at.in,
                  reduce_tree_streams<A>(0, leaves_, leaf_of<false>(at), joiner<false>()));
    }

    // Folds `len` rows (stride st, flat indices from `first`) into the partial results `cur` of
    // `width` neighbouring outputs. A few rows at a time per block of W outputs: the input is read
    // as a handful of parallel streams, the block's accumulators stay in registers across those
    // rows, and fixed-width blocks vectorize at -O2 (GCC's default cost model skips loops that
    // would need a scalar epilogue).
    void fold_rows(A* cur, std::size_t width, const T* q, std::size_t len, std::ptrdiff_t st,
                   std::size_t first) const noexcept {
        constexpr std::size_t rows_at_once = 8;
        const std::ptrdiff_t ls = p_.lane_in;
        for (std::size_t i = 0; i < len; i += rows_at_once) {
            const std::size_t rows = std::min(rows_at_once, len - i);
            const T* r = q + static_cast<std::ptrdiff_t>(i) * st;
            const auto j = static_cast<std::int64_t>(first + i);
            for (std::size_t c = 0; c < width; c += W) {
                const std::size_t cols = std::min(W, width - c);
                lane_values<A, W> acc;
                if (cols == W) {
                    for (std::size_t w = 0; w < W; ++w) acc.v[w] = cur[c + w];
                } else {
                    for (std::size_t w = 0; w < cols; ++w) acc.v[w] = cur[c + w];
                }
                acc = fold_tile_run<P, W>(acc, r + static_cast<std::ptrdiff_t>(c) * ls, rows, st, j,
                                          ls, cols);
                if (cols == W) {
                    for (std::size_t w = 0; w < W; ++w) cur[c + w] = acc.v[w];
                } else {
                    for (std::size_t w = 0; w < cols; ++w) cur[c + w] = acc.v[w];
                }
            }
        }
    }

    // Tile mode: streamed group g of up to columns_ outputs. Leaves are folded one by one into a
    // binary counter of per-column partial results (level l holds a perfect subtree of 2^l
    // leaves), which builds exactly the tree reduce_tree builds. The counter lives on the stack.
    void run_streamed(std::size_t g) const {
        const group at = columns_at(g, columns_);
        const std::size_t width = at.width, n = p_.red.count;
        if (n == 0) {
            for (std::size_t c = 0; c < width; ++c)
                at.out[static_cast<std::ptrdiff_t>(c) * p_.lane_out] = P::empty();
            return;
        }
        alignas(64) unsigned char raw[stream_bytes];
        A* const cur = reinterpret_cast<A*>(raw);  // the leaf being folded, then the carry
        A* const levels = cur + width;             // level l at levels + l * width
        for (std::size_t b = 0; b < leaves_; ++b) {
            const std::size_t lo = b * leaf_size(true), hi = std::min(n, lo + leaf_size(true));
            for (std::size_t c = 0; c < width; ++c) std::construct_at(cur + c, P::init());
            auto fold = [this, cur, width](const T* q, std::size_t len, std::ptrdiff_t st,
                                           std::size_t first) {
                fold_rows(cur, width, q, len, st, first);
            };
            if (p_.red.rank == 1) {
                const std::ptrdiff_t st = p_.red.inner_stride(0);
                fold(at.in + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, lo);
            } else {
                for_each_run(p_.red, lo, hi,
                             [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t st,
                                 std::size_t first) { fold(at.in + off, len, st, first); });
            }
            std::size_t l = 0;  // levels 0..l-1 are occupied exactly when b's low bits are set
            for (; (b >> l) & 1u; ++l) {
                const A* level = levels + l * width;
                for (std::size_t c = 0; c < width; ++c) cur[c] = P::join(level[c], cur[c]);
            }
            A* const level = levels + l * width;
            for (std::size_t c = 0; c < width; ++c) std::construct_at(level + c, cur[c]);
        }
        // The occupied levels are the set bits of leaves_; join them right to left.
        const A* right = nullptr;
        for (std::size_t l = 0; l < levels_; ++l) {
            if (((leaves_ >> l) & 1u) == 0) continue;
            A* const level = levels + l * width;
            if (right != nullptr)
                for (std::size_t c = 0; c < width; ++c) level[c] = P::join(level[c], right[c]);
            right = level;
        }
        for (std::size_t c = 0; c < width; ++c) {
            const auto o = static_cast<std::ptrdiff_t>(c);
            at.out[o * p_.lane_out] = P::finish(right[c], n, at.in + o * p_.lane_in, p_.red);
        }
    }

    void run_serial(std::size_t g) const {
        if (p_.tile)
            run_streamed(g);
        else
            run_single(g);
    }

    // One output (scalar mode) or tile of W outputs whose tree is split across the arena.
    template <bool Tile>
    void run_split(std::size_t g, std::size_t leaf_grain, const backend_core& core) const {
        using V = value_t<Tile>;
        static_assert(std::is_trivially_copyable_v<V> && sizeof(V) <= max_tree_value &&
                      alignof(V) <= alignof(std::max_align_t));
        const group at = Tile ? columns_at(g, W) : position(g);
        const auto leaf = leaf_of<Tile>(at);
        const auto join = joiner<Tile>();
        V value{};
        tree_reduce(
            core, leaves_, leaf_grain, &value,
            [&](void* v, std::size_t lo, std::size_t hi) {
                if constexpr (Tile)
                    std::construct_at(static_cast<V*>(v), reduce_tree<V>(lo, hi, leaf, join));
                else
                    std::construct_at(static_cast<V*>(v),
                                      reduce_tree_streams<V>(lo, hi, leaf, join));
            },
            [&](void* left, const void* right) {
                V& l = *static_cast<V*>(left);
                l = join(l, *static_cast<const V*>(right));
            });
        if constexpr (Tile) {
            for (std::size_t w = 0; w < at.width; ++w) {
                const auto o = static_cast<std::ptrdiff_t>(w);
                write_one(at.out + o * p_.lane_out, at.in + o * p_.lane_in, value.v[w]);
            }
        } else {
            write_one(at.out, at.in, value);
        }
    }

    template <bool Tile>
    void run_as(session& s) const {
        backend_core& core = session_access::core(s);
        session_counters& counters = session_access::counters(s);
        const std::size_t n = std::max<std::size_t>(p_.red.count, 1);
        const std::size_t groups = Tile ? streams_ : p_.outputs;
        const std::size_t grain = core.settings().grain;
        if (p_.outputs * n <= grain || !session_access::may_fan_out(s)) {
            ++counters.inline_dispatches;
            for (std::size_t g = 0; g < groups; ++g) run_serial(g);
            return;
        }
        ++counters.parallel_dispatches;
        // Few outputs with much work each: split every output's tree across threads as well.
        const std::size_t tiles =
            Tile ? p_.outputs / p_.lane_extent * ((p_.lane_extent + W - 1) / W) : groups;
        const std::size_t width = Tile ? std::min(W, p_.lane_extent) : 1;
        const auto threads = static_cast<std::size_t>(core.settings().threads);
        if (leaves_ > 1 && tiles < 4 * threads && n * width > grain) {
            const std::size_t leaf_grain =
                std::max<std::size_t>(1, grain / (leaf_size(Tile) * width));
            if (tiles == 1) return run_split<Tile>(0, leaf_grain, core);
            fan_out(core, tiles, 1, [&](std::size_t begin, std::size_t end) {
                for (std::size_t g = begin; g != end; ++g) run_split<Tile>(g, leaf_grain, core);
            });
            return;
        }
        const std::size_t per_group = n * (Tile ? std::min(columns_, p_.lane_extent) : 1);
        const std::size_t group_grain = std::max<std::size_t>(1, grain / per_group);
        fan_out(core, groups, group_grain, [&](std::size_t begin, std::size_t end) {
            for (std::size_t g = begin; g != end; ++g) run_serial(g);
        });
    }

    const reduction_plan<T, R>& p_;
    std::size_t leaves_;
    std::size_t levels_;
    std::size_t columns_ = 1;  // outputs per streamed group
    std::size_t streams_ = 0;  // streamed groups
};

/// Out-parameter form: validates everything, then reduces `in` over `axes` into `out`. `out`
/// has the reduced shape with or without the reduced axes kept as extent-1 axes (the two hold
/// the same elements in the same order); its rank tells which.
template <class P, class T>
void reduce_into(session& s, const char* op, const tensor_view<const T>& in, const axis_list& axes,
                 const tensor_view<typename P::result>& out) {
    check_session(s);
    const std::uint32_t mask = reduction_mask(op, axes, in.rank());
    const bool keep_dims = mask != 0 && out.rank() == in.rank();
    if (!(out.shape() == reduced_shape(in.shape(), mask, keep_dims)))
        throw_out_shape(op, "out", out.shape(), reduced_shape(in.shape(), mask, false),
                        reduced_shape(in.shape(), mask, true));
    check_writable(op, "out", out);
    check_in_place(op, "out", out, operand_name("input", 0), in);
    if constexpr (P::needs_elements) check_nonempty(op, in.shape(), mask);
    const auto plan = plan_reduction(in, mask, keep_dims, out, !P::uses_index);
    reduction_runner<P, T, typename P::result>(plan).run(s);
}

/// Allocating form: the result comes from the session's workspace.
template <class P, class T>
tensor<typename P::result> reduce_new(session& s, const char* op, const tensor_view<const T>& in,
                                      const axis_list& axes, bool keep_dims) {
    using R = typename P::result;
    check_session(s);
    const std::uint32_t mask = reduction_mask(op, axes, in.rank());
    if constexpr (P::needs_elements) check_nonempty(op, in.shape(), mask);
    tensor<R> out = empty<R>(s, reduced_shape(in.shape(), mask, keep_dims));
    const tensor_view<R> o = out;
    const auto plan = plan_reduction(in, mask, keep_dims, o, !P::uses_index);
    reduction_runner<P, T, R>(plan).run(s);
    return out;
}

}  // namespace tessera::detail::reductions

// Every reduction of every element type it accepts is compiled into the library
// (src/reduce_*.cpp): the declarations below stop a user's file from instantiating the engine
// above, which would cost it most of a second of compile time per reduction it calls. The
// entry points are not inline functions, so nothing is instantiated for inlining either.
#define TESSERA_REDUCTION(EXTERN, POLICY, T)                                                      \
    EXTERN template void reduce_into<POLICY<T>, T>(                                               \
        session&, const char*, const tensor_view<const T>&, const axis_list&,                     \
        const tensor_view<typename POLICY<T>::result>&);                                          \
    EXTERN template tensor<typename POLICY<T>::result> reduce_new<POLICY<T>, T>(                  \
        session&, const char*, const tensor_view<const T>&, const axis_list&, bool);
/// The reductions of a numeric type: sum, prod, mean and norm.
#define TESSERA_NUMERIC_REDUCTIONS(EXTERN, T)                                                     \
    TESSERA_REDUCTION(EXTERN, sum_policy, T)                                                      \
    TESSERA_REDUCTION(EXTERN, prod_policy, T)                                                     \
    TESSERA_REDUCTION(EXTERN, mean_policy, T)                                                     \
    TESSERA_REDUCTION(EXTERN, norm_policy, T)
/// The reductions of a real numeric type: those of a numeric type and max, min, argmax, argmin.
#define TESSERA_REAL_REDUCTIONS(EXTERN, T)                                                        \
    TESSERA_NUMERIC_REDUCTIONS(EXTERN, T)                                                         \
    TESSERA_REDUCTION(EXTERN, max_policy, T)                                                      \
    TESSERA_REDUCTION(EXTERN, min_policy, T)                                                      \
    TESSERA_REDUCTION(EXTERN, argmax_policy, T)                                                   \
    TESSERA_REDUCTION(EXTERN, argmin_policy, T)

namespace tessera::detail::reductions {

TESSERA_REAL_REDUCTIONS(extern, float)
TESSERA_REAL_REDUCTIONS(extern, double)
TESSERA_REAL_REDUCTIONS(extern, std::int32_t)
TESSERA_REAL_REDUCTIONS(extern, std::int64_t)
TESSERA_NUMERIC_REDUCTIONS(extern, std::complex<float>)
TESSERA_NUMERIC_REDUCTIONS(extern, std::complex<double>)

}  // namespace tessera::detail::reductions

// Only the library's reduction sources, which define TESSERA_DEFINE_REDUCTIONS, keep the macros.
#ifndef TESSERA_DEFINE_REDUCTIONS
#undef TESSERA_REAL_REDUCTIONS
#undef TESSERA_NUMERIC_REDUCTIONS
#undef TESSERA_REDUCTION
#endif
