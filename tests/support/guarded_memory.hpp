// Memory for tests that catch over-reads and over-writes: `count` elements that end exactly where
// an inaccessible page begins, so an access past the last one faults.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>

namespace tessera::test {

/// `count` elements of U that end where an inaccessible page begins; unmapped when it goes.
/// data() is nullptr if the mapping failed.
template <class U>
class guarded {
public:
    explicit guarded(std::size_t count) {
        const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        const std::size_t bytes = count * sizeof(U);
        span_ = (bytes + page - 1) / page * page + page;
        void* const region =
            mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED) return;
        region_ = static_cast<unsigned char*>(region);
        if (mprotect(region_ + span_ - page, page, PROT_NONE) == 0)
            data_ = reinterpret_cast<U*>(region_ + span_ - page - bytes);
    }
    ~guarded() {
        if (region_ != nullptr) munmap(region_, span_);
    }
    guarded(const guarded&) = delete;
    guarded& operator=(const guarded&) = delete;

    U* data() const noexcept { return data_; }

private:
    unsigned char* region_ = nullptr;
    std::size_t span_ = 0;
    U* data_ = nullptr;
};

}  // namespace tessera::test
