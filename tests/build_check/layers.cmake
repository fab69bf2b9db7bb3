# The direction of tessera's header dependencies, checked: every header under include/tessera
# belongs to one layer, and may include headers of its own layer or of a layer below it only.
#   runtime   the backend, the session and the calls into the compiled runtime
#   tensors   shapes, element types, views and tensors
#   engines   the walks, checks and kernels under the ops (detail/)
#   api       the public op headers and everything built on them
# A header in no layer fails the check too, so a new header must be placed.
#   cmake -DINCLUDE_DIR=<repo>/include -P layers.cmake
cmake_minimum_required(VERSION 3.20)
set(runtime
    detail/atomic.hpp detail/function_ref.hpp detail/runtime.hpp detail/thread_state.hpp
    detail/pool.hpp detail/counters.hpp detail/check.hpp detail/backend_core.hpp
    stats.hpp error.hpp version.hpp session.hpp backend.hpp arena.hpp)
set(tensors shape.hpp dtype.hpp detail/broadcast.hpp tensor_view.hpp tensor.hpp)
set(engines
    detail/validate.hpp detail/iteration.hpp detail/copy.hpp detail/parallel.hpp
    detail/elementwise.hpp detail/reduce_policies.hpp detail/reduce_leaves.hpp
    detail/reduce_runner.hpp detail/small_matmul.hpp detail/linalg_lanes.hpp detail/matmul.hpp
    detail/plan_cache.hpp detail/product_slots.hpp detail/einsum.hpp)
set(api
    ops/elementwise.hpp ops/reduce.hpp ops/structural.hpp ops/matmul.hpp ops/linalg.hpp
    ops/einsum.hpp parallel.hpp print.hpp format.hpp random.hpp eigen.hpp mpi.hpp tessera.hpp)
set(layers runtime tensors engines api)

function(layer_of header out)
    set(index 0)
    foreach(layer IN LISTS layers)
        if(header IN_LIST ${layer})
            set(${out} ${index} PARENT_SCOPE)
            return()
        endif()
        math(EXPR index "${index} + 1")
    endforeach()
    set(${out} -1 PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}/tessera" "${INCLUDE_DIR}/tessera/*.hpp")
set(problems "")
foreach(header IN LISTS headers)
    layer_of("${header}" own)
    if(own EQUAL -1)
        string(APPEND problems "\n  ${header} is in no layer")
        continue()
    endif()
    file(STRINGS "${INCLUDE_DIR}/tessera/${header}" includes REGEX "^#include <tessera/")
    foreach(line IN LISTS includes)
        string(REGEX REPLACE "^#include <tessera/([^>]+)>.*" "\\1" used "${line}")
        layer_of("${used}" theirs)
        if(theirs GREATER own)
            list(GET layers ${own} own_name)
            list(GET layers ${theirs} their_name)
            string(APPEND problems
                   "\n  ${header} (${own_name}) includes ${used} (${their_name}, a layer above)")
        endif()
    endforeach()
endforeach()
if(problems)
    message(FATAL_ERROR "build_check: header layers broken:${problems}")
endif()
list(LENGTH headers count)
message(STATUS "build_check: ${count} headers, every include points to its own layer or below")
