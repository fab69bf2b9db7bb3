# Builds an object library and reads the symbols its object defines (nm); fails when one of them
# belongs to an engine that the library compiles: a reduction runner or anything of Eigen.
#   cmake -DBUILD_DIR=<dir> -DCONFIG=<config> -DTARGET=<object library> -DNM=<nm>
#         -DOBJECT=<its object file> -P check_symbols.cmake
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}"
                        --config "${CONFIG}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "build_check: building ${TARGET} failed")
endif()
execute_process(COMMAND "${NM}" -C --defined-only "${OBJECT}"
                OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "build_check: ${NM} failed on ${OBJECT}")
endif()
string(REGEX MATCHALL "[^\n]*(reduction_runner|Eigen::)[^\n]*" found "${symbols}")
if(found)
    list(LENGTH found count)
    list(GET found 0 first)
    message(FATAL_ERROR "build_check: ${OBJECT} defines ${count} symbols of engines the library "
                        "compiles, e.g.\n  ${first}")
endif()
message(STATUS "build_check: ${OBJECT} defines no engine symbol")
