// tessera/detail/reduce_leaves.hpp - the leaves of the pairwise reduction tree: runs of a strided
// index space folded into interleaved accumulators (one output alone, or a tile of neighbouring
// outputs together), and the tree that joins them. Part of ops/reduce.hpp; the policies they
// fold with are in detail/reduce_policies.hpp, the plan and runner in detail/reduce_runner.hpp.
#pragma once

#include <tessera/detail/iteration.hpp>
#include <tessera/detail/reduce_policies.hpp>
#include <tessera/detail/runtime.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace tessera::detail::reductions {

// ---------------------------------------------------------------------------------------------
// Leaves and the tree

/// Elements per leaf of the pairwise tree when each output is reduced alone (scalar mode), and
/// the interleaved accumulators a leaf uses; a leaf of at most `short_leaf` elements uses one.
/// Exact ops (max, min, arg*) give the same result for any tree, so their leaves are longer: the
/// lane joins at the end of a leaf are scalar and branchy.
template <class P>
inline constexpr std::size_t scalar_leaf = P::exact ? 2048 : 128;
inline constexpr std::size_t scalar_lanes = 8;
inline constexpr std::size_t short_leaf = 16;
/// Elements per leaf (per output) when neighbouring outputs are reduced together (tile mode).
template <class P>
inline constexpr std::size_t tile_leaf = P::exact ? 512 : 64;
/// Outputs a tile reduces together: one 64-byte line of input per reduced element.
template <class T>
inline constexpr std::size_t tile_width = std::clamp<std::size_t>(64 / sizeof(T), 4, 16);
/// Stack bytes a streamed group of tile-mode outputs may use for its per-column tree state.
inline constexpr std::size_t stream_bytes = 32 * 1024;

/// Calls `fn(offset, length, stride, first)` for each run along the innermost axis covering the
/// flat indices [lo, hi) of `sp` in row-major order; `first` is the run's first flat index.
template <class Fn>
void for_each_run(const strided_space& sp, std::size_t lo, std::size_t hi, Fn&& fn) noexcept {
    const std::ptrdiff_t inner_stride = sp.inner_stride(0);
    std::size_t first = lo;
    detail::for_each_run(static_cast<const iteration<1>&>(sp), lo, hi,
                         [&](const std::array<std::ptrdiff_t, 1>& offset, std::size_t length) {
                             fn(offset[0], length, inner_stride, first);
                             first += length;
                         });
}

/// Folds the run q[0], q[st], ... (len elements, the first with flat index j) into `a`. Taking and
/// returning the accumulators by value keeps them in registers.
template <class P, class T>
typename P::acc fold_run(typename P::acc a, const T* q, std::size_t len, std::ptrdiff_t st,
                         std::int64_t j) noexcept {
    for (std::size_t i = 0; i < len; ++i)
        a = P::step(a, q[static_cast<std::ptrdiff_t>(i) * st], j + static_cast<std::int64_t>(i));
    return a;
}

template <class A>
using leaf_lanes = std::array<A, scalar_lanes>;

/// Folds a run into the interleaved accumulators: element i goes to lane i % scalar_lanes.
template <class P, class T>
leaf_lanes<typename P::acc> fold_run_lanes(leaf_lanes<typename P::acc> lanes, const T* q,
                                           std::size_t len, std::ptrdiff_t st,
                                           std::int64_t j) noexcept {
    constexpr std::size_t L = scalar_lanes;
    std::size_t i = 0;
    if (st == 1) {  // the dense case: independent lanes become vector operations
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k)
                lanes[k] = P::step(lanes[k], q[i + k], j + static_cast<std::int64_t>(i + k));
    } else {
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k)
                lanes[k] = P::step(lanes[k], q[static_cast<std::ptrdiff_t>(i + k) * st],
                                   j + static_cast<std::int64_t>(i + k));
    }
    for (std::size_t k = 0; i < len; ++i, ++k)
        lanes[k] = P::step(lanes[k], q[static_cast<std::ptrdiff_t>(i) * st],
                           j + static_cast<std::int64_t>(i));
    return lanes;
}

/// Position lanes of an arg leaf: the same width as T, so values and positions blend together.
template <class T>
using position_t = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;

template <class T>
struct arg_lanes {
    std::array<T, scalar_lanes> value;
    std::array<position_t<T>, scalar_lanes> pos;  // within the leaf; -1: nothing taken yet
};

