# tessera_warnings (alias tessera::warnings): the warning set for tessera's own code. The library,
# tests, benchmarks and examples link it; it is build-tree only and never exported, so users of
# tessera never inherit these flags.
include_guard(GLOBAL)

add_library(tessera_warnings INTERFACE)
add_library(tessera::warnings ALIAS tessera_warnings)

set(_tessera_gnu_warnings
    -Wall
    -Wextra
    -Wpedantic
    -Wshadow
    -Wnon-virtual-dtor
    -Woverloaded-virtual
    -Wcast-align
    -Wnull-dereference
    -Wdouble-promotion
    -Wformat=2
    -Wimplicit-fallthrough
)
target_compile_options(tessera_warnings INTERFACE
    "$<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang,AppleClang>:${_tessera_gnu_warnings}>"
    "$<$<COMPILE_LANG_AND_ID:CXX,MSVC>:/W4>")

if(TESSERA_WERROR)
    target_compile_options(tessera_warnings INTERFACE
        "$<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang,AppleClang>:-Werror>"
        "$<$<COMPILE_LANG_AND_ID:CXX,MSVC>:/WX>")
endif()
