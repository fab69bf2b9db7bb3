// tessera/random.hpp - tensors of random values: tessera::uniform and tessera::normal, each
// reproducible for a given seed. Kept out of tensor.hpp so that only the files that draw random
// tensors pay for <random>.
#pragma once

#include <tessera/dtype.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/tensor.hpp>

#include <cstdint>
#include <random>
#include <type_traits>

namespace tessera {

namespace detail {
template <class T, class Draw>
tensor<T> random_fill(session& s, const shape& shape, Draw draw) {
    tensor<T> t = empty<T>(s, shape);
    for (T& v : t.values()) {
        if constexpr (is_complex_v<T>) {
            const auto re = draw();
            v = T(re, draw());
        } else {
            v = static_cast<T>(draw());
        }
    }
    return t;
}
}  // namespace detail

/// Returns a tensor of `shape` with values drawn uniformly from [low, high) (integers: [low,
/// high]; complex: real and imaginary parts each), reproducibly for a given `seed`.
template <numeric T>
tensor<T> uniform(session& s, const shape& shape, real_type_t<T> low, real_type_t<T> high,
                  std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    using R = real_type_t<T>;
    if constexpr (std::is_integral_v<R>) {
        std::uniform_int_distribution<R> dist(low, high);
        return detail::random_fill<T>(s, shape, [&] { return dist(rng); });
    } else {
        std::uniform_real_distribution<R> dist(low, high);
        return detail::random_fill<T>(s, shape, [&] { return dist(rng); });
    }
}

/// Returns a tensor of `shape` with values drawn from the normal distribution of mean `mu` and
/// standard deviation `sigma` (complex: real and imaginary parts each), reproducibly for a given
/// `seed`.
template <floating T>
tensor<T> normal(session& s, const shape& shape, real_type_t<T> mu, real_type_t<T> sigma,
                 std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<real_type_t<T>> dist(mu, sigma);
    return detail::random_fill<T>(s, shape, [&] { return dist(rng); });
}

}  // namespace tessera
