// fork_join.hpp (private to the compiled runtime) - tells ThreadSanitizer about the ordering
// oneTBB guarantees when tessera hands work to it. oneTBB's scheduler lives in libtbb, which is not
// built with TSan, so TSan cannot see that a task runs after it was spawned or that parallel_for
// returns after its chunks: every chunk's read of the caller's data would look like a race. Each
// place that hands work to oneTBB (runtime.cpp: parallel_for, parallel_invoke,
// task_arena::execute) annotates the two edges oneTBB documents, and nothing more:
//   fork: what the caller did before handing the work over happens before every piece of it;
//   join: every piece happens before what the caller does after the hand-over returns.
// Pieces are not ordered with each other, so a race between two chunks is still reported. What
// these edges cannot cover is oneTBB's own bookkeeping after the fork (the copies of the function
// object it puts into its tasks, its task and wait objects); tests/tsan.supp suppresses exactly
// those, each with its reason. One kind of that bookkeeping a suppression cannot be relied on for:
// oneTBB keeps some task and wait objects on the caller's stack, and a thread that ran a piece
// reads them after the piece ends, then releases oneTBB's wait object. When the caller's later
// frames reuse that memory, TSan compares the new access with the old read, and if the other
// thread's history has been overwritten by then (a long run) it cannot show that stack, so no
// suppression matches it. The join therefore also acquires the synchronisation points in the
// stack just below the caller's frame pointer (tsan_acquire_stack_below): the wait object's
// release is among them, as oneTBB's own wait acquires it. Without -fsanitize=thread everything
// here is empty and inline: no cost.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define TESSERA_TSAN_ANNOTATIONS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TESSERA_TSAN_ANNOTATIONS 1
#endif
#endif

#if defined(TESSERA_TSAN_ANNOTATIONS)
#include <pthread.h>
#include <sanitizer/tsan_interface.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#endif

namespace tessera::detail {

#if defined(TESSERA_TSAN_ANNOTATIONS)
inline void tsan_release(void* point) noexcept { __tsan_release(point); }
inline void tsan_acquire(void* point) noexcept { __tsan_acquire(point); }

/// The lowest address of the calling thread's stack.
inline std::uintptr_t stack_low() noexcept {
    thread_local const std::uintptr_t low = [] {
        pthread_attr_t attr;
        void* base = nullptr;
        std::size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            pthread_attr_getstack(&attr, &base, &size);
            pthread_attr_destroy(&attr);
        }
        return reinterpret_cast<std::uintptr_t>(base);
    }();
    return low;
}

/// Acquires every synchronisation point at an 8-byte-aligned address (oneTBB's wait objects are
/// 64-bit atomics) in the 8 KiB of stack below `frame`, the frame of the code that made a oneTBB
/// call which has returned: the call's task and wait objects lie there, in the caller's own frame
/// where the compiler inlined oneTBB's code, else in the dead frames just below it. A thread that
/// ran a piece reads those objects after the piece ends, then releases oneTBB's wait object;
/// acquiring it orders those reads before the caller's later use of the memory, as oneTBB's own
/// wait does.
inline void tsan_acquire_stack_below(const void* frame) noexcept {
    constexpr std::uintptr_t span = 8 * 1024;
    const auto top = reinterpret_cast<std::uintptr_t>(frame) & ~std::uintptr_t{7};
    const std::uintptr_t low = std::max(stack_low(), top - span) & ~std::uintptr_t{7};
    for (std::uintptr_t a = low; a < top; a += 8) __tsan_acquire(reinterpret_cast<void*>(a));
}
#else
inline void tsan_release(void*) noexcept {}
inline void tsan_acquire(void*) noexcept {}
#endif

/// The edges of one hand-over. The caller makes a fork_join, then the function object it hands
/// over, calls fork() last, and keeps the fork_join in scope until the oneTBB call returns or
/// throws (its destructor is the join); every piece of the work runs inside a fork_join::piece.
class fork_join {
public:
    fork_join() noexcept = default;
    // Inlined into the code that made the oneTBB call, whose frame it names.
    [[gnu::always_inline]] ~fork_join() {
        tsan_acquire(&join_);
#if defined(TESSERA_TSAN_ANNOTATIONS)
        tsan_acquire_stack_below(__builtin_frame_address(0));
#endif
    }
    /// The fork edge: everything this thread did so far happens before every piece.
    void fork() noexcept { tsan_release(&fork_); }
    fork_join(const fork_join&) = delete;
    fork_join& operator=(const fork_join&) = delete;

    /// One piece of the work: acquires the fork edge on entry, releases the join edge on exit
    /// (also when the piece throws).
    class piece {
    public:
        explicit piece(fork_join& f) noexcept : f_(f) { tsan_acquire(&f_.fork_); }
        ~piece() { tsan_release(&f_.join_); }
        piece(const piece&) = delete;
        piece& operator=(const piece&) = delete;

    private:
        fork_join& f_;
    };

private:
    // Only their addresses matter: they name the two synchronisation points for TSan.
    char fork_ = 0;
    char join_ = 0;
};

}  // namespace tessera::detail
