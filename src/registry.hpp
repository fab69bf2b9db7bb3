// The process-wide list of live backends, consulted only when a block is freed outside any session
// of its backend. Internal to src/.
#pragma once

#include <tessera/detail/backend_core.hpp>

#include <cstdint>

namespace tessera::detail {

void register_backend(backend_core* core);
void unregister_backend(backend_core* core) noexcept;
std::uint64_t next_backend_id() noexcept;

}  // namespace tessera::detail
