// tessera/error.hpp - the exception types tessera throws.
// Every recoverable error derives from tessera::error; the message names the op and the operands,
// e.g. "add: shapes [3,4] and [4,3] do not broadcast".
#pragma once

#include <stdexcept>
#include <string>

namespace tessera {

/// Base class of every exception tessera throws for bad input or configuration.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Thrown for an invalid backend option or environment setting (e.g. TESSERA_NUM_THREADS=0).
class config_error : public error {
public:
    using error::error;
};

/// Thrown when operand shapes, ranks or element counts are incompatible with an op.
class shape_error : public error {
public:
    using error::error;
};

/// Thrown for an einsum spec that is malformed, does not fit the number of operands, or names
/// output indices or a contraction path that cannot be honoured; the message quotes the spec.
class spec_error : public error {
public:
    using error::error;
};

/// Thrown when an out-parameter overlaps an input in a way the op cannot honour.
class alias_error : public error {
public:
    using error::error;
};

/// Thrown when a byte count overflows or the pool cannot obtain memory.
class allocation_error : public error {
public:
    using error::error;
};

}  // namespace tessera
