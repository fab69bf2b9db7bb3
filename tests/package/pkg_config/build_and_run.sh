#!/bin/sh
# Builds main.cpp against an installed tessera the way a project without CMake does, with the
# compiler and `pkg-config --cflags --libs tessera` alone, runs it and checks what it prints; run
# by the package.pkg_config test.
#   build_and_run.sh <pkg-config> <c++ compiler> <dir holding tessera.pc> <expected version> \
#                    <work dir> [extra compile and link flags, one argument]
# The extra flags are the build's own (sanitizers: the library's objects link only into programs
# built with them). Exits 77, which the test reads as skipped, when pkg-config is not installed.
set -eu
pkg_config=$1 cxx=$2 pc_dir=$3 version=$4 work=$5 extra=${6-}
src=$(cd "$(dirname "$0")" && pwd)/main.cpp

if [ -z "$pkg_config" ] || ! command -v "$pkg_config" >/dev/null 2>&1; then
    echo "pkg_config consumer: pkg-config is not installed (scripts/deps installs it)" >&2
    exit 77
fi
# Only the installed tessera.pc is added; oneTBB, Eigen and fmt come from the usual search path.
PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH

found=$("$pkg_config" --modversion tessera)
if [ "$found" != "$version" ]; then
    echo "pkg_config consumer: tessera.pc says version '$found', this build is $version" >&2
    exit 1
fi
flags=$("$pkg_config" --cflags --libs tessera)

mkdir -p "$work"
echo "$cxx -std=c++20 main.cpp $flags"
# shellcheck disable=SC2086  # the flags split into words, as $(pkg-config ...) does in a makefile
"$cxx" -std=c++20 $extra "$src" $flags -o "$work/consumer"

out=$("$work/consumer")
echo "$out"
if [ "$out" != "consumer: sum=14 arena_entries=1" ]; then
    echo "pkg_config consumer: unexpected output" >&2
    exit 1
fi
