// tessera/ops/elementwise.hpp - elementwise ops. Each op has an allocating form that returns a new
// tensor from the session's workspace and an out-parameter form that writes into a caller's tensor
// and never allocates.
#pragma once

#include <tessera/detail/parallel.hpp>
#include <tessera/session.hpp>
#include <tessera/tensor.hpp>

#include <cstddef>

namespace tessera {

namespace detail {
[[noreturn]] void throw_shape_mismatch(const char* op, const shape& a, const shape& b);
[[noreturn]] void throw_out_shape(const char* op, const shape& out, const shape& expected);

template <class T, class Fn>
void binary_elementwise(session& s, const T* a, const T* b, T* out, std::size_t n, Fn fn) {
    parallel_range(s, n, session_access::core(s).settings().elementwise_grain,
                 [=](std::size_t begin, std::size_t end) {
                     for (std::size_t i = begin; i < end; ++i) out[i] = fn(a[i], b[i]);
                 });
}
}  // namespace detail

/// Writes `a + b` into `out`. Shapes must match exactly (broadcasting comes with the full op set);
/// `out` may be `a` or `b` itself (in place). Never allocates. Throws shape_error before writing.
template <class T>
void add(session& s, const tensor<T>& a, const tensor<T>& b, tensor<T>& out) {
    detail::session_access::check_thread(s);
    if (!(a.shape() == b.shape())) detail::throw_shape_mismatch("add", a.shape(), b.shape());
    if (!(out.shape() == a.shape())) detail::throw_out_shape("add", out.shape(), a.shape());
    detail::binary_elementwise(s, a.data(), b.data(), out.data(), a.size(),
                               [](T x, T y) { return x + y; });
}

/// Returns `a + b` in a new tensor from the session's workspace. Throws shape_error.
template <class T>
tensor<T> add(session& s, const tensor<T>& a, const tensor<T>& b) {
    detail::session_access::check_thread(s);
    if (!(a.shape() == b.shape())) detail::throw_shape_mismatch("add", a.shape(), b.shape());
    tensor<T> out = empty<T>(s, a.shape());
    detail::binary_elementwise(s, a.data(), b.data(), out.data(), a.size(),
                               [](T x, T y) { return x + y; });
    return out;
}

}  // namespace tessera