/// Folds a run into struct-of-arrays arg lanes; `base` is the leaf position of q[0].
template <class P, class T>
arg_lanes<T> fold_arg_run(arg_lanes<T> a, const T* q, std::size_t len, std::ptrdiff_t st,
                          std::size_t base) noexcept {
    using I = position_t<T>;
    constexpr std::size_t L = scalar_lanes;
    std::size_t i = 0;
    auto lane = [&](std::size_t k, T x, std::size_t at) {
        const bool take = P::takes(x, a.value[k]);
        a.value[k] = take ? x : a.value[k];
        a.pos[k] = take ? static_cast<I>(at) : a.pos[k];
    };
    if (st == 1) {
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k) lane(k, q[i + k], base + i + k);
    } else {
        for (; i + L <= len; i += L)
            for (std::size_t k = 0; k < L; ++k)
                lane(k, q[static_cast<std::ptrdiff_t>(i + k) * st], base + i + k);
    }
    for (std::size_t k = 0; i < len; ++i, ++k)
        lane(k, q[static_cast<std::ptrdiff_t>(i) * st], base + i);
    return a;
}

/// An argmax/argmin leaf: lanes in struct-of-arrays form, joined into one (value, index).
template <class P, class T>
typename P::acc reduce_arg_leaf(const T* p, const strided_space& red, std::size_t lo,
                                std::size_t hi) noexcept {
    arg_lanes<T> a;
    a.value.fill(P::init().value);
    a.pos.fill(-1);
    if (red.rank == 1) {
        const std::ptrdiff_t st = red.inner_stride(0);
        a = fold_arg_run<P>(a, p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, 0);
    } else {
        for_each_run(red, lo, hi,
                     [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t s, std::size_t first) {
                         a = fold_arg_run<P>(a, p + off, len, s, first - lo);
                     });
    }
    std::array<typename P::acc, scalar_lanes> r;
    for (std::size_t k = 0; k < scalar_lanes; ++k)
        r[k] = {a.value[k],
                a.pos[k] < 0 ? -1
                             : static_cast<std::int64_t>(lo) + static_cast<std::int64_t>(a.pos[k])};
    return P::join(P::join(P::join(r[0], r[1]), P::join(r[2], r[3])),
                   P::join(P::join(r[4], r[5]), P::join(r[6], r[7])));
}

/// Reduces the flat indices [lo, hi) of `red` from base `p` into one accumulator.
template <class P, class T>
typename P::acc reduce_leaf(const T* p, const strided_space& red, std::size_t lo,
                            std::size_t hi) noexcept {
    using A = typename P::acc;
    if constexpr (P::uses_index)
        if (hi - lo > short_leaf) return reduce_arg_leaf<P>(p, red, lo, hi);
    const bool one_run = red.rank == 1;
    const std::ptrdiff_t st = red.inner_stride(0);
    const auto j = static_cast<std::int64_t>(lo);
    if (hi - lo <= short_leaf) {
        if (one_run)
            return fold_run<P>(P::init(), p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, j);
        A a = P::init();
        for_each_run(red, lo, hi,
                     [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t s, std::size_t first) {
                         a = fold_run<P>(a, p + off, len, s, static_cast<std::int64_t>(first));
                     });
        return a;
    }
    leaf_lanes<A> lanes;
    lanes.fill(P::init());
    if (one_run) {
        lanes = fold_run_lanes<P>(lanes, p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st, j);
    } else {
        for_each_run(red, lo, hi,
                     [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t s, std::size_t first) {
                         lanes = fold_run_lanes<P>(lanes, p + off, len, s,
                                                   static_cast<std::int64_t>(first));
                     });
    }
    return P::join(P::join(P::join(lanes[0], lanes[1]), P::join(lanes[2], lanes[3])),
                   P::join(P::join(lanes[4], lanes[5]), P::join(lanes[6], lanes[7])));
}

/// Accumulators of the W outputs of one tile.
template <class A, std::size_t W>
struct lane_values {
    std::array<A, W> v;
};

/// Folds `len` reduced elements (flat indices from j, stride st) into the accumulators of a tile
/// of `width` outputs, output w at q + w * lane_stride.
template <class P, std::size_t W, class T>
lane_values<typename P::acc, W> fold_tile_run(lane_values<typename P::acc, W> acc, const T* q,
                                              std::size_t len, std::ptrdiff_t st, std::int64_t j,
                                              std::ptrdiff_t lane_stride,
                                              std::size_t width) noexcept {
    if (width == W && lane_stride == 1) {  // a full tile of a row: W contiguous elements
        for (std::size_t i = 0; i < len; ++i) {
            const T* r = q + static_cast<std::ptrdiff_t>(i) * st;
            const std::int64_t ji = j + static_cast<std::int64_t>(i);
            for (std::size_t w = 0; w < W; ++w) acc.v[w] = P::step(acc.v[w], r[w], ji);
        }
    } else {
        for (std::size_t i = 0; i < len; ++i) {
            const T* r = q + static_cast<std::ptrdiff_t>(i) * st;
            const std::int64_t ji = j + static_cast<std::int64_t>(i);
            for (std::size_t w = 0; w < width; ++w)
                acc.v[w] = P::step(acc.v[w], r[static_cast<std::ptrdiff_t>(w) * lane_stride], ji);
        }
    }
    return acc;
}

