// tessera/detail/pool.hpp - aligned blocks, size classes and the intrusive free lists that the
// workspaces and the backend's shared pool are made of. No locking here: callers own the lists.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

namespace tessera::detail {

inline constexpr std::size_t block_alignment = 64;
// Classes are powers of two of the payload size: 64 B (class 6) up to 2^47 B. A request above the
// largest class is an allocation_error, not a wrap-around.
inline constexpr unsigned min_size_class = 6;
inline constexpr unsigned max_size_class = 47;
inline constexpr unsigned size_class_count = max_size_class + 1;

/// Sits in the 64 bytes before every block's payload, so a payload pointer is all a tensor keeps.
struct alignas(block_alignment) block_header {
    block_header* next = nullptr;  // free-list link while the block is free
    std::uint64_t backend_id = 0;  // owning backend; 0 means "unpooled": straight back to the heap
    std::uint32_t size_class = 0;

    void* payload() noexcept { return this + 1; }
    static block_header* of(void* payload) noexcept { return static_cast<block_header*>(payload) - 1; }
    std::size_t payload_bytes() const noexcept { return std::size_t{1} << size_class; }
};
static_assert(sizeof(block_header) == block_alignment);

/// Returns the size class that holds `bytes`, or size_class_count if no class can.
constexpr unsigned size_class_for(std::size_t bytes) noexcept {
    if (bytes <= (std::size_t{1} << min_size_class)) return min_size_class;
    const auto c = static_cast<unsigned>(std::bit_width(bytes - 1));
    return c <= max_size_class ? c : size_class_count;
}

/// Per-size-class singly linked free lists; whoever holds them may use them without locks.
struct free_lists {
    block_header* head[size_class_count] = {};
    std::size_t retained_bytes = 0;

    block_header* pop(unsigned size_class) noexcept {
        block_header* b = head[size_class];
        if (b != nullptr) {
            head[size_class] = b->next;
            retained_bytes -= b->payload_bytes();
        }
        return b;
    }
    void push(block_header* b) noexcept {
        b->next = head[b->size_class];
        head[b->size_class] = b;
        retained_bytes += b->payload_bytes();
    }
};

/// Fault-injection hook for tests: after `n` more heap allocations of pool blocks, every further
/// one throws std::bad_alloc, process-wide, until the hook is reset with `no_injected_failure`.
inline constexpr std::size_t no_injected_failure = static_cast<std::size_t>(-1);
void fail_block_allocations_after(std::size_t n) noexcept;

/// Allocates a fresh block of `size_class` from the heap (throws std::bad_alloc).
block_header* heap_allocate_block(unsigned size_class, std::uint64_t backend_id);
/// Gives a block back to the heap.
void heap_free_block(block_header* b) noexcept;
/// Frees every block in `lists` to the heap and returns the bytes released.
std::size_t free_all(free_lists& lists) noexcept;
/// Frees blocks from `lists` to the heap, largest first, until at least `wanted` bytes are freed
/// or the lists are empty; returns the bytes released and adds the blocks freed to `blocks`.
class counter;  // detail/counters.hpp
std::size_t free_largest(free_lists& lists, std::size_t wanted, counter& blocks) noexcept;

}  // namespace tessera::detail
