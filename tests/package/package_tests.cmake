# Tests (label `package`) proving that a separate project can use tessera by each route:
#   package.install           installs this build into a scratch prefix (fixture tessera_installed)
#   package.find_package      builds and runs find_package/ against that prefix
#   package.find_package_mpi  the same for find_package_mpi/ (tessera::mpi), where it was built
#   package.pkg_config        builds pkg_config/main.cpp against that prefix with the compiler and
#                             `pkg-config --cflags --libs tessera` alone (no CMake), and runs it
#   package.add_subdirectory  builds and runs add_subdirectory/ against this source tree (the
#                             library compiled again, unoptimised)
# Included from tests/CMakeLists.txt; needs the top-level variables TESSERA_INSTALL and
# TESSERA_SANITIZE_FLAGS, and CMAKE_INSTALL_LIBDIR (GNUInstallDirs).

set(_tessera_package_prefix "${CMAKE_CURRENT_BINARY_DIR}/package-prefix")
get_property(_tessera_package_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)

# How ctest --build-and-test should drive the consumer builds: same generator, build tool and
# compiler as this build.
set(_tessera_package_generator --build-generator "${CMAKE_GENERATOR}")
if(CMAKE_GENERATOR_PLATFORM)
    list(APPEND _tessera_package_generator --build-generator-platform "${CMAKE_GENERATOR_PLATFORM}")
endif()
if(CMAKE_GENERATOR_TOOLSET)
    list(APPEND _tessera_package_generator --build-generator-toolset "${CMAKE_GENERATOR_TOOLSET}")
endif()
if(CMAKE_MAKE_PROGRAM)
    list(APPEND _tessera_package_generator --build-makeprogram "${CMAKE_MAKE_PROGRAM}")
endif()
if(_tessera_package_multi_config)
    list(APPEND _tessera_package_generator --build-config $<CONFIG>)
endif()

# Options for configuring the consumers. A list inside one -D value must reach ctest as a single
# argument, hence $<SEMICOLON>.
set(_tessera_package_options
    -DCMAKE_BUILD_TYPE=$<CONFIG>
    "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}")
# Objects built with a sanitizer only link into programs built with it, so the consumers get
# this build's compile and link flags, sanitizer flags included.
list(JOIN TESSERA_SANITIZE_FLAGS " " _tessera_package_sanitize)
string(STRIP "${CMAKE_CXX_FLAGS} ${_tessera_package_sanitize}" _tessera_package_cxx_flags)
string(STRIP "${CMAKE_EXE_LINKER_FLAGS} ${_tessera_package_sanitize}" _tessera_package_ld_flags)
if(_tessera_package_cxx_flags)
    list(APPEND _tessera_package_options "-DCMAKE_CXX_FLAGS=${_tessera_package_cxx_flags}")
endif()
if(_tessera_package_ld_flags)
    list(APPEND _tessera_package_options "-DCMAKE_EXE_LINKER_FLAGS=${_tessera_package_ld_flags}")
endif()

# Where the dependencies (TBB, Eigen3, fmt) were found from, if the user had to say.
list(JOIN CMAKE_PREFIX_PATH "$<SEMICOLON>" _tessera_package_user_prefix)

