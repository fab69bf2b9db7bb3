// einsum_fuzz.cpp - a libFuzzer target over einsum's spec parser and planner.
//
// Each input spells a spec from tokens (letters, ',', '->', '...', stray '.', '-', '>', spaces and
// raw bytes) and picks operand shapes: either shapes that fit the spec's terms (so the planner and
// the executor run) or arbitrary ones (so the checks run). Bad specs and shapes must throw
// tessera::error; that is the contract. What must never happen:
//   - a crash, a sanitizer report, a hang or an exception of another type;
//   - results that depend on the contraction order: with small integer inputs every order gives
//     exactly the same numbers, so the chosen path, a left-to-right path and the out-parameter
//     form (into a reversed view) are compared element by element.
// Built with clang and -fsanitize=fuzzer,address,undefined (fuzz/CMakeLists.txt).
#include <tessera/tessera.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

using tessera::session;
using tessera::shape;
using tessera::tensor;

class program {
public:
    program(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
    std::uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
    std::size_t in(std::size_t lo, std::size_t hi) { return lo + byte() % (hi - lo + 1); }

private:
    const std::uint8_t* p_;
    const std::uint8_t* end_;
};

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "einsum_fuzz: %s\n", what);
    std::abort();
}

constexpr std::size_t max_operands = 4;

std::string any_spec(program& in) {
    static const char* const tokens[] = {"a", "b", "c", "i", "j", "k", "A", ",", "->", "...", ".", "-", ">", " ", "Z"};
    const std::size_t length = in.in(0, 20);
    std::string spec;
    for (std::size_t i = 0; i < length; ++i) {
        const std::size_t t = in.in(0, 15);
        if (t == 15)
            spec += static_cast<char>(in.byte());  // any byte, NUL and non-ASCII included
        else
            spec += tokens[t];
    }
    return spec;
}

/// Shapes that fit the spec's input terms: one extent per letter, 0-3 axes per '...'.
std::vector<shape> fitting_shapes(const std::string& spec, program& in) {
    std::array<std::size_t, 256> extent{};
    for (auto& e : extent) e = in.in(0, 3);
    std::vector<shape> shapes;
    std::vector<std::size_t> dims;
    const std::size_t arrow = spec.find("->");
    const std::string lhs = spec.substr(0, arrow);
    for (std::size_t i = 0; i <= lhs.size() && shapes.size() < max_operands; ++i) {
        if (i == lhs.size() || lhs[i] == ',') {
            if (dims.size() > tessera::max_rank) return {};
            shapes.emplace_back(std::span<const std::size_t>(dims));
            dims.clear();
        } else if (lhs.compare(i, 3, "...") == 0) {
            for (std::size_t k = in.in(0, 3); k > 0; --k) dims.push_back(in.in(1, 3));
            i += 2;
        } else if (lhs[i] != ' ') {
            dims.push_back(extent[static_cast<unsigned char>(lhs[i])]);
        }
    }
    return shapes;
}

std::vector<shape> any_shapes(program& in) {
    std::vector<shape> shapes;
    for (std::size_t n = in.in(1, max_operands); n > 0; --n) {
        std::array<std::size_t, 4> dims{};
        const std::size_t rank = in.in(0, 4);
        for (std::size_t i = 0; i < rank; ++i) dims[i] = in.in(0, 3);
        shapes.emplace_back(std::span<const std::size_t>(dims.data(), rank));
    }
    return shapes;
}

template <class Fn>
auto with_operands(const std::vector<tensor<double>>& t, Fn fn) {
    switch (t.size()) {
        case 1: return fn(t[0]);
        case 2: return fn(t[0], t[1]);
        case 3: return fn(t[0], t[1], t[2]);
        default: return fn(t[0], t[1], t[2], t[3]);
    }
}

void expect_same(const tensor<double>& a, const tensor<double>& b, const char* what) {
    if (!(a.shape() == b.shape())) fail(what);
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a.data()[i] != b.data()[i]) fail(what);
}

/// The out form with the operands as a runtime list, writing `out` in reverse order along its
/// first axis, read back as a dense tensor.
tensor<double> into_reversed(session& s, const std::string& spec,
                             const std::vector<tensor<double>>& ops, const shape& result) {
    tensor<double> buffer = tessera::full<double>(s, result, -1.0);
    const tessera::tensor_view<double> out =
        result.rank() > 0 ? buffer.view().flip(0) : buffer.view();
    const std::vector<tessera::tensor_view<const double>> views(ops.begin(), ops.end());
    tessera::einsum(s, spec, views, out);
    return tessera::contiguous(s, tessera::tensor_view<const double>(out));
}

void run(program& in) {
    const std::string spec = any_spec(in);
    const bool fitting = in.byte() % 4 != 0;
    std::vector<shape> shapes = fitting ? fitting_shapes(spec, in) : any_shapes(in);
    if (shapes.empty()) return;
    tessera::backend be{tessera::backend_options{}.with_threads(1)};
    be.run([&](session& s) {
        std::vector<tensor<double>> ops;
        for (const shape& sh : shapes) {
            tensor<double> t = tessera::empty<double>(s, sh);
            for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<double>(in.in(0, 4)) - 2;
            ops.push_back(std::move(t));
        }
        std::optional<tensor<double>> result;
        try {
            result = with_operands(ops, [&](const auto&... x) { return tessera::einsum(s, spec, x...); });
        } catch (const tessera::error&) {
            return;  // bad spec or shapes: the contract
        }
        if (result->rank() > tessera::max_rank) fail("result above the maximum rank");
        expect_same(*result, into_reversed(s, spec, ops, result->shape()),
                    "the out form differs from einsum");
        if (ops.size() < 2) return;
        std::vector<tessera::einsum_step> left_to_right(ops.size() - 1, {0, 1});
        try {
            const tensor<double> other = with_operands(ops, [&](const auto&... x) {
                return tessera::prepare<double>(s, spec, left_to_right, x.shape()...)(s, x...);
            });
            expect_same(*result, other, "the left-to-right path gives other numbers than the chosen one");
        } catch (const tessera::shape_error&) {
            // Left to right may need an intermediate above rank 8; the chosen path did not.
        }
    });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    program in(data, size);
    try {
        run(in);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "einsum_fuzz: unexpected exception: %s\n", e.what());
        std::abort();
    }
    return 0;
}
