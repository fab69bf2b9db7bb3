// Heap blocks, the backend registry and the slow release path of the buffer pool.
#include "registry.hpp"

#include <tessera/detail/counters.hpp>
#include <tessera/detail/pool.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

namespace tessera::detail {
namespace {

struct registry {
    std::mutex mutex;
    std::vector<backend_core*> live;
};

// Never destroyed: tensors may be freed during static destruction, after any registry object
// with a destructor would be gone.
registry& the_registry() {
    static registry* r = new registry;
    return *r;
}

std::atomic<std::size_t> allocations_before_failure{no_injected_failure};

// Cold path only (a pool miss already pays for a heap call): one relaxed load when off.
void consume_injected_failure_budget() {
    std::size_t left = allocations_before_failure.load(std::memory_order_relaxed);
    while (left != no_injected_failure) {
        if (left == 0) throw std::bad_alloc();
        if (allocations_before_failure.compare_exchange_weak(left, left - 1,
                                                             std::memory_order_relaxed))
            return;
    }
}

}  // namespace

void fail_block_allocations_after(std::size_t n) noexcept {
    allocations_before_failure.store(n, std::memory_order_relaxed);
}

block_header* heap_allocate_block(unsigned size_class, std::uint64_t backend_id) {
    consume_injected_failure_budget();
    void* raw = ::operator new(sizeof(block_header) + (std::size_t{1} << size_class),
                               std::align_val_t{block_alignment});
    auto* b = new (raw) block_header;
    b->backend_id = backend_id;
    b->size_class = size_class;
    return b;
}

void heap_free_block(block_header* b) noexcept {
    ::operator delete(static_cast<void*>(b), std::align_val_t{block_alignment});
}

std::size_t free_all(free_lists& lists) noexcept {
    std::size_t freed = 0;
    for (block_header*& head : lists.head) {
        while (head != nullptr) {
            block_header* next = head->next;
            freed += head->payload_bytes();
            heap_free_block(head);
            head = next;
        }
    }
    lists.retained_bytes = 0;
    return freed;
}

std::size_t free_largest(free_lists& lists, std::size_t wanted, counter& blocks) noexcept {
    std::size_t freed = 0;
    for (unsigned c = max_size_class + 1; c-- > min_size_class && freed < wanted;) {
        while (freed < wanted) {
            block_header* b = lists.pop(c);
            if (b == nullptr) break;
            freed += b->payload_bytes();
            ++blocks;
            heap_free_block(b);
        }
    }
    return freed;
}

std::uint64_t next_backend_id() noexcept {
    // Never reused, so a block of a destroyed backend can never be mistaken for a live one's.
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

void register_backend(backend_core* core) {
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    r.live.push_back(core);
}

void unregister_backend(backend_core* core) noexcept {
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    std::erase(r.live, core);
}

void release_block_slow(block_header* b) noexcept {
    if (b->backend_id != 0) {
        registry& r = the_registry();
        // Held while the block is handed over, so the backend cannot be torn down in between.
        std::lock_guard lock(r.mutex);
        auto it = std::find_if(r.live.begin(), r.live.end(),
                               [&](backend_core* c) { return c->id() == b->backend_id; });
        if (it != r.live.end()) {
            (*it)->take_back(b);
            return;
        }
    }
    heap_free_block(b);
}

}  // namespace tessera::detail
