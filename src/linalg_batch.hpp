// src/linalg_batch.hpp - what the batched linear algebra ops (tessera/ops/linalg.hpp) share: the
// batch walk (a kernel per chunk, called per item with the operands' offsets from the cursor of
// detail/iteration.hpp, or a block kernel of src/linalg_lanes.hpp per W or 2 W items of a run),
// failure reporting, size classes, and the moves of one matrix between a strided operand and an
// Eigen matrix. Private to the library: each src/linalg_*.cpp holds the
// kernels and op bodies of one family beside their instantiation for the four element types, so
// that the Eigen decompositions compile once, in parallel, and never in a user's translation
// unit. Includes Eigen's core only; each family includes its decomposition.
#pragma once

// eigen.hpp configures Eigen, so it comes before anything that may include Eigen.
#include <tessera/eigen.hpp>
#include <tessera/detail/iteration.hpp>
#include <tessera/detail/parallel.hpp>
#include <tessera/ops/linalg.hpp>

#include "linalg_lanes.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>

namespace tessera::detail {

// Only touched when an item fails, so a plain mutex is fine.
struct failure_log {
    std::mutex mutex;
    std::size_t item = static_cast<std::size_t>(-1);
    int info = 0;
    void record(std::size_t i, int code) {
        std::lock_guard<std::mutex> lock(mutex);
        if (i < item) {
            item = i;
            info = code;
        }
    }
};

/// Work units (the backend's grain is in float additions) of one item: a per-item overhead of
/// ~64 (index walk, copies in and out) plus `per_n3` units per n^3. An n x n LU is ~n^3 units.
inline std::size_t item_work(std::size_t n, double per_n3, double extra = 0) noexcept {
    const double nd = static_cast<double>(n);
    const double w = 64.0 + per_n3 * nd * nd * nd + extra;
    return w > 1e18 ? static_cast<std::size_t>(1e18) : static_cast<std::size_t>(w);
}

// A per-item kernel is built once per chunk (owning the chunk's scratch) and called once per item
// with the operands' element offsets, in the order of its params; it returns 0 or a failure code,
// and fail() NaN-fills the item's outputs for the info form.

/// Runs the per-item kernel on one item and counts its code as Mode says: the info form writes it
/// (and calls fail() for a failed item), raise records the failure. Returns false to stop the
/// chunk (a failure under raise).
template <on_failure Mode, std::size_t K, class Kernel>
bool run_item(Kernel& kernel, std::size_t item, const std::array<std::ptrdiff_t, K>& off,
              std::int32_t* info, failure_log& failures) {
    // One kernel instantiation serves both modes: offsets go in as a pointer, not as an array
    // whose length (info or not) would be part of the kernel's type.
    const int code = kernel(off.data());
    if constexpr (Mode == on_failure::info) {
        info[off[K - 1]] = code;
        if (code != 0) kernel.fail(off.data());
    } else if constexpr (Mode == on_failure::raise) {
        if (code != 0) {
            failures.record(item, code);
            return false;
        }
    }
    return true;
}

/// Runs one chunk [begin, end) of the batch with a kernel from `make()` (it owns the chunk's
/// scratch), called once per item with the operands' offsets.
///
/// Out of line on purpose: each kernel is instantiated for one call site, and GCC inlines such
/// functions whatever their size, so without this a caller using several ops got every Eigen
/// decomposition of every size class inlined into one function (over 10 GB to compile a test).
template <on_failure Mode, std::size_t K, class Make>
[[gnu::noinline]] void run_chunk(const iteration<K>& it, std::size_t begin, std::size_t end,
                                 std::int32_t* info, failure_log& failures, const Make& make) {
    auto kernel = make();
    for_each_item(it, begin, end, [&](std::size_t item, const std::array<std::ptrdiff_t, K>& off) {
        return run_item<Mode>(kernel, item, off, info, failures);
    });
}

/// Runs one chunk [begin, end) of the batch through the block kernel `fn`, `lanes` items at a
/// time, one run of the innermost batch axis after another (operands in `proto`); each item a
/// block hands back is redone by the per-item kernel from `make()`, whose code then counts as in
/// run_chunk. Out of line as run_chunk.
template <on_failure Mode, class T, std::size_t K, class Make>
[[gnu::noinline]] void run_lane_chunk(const iteration<K>& it, std::size_t begin, std::size_t end,
                                      std::int32_t* info, failure_log& failures, lane_fn<T> fn,
                                      int lanes, const lane_run<T>& proto, const Make& make) {
    constexpr std::size_t operands = Mode == on_failure::info ? K - 1 : K;
    static_assert(operands <= max_lane_operands);
    auto kernel = make();
    lane_run<T> run = proto;
    for (cursor<K> at(it, begin); begin < end;) {
        const std::size_t count = std::min(at.run_left(), end - begin);
        std::array<std::ptrdiff_t, K> start, step;
        for (std::size_t k = 0; k < K; ++k) {
            start[k] = at.offset(k);
            step[k] = it.inner_stride(k);
        }
        for (std::size_t k = 0; k < operands; ++k) {
            run.start[k] = start[k];
            run.step[k] = step[k];
        }
        run.count = count;
        if constexpr (Mode == on_failure::info)
            for (std::size_t i = 0; i < count; ++i)
                info[start[K - 1] + static_cast<std::ptrdiff_t>(i) * step[K - 1]] = 0;
        for (std::size_t i = 0; i < count; i += static_cast<std::size_t>(lanes)) {
            const std::uint32_t redo = fn(run, i);
            for (std::size_t l = 0; l < static_cast<std::size_t>(lanes); ++l) {
                if ((redo >> l & 1U) == 0) continue;
                std::array<std::ptrdiff_t, K> off;
                for (std::size_t k = 0; k < K; ++k)
                    off[k] = start[k] + static_cast<std::ptrdiff_t>(i + l) * step[k];
                if (!run_item<Mode>(kernel, begin + i + l, off, info, failures)) return;
            }
        }
        at.advance(count);
        begin += count;
    }
}

/// The block kernel an op runs on, when it has one for this size and type (fn not null).
template <class T>
struct lane_plan {
    lane_fn<T> fn = nullptr;
    int lanes = 0;
    lane_run<T> run;  // the operands
};

/// No block kernel: the complex element types, and the ops without one.
struct no_lanes {};

/// The plan for `op` on real T with the given block operands; empty otherwise.
template <class T, class... Operands>
auto plan_lanes(lane_op op, std::size_t n, const Operands&... operands) noexcept {
    if constexpr (is_complex_v<T>) {
        return no_lanes{};
    } else {
        lane_plan<T> plan;
        plan.fn = find_lane_kernel<T>(op, n, plan.lanes);
        int k = 0;
        const auto place = [&]<class U>(const operand<U>& o) {
            if constexpr (std::is_same_v<std::remove_const_t<U>, std::int64_t>)
                plan.run.piv = {const_cast<std::int64_t*>(o.data), o.rs, o.cs};
            else
                plan.run.op[k] = {const_cast<T*>(o.data), o.rs, o.cs};
            ++k;
        };
        (place(operands), ...);
        return plan;
    }
}

/// Runs `make()`-built kernels over the batch, inline or in parallel per the grain, through the
/// block kernel of `lanes` when it has one (items it hands back go to the per-item kernel), and
/// throws linalg_error for the lowest failing item when Mode is raise.
template <on_failure Mode, std::size_t K, class Make, class Lanes = no_lanes>
void run_batch(session& s, const char* op, linalg_reason reason, const shape& batch,
               const std::array<stride_array, K>& strides, std::size_t work, std::int32_t* info,
               const Make& make, const Lanes& lanes = {}) {
    const std::size_t count = batch.count();
    if (count == 0) return;
    std::array<const stride_array*, K> st{};
    for (std::size_t k = 0; k < K; ++k) st[k] = &strides[k];
    const iteration<K> it = collapse<K>(batch, st);
    const std::size_t grain = std::max<std::size_t>(
        1, session_access::core(s).settings().grain / std::max<std::size_t>(work, 1));
    failure_log failures;
    parallel_range(s, count, grain, [&](std::size_t begin, std::size_t end) {
        if constexpr (!std::is_same_v<Lanes, no_lanes>) {
            if (lanes.fn != nullptr) {
                run_lane_chunk<Mode>(it, begin, end, info, failures, lanes.fn, lanes.lanes,
                                     lanes.run, make);
                return;
            }
        }
        run_chunk<Mode>(it, begin, end, info, failures, make);
    });
    if constexpr (Mode == on_failure::raise)
        if (failures.item != static_cast<std::size_t>(-1))
            throw_linalg_failure(op, reason, failures.item, count, failures.info);
}

// Size classes. Kernels are templates on N: an exact size (N > 0) for the few sizes whose unrolled
// code pays for its compile time, `bounded_n` for every other n <= max_bounded_n (Eigen's dynamic
// algorithms on matrices with inline storage of at most 8 x 8: no heap), and Eigen::Dynamic above.
// Instantiating every n in 1..8 as its own fixed size multiplied the compile time of a user of all
// ops by ~4 for a small gain over the bounded class.
inline constexpr int bounded_n = -2;
inline constexpr int max_bounded_n = 8;

/// Calls f(std::integral_constant<int, N>) with N = n if n is one of Fixed, else bounded_n for
/// n <= max_bounded_n, else Eigen::Dynamic.
template <int... Fixed, class F>
void with_size_class(std::size_t n, F&& f) {
    const bool done =
        ((n == static_cast<std::size_t>(Fixed) ? (f(std::integral_constant<int, Fixed>{}), true)
                                               : false) ||
         ...);
    if (done) return;
    if (n <= static_cast<std::size_t>(max_bounded_n)) f(std::integral_constant<int, bounded_n>{});
    else f(std::integral_constant<int, Eigen::Dynamic>{});
}

template <class T>
T nan_of() noexcept {
    using R = real_type_t<T>;
    constexpr R q = std::numeric_limits<R>::quiet_NaN();
    if constexpr (is_complex_v<T>) return T(q, q);
    else return q;
}

template <class T, int N>
struct size_class_types {
    using square = Eigen::Matrix<T, N, N, Eigen::RowMajor>;
    using column = Eigen::Matrix<T, N, 1>;
};
template <class T>
struct size_class_types<T, bounded_n> {
    using square = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor, max_bounded_n,
                                 max_bounded_n>;
    using column = Eigen::Matrix<T, Eigen::Dynamic, 1, Eigen::ColMajor, max_bounded_n, 1>;
};
/// The square matrix type (row-major, as tessera's tensors) and column type of size class N.
template <class T, int N>
using square_t = typename size_class_types<T, N>::square;
template <class T, int N>
using column_t = typename size_class_types<T, N>::column;

template <class T>
operand<T> matrix_operand(const tensor_view<T>& v) noexcept {
    return {v.data(), v.stride(v.rank() - 2), v.stride(v.rank() - 1)};
}
template <class T>
operand<T> vector_operand(const tensor_view<T>& v) noexcept {
    return {v.data(), v.stride(v.rank() - 1), 0};
}
template <class T>
operand<T> scalar_operand(const tensor_view<T>& v) noexcept {
    return {v.data(), 0, 0};
}

/// Copies the row-major matrix at p (strides rs, cs) into `m`.
template <class M, class T>
void load_matrix(M& m, const T* p, std::ptrdiff_t rs, std::ptrdiff_t cs) noexcept {
    const Eigen::Index rows = m.rows(), cols = m.cols();
    if (M::IsRowMajor && cs == 1 && rs == cols) {
        std::copy_n(p, rows * cols, m.data());
        return;
    }
    for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = p[i * rs + j * cs];
}

/// Copies `m` to the matrix at p (strides rs, cs).
template <class M, class T>
void store_matrix(const M& m, T* p, std::ptrdiff_t rs, std::ptrdiff_t cs) noexcept {
    const Eigen::Index rows = m.rows(), cols = m.cols();
    if (M::IsRowMajor && cs == 1 && rs == cols) {
        std::copy_n(m.data(), rows * cols, p);
        return;
    }
    for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < cols; ++j) p[i * rs + j * cs] = m(i, j);
}