if(TESSERA_INSTALL)
    set(_tessera_package_install_config "")
    if(_tessera_package_multi_config)
        set(_tessera_package_install_config --config $<CONFIG>)
    endif()
    add_test(NAME package.install
        COMMAND "${CMAKE_COMMAND}" --install "${PROJECT_BINARY_DIR}"
                --prefix "${_tessera_package_prefix}" ${_tessera_package_install_config})
    set_tests_properties(package.install PROPERTIES
        LABELS package
        FIXTURES_SETUP tessera_installed)

    set(_tessera_package_prefix_path "${_tessera_package_prefix}")
    if(_tessera_package_user_prefix)
        string(APPEND _tessera_package_prefix_path "$<SEMICOLON>${_tessera_package_user_prefix}")
    endif()
    add_test(NAME package.find_package
        COMMAND "${CMAKE_CTEST_COMMAND}"
            --build-and-test
                "${CMAKE_CURRENT_LIST_DIR}/find_package"
                "${CMAKE_CURRENT_BINARY_DIR}/package-find_package"
            ${_tessera_package_generator}
            --build-options
                "-DCMAKE_PREFIX_PATH=${_tessera_package_prefix_path}"
                ${_tessera_package_options}
            --test-command consumer)
    set_tests_properties(package.find_package PROPERTIES
        LABELS package
        FIXTURES_REQUIRED tessera_installed
        TIMEOUT 600)

    # The optional component, where it was built: find_package(tessera COMPONENTS mpi). The
    # consumer runs as a singleton rank (no mpiexec).
    if(TARGET tessera::mpi)
        add_test(NAME package.find_package_mpi
            COMMAND "${CMAKE_CTEST_COMMAND}"
                --build-and-test
                    "${CMAKE_CURRENT_LIST_DIR}/find_package_mpi"
                    "${CMAKE_CURRENT_BINARY_DIR}/package-find_package_mpi"
                ${_tessera_package_generator}
                --build-options
                    "-DCMAKE_PREFIX_PATH=${_tessera_package_prefix_path}"
                    ${_tessera_package_options}
                --test-command consumer)
        set_tests_properties(package.find_package_mpi PROPERTIES
            LABELS "package;mpi"
            FIXTURES_REQUIRED tessera_installed
            ENVIRONMENT "${TESSERA_MPIEXEC_ENVIRONMENT}"
            TIMEOUT 600)
    endif()

    # Plain compiler and pkg-config, as a makefile would use them; the build's compile and link
    # flags (sanitizers) are passed on as one argument. Skipped (exit 77) without pkg-config.
    find_program(TESSERA_PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf
        DOC "pkg-config, for the package.pkg_config test")
    if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
        set(_tessera_package_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
    else()
        set(_tessera_package_pc_dir "${_tessera_package_prefix}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
    endif()
    add_test(NAME package.pkg_config
        COMMAND sh "${CMAKE_CURRENT_LIST_DIR}/pkg_config/build_and_run.sh"
            "${TESSERA_PKG_CONFIG_EXECUTABLE}"
            "${CMAKE_CXX_COMPILER}"
            "${_tessera_package_pc_dir}"
            "${PROJECT_VERSION}"
            "${CMAKE_CURRENT_BINARY_DIR}/package-pkg_config"
            "${_tessera_package_cxx_flags} ${_tessera_package_ld_flags}")
    set_tests_properties(package.pkg_config PROPERTIES
        LABELS package
        FIXTURES_REQUIRED tessera_installed
        SKIP_RETURN_CODE 77
        TIMEOUT 600)
endif()

set(_tessera_package_subdir_options "")
if(_tessera_package_user_prefix)
    set(_tessera_package_subdir_options "-DCMAKE_PREFIX_PATH=${_tessera_package_user_prefix}")
endif()
# It compiles the whole library again, without optimisation: -O0 in place of the configuration's
# flags, so also without -g and with the library's assertions on (no NDEBUG). What it proves is
# the route (targets, options, include paths, what a subproject leaves alone); the optimised
# library is the one the rest of the suite tests. On the 2-core development machine it took 318 s
# of the suite's 337 s of tests at -O2 -g, and its library compiles in 131 s at -O0. Its limit
# stays well above the others': with make, ctest --build-and-test gives the build tool no job
# count (and CMake clears MAKEFLAGS for it), so the library compiles one file at a time.
add_test(NAME package.add_subdirectory
    COMMAND "${CMAKE_CTEST_COMMAND}"
        --build-and-test
            "${CMAKE_CURRENT_LIST_DIR}/add_subdirectory"
            "${CMAKE_CURRENT_BINARY_DIR}/package-add_subdirectory"
        ${_tessera_package_generator}
        --build-options
            "-DTESSERA_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
            ${_tessera_package_subdir_options}
            ${_tessera_package_options}
            "-DCMAKE_CXX_FLAGS_$<UPPER_CASE:$<CONFIG>>=-O0"
        --test-command consumer)
set_tests_properties(package.add_subdirectory PROPERTIES
    LABELS package
    TIMEOUT 1800)
