// tessera/detail/product_slots.hpp - the small products a workspace remembers: for a few shapes,
// the kernel that the last single product of its entry resolved to (src/matmul_engine.hpp), so
// that the next one of the same shape, strides and form calls it without choosing the path and
// planning again (detail/matmul.hpp). Part of ops/matmul.hpp.
#pragma once

#include <tessera/detail/small_matmul.hpp>

#include <array>
#include <cstddef>

namespace tessera::detail {

/// What a single small product's kernel depends on: the shape, the six strides and whether alpha
/// and beta are plain (not accumulating, or 1 and 0). The empty key (m = -1) matches nothing.
struct product_key {
    std::ptrdiff_t m = -1, n = 0, k = 0, a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0, c_rs = 0, c_cs = 0;
    bool plain = false;
};

/// Whether two keys are equal: one branch, not one per field (a warm call's whole look-up).
[[gnu::always_inline]] inline bool same_key(const product_key& a, const product_key& b) noexcept {
    const std::ptrdiff_t fields = (a.m ^ b.m) | (a.n ^ b.n) | (a.k ^ b.k) | (a.a_rs ^ b.a_rs) |
                                  (a.a_cs ^ b.a_cs) | (a.b_rs ^ b.b_rs) | (a.b_cs ^ b.b_cs) |
                                  (a.c_rs ^ b.c_rs) | (a.c_cs ^ b.c_cs);
    return (fields | static_cast<std::ptrdiff_t>(a.plain != b.plain)) == 0;
}

/// A remembered product: its key and its kernel, a fixed-size one or (`fixed` null) the
/// register-blocked kernel's plan.
template <class T>
struct product_slot {
    product_key key;
    small_batch_fn<T> fixed = nullptr;
    small_gemm_plan<T> gemm;
};

/// The products a workspace remembers, looked up without a lock by the one session that leases
/// it; direct-mapped on the shape, for each real element type, so that a warm call compares one
/// entry. Products of a few shapes in turn mostly keep theirs; two shapes that share an entry
/// (8x8x8, 16x16x16 and 32x32x32 do), or one shape in two layouts, take turns in it and plan again
/// on each turn. Cache-line aligned: the workspaces' slots sit side by side.
struct alignas(64) product_slots {
    static constexpr std::size_t count = 8;
    std::array<product_slot<float>, count> floats;
    std::array<product_slot<double>, count> doubles;

    template <class T>
    product_slot<T>& slot(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k) noexcept {
        // Unsigned: an empty product's extents may be anything (overflow wraps, harmlessly).
        const auto i = (static_cast<std::size_t>(m) * 7 + static_cast<std::size_t>(n) * 3 +
                        static_cast<std::size_t>(k)) &
                       (count - 1);
        if constexpr (sizeof(T) == sizeof(float))
            return floats[i];
        else
            return doubles[i];
    }
};

}  // namespace tessera::detail