template <class V, class T>
void store_vector(const V& v, T* p, std::ptrdiff_t st) noexcept {
    for (Eigen::Index i = 0; i < v.size(); ++i) p[i * st] = v(i);
}

template <class T>
void fill_matrix(T* p, std::ptrdiff_t rs, std::ptrdiff_t cs, Eigen::Index rows, Eigen::Index cols,
                 T value) noexcept {
    for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < cols; ++j) p[i * rs + j * cs] = value;
}

/// Appends info's batch strides when the op runs with an info tensor.
template <on_failure Mode, std::size_t K>
auto with_info(const std::array<stride_array, K>& st, const tensor_view<std::int32_t>& info,
               const shape& batch) {
    if constexpr (Mode == on_failure::info) {
        std::array<stride_array, K + 1> all{};
        for (std::size_t k = 0; k < K; ++k) all[k] = st[k];
        all[K] = batch_strides(info, 0, batch);
        return all;
    } else {
        return st;
    }
}

template <on_failure Mode>
void fill_info(const tensor_view<std::int32_t>& info, std::int32_t value) noexcept {
    if constexpr (Mode == on_failure::info)
        for_each_item(collapse<1>(info.shape(), {&info.stride_values()}), 0, info.size(),
                      [&](std::size_t, const std::array<std::ptrdiff_t, 1>& off) {
                          info.data()[off[0]] = value;
                          return true;
                      });
}

/// Where a batched op on square [..., n, n] matrices `a` starts: sets `batch` (a's leading axes,
/// which every other operand was checked against) and `n`. Returns false when nothing is left to
/// compute: an empty batch, or n = 0, where every item succeeds (and `info`, if kept, says so).
template <on_failure Mode, class T>
bool start_square_batch(const tensor_view<const T>& a, const tensor_view<std::int32_t>& info,
                        shape& batch, std::size_t& n) noexcept {
    batch = leading_axes(a.shape(), 2);
    n = a.extent(a.rank() - 1);
    if (batch.count() == 0) return false;
    if (n == 0) {
        fill_info<Mode>(info, 0);
        return false;
    }
    return true;
}

}  // namespace tessera::detail

/// Calls X(T) for each linalg element type; the src/linalg_*.cpp files instantiate with it.
#define TESSERA_FOR_LINALG_TYPES(X) \
    X(float)                        \
    X(double)                       \
    X(std::complex<float>)          \
    X(std::complex<double>)
