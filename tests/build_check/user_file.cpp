// A user's file that calls every reduction of every element type it accepts, in the allocating,
// keepdims, out and whole-tensor forms, and a product and a factorisation. The ctest test
// build_check.engines_compiled builds it and reads its symbols: the engines behind these calls are
// compiled into the library, so none may be instantiated here (see check_symbols.cmake).
#include <tessera/tessera.hpp>

#include <complex>
#include <cstdint>

namespace {

template <class T>
void numeric_reductions(tessera::session& s, const tessera::tensor<T>& a) {
    auto r = tessera::sum(s, a, {0});
    tessera::sum(s, a, {0}, r);
    (void)tessera::sum(s, a, {0}, tessera::keepdims);
    (void)tessera::prod(s, a);
    (void)tessera::mean(s, a, {1});
    (void)tessera::norm(s, a);
    (void)tessera::sum_all(s, a);
    (void)tessera::prod_all(s, a);
    (void)tessera::mean_all(s, a);
    (void)tessera::norm_all(s, a);
}

template <class T>
void real_reductions(tessera::session& s, const tessera::tensor<T>& a) {
    numeric_reductions(s, a);
    (void)tessera::max(s, a, {0});
    (void)tessera::min(s, a);
    (void)tessera::argmax(s, a, 0);
    (void)tessera::argmin(s, a);
    (void)tessera::max_all(s, a);
    (void)tessera::min_all(s, a);
    (void)tessera::argmax_all(s, a);
    (void)tessera::argmin_all(s, a);
}

}  // namespace

void user_file(tessera::session& s) {
    real_reductions(s, tessera::zeros<float>(s, {2, 3}));
    real_reductions(s, tessera::zeros<double>(s, {2, 3}));
    real_reductions(s, tessera::zeros<std::int32_t>(s, {2, 3}));
    real_reductions(s, tessera::zeros<std::int64_t>(s, {2, 3}));
    numeric_reductions(s, tessera::zeros<std::complex<float>>(s, {2, 3}));
    numeric_reductions(s, tessera::zeros<std::complex<double>>(s, {2, 3}));
    const auto m = tessera::zeros<double>(s, {6, 6});
    (void)tessera::matmul(s, m, m);
    (void)tessera::inverse(s, m);
}
