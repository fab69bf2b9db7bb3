// NumPy-style text for shapes, views and tensors; tessera/print.hpp describes the format. The
// layout follows NumPy's _formatArray (str() defaults: linewidth 75, edgeitems 3, threshold 1000)
// so that output reads the same to anyone used to NumPy.
#include <tessera/print.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {
namespace {

constexpr std::size_t line_width = 75;
constexpr std::size_t edge_items = 3;
constexpr std::size_t summary_threshold = 1000;
constexpr std::size_t max_significant_digits = 8;

// Which entries are shown: all of them, or, for a summarised view, the first and last edge_items
// of every axis longer than 2 * edge_items.
struct plan {
    const shape& extents;
    bool summarise;

    bool gap(std::size_t axis) const noexcept {
        return summarise && extents[axis] > 2 * edge_items;
    }
    std::size_t shown(std::size_t axis) const noexcept {
        return gap(axis) ? 2 * edge_items : extents[axis];
    }
    // The index of the i-th shown entry of `axis`.
    std::size_t index(std::size_t axis, std::size_t i) const noexcept {
        return gap(axis) && i >= edge_items ? extents[axis] - 2 * edge_items + i : i;
    }
};

// Appends the shown elements in display order, walking the strides (any sign, or 0).
template <class T>
void gather(const T* p, const tensor_view<const T>& v, const plan& pl, std::size_t axis,
            std::vector<T>& out) {
    if (axis == v.rank()) {
        out.push_back(*p);
        return;
    }
    for (std::size_t i = 0; i < pl.shown(axis); ++i)
        gather(p + static_cast<std::ptrdiff_t>(pl.index(axis, i)) * v.stride(axis), v, pl, axis + 1,
               out);
}

// A real value ready to print. For a finite one, value = -/+ d0.d1d2... * 10^exponent with
// `digits` = "d0d1d2..." free of trailing zeros (zero is "0" with exponent 0).
struct number {
    enum class kind { finite, nan, inf };
    kind k = kind::finite;
    bool negative = false;
    std::string digits;
    int exponent = 0;
    double magnitude = 0.0;
};

number parse_scientific(const char* first, const char* last) {
    number n;
    if (*first == '-') {
        n.negative = true;
        ++first;
    }
    for (; first != last && *first != 'e'; ++first)
        if (*first != '.') n.digits += *first;
    ++first;                     // 'e'
    if (*first == '+') ++first;  // from_chars takes '-' but not '+'
    std::from_chars(first, last, n.exponent);
    while (n.digits.size() > 1 && n.digits.back() == '0') n.digits.pop_back();
    return n;
}

// The shortest round-trip digits of x, rounded to max_significant_digits when longer.
template <class R>
number to_number(R x) {
    number n;
    if (std::isnan(x)) {
        n.k = number::kind::nan;
        return n;
    }
    if (std::isinf(x)) {
        n.k = number::kind::inf;
        n.negative = x < 0;
        return n;
    }
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    n = parse_scientific(buf, res.ptr);
    if (n.digits.size() > max_significant_digits) {
        res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific,
                            static_cast<int>(max_significant_digits) - 1);
        n = parse_scientific(buf, res.ptr);
    }
    n.magnitude = std::abs(static_cast<double>(x));
    return n;
}

// One notation and one digit count for a whole set of values (a real tensor, or the real or
// the imaginary parts of a complex one), chosen as NumPy chooses.
struct notation {
    bool scientific = false;
    std::size_t fraction_digits = 0;  // after the point (of the mantissa, when scientific)
    std::size_t exponent_digits = 2;
};

std::size_t decimal_width(unsigned value) {
    std::size_t w = 1;
    for (; value >= 10; value /= 10) ++w;
    return w;
}

notation choose_notation(std::span<const number> values) {
    double largest = 0.0;
    double smallest = std::numeric_limits<double>::infinity();
    for (const number& n : values) {
        if (n.k != number::kind::finite || n.magnitude == 0.0) continue;
        largest = std::max(largest, n.magnitude);
        smallest = std::min(smallest, n.magnitude);
    }
    notation f;
    f.scientific = largest > 0.0 && (largest >= 1e8 || smallest < 1e-4 || largest / smallest > 1e3);
    for (const number& n : values) {
        if (n.k != number::kind::finite) continue;
        const auto significant = static_cast<std::ptrdiff_t>(n.digits.size());
        if (f.scientific) {
            f.fraction_digits = std::max(f.fraction_digits, n.digits.size() - 1);
            f.exponent_digits = std::max(
                f.exponent_digits, decimal_width(static_cast<unsigned>(std::abs(n.exponent))));
        } else {
            const std::ptrdiff_t after_point = significant - 1 - n.exponent;
            f.fraction_digits =
                std::max(f.fraction_digits,
                         static_cast<std::size_t>(std::max<std::ptrdiff_t>(after_point, 0)));
        }
    }
    return f;
}

