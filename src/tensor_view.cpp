// Out-of-line parts of tensor_view: the no-copy reshape and the view error messages.
#include <tessera/error.hpp>
#include <tessera/print.hpp>
#include <tessera/tensor_view.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessera::detail {
void throw_axis_out_of_range(const char* op, const any_integer& axis, std::size_t rank) {
    throw shape_error(fmt::format("{}: axis {}{} is out of range for rank {}", op,
                                  axis.negative() ? "-" : "", axis.magnitude(), rank));
}
void throw_all_axes_not_accepted(const char* op) {
    throw shape_error(fmt::format("{}: takes a list of axes, not tessera::all_axes", op));
}
void throw_duplicate_axis(const char* op, std::size_t axis) {
    throw shape_error(fmt::format("{}: axis {} appears more than once", op, axis));
}
void throw_permutation_size(const char* op, std::size_t given, std::size_t rank) {
    throw shape_error(fmt::format("{}: {} axes given for a view of rank {}", op, given, rank));
}
void throw_strides_size(std::size_t given, std::size_t rank) {
    throw shape_error(fmt::format("tensor_view: {} strides given for rank {}", given, rank));
}
void throw_slice_step_zero() { throw shape_error("slice: step must not be 0"); }
void throw_squeeze_extent(std::size_t axis, std::size_t extent) {
    throw shape_error(fmt::format("squeeze: axis {} has extent {}, not 1", axis, extent));
}
void throw_select_index(std::size_t axis, std::ptrdiff_t index, std::size_t extent) {
    throw shape_error(
        fmt::format("select: index {} is out of range for axis {} of extent {}", index, axis, extent));
}
void throw_reshape_count(const shape& from, const shape& to) {
    throw shape_error(fmt::format("reshape: cannot reshape {} ({} elements) to {} ({} elements)",
                                  to_string(from), from.count(), to_string(to), to.count()));
}
void throw_reshape_strides(const shape& from, const shape& to) {
    throw shape_error(fmt::format(
        "reshape: the strides of this {} view do not allow viewing it as {} without a copy; "
        "make it contiguous first (tessera::contiguous)",
        to_string(from), to_string(to)));
}
void throw_unsqueeze_rank() {
    throw shape_error(fmt::format("unsqueeze: the view already has the maximum rank {}", max_rank));
}
void throw_diagonal_axes(std::size_t axis) {
    throw shape_error(fmt::format("diagonal: both axes are {}; they must differ", axis));
}

bool reshape_strides(const shape& from, const stride_array& strides, const shape& to,
                     stride_array& out) noexcept {
    if (to.count() == 0 || from.count() <= 1) {
        out = row_major_strides(to);
        return true;
    }
    // Drop extent-1 axes of the source: they constrain nothing.
    std::size_t old_dims[max_rank];
    std::ptrdiff_t old_strides[max_rank];
    std::size_t old_rank = 0;
    for (std::size_t i = 0; i < from.rank(); ++i) {
        if (from[i] == 1) continue;
        old_dims[old_rank] = from[i];
        old_strides[old_rank++] = strides[i];
    }
    // Walk both shapes, matching groups of axes with equal products. Within a group the source
    // axes must be mutually contiguous; the group's new strides then follow row-major order.
    std::size_t oi = 0, oj = 1, ni = 0, nj = 1;
    const std::size_t new_rank = to.rank();
    while (ni < new_rank && oi < old_rank) {
        std::size_t np = to[ni];
        std::size_t op = old_dims[oi];
        while (np != op) {
            if (np < op) {
                if (nj >= new_rank) return false;
                np *= to[nj++];
            } else {
                if (oj >= old_rank) return false;
                op *= old_dims[oj++];
            }
        }
        for (std::size_t k = oi; k + 1 < oj; ++k)
            if (old_strides[k] != static_cast<std::ptrdiff_t>(old_dims[k + 1]) * old_strides[k + 1])
                return false;
        out[nj - 1] = old_strides[oj - 1];
        for (std::size_t k = nj - 1; k > ni; --k)
            out[k - 1] = out[k] * static_cast<std::ptrdiff_t>(to[k]);
        ni = nj++;
        oi = oj++;
    }
    // Trailing extent-1 axes of the target: any stride works; use the innermost one's.
    const std::ptrdiff_t last = ni > 0 ? out[ni - 1] : 1;
    for (std::size_t k = ni; k < new_rank; ++k) out[k] = last;
    return true;
}

}  // namespace tessera::detail
