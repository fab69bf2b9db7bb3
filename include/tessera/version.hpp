// tessera/version.hpp - the library version, the single source CMake parses.
#pragma once

/// The major version number, an integer literal usable in `#if` (CMake parses it).
#define TESSERA_VERSION_MAJOR 0
/// The minor version number, an integer literal usable in `#if` (CMake parses it).
#define TESSERA_VERSION_MINOR 1
/// The patch version number, an integer literal usable in `#if` (CMake parses it).
#define TESSERA_VERSION_PATCH 0
/// The version as a string literal, "MAJOR.MINOR.PATCH", matching the three numbers above.
#define TESSERA_VERSION_STRING "0.1.0"
