// tessera/detail/elementwise.hpp - the engine under every elementwise op: NumPy broadcasting,
// validation (shapes, aliasing) before any write, axis collapsing so that dense operands run as
// one flat loop, and the inline-or-parallel decision.
#pragma once

#include <tessera/detail/iteration.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/detail/validate.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

namespace tessera::detail {

/// Relative cost per element of an op family, multiplied with the element count before comparing
/// with the backend's grain: a transcendental element costs about as much as 8 additions.
enum class cost : unsigned { cheap = 1, transcendental = 8 };

/// The chunk size, in elements, for an op of cost `c`: the backend's grain is in work units.
inline std::size_t grain_for(session& s, cost c) noexcept {
    const std::size_t g = session_access::core(s).settings().grain / static_cast<std::size_t>(c);
    return g == 0 ? 1 : g;
}

template <class Out, class F, class Ptrs, std::size_t... I>
inline void dense_run(Out* out, const Ptrs& in, std::size_t begin, std::size_t end, F& f,
                      std::index_sequence<I...>) {
    for (std::size_t i = begin; i < end; ++i) out[i] = f(std::get<I>(in)[i]...);
}

template <class Out, class F, class Ptrs, std::size_t... I>
inline void strided_run(Out* out, std::ptrdiff_t out_stride, const Ptrs& in,
                        const std::ptrdiff_t* in_strides, std::size_t n, F& f,
                        std::index_sequence<I...>) {
    for (std::size_t j = 0; j < n; ++j) {
        const auto i = static_cast<std::ptrdiff_t>(j);
        out[i * out_stride] = f(std::get<I>(in)[i * in_strides[I]]...);
    }
}

/// Runs `f` over already validated operands, each broadcast to `out`'s shape.
template <class Out, class F, class... In>
void run_elementwise(session& s, cost c, F& f, const tensor_view<Out>& out,
                     const tensor_view<const In>&... in) {
    constexpr std::size_t n_in = sizeof...(In);
    constexpr auto seq = std::make_index_sequence<n_in>{};
    const std::size_t count = out.size();
    if (count == 0) return;
    const iteration<1 + n_in> it =
        collapse<1 + n_in>(out.shape(), {&out.stride_values(), &in.stride_values()...});
    Out* const o = out.data();
    const std::tuple<const In*...> ptrs{in.data()...};
    const std::size_t grain = grain_for(s, c);

    bool dense = it.rank == 1;
    for (std::size_t k = 0; k <= n_in && dense; ++k) dense = it.strides[k][0] == 1;
    if (dense) {
        parallel_range(s, count, grain, [&](std::size_t begin, std::size_t end) {
            dense_run(o, ptrs, begin, end, f, seq);
        });
        return;
    }
    std::array<std::ptrdiff_t, n_in + 1> inner{};
    for (std::size_t k = 0; k <= n_in; ++k) inner[k] = it.inner_stride(k);
    const auto run = [&](const std::array<std::ptrdiff_t, n_in + 1>& offset, std::size_t length) {
        auto shifted = [&]<std::size_t... I>(std::index_sequence<I...>) {
            return std::tuple<const In*...>{std::get<I>(ptrs) + offset[I + 1]...};
        }(seq);
        strided_run(o + offset[0], inner[0], shifted, inner.data() + 1, length, f, seq);
    };
    parallel_range(s, count, grain, [&](std::size_t begin, std::size_t end) {
        for_each_run(it, begin, end, run);
    });
}

/// True when every operand has `out`'s shape and all are dense row-major: the common case, run
/// as one flat loop without building a broadcast iteration (measured: ~5 ns instead of ~35 ns of
/// per-op overhead for an 8-element add).
template <class Out, class... In>
bool all_dense_same_shape(const tensor_view<Out>& out, const tensor_view<const In>&... in) noexcept {
    return ((in.shape() == out.shape()) && ...) && out.is_contiguous() && (in.is_contiguous() && ...);
}

/// Dense operands of equal size overlap only if they are the very same elements.
template <class O, class I>
void check_dense_overlap(const char* op, const O* out, const I* in, std::size_t n,
                         std::size_t index) {
    const auto o = reinterpret_cast<std::uintptr_t>(out);
    const auto i = reinterpret_cast<std::uintptr_t>(in);
    const bool same = o == i && sizeof(O) == sizeof(I);
    if (!same && o < i + n * sizeof(I) && i < o + n * sizeof(O)) [[unlikely]]
        throw_overlap(op, "out", operand_name("input", index), true);
}

template <class Out, class F, class... In>
void run_dense(session& s, cost c, F& f, Out* out, std::size_t n, const In*... in) {
    const std::tuple<const In*...> ptrs{in...};
    parallel_range(s, n, grain_for(s, c), [&](std::size_t begin, std::size_t end) {
        dense_run(out, ptrs, begin, end, f, std::make_index_sequence<sizeof...(In)>{});
    });
}

/// Out-parameter form: validates every operand against `out` before writing anything, then runs.
template <class Out, class F, class... In>
void elementwise_into(session& s, const char* op, cost c, F f, const tensor_view<Out>& out,
                      const tensor_view<const In>&... in) {
    check_session(s);
    std::size_t index = 0;
    if (all_dense_same_shape(out, in...)) {
        (check_dense_overlap(op, out.data(), in.data(), out.size(), index++), ...);
        if (out.size() != 0) run_dense(s, c, f, out.data(), out.size(), in.data()...);
        return;
    }
    if constexpr (sizeof...(In) > 0) {
        const shape result = broadcast_all(op, in.shape()...);
        if (!(out.shape() == result)) throw_out_shape(op, "out", out.shape(), result);
    }
    check_writable(op, "out", out);
    (check_in_place(op, "out", out, operand_name("input", index++), in), ...);
    run_elementwise(s, c, f, out, broadcast_unchecked(in, out.shape())...);
}

/// Allocating form: the result has the broadcast shape of the inputs.
template <class R, class F, class... In>
tensor<R> elementwise_new(session& s, const char* op, cost c, F f,
                          const tensor_view<const In>&... in) {
    check_session(s);
    const shape result = broadcast_all(op, in.shape()...);
    tensor<R> out = empty<R>(s, result);
    if (((in.shape() == result && in.is_contiguous()) && ...)) {
        if (out.size() != 0) run_dense(s, c, f, out.data(), out.size(), in.data()...);
        return out;
    }
    const tensor_view<R> o = out;
    run_elementwise(s, c, f, o, broadcast_unchecked(in, result)...);
    return out;
}

}  // namespace tessera::detail