// Renders one value. `plus` writes '+' before non-negative values (imaginary parts); without
// `bare_point` an integral value ends without the '.' ("2" rather than "2.").
std::string render(const number& n, const notation& f, bool plus, bool bare_point) {
    std::string s;
    if (n.k == number::kind::nan) return plus ? "+nan" : "nan";
    if (n.negative)
        s += '-';
    else if (plus)
        s += '+';
    if (n.k == number::kind::inf) return s + "inf";
    auto digit = [&n](std::ptrdiff_t i) {
        return i >= 0 && i < static_cast<std::ptrdiff_t>(n.digits.size())
                   ? n.digits[static_cast<std::size_t>(i)]
                   : '0';
    };
    const auto fraction = static_cast<std::ptrdiff_t>(f.fraction_digits);
    if (f.scientific) {
        s += n.digits[0];
        if (fraction > 0 || bare_point) s += '.';
        for (std::ptrdiff_t j = 1; j <= fraction; ++j) s += digit(j);
        const std::string e = std::to_string(std::abs(n.exponent));
        s += n.exponent < 0 ? "e-" : "e+";
        s.append(f.exponent_digits - e.size(), '0');
        s += e;
    } else {
        if (n.exponent < 0) {
            s += '0';
        } else {
            for (std::ptrdiff_t i = 0; i <= n.exponent; ++i) s += digit(i);
        }
        if (fraction > 0 || bare_point) s += '.';
        for (std::ptrdiff_t j = 1; j <= fraction; ++j) s += digit(n.exponent + j);
    }
    return s;
}

std::vector<std::string> render_all(std::span<const number> values, bool plus, bool bare_point) {
    const notation f = choose_notation(values);
    std::vector<std::string> out;
    out.reserve(values.size());
    for (const number& n : values) out.push_back(render(n, f, plus, bare_point));
    return out;
}

std::size_t widest(std::span<const std::string> words) {
    std::size_t w = 0;
    for (const std::string& s : words) w = std::max(w, s.size());
    return w;
}

std::string pad_left(const std::string& s, std::size_t width) {
    return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

template <class T>
std::vector<std::string> words_of(const std::vector<T>& values) {
    std::vector<std::string> words;
    words.reserve(values.size());
    if constexpr (std::is_same_v<T, bool>) {
        for (bool b : values) words.emplace_back(b ? "true" : "false");
    } else if constexpr (std::is_integral_v<T>) {
        for (T x : values) words.push_back(fmt::format_int(x).str());
    } else if constexpr (is_complex_v<T>) {
        std::vector<number> re, im;
        re.reserve(values.size());
        im.reserve(values.size());
        for (const T& z : values) {
            re.push_back(to_number(z.real()));
            im.push_back(to_number(z.imag()));
        }
        // Real and imaginary parts are aligned separately, so the signs between them line up.
        const std::vector<std::string> r = render_all(re, false, false);
        const std::vector<std::string> i = render_all(im, true, false);
        const std::size_t rw = widest(r);
        const std::size_t iw = widest(i);
        for (std::size_t k = 0; k < values.size(); ++k)
            words.push_back(pad_left(r[k], rw) + pad_left(i[k], iw) + 'j');
    } else {
        std::vector<number> ns;
        ns.reserve(values.size());
        for (T x : values) ns.push_back(to_number(x));
        words = render_all(ns, false, true);
    }
    return words;
}

// NumPy's _formatArray: brackets per axis, a hanging indent of one space per open bracket,
// rows wrapped to line_width, "..." for the entries a summary leaves out.
class layout {
public:
    layout(const plan& pl, std::span<const std::string> words)
        : plan_(pl), words_(words), width_(widest(words)) {}

    std::string run() { return nest(0, " ", line_width); }

private:
    std::string next_word() { return pad_left(words_[next_++], width_); }

    // Appends `word` to `line`, first moving `line` to `s` when the word would overflow it
    // (unless the line holds nothing but its indent, where wrapping would not help).
    static void extend(std::string& s, std::string& line, const std::string& word,
                       std::size_t width, const std::string& indent) {
        if (line.size() + word.size() > width && line.size() > indent.size()) {
            while (!line.empty() && line.back() == ' ') line.pop_back();
            s += line;
            s += '\n';
            line = indent;
        }
        line += word;
    }

    std::string nest(std::size_t axis, const std::string& indent, std::size_t width) {
        const std::size_t axes_left = plan_.extents.rank() - axis;
        const std::string inner_indent = indent + ' ';
        const std::size_t inner_width = width - 1;  // room for this axis's ']'
        const std::size_t shown = plan_.shown(axis);
        const bool gap = plan_.gap(axis);
        std::string s;
        if (axes_left == 1) {
            const std::size_t element_width = width - 1;
            std::string line = indent;
            for (std::size_t i = 0; i < shown; ++i) {
                if (gap && i == edge_items) {
                    extend(s, line, "...", element_width, indent);
                    line += ' ';
                }
                extend(s, line, next_word(), element_width, indent);
                if (i + 1 < shown) line += ' ';
            }
            s += line;
        } else {
            const std::string separator(axes_left - 1, '\n');
            for (std::size_t i = 0; i < shown; ++i) {
                if (gap && i == edge_items) s += indent + "..." + separator;
                s += indent + nest(axis + 1, inner_indent, inner_width);
                if (i + 1 < shown) s += separator;
            }
        }
        return '[' + s.substr(indent.size()) + ']';
    }

    const plan& plan_;
    std::span<const std::string> words_;
    std::size_t width_;
    std::size_t next_ = 0;
};

}  // namespace

