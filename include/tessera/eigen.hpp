// tessera/eigen.hpp - the Eigen bridge: tessera::view_of (an Eigen dense object as a tensor_view,
// no copy), tessera::as_eigen (a rank-1 or rank-2 view as an Eigen::Map, no copy) and
// tessera::from_eigen (a copy into a tensor). The only public header that includes Eigen; it is
// also where Eigen is configured for the library's own sources (src/ includes Eigen through it),
// so that Eigen never starts threads of its own. tessera.hpp does not include this header.
#pragma once

// tessera is not compiled with -fopenmp, but a user's translation unit may be. Eigen parallelises
// its GEMM with OpenMP whenever _OPENMP is defined, and Eigen::setNbThreads(1) does not stop it
// from asking OpenMP on the way; tessera's own arena supplies the parallelism (DESIGN.md section
// 6), so OpenMP in Eigen is compiled out here. Should Eigen already have been included with OpenMP
// on, tessera's products are still sequential per tile: they call Eigen's sequential GEMM kernel
// directly (src/gemm.hpp), never the OpenMP driver around it.
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// GCC 12's AVX-512 intrinsics, which Eigen's kernels use when the build targets AVX-512 (e.g.
// TESSERA_ARCH=native), start from _mm512_undefined_*() and trip a false -Wmaybe-uninitialized
// (GCC bug 105593, fixed in GCC 13). This silences it where <immintrin.h> is first seen here; a
// translation unit that saw it earlier (through oneTBB, say) needs the same pragma up front.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#if !EIGEN_VERSION_AT_LEAST(3, 4, 0)
#error "tessera: Eigen 3.4 or newer is required"
#endif

#include <tessera/detail/copy.hpp>
#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <cstddef>
#include <span>
#include <type_traits>