/// Reduces the flat indices [lo, hi) of `red` for `width` neighbouring outputs at once: output w
/// starts at p + w * lane_stride. Each input row read is one short contiguous run when
/// lane_stride is 1.
template <class P, std::size_t W, class T>
lane_values<typename P::acc, W> reduce_tile_leaf(const T* p, std::ptrdiff_t lane_stride,
                                                 std::size_t width, const strided_space& red,
                                                 std::size_t lo, std::size_t hi) noexcept {
    lane_values<typename P::acc, W> acc;
    acc.v.fill(P::init());
    if (red.rank == 1) {
        const std::ptrdiff_t st = red.inner_stride(0);
        return fold_tile_run<P, W>(acc, p + static_cast<std::ptrdiff_t>(lo) * st, hi - lo, st,
                                   static_cast<std::int64_t>(lo), lane_stride, width);
    }
    for_each_run(red, lo, hi,
                 [&](std::ptrdiff_t off, std::size_t len, std::ptrdiff_t st, std::size_t first) {
                     acc =
                         fold_tile_run<P, W>(acc, p + off, len, st,
                                             static_cast<std::int64_t>(first), lane_stride, width);
                 });
    return acc;
}

/// The pairwise tree over leaves [lo, hi): a leaf alone, else the join of the two parts split by
/// tree_split. Every path below (serial, streamed or parallel) reduces with exactly this tree.
template <class V, class Leaf, class Join>
V reduce_tree(std::size_t lo, std::size_t hi, const Leaf& leaf, const Join& join) {
    if (hi - lo == 1) return leaf(lo);
    const std::size_t mid = lo + tree_split(hi - lo);
    const V left = reduce_tree<V>(lo, mid, leaf, join);
    return join(left, reduce_tree<V>(mid, hi, leaf, join));
}

/// The tree over leaves added one by one, left to right: a binary counter whose level l holds a
/// perfect subtree of 2^l leaves. After n leaves the occupied levels are the set bits of n, and
/// joining them right to left gives exactly reduce_tree's tree over those n leaves.
template <class V>
class leaf_counter {
public:
    template <class Join>
    void add(V value, const Join& join) {
        std::size_t l = 0;
        for (; (count_ >> l) & 1u; ++l) value = join(levels_[l], value);
        levels_[l] = value;
        ++count_;
    }
    /// The tree's value; at least one leaf must have been added.
    template <class Join>
    V result(const Join& join) const {
        std::size_t l = static_cast<std::size_t>(std::countr_zero(count_));
        V right = levels_[l];
        for (++l; l < 64; ++l)
            if ((count_ >> l) & 1u) right = join(levels_[l], right);
        return right;
    }

private:
    std::array<V, 64> levels_{};
    std::uint64_t count_ = 0;
};

/// Leaves below which reduce_tree_streams is reduce_tree: the input of a smaller tree is in the
/// caches, where reading several places at once gains nothing.
inline constexpr std::size_t streamed_tree_leaves = 64;

/// reduce_tree's tree, bit for bit, with its four subtrees two levels down reduced side by side,
/// a leaf of each in turn: one core reading one stream at a time reaches about 3/4 of memcpy's
/// bandwidth on the development machine, four streams all of it (a scalar sum over memory is
/// bound by that bandwidth).
template <class V, class Leaf, class Join>
V reduce_tree_streams(std::size_t lo, std::size_t hi, const Leaf& leaf, const Join& join) {
    if (hi - lo < streamed_tree_leaves) return reduce_tree<V>(lo, hi, leaf, join);
    const std::size_t mid = lo + tree_split(hi - lo);
    // The left half is a power of two of at least 32 leaves. A right half less than half as long
    // would leave two of the four streams idle most of the time: the left half's own quarters
    // then read side by side, and the right half after it (the node is still join(left, right)).
    if (2 * (hi - mid) < mid - lo)
        return join(reduce_tree_streams<V>(lo, mid, leaf, join),
                    reduce_tree_streams<V>(mid, hi, leaf, join));
    // Both halves hold at least two leaves, so the four quarters are nodes of the tree.
    const std::array<std::size_t, 5> at{lo, lo + tree_split(mid - lo), mid,
                                        mid + tree_split(hi - mid), hi};
    std::array<leaf_counter<V>, 4> quarter;
    for (std::size_t i = 0; i < at[1] - at[0]; ++i)  // the first quarter is the longest
        for (std::size_t q = 0; q < 4; ++q)
            if (at[q] + i < at[q + 1]) quarter[q].add(leaf(at[q] + i), join);
    return join(join(quarter[0].result(join), quarter[1].result(join)),
                join(quarter[2].result(join), quarter[3].result(join)));
}

}  // namespace tessera::detail::reductions
