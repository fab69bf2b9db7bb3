// Error messages of the reductions (tessera/ops/reduce.hpp), formatted only when thrown.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <cstdint>
#include <tessera/error.hpp>
#include <tessera/shape.hpp>
#include <vector>

namespace tessera::detail {

void throw_empty_reduction(const char* op, const shape& in, std::uint32_t mask) {
    std::vector<std::size_t> axes;
    for (std::size_t a = 0; a < in.rank(); ++a)
        if ((mask >> a) & 1u) axes.push_back(a);
    throw shape_error(fmt::format(
        "{}: cannot reduce zero elements (shape [{}] over axes [{}]); {} has no identity", op,
        fmt::join(in.dims(), ","), fmt::join(axes, ","), op));
}

}  // namespace tessera::detail
