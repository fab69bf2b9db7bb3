// tessera/tessera.hpp - the umbrella header: includes the whole public API except the Eigen
// bridge (tessera/eigen.hpp). It includes neither Eigen nor oneTBB: both serve the compiled library.
// Start with tessera::backend (backend.hpp) and backend::run, which hands you a tessera::session.
#pragma once

#include <tessera/backend.hpp>
#include <tessera/error.hpp>
#include <tessera/dtype.hpp>
#include <tessera/ops/einsum.hpp>
#include <tessera/ops/elementwise.hpp>
#include <tessera/ops/linalg.hpp>
#include <tessera/ops/matmul.hpp>
#include <tessera/ops/reduce.hpp>
#include <tessera/ops/structural.hpp>
#include <tessera/parallel.hpp>
#include <tessera/print.hpp>
#include <tessera/random.hpp>
#include <tessera/session.hpp>
#include <tessera/shape.hpp>
#include <tessera/stats.hpp>
#include <tessera/tensor.hpp>
#include <tessera/tensor_view.hpp>
#include <tessera/version.hpp>
