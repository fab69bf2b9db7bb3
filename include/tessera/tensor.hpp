// tessera/tensor.hpp - tessera::tensor<T>, an owning, move-only, dense row-major array whose
// storage comes from a session's workspace, and the makers empty/zeros/full.
#pragma once

#include <tessera/session.hpp>
#include <tessera/shape.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace tessera {

namespace detail {
[[noreturn]] void throw_bytes_overflow(const char* op, std::size_t count, std::size_t element_size);
}

/// An owning, move-only, dense row-major tensor.
///
/// Its block is borrowed from the workspace of the session that made it. When the tensor is
/// destroyed the block goes back to that workspace (inside a session of the same backend), to the
/// backend's shared pool (elsewhere), or to the heap (if the backend is gone): a tensor may safely
/// outlive its session and its backend.
template <class T>
class tensor {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                  "tensor<T>: T must be a trivially copyable arithmetic-like type");

public:
    using value_type = T;

    /// Builds a tensor of shape [0] that owns nothing.
    tensor() noexcept = default;
    tensor(tensor&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)),
          shape_(std::exchange(other.shape_, no_elements())) {}
    tensor& operator=(tensor&& other) noexcept {
        if (this != &other) {
            release();
            data_ = std::exchange(other.data_, nullptr);
            shape_ = std::exchange(other.shape_, no_elements());
        }
        return *this;
    }
    tensor(const tensor&) = delete;
    tensor& operator=(const tensor&) = delete;
    ~tensor() { release(); }

    const tessera::shape& shape() const noexcept { return shape_; }
    std::size_t rank() const noexcept { return shape_.rank(); }
    /// Returns the element count (0 for a moved-from or default-built tensor).
    std::size_t size() const noexcept { return shape_.count(); }
    T* data() noexcept { return data_; }
    const T* data() const noexcept { return data_; }
    /// Returns the elements in row-major order; valid while the tensor lives.
    std::span<T> values() noexcept { return {data_, size()}; }
    std::span<const T> values() const noexcept { return {data_, size()}; }

    /// Allocates an uninitialised tensor of `shape` from the session's workspace.
    static tensor uninitialized(session& s, const tessera::shape& shape) {
        detail::session_access::check_thread(s);
        tensor t;
        t.shape_ = shape;
        const std::size_t n = shape.count();
        if (n != 0) {
            if (n > static_cast<std::size_t>(-1) / sizeof(T))
                detail::throw_bytes_overflow("empty", n, sizeof(T));
            t.data_ = static_cast<T*>(detail::session_access::allocate(s, n * sizeof(T)));
        }
        return t;
    }

private:
    void release() noexcept {
        if (data_ != nullptr) detail::release_block(data_);
        data_ = nullptr;
    }

    static constexpr tessera::shape no_elements() noexcept { return tessera::shape::of_length(0); }

    T* data_ = nullptr;
    tessera::shape shape_ = no_elements();
};

/// Returns an uninitialised tensor of `shape`, borrowed from the session's workspace.
template <class T>
tensor<T> empty(session& s, const shape& shape) {
    return tensor<T>::uninitialized(s, shape);
}

/// Returns a tensor of `shape` filled with `value`.
template <class T>
tensor<T> full(session& s, const shape& shape, T value) {
    tensor<T> t = tensor<T>::uninitialized(s, shape);
    std::fill_n(t.data(), t.size(), value);
    return t;
}

/// Returns a tensor of `shape` filled with zeros.
template <class T>
tensor<T> zeros(session& s, const shape& shape) {
    return full<T>(s, shape, T{});
}

}  // namespace tessera