std::string to_string(const shape& s) {
    return fmt::format("[{}]", fmt::join(s.dims(), ","));
}

std::ostream& operator<<(std::ostream& os, const shape& s) {
    return os << to_string(s);
}

std::string to_string(const stats& st) {
    std::string text;
#define TESSERA_PRINT_COUNTER(name, meaning) \
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", #name, st.name);
    TESSERA_SESSION_COUNTERS(TESSERA_PRINT_COUNTER)
    TESSERA_BACKEND_COUNTERS(TESSERA_PRINT_COUNTER)
    TESSERA_GAUGES(TESSERA_PRINT_COUNTER)
#undef TESSERA_PRINT_COUNTER
    return text;
}

std::ostream& operator<<(std::ostream& os, const stats& st) {
    return os << to_string(st);
}

template <element T>
std::string to_string(const tensor_view<const T>& v) {
    if (v.size() == 0) return "[]";
    const plan pl{v.shape(), v.size() > summary_threshold};
    std::vector<T> shown;
    gather(v.data(), v, pl, 0, shown);
    const std::vector<std::string> words = words_of(shown);
    if (v.rank() == 0) return words[0];
    return layout(pl, words).run();
}

template <element T>
std::ostream& operator<<(std::ostream& os, const tensor_view<const T>& v) {
    return os << to_string(v);
}

template std::string to_string<float>(const tensor_view<const float>&);
template std::string to_string<double>(const tensor_view<const double>&);
template std::string to_string<std::complex<float>>(const tensor_view<const std::complex<float>>&);
template std::string to_string<std::complex<double>>(
    const tensor_view<const std::complex<double>>&);
template std::string to_string<std::int32_t>(const tensor_view<const std::int32_t>&);
template std::string to_string<std::int64_t>(const tensor_view<const std::int64_t>&);
template std::string to_string<bool>(const tensor_view<const bool>&);

template std::ostream& operator<< <float>(std::ostream&, const tensor_view<const float>&);
template std::ostream& operator<< <double>(std::ostream&, const tensor_view<const double>&);
template std::ostream& operator<< <std::complex<float>>(
    std::ostream&, const tensor_view<const std::complex<float>>&);
template std::ostream& operator<< <std::complex<double>>(
    std::ostream&, const tensor_view<const std::complex<double>>&);
template std::ostream& operator<< <std::int32_t>(std::ostream&,
                                                 const tensor_view<const std::int32_t>&);
template std::ostream& operator<< <std::int64_t>(std::ostream&,
                                                 const tensor_view<const std::int64_t>&);
template std::ostream& operator<< <bool>(std::ostream&, const tensor_view<const bool>&);

}  // namespace tessera
