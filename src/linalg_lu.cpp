// The LU family of the batched linear algebra ops, instantiated for the four element types:
// inverse, solve, lu, det and slogdet (see src/linalg_kernels.hpp).
#include "linalg_kernels.hpp"

namespace tessera::detail {

#define TESSERA_INSTANTIATE(T)                                                                     \
    template void inverse_run<on_failure::raise, T>(session&, const tensor_view<const T>&,         \
                                                    const tensor_view<T>&,                         \
                                                    const tensor_view<std::int32_t>&);             \
    template void inverse_run<on_failure::info, T>(session&, const tensor_view<const T>&,          \
                                                   const tensor_view<T>&,                          \
                                                   const tensor_view<std::int32_t>&);              \
    template void solve_run<on_failure::raise, T>(session&, const tensor_view<const T>&,           \
                                                  const tensor_view<const T>&,                     \
                                                  const tensor_view<T>&, const shape&,             \
                                                  const tensor_view<std::int32_t>&);               \
    template void solve_run<on_failure::info, T>(session&, const tensor_view<const T>&,            \
                                                 const tensor_view<const T>&,                      \
                                                 const tensor_view<T>&, const shape&,              \
                                                 const tensor_view<std::int32_t>&);                \
    template void lu_run<on_failure::ignore, T>(session&, const tensor_view<const T>&,             \
                                                const tensor_view<T>&,                             \
                                                const tensor_view<std::int64_t>&,                  \
                                                const tensor_view<std::int32_t>&);                 \
    template void lu_run<on_failure::info, T>(session&, const tensor_view<const T>&,               \
                                              const tensor_view<T>&,                               \
                                              const tensor_view<std::int64_t>&,                    \
                                              const tensor_view<std::int32_t>&);                   \
    template void det_run<T>(session&, const tensor_view<const T>&, const tensor_view<T>&);        \
    template void slogdet_run<T>(session&, const tensor_view<const T>&, const tensor_view<T>&,     \
                                 const tensor_view<real_type_t<T>>&);
TESSERA_FOR_LINALG_TYPES(TESSERA_INSTANTIATE)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::detail
