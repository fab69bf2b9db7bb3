// bench/native/lane_floors.cpp - floors under batched_linalg_bench's targets for the SIMD-across-
// batch kernels, compiled with -march=native as the Eigen loops those targets are set against:
// the bytes of a batch alone (a vectorised read of the input, for det; a copy of it, for inverse)
// and the kernels' data movement alone (dense items into lanes, and into lanes and back, by the
// library's own load and store, with no arithmetic between). A target that asks for less time than
// the bytes alone cannot be met on the machine at all; one that asks for less than the movement
// alone cannot be met by any kernel that moves dense items into lanes.
#include <cstddef>
#include <cstring>

#include "linalg_lanes_kernels.hpp"
#include "native_vectors.hpp"

namespace {

using tessera::detail::vec_t;
namespace lanes = tessera::detail::lanes;

using tessera_bench::native::read_all;
using tessera_bench::native::vector_bytes;

/// The batch's dense N x N items into lanes, W at a time, and back into `out` (Back) or summed
/// into one vector per block written to `out` (so that every element is read and kept).
template <class T, int N, bool Back>
void move_through_lanes(const T* in, T* out, std::size_t batch) {
    constexpr int W = vector_bytes / static_cast<int>(sizeof(T));
    using V = vec_t<T, W>;
    for (std::size_t at = 0; at + W <= batch; at += W) {
        V m[N * N];
        lanes::load<W, N, N>(m, lanes::lane_items<W, const T>{in + at * N * N, N * N, W}, N, 1);
        // Between load and store the optimiser must not see that one undoes the other.
        for (V& x : m) x = tessera::detail::opaque(x);
        if constexpr (Back) {
            lanes::store<W, N, N>(m, lanes::lane_items<W, T>{out + at * N * N, N * N, W}, 0, N, 1);
        } else {
            V sum = m[0];
            for (int e = 1; e < N * N; ++e) sum += m[e];
            std::memcpy(out + at, &sum, sizeof(V));
        }
    }
}

template <class T, int N>
void floor_n(int what, const T* in, T* out, std::size_t batch) {
    switch (what) {
        case 0: out[0] = read_all(in, batch * N * N); break;
        case 1: std::memcpy(out, in, batch * N * N * sizeof(T)); break;
        case 2: move_through_lanes<T, N, false>(in, out, batch); break;
        default: move_through_lanes<T, N, true>(in, out, batch); break;
    }
}

template <class T>
bool floor_of(int what, int n, const void* in, void* out, std::size_t batch) {
    const auto* a = static_cast<const T*>(in);
    auto* b = static_cast<T*>(out);
    switch (n) {
        case 2: floor_n<T, 2>(what, a, b, batch); return true;
        case 3: floor_n<T, 3>(what, a, b, batch); return true;
        case 4: floor_n<T, 4>(what, a, b, batch); return true;
        default: return false;
    }
}

}  // namespace

/// what: 0 read the input, 1 copy it to out, 2 move its items into lanes, 3 into lanes and back
/// to out; `batch` items of n x n (n = 2..4; the movement skips a last partial block) of
/// `bytes`-byte reals.
extern "C" __attribute__((visibility("default"))) bool tessera_bench_lane_floor(
    int bytes, int what, int n, const void* in, void* out, std::size_t batch) {
    return bytes == 4 ? floor_of<float>(what, n, in, out, batch)
                      : floor_of<double>(what, n, in, out, batch);
}
