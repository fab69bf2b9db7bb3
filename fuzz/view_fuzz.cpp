// view_fuzz.cpp - a libFuzzer target over shape, stride, broadcast and reshape validation.
//
// Each input is a little program: make two tensors of fuzzed shapes, derive views from them with
// a fuzzed sequence of transforms (transpose, permute, slice, flip, reshape, broadcast_to,
// squeeze, unsqueeze, diagonal, select), then call a fuzzed op on the views. Transforms and ops
// may throw tessera::error for bad input; that is the contract. What must never happen:
//   - a transform that returns a view reaching outside its tensor (checked here, independently
//     of tessera's own overlap arithmetic, before any op reads the view);
//   - a crash, a sanitizer report or an exception of another type;
//   - an op that throws after writing part of its out-parameter (checked for elementwise ops).
// Built with clang and -fsanitize=fuzzer,address,undefined (fuzz/CMakeLists.txt).
#include <tessera/tessera.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using tessera::session;
using tessera::shape;
using tessera::tensor;
using tessera::tensor_view;

/// Reads the input byte by byte; past the end it yields zeros, so every input is a program.
class program {
public:
    program(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
    std::uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
    bool done() const { return p_ >= end_; }
    /// A value in [lo, hi].
    std::ptrdiff_t in(std::ptrdiff_t lo, std::ptrdiff_t hi) {
        return lo + static_cast<std::ptrdiff_t>(byte()) % (hi - lo + 1);
    }

private:
    const std::uint8_t* p_;
    const std::uint8_t* end_;
};

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "view_fuzz: %s\n", what);
    std::abort();
}

shape any_shape(program& in) {
    const auto rank = static_cast<std::size_t>(in.in(0, 4));
    std::array<std::size_t, 4> dims{};
    for (std::size_t i = 0; i < rank; ++i) dims[i] = static_cast<std::size_t>(in.in(0, 5));
    return shape(std::span<const std::size_t>(dims.data(), rank));
}

/// Aborts unless every element of `v` lies inside `t`'s storage.
void check_inside(const tensor_view<float>& v, const tensor<float>& t) {
    if (v.size() == 0) return;
    std::ptrdiff_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < v.rank(); ++i) {
        const std::ptrdiff_t span = v.stride(i) * static_cast<std::ptrdiff_t>(v.extent(i) - 1);
        (span < 0 ? lo : hi) += span;
    }
    const std::ptrdiff_t first = (v.data() - t.data()) + lo, last = (v.data() - t.data()) + hi;
    if (first < 0 || last >= static_cast<std::ptrdiff_t>(t.size())) fail("a view escaped its tensor");
}

/// Applies one fuzzed transform to `v`; on a tessera::error the view stays as it was.
void transform(program& in, tensor_view<float>& v) {
    const auto r = static_cast<std::ptrdiff_t>(v.rank());
    const auto axis = [&] { return in.in(-r - 1, r); };  // includes one bad axis each side
    try {
        // Each argument is read into a local first: the order in which function arguments are
        // evaluated is unspecified, and an input must mean the same program everywhere.
        switch (in.byte() % 11) {
            case 0: v = v.transpose(); break;
            case 1: {
                const std::ptrdiff_t x = axis(), y = axis();
                v = v.transpose(x, y);
                break;
            }
            case 2: {
                std::array<std::ptrdiff_t, tessera::max_rank> axes{};
                const auto n = static_cast<std::size_t>(
                    std::clamp<std::ptrdiff_t>(r + in.in(-1, 1), 0, tessera::max_rank));
                for (std::size_t i = 0; i < n; ++i) axes[i] = in.in(-1, r);
                v = v.permute(std::span<const std::ptrdiff_t>(axes.data(), n));
                break;
            }
            case 3: {
                const std::ptrdiff_t x = axis(), start = in.in(-8, 8), stop = in.in(-8, 8),
                                     step = in.in(-3, 3);
                const bool to_end = in.byte() % 4 == 0;
                v = v.slice(x, start, to_end ? tessera::slice_end : stop, step);
                break;
            }
            case 4: v = v.flip(axis()); break;
            case 5: v = v.reshape(any_shape(in)); break;
            case 6: v = v.broadcast_to(any_shape(in)); break;
            case 7: {
                const bool all = in.byte() % 2 != 0;
                v = all ? v.squeeze() : v.squeeze(axis());
                break;
            }
            case 8: v = v.unsqueeze(axis()); break;
            case 9: {
                const std::ptrdiff_t x = axis(), y = axis();
                v = v.diagonal(x, y);
                break;
            }
            case 10: {
                const std::ptrdiff_t x = axis(), index = in.in(-6, 6);
                v = v.select(x, index);
                break;
            }
        }
    } catch (const tessera::error&) {
    }
}

/// Calls one fuzzed op on the views. Elementwise out-parameter forms are checked to write
/// nothing when they throw.
void run_op(program& in, session& s, const tensor_view<float>& a, const tensor_view<float>& b,
            const tensor<float>& b_home) {
    try {
        switch (in.byte() % 9) {
            case 0: (void)tessera::add(s, a, b); break;
            case 1: {
                // In place into b, which may overlap a (both may view one tensor): a rejected
                // alias must leave b's whole tensor as it was.
                const std::vector<float> before(b_home.data(), b_home.data() + b_home.size());
                try {
                    tessera::add(s, a, b, b);
                } catch (const tessera::error&) {
                    if (!std::equal(before.begin(), before.end(), b_home.data()))
                        fail("an in-place op that threw had written its out-parameter");
                    throw;
                }
                break;
            }
            case 2: (void)tessera::sum(s, a); break;
            case 3: {
                const std::ptrdiff_t axis = in.in(-5, 5);
                if (in.byte() % 2 == 0)
                    (void)tessera::sum(s, a, {axis}, tessera::keepdims);
                else
                    (void)tessera::sum(s, a, {axis});
                break;
            }
            case 4: (void)tessera::contiguous(s, a); break;
            case 5: (void)tessera::to_string(a); break;
            case 6: (void)tessera::matmul(s, a, b); break;
            case 7: (void)tessera::batched_matmul(s, a, b); break;
            case 8: {
                // An out-parameter elementwise op that fails must leave the out untouched.
                tensor<float> out = tessera::full<float>(s, b.shape(), 7.0f);
                try {
                    tessera::mul(s, a, b, out.view());
                } catch (const tessera::error&) {
                    for (float x : out.values())
                        if (x != 7.0f) fail("an op that threw had written its out-parameter");
                    throw;
                }
                break;
            }
        }
    } catch (const tessera::error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static tessera::backend be{tessera::backend_options{}.with_threads(1)};
    program in(data, size);
    be.run([&](session& s) {
        tensor<float> x = tessera::uniform<float>(s, any_shape(in), -2.0f, 2.0f, 1);
        tensor<float> y = tessera::uniform<float>(s, any_shape(in), -2.0f, 2.0f, 2);
        // One time in four both views start from x, so that ops see overlapping operands.
        tensor<float>& b_home = in.byte() % 4 == 0 ? x : y;
        tensor_view<float> a = x.view(), b = b_home.view();
        const auto steps = in.in(0, 8);
        for (std::ptrdiff_t i = 0; i < steps && !in.done(); ++i) {
            transform(in, in.byte() % 2 ? a : b);
            check_inside(a, x);
            check_inside(b, b_home);
        }
        run_op(in, s, a, b, b_home);
    });
    return 0;
}
