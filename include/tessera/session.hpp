// tessera/session.hpp - tessera::session, the scope in which ops run.
// A session is opened by backend::run, which enters the backend's arena at most once (see run for
// the nested cases); every op takes the session as its first parameter, borrows buffers from its
// workspace and counts what it did.
#pragma once

#include <tessera/detail/backend_core.hpp>
#include <tessera/detail/check.hpp>
#include <tessera/detail/runtime.hpp>
#include <tessera/detail/thread_state.hpp>

#include <cstddef>
#include <type_traits>

namespace tessera {

namespace detail {
struct session_access;
[[noreturn]] void throw_block_too_large(std::size_t bytes);
}  // namespace detail

/// An open execution scope on one backend, bound to the thread that opened it.
///
/// Sessions are created only by backend::run and live until `fn` returns or throws; they are never
/// copied, moved or shared between threads. Inside a session, ops allocate from a leased workspace
/// without locks and decide per call whether to run inline or fan out on the backend's arena.
///
///     tessera::backend be;
///     be.run([](tessera::session& s) { auto c = tessera::add(s, a, b); });
class session {
public:
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    /// Returns the threads this session's ops may use: the backend's thread count (an attached
    /// backend's is its arena's concurrency), or 1 for a session opened inside another backend's
    /// work (which runs serially on its thread; see backend::run).
    int threads() const noexcept { return serial_ ? 1 : core_->settings().threads; }

    /// Returns true when called from the thread this session belongs to.
    bool on_owner_thread() const noexcept { return owner_ == &detail::this_thread; }

private:
    friend class backend;
    friend struct detail::session_access;

    session(detail::backend_core& core, detail::thread_state& ts, detail::entry_kind kind)
        : prev_(ts.innermost),
          saved_chunk_of_(ts.chunk_of),
          core_(&core),
          ws_(&core.lease(ts)),
          owner_(&ts),
          serial_(kind == detail::entry_kind::nested_serial || core.settings().threads == 1) {
        detail::session_counters& c = ws_->counters;
        ++c.sessions;
        switch (kind) {
            case detail::entry_kind::arena: ++c.arena_entries; break;
            case detail::entry_kind::attached: ++c.attached_entries; break;
            case detail::entry_kind::inline_thread:
            case detail::entry_kind::nested_serial: ++c.inline_entries; break;
            case detail::entry_kind::child: ++c.child_sessions; break;
        }
        ts.innermost = this;
        // A session is a fresh context: a chunk marker from an enclosing parallel op must not leak
        // into it (e.g. a session on another backend opened from inside a chunk).
        ts.chunk_of = nullptr;
    }

    // Runs on every exit path of `run`, so the workspace is handed back and the thread's markers
    // restored even when `fn` throws.
    ~session() {
        owner_->innermost = prev_;
        owner_->chunk_of = saved_chunk_of_;
        core_->give_back(*ws_);
    }

    // The thread's markers to restore at close, first and side by side as in thread_state: the
    // compiler saves and restores the pair with one 16-byte move each way. (Placed elsewhere, it
    // saved them with two stores and restored them with one load across both, which cannot be
    // forwarded from the stores: a one-thread empty session took 18-20 ns instead of 7.5.)
    session* prev_;
    const detail::backend_core* saved_chunk_of_;
    detail::backend_core* core_;
    detail::workspace* ws_;
    detail::thread_state* owner_;
    bool serial_;  // ops run inline on the owner thread: one thread, or not this session's to use
};

namespace detail {

/// The internal face of a session that ops and the backend use.
struct session_access {
    static backend_core& core(session& s) noexcept { return *s.core_; }
    /// True when this session's ops may fan out on the backend's arena: false for a serial
    /// session (a one-thread backend's, or one opened inside another backend's work).
    static bool may_fan_out(const session& s) noexcept { return !s.serial_; }
    static session_counters& counters(session& s) noexcept { return s.ws_->counters; }
    static workspace& workspace_of(session& s) noexcept { return *s.ws_; }
    static bool belongs_to(const session& s, const backend_core& core) noexcept {
        return s.core_ == &core;
    }

    /// Borrows `bytes` (> 0) from the session's workspace; a warm workspace serves it without a
    /// lock or a heap call.
    static void* allocate(session& s, std::size_t bytes) {
        const unsigned size_class = size_class_for(bytes);
        if (size_class == size_class_count) [[unlikely]]
            throw_block_too_large(bytes);
        if (block_header* b = s.ws_->lists.pop(size_class)) {
            ++s.ws_->counters.pool_hits;
            return b->payload();
        }
        return s.core_->refill(size_class, *s.ws_)->payload();
    }

    /// Opens a session of `kind` on the calling thread and calls `fn` in it.
    template <class Fn>
    static std::invoke_result_t<Fn&, session&> open(backend_core& core, entry_kind kind, Fn& fn) {
        session s(core, this_thread, kind);
        return call(fn, s);
    }

    /// Calls `fn` with `s` as std::invoke(fn, s) would, without <functional>: a pointer to a
    /// member of session (`be.run(&tessera::session::threads)`) is applied to s, anything else
    /// is called.
    template <class Fn>
    static std::invoke_result_t<Fn&, session&> call(Fn& fn, session& s) {
        if constexpr (std::is_member_function_pointer_v<Fn>)
            return (s.*fn)();
        else if constexpr (std::is_member_object_pointer_v<Fn>)
            return s.*fn;
        else
            return fn(s);
    }
};

/// Checks, at an op's entry, that `s` is used on the thread that opened it: the one check every
/// op makes before it touches `s`. Always on, since a session's workspace and counters are
/// unsynchronised; a failure goes to the check handler (TESSERA_CHECK).
inline void check_session(const session& s) noexcept {
    TESSERA_CHECK(s.on_owner_thread(),
                  "tessera::session used from a thread other than the one that opened it");
}

/// Returns a block obtained from session_access::allocate. Lock-free when the calling thread is in
/// a session of the block's backend.
inline void release_block(void* payload) noexcept {
    block_header* b = block_header::of(payload);
    session* s = this_thread.innermost;
    if (s != nullptr && session_access::core(*s).id() == b->backend_id) {
        session_access::workspace_of(*s).lists.push(b);
        return;
    }
    release_block_slow(b);
}

}  // namespace detail
}  // namespace tessera
