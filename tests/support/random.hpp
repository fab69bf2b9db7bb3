// Random inputs for the op tests: fresh seeds (replayable), strided random fills, and the float64 /
// complex<double> type the loop references compute in.
#pragma once

#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>

#include <array>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <type_traits>

namespace tessera::test {

/// A new seed on every call, so each run draws fresh inputs; print it with any failure. With
/// TESSERA_TEST_SEED=<seed> set, every call returns that seed instead, to replay a failure.
inline std::uint64_t fresh_seed() {
    if (const char* fixed = std::getenv("TESSERA_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
    static std::mt19937_64 seeds{(std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
    return seeds();
}

/// The type a reference computes in: double for real T, complex<double> for complex T.
template <class T>
using wide_t = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;

template <class T>
wide_t<T> widen(T x) {
    if constexpr (is_complex_v<T>)
        return std::complex<double>(x.real(), x.imag());
    else
        return static_cast<double>(x);
}

/// Fills `v` (any strides) with values uniform in [-1, 1) (both parts for complex), in row-major
/// order of its indices.
template <class T>
void fill_random(const tensor_view<T>& v, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    using R = real_type_t<T>;
    std::array<std::size_t, max_rank> index{};
    for (std::size_t i = 0; i < v.size(); ++i) {
        std::ptrdiff_t offset = 0;
        for (std::size_t ax = 0; ax < v.rank(); ++ax) offset += static_cast<std::ptrdiff_t>(index[ax]) * v.stride(ax);
        if constexpr (is_complex_v<T>) {
            const double re = dist(rng);
            v.data()[offset] = T(static_cast<R>(re), static_cast<R>(dist(rng)));
        } else {
            v.data()[offset] = static_cast<T>(dist(rng));
        }
        for (std::size_t ax = v.rank(); ax-- > 0;) {
            if (++index[ax] < v.extent(ax)) break;
            index[ax] = 0;
        }
    }
}

/// A new tensor of `sh` filled by fill_random.
template <class T>
tensor<T> random_tensor(session& s, const shape& sh, std::mt19937_64& rng) {
    tensor<T> t = empty<T>(s, sh);
    fill_random<T>(t.view(), rng);
    return t;
}

}  // namespace tessera::test
