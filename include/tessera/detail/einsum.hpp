// tessera/detail/einsum.hpp - what einsum keeps inline: the plan a spec and its shapes compile to
// (einsum_program), its look-up (a workspace slot, then the backend's cache, then the planner in
// src/einsum.cpp), the checks of a call, and the declaration of the executor that runs a plan's
// steps as batched matrix products or as strided loops, compiled in the library for the four
// element types (src/einsum_run.cpp). Part of ops/einsum.hpp; it includes neither Eigen nor oneTBB.
#pragma once

#include <tessera/detail/check.hpp>
#include <tessera/detail/elementwise.hpp>
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
#include <type_traits>
#include <vector>

namespace tessera::detail {

/// Labels a spec can use: the 52 letters, then one per broadcast ('...') axis.
inline constexpr std::size_t letter_labels = 52;
/// A step's loop runs over at most the labels of two operands.
inline constexpr std::size_t max_loop_labels = 2 * max_rank;

/// The axes of a rank-8 operand in their own order (a permutation that changes nothing).
inline constexpr std::array<std::uint8_t, max_rank> identity_axes{0, 1, 2, 3, 4, 5, 6, 7};

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
    std::array<std::size_t, max_rank> ext_x{}, ext_y{}, ext_out{};  ///< extents in the orders above
    shape x_matrix, y_matrix, out_matrix;  ///< [batch..., M, K], [batch..., K, N], [batch..., M, N]
    bool x_empty = false, y_empty = false, out_empty = false;
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
    plan_slots::entry& slot = session_access::workspace_of(s).plans->entries[plan_slot_index(key)];
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
[[noreturn]] void throw_einsum_operand_list(std::string_view spec, std::size_t given, std::size_t limit);
[[noreturn]] void throw_einsum_plan_shape(std::string_view spec, std::size_t operand, const shape& expected,
                                          const shape& got);

/// Checks the length of an operand list against what a call's stack arrays hold: 1..Cap operands
/// (Cap is a pack's own size, or max_einsum_operands for a runtime list).
template <std::size_t Cap>
void check_operand_list(std::string_view spec, std::size_t n) {
    if (n == 0 || n > Cap) [[unlikely]]
        throw_einsum_operand_list(spec, n, Cap);
}

/// Checks an out-parameter against a plan's result and every input, before anything is written.
template <class T>
void check_einsum_out(const einsum_program& p, const tensor_view<T>& out, std::span<const tensor_view<const T>> in) {
    if (!(out.shape() == p.result)) throw_einsum_out_shape(p.spec, p.result, out.shape());
    check_writable("einsum", "out", out);
    if (out.size() == 0) return;
    const byte_range o = bytes_of(out);
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i].size() == 0) continue;
        const byte_range r = bytes_of(in[i]);
        if (o.lo < r.hi && r.lo < o.hi) throw_einsum_alias(p.spec, i);
    }
}

/// Runs plan `p` on `in` (shapes already matched to the plan), writing `out` (checked by the
/// caller). Intermediates come from the session's workspace and go back to it as soon as the step
/// that reads them is done; `room` holds their addresses (at least 2 * in.size() - 2 slots, left
/// uninitialized by the caller). Defined in the library (src/einsum_run.cpp) for float, double,
/// complex<float> and complex<double>.
template <class T>
void run_einsum_steps(session& s, const einsum_program& p, std::span<const tensor_view<const T>> in,
                      const tensor_view<T>& out, std::span<void*> room);

/// Runs plan `p` on `in` (1..Cap operands, shapes already matched to the plan), writing `out`
/// (checked by the caller).
template <class T, std::size_t Cap>
void run_einsum(session& s, const einsum_program& p, std::span<const tensor_view<const T>> in,
                const tensor_view<T>& out) {
    TESSERA_ASSERT(in.size() <= Cap && in.size() == p.inputs.size(), "einsum: operand list not checked against the plan");
    // n operands give at most 2n - 1 steps (a sum over an index only one operand has, for each,
    // then n - 1 pairwise steps), so at most 2n - 2 intermediates. Not value-initialized: a
    // runtime list sizes this for max_einsum_operands, and a warm call should not clear 1 KiB it
    // does not use.
    std::array<void*, 2 * Cap> room;
    run_einsum_steps<T>(s, p, in, out, room);
}

}  // namespace tessera::detail