namespace tessera {

namespace detail {
[[noreturn]] void throw_eigen_rank(const char* op, std::size_t rank, const char* accepted);
[[noreturn]] void throw_eigen_negative_stride(const char* op, std::size_t axis,
                                              std::ptrdiff_t stride);

/// An Eigen dense object whose coefficients sit in memory with strides (Matrix, Array, Map, Ref,
/// Block of those): what view_of accepts.
template <class E>
concept eigen_direct_access =
    std::is_base_of_v<Eigen::DenseBase<std::remove_cvref_t<E>>, std::remove_cvref_t<E>> &&
    (static_cast<unsigned>(std::remove_cvref_t<E>::Flags) & Eigen::DirectAccessBit) != 0;

/// What view_of accepts: an object with direct access that is not a temporary owning matrix or
/// array (its view would dangle at the end of the full expression). Maps, Refs and blocks may be
/// temporaries: they refer to storage that outlives them.
template <class E>
concept eigen_viewable =
    eigen_direct_access<E> &&
    !(std::is_rvalue_reference_v<E&&> && std::remove_cvref_t<E>::IsPlainObjectBase);

template <class T>
using eigen_row_major = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic,
                                      Eigen::RowMajor>;
template <class T>
using eigen_column = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, 1>;

template <class T>
using add_const_if_t = std::conditional_t<std::is_const_v<T>, const eigen_row_major<T>,
                                          eigen_row_major<T>>;

/// The stride of `v` on `axis` for an Eigen map: negative strides are rejected, and any stride
/// on an axis of extent 0 or 1 is as good as another.
template <class T>
std::ptrdiff_t eigen_stride(const char* op, const tensor_view<T>& v, std::size_t axis) {
    if (v.extent(axis) <= 1) return 0;
    if (v.stride(axis) < 0) throw_eigen_negative_stride(op, axis, v.stride(axis));
    return v.stride(axis);
}
}  // namespace detail

/// The Eigen::Map that as_eigen returns for a view of T (const T: a read-only map): a row-major
/// dynamic matrix with run-time outer (row) and inner (column) strides.
template <class T>
using eigen_map = Eigen::Map<detail::add_const_if_t<T>, Eigen::Unaligned,
                             Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;

/// The Eigen::Map that as_eigen_vector returns: a column vector with a run-time inner stride.
template <class T>
using eigen_vector_map =
    Eigen::Map<std::conditional_t<std::is_const_v<T>, const detail::eigen_column<T>,
                                  detail::eigen_column<T>>,
               Eigen::Unaligned, Eigen::InnerStride<Eigen::Dynamic>>;

/// Returns a view of an Eigen dense object's coefficients, without copying: rank 1 for a
/// compile-time vector (VectorXf, RowVectorXd, m.col(j), ...), else rank 2 [rows, cols].
///
/// Row- and column-major storage and any inner and outer strides (Map, Ref, blocks) come out as
/// the view's strides. A const object (or a Map/Ref of const) gives tensor_view<const T>. The
/// view is valid while the object's storage is; a temporary owning matrix does not compile,
/// since its view would dangle.
///
///     Eigen::MatrixXf m(3, 4);                 // column-major
///     tessera::tensor_view<float> v = tessera::view_of(m);   // shape [3,4], strides [1,3]
template <class E>
    requires detail::eigen_viewable<E>
auto view_of(E&& m) {
    using D = std::remove_cvref_t<E>;
    using T = std::remove_pointer_t<decltype(m.data())>;
    static_assert(element<std::remove_const_t<T>>,
                  "tessera::view_of: the Eigen scalar type is not a tessera element type");
    if constexpr (D::IsVectorAtCompileTime) {
        const std::ptrdiff_t strides[1] = {m.innerStride()};
        return tensor_view<T>(m.data(), shape::of_length(static_cast<std::size_t>(m.size())),
                              std::span<const std::ptrdiff_t>(strides, 1));
    } else {
        const std::ptrdiff_t strides[2] = {m.rowStride(), m.colStride()};
        const shape extents{static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
        return tensor_view<T>(m.data(), extents, std::span<const std::ptrdiff_t>(strides, 2));
    }
}

/// Returns an Eigen::Map of a rank-2 view ([rows, cols]) or a rank-1 view (as an [n, 1]
/// column), carrying the view's strides; no copy.
///
/// The map writes through to the viewed elements (read-only for a view of const T) and is valid
/// while they are. Eigen routines on it run on the calling thread. Throws shape_error for rank 0
/// or above 2, and for a negative stride (Eigen maps do not support them; make the view
/// contiguous first with tessera::contiguous).
///
///     auto m = tessera::as_eigen(t.view().transpose());   // Eigen::Map, shape [cols, rows]
///     double total = m.sum();
template <class T>
    requires element<std::remove_const_t<T>>
eigen_map<T> as_eigen(const tensor_view<T>& v) {
    if (v.rank() == 0 || v.rank() > 2) detail::throw_eigen_rank("as_eigen", v.rank(), "1 or 2");
    const std::ptrdiff_t outer = detail::eigen_stride("as_eigen", v, 0);
    const std::ptrdiff_t inner = v.rank() == 2 ? detail::eigen_stride("as_eigen", v, 1) : 1;
    const auto rows = static_cast<Eigen::Index>(v.extent(0));
    const auto cols = static_cast<Eigen::Index>(v.rank() == 2 ? v.extent(1) : 1);
    return eigen_map<T>(v.data(), rows, cols,
                        Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(outer, inner));
}
/// Returns a writable Eigen::Map of a rank-1 ([n, 1]) or rank-2 tensor; no copy. Valid while the
/// tensor lives and is not moved from. Throws shape_error for rank 0 or above 2.
template <element T>
eigen_map<T> as_eigen(tensor<T>& t) {
    return as_eigen(t.view());
}
/// Returns a read-only Eigen::Map of a rank-1 ([n, 1]) or rank-2 tensor; no copy. Valid while
/// the tensor lives and is not moved from. Throws shape_error for rank 0 or above 2.
template <element T>
eigen_map<const T> as_eigen(const tensor<T>& t) {
    return as_eigen(t.view());
}
/// Deleted: a map of a temporary tensor would dangle; name the tensor first.
template <element T>
void as_eigen(tensor<T>&&) = delete;

/// Returns an Eigen column-vector Map of a rank-1 view, carrying its stride; no copy. Throws
/// shape_error for another rank or a negative stride, as as_eigen does.
template <class T>
    requires element<std::remove_const_t<T>>
eigen_vector_map<T> as_eigen_vector(const tensor_view<T>& v) {
    if (v.rank() != 1) detail::throw_eigen_rank("as_eigen_vector", v.rank(), "1");
    const std::ptrdiff_t inner = detail::eigen_stride("as_eigen_vector", v, 0);
    return eigen_vector_map<T>(v.data(), static_cast<Eigen::Index>(v.extent(0)),
                               Eigen::InnerStride<Eigen::Dynamic>(inner));
}
/// Returns a writable Eigen column-vector Map of a rank-1 tensor; no copy. Valid while the tensor
/// lives and is not moved from. Throws shape_error for another rank.
template <element T>
eigen_vector_map<T> as_eigen_vector(tensor<T>& t) {
    return as_eigen_vector(t.view());
}
/// Returns a read-only Eigen column-vector Map of a rank-1 tensor; no copy. Valid while the tensor
/// lives and is not moved from. Throws shape_error for another rank.
template <element T>
eigen_vector_map<const T> as_eigen_vector(const tensor<T>& t) {
    return as_eigen_vector(t.view());
}
/// Deleted: a map of a temporary tensor would dangle; name the tensor first.
template <element T>
void as_eigen_vector(tensor<T>&&) = delete;

/// Returns a tensor holding a copy of an Eigen dense object or expression: shape [n] for a
/// compile-time vector, else [rows, cols].
///
/// Objects with direct access (Matrix, Map, Ref, blocks) are copied as tessera::contiguous copies
/// (the same copy engine), in parallel when large; other expressions (products, sums, ...) are
/// evaluated by Eigen on the calling thread straight into the result. The result comes from the
/// session's workspace.
template <class Derived, class T = std::remove_const_t<typename Derived::Scalar>>
    requires element<T>
tensor<T> from_eigen(session& s, const Eigen::DenseBase<Derived>& m) {
    if constexpr (detail::eigen_direct_access<Derived>) {
        const tensor_view<const T> src = view_of(m.derived());
        tensor<T> out = empty<T>(s, src.shape());  // checks the session's thread
        detail::copy_unchecked(s, out.view(), src);
        return out;
    } else {
        const auto rows = static_cast<std::size_t>(m.rows());
        const auto cols = static_cast<std::size_t>(m.cols());
        tensor<T> out = empty<T>(
            s, Derived::IsVectorAtCompileTime ? shape::of_length(rows * cols) : shape{rows, cols});
        // Evaluate in Matrix form (an Array expression is wrapped) into a map of the result's
        // storage, which is fresh, so nothing can alias it.
        auto value = [&]() -> decltype(auto) {
            if constexpr (std::is_base_of_v<Eigen::ArrayBase<Derived>, Derived>)
                return m.derived().matrix();
            else
                return m.derived();
        };
        if constexpr (Derived::IsVectorAtCompileTime && Derived::ColsAtCompileTime == 1) {
            Eigen::Map<detail::eigen_column<T>> to(out.data(), m.rows());
            to.noalias() = value();
        } else if constexpr (Derived::IsVectorAtCompileTime) {
            Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>> to(out.data(), m.cols());
            to.noalias() = value();
        } else {
            Eigen::Map<detail::eigen_row_major<T>> to(out.data(), m.rows(), m.cols());
            to.noalias() = value();
        }
        return out;
    }
}

}  // namespace tessera
