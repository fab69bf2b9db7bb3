// eigh and eigvalsh of the batched linear algebra ops, instantiated for the four element types
// (see src/linalg_kernels.hpp).
#include "linalg_kernels.hpp"

namespace tessera::detail {

#define TESSERA_INSTANTIATE(T)                                                                     \
    template void eigh_run<on_failure::raise, T>(session&, const tensor_view<const T>&,            \
                                                 const tensor_view<real_type_t<T>>&,               \
                                                 const tensor_view<T>&,                            \
                                                 const tensor_view<std::int32_t>&);                \
    template void eigh_run<on_failure::info, T>(session&, const tensor_view<const T>&,             \
                                                const tensor_view<real_type_t<T>>&,                \
                                                const tensor_view<T>&,                             \
                                                const tensor_view<std::int32_t>&);                \
    template void eigvalsh_run<on_failure::raise, T>(session&, const tensor_view<const T>&,        \
                                                     const tensor_view<real_type_t<T>>&,           \
                                                     const tensor_view<std::int32_t>&);            \
    template void eigvalsh_run<on_failure::info, T>(session&, const tensor_view<const T>&,         \
                                                    const tensor_view<real_type_t<T>>&,            \
                                                    const tensor_view<std::int32_t>&);
TESSERA_FOR_LINALG_TYPES(TESSERA_INSTANTIATE)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::detail
