// The cold half of einsum: parsing a spec, checking it against the operands' shapes, choosing a
// contraction order, lowering each pairwise step to a matrix product or a strided loop, and the
// backend's plan cache. Nothing here runs on a warm call.

#include <tessera/detail/einsum.hpp>
#include <tessera/error.hpp>
#include <tessera/print.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace tessera::detail {
namespace {

using label_mask = std::uint64_t;
constexpr int ellipsis_mark = -1;
/// Operand counts up to this get an exhaustive search for the cheapest order; beyond, a greedy one.
constexpr std::size_t optimal_path_limit = 5;

char label_char(int label) {
    return static_cast<char>(label < 26 ? 'a' + label : 'A' + (label - 26));
}

[[noreturn]] void malformed(std::string_view spec, std::string_view why) {
    throw spec_error(fmt::format("einsum \"{}\": malformed spec: {}", spec, why));
}

/// A term of the spec: label ids (0-51) in order, ellipsis_mark where '...' stands.
struct term {
    std::vector<int> labels;
    bool ellipsis = false;
    std::size_t letters() const { return labels.size() - (ellipsis ? 1 : 0); }
    std::string spelled() const {
        std::string out;
        for (int l : labels) out += l == ellipsis_mark ? std::string("...") : std::string(1, label_char(l));
        return out;
    }
};

struct parsed_spec {
    std::vector<term> inputs;
    bool explicit_output = false;
    term output;
};

parsed_spec parse(std::string_view spec) {
    parsed_spec p;
    p.inputs.emplace_back();
    term* current = &p.inputs.back();
    for (std::size_t i = 0; i < spec.size(); ++i) {
        const char c = spec[i];
        if (c == ' ') continue;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            current->labels.push_back(c >= 'a' ? c - 'a' : 26 + (c - 'A'));
        } else if (c == ',') {
            if (p.explicit_output) malformed(spec, fmt::format("',' at position {} is after '->'", i));
            p.inputs.emplace_back();
            current = &p.inputs.back();
        } else if (c == '-') {
            if (i + 1 >= spec.size() || spec[i + 1] != '>')
                malformed(spec, fmt::format("'-' at position {} is not followed by '>'", i));
            if (p.explicit_output) malformed(spec, fmt::format("a second '->' at position {}", i));
            p.explicit_output = true;
            current = &p.output;
            ++i;
        } else if (c == '.') {
            if (spec.substr(i, 3) != "...")
                malformed(spec, fmt::format("'.' at position {} is not part of '...'", i));
            if (current->ellipsis)
                malformed(spec, fmt::format("a second '...' in one term at position {}", i));
            current->ellipsis = true;
            current->labels.push_back(ellipsis_mark);
            i += 2;
        } else {
            malformed(spec, fmt::format("'{}' at position {} is not a letter, ',', '->' or '...'",
                                        c >= 0x20 && c < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c)),
                                        i));
        }
    }
    return p;
}

double extent_product(label_mask m, const std::array<std::size_t, 64>& extent) {
    double p = 1;
    for (; m != 0; m &= m - 1) p *= static_cast<double>(extent[static_cast<std::size_t>(std::countr_zero(m))]);
    return p;
}

/// What the planner knows of a slot: its labels in axis order.
struct slot_labels {
    std::vector<int> labels;
    label_mask mask = 0;
};

label_mask mask_of(const std::vector<int>& labels) {
    label_mask m = 0;
    for (int l : labels) m |= label_mask{1} << l;
    return m;
}

std::int8_t position(const std::vector<int>& labels, int label) {
    for (std::size_t i = 0; i < labels.size(); ++i)
        if (labels[i] == label) return static_cast<std::int8_t>(i);
    return -1;
}

class planner {
public:
    planner(const plan_key& key, einsum_program& p) : key_(key), p_(p) {}

    void run() {
        const parsed_spec spec = parse(key_.spec);
        check_operands(spec);
        choose_output(spec);
        normalize_inputs();
        if (slots_.size() == 1) {
            if (!key_.path.empty())
                spec_fail(fmt::format("the path has {} step{} but one operand needs none", key_.path.size(),
                                      key_.path.size() == 1 ? "" : "s"));
            add_loop(0, 0, out_labels_, false);
        } else {
            sum_lonely_labels();
            contract_pairs();
        }
        p_.slots.clear();
        for (const slot_labels& s : slots_) p_.slots.push_back(shape_of(s.labels));
        p_.result = shape_of(out_labels_);
    }

private:
    [[noreturn]] void shape_fail(const std::string& why) const {
        throw shape_error(fmt::format("einsum \"{}\": {}", key_.spec, why));
    }
    [[noreturn]] void spec_fail(const std::string& why) const {
        throw spec_error(fmt::format("einsum \"{}\": {}", key_.spec, why));
    }

    std::string label_name(int l) const {
        return l < static_cast<int>(letter_labels) ? fmt::format("index '{}'", label_char(l))
                                                   : fmt::format("'...' axis {}", l - static_cast<int>(letter_labels));
    }

    void check_operands(const parsed_spec& spec) {
        const std::size_t n = spec.inputs.size();
        if (n != key_.shapes.size())
            spec_fail(fmt::format("the spec names {} operand{} but {} {} given", n, n == 1 ? "" : "s",
                                  key_.shapes.size(), key_.shapes.size() == 1 ? "was" : "were"));
        // How many axes each operand's '...' stands for; they broadcast aligned at the right.
        std::vector<std::size_t> spans(n, 0);
        for (std::size_t i = 0; i < n; ++i) {
            const term& t = spec.inputs[i];
            const shape& sh = *key_.shapes[i];
            if (!t.ellipsis && sh.rank() != t.letters())
                shape_fail(fmt::format("operand {} has shape {} but its subscripts \"{}\" name {} ax{}", i, to_string(sh),
                                       t.spelled(), t.letters(), t.letters() == 1 ? "is" : "es"));
            if (t.ellipsis && sh.rank() < t.letters())
                shape_fail(fmt::format("operand {} has shape {} but its subscripts \"{}\" name at least {} axes", i,
                                       to_string(sh), t.spelled(), t.letters()));
            spans[i] = t.ellipsis ? sh.rank() - t.letters() : 0;
            broadcast_rank_ = std::max(broadcast_rank_, spans[i]);
        }
        if (letter_labels + broadcast_rank_ > 64) shape_fail("too many '...' axes");
        std::array<int, 64> owner{};
        owner.fill(-1);
        std::array<std::size_t, 64> owner_axis{};
        for (std::size_t i = 0; i < n; ++i) {
            const term& t = spec.inputs[i];
            const shape& sh = *key_.shapes[i];
            std::vector<int> axes;
            for (int l : t.labels) {
                if (l != ellipsis_mark) {
                    axes.push_back(l);
                    continue;
                }
                for (std::size_t j = 0; j < spans[i]; ++j)
                    axes.push_back(static_cast<int>(letter_labels + broadcast_rank_ - spans[i] + j));
            }
            for (std::size_t a = 0; a < axes.size(); ++a) {
                const auto l = static_cast<std::size_t>(axes[a]);
                const std::size_t e = sh[a];
                const bool broadcast_axis = l >= letter_labels;
                if (broadcast_axis && e == 1) continue;  // stretches to whatever the others have
                if (owner[l] < 0) {
                    owner[l] = static_cast<int>(i);
                    owner_axis[l] = a;
                    extent_[l] = e;
                } else if (extent_[l] != e) {
                    const auto o = static_cast<std::size_t>(owner[l]);
                    if (broadcast_axis)
                        shape_fail(fmt::format("the '...' axes of operand {} {} and operand {} {} do not broadcast", o,
                                               to_string(*key_.shapes[o]), i, to_string(sh)));
                    shape_fail(fmt::format("{} has extent {} in operand {} {} (axis {}) but {} in operand {} {} (axis {})",
                                           label_name(axes[a]), extent_[l], o, to_string(*key_.shapes[o]), owner_axis[l], e, i,
                                           to_string(sh), a));
                }
            }
            input_axes_.push_back(std::move(axes));
        }
        for (std::size_t l = letter_labels; l < letter_labels + broadcast_rank_; ++l)
            if (owner[l] < 0) extent_[l] = 1;
    }

    void choose_output(const parsed_spec& spec) {
        std::array<int, 64> uses{};
        label_mask present = 0;
        for (const auto& axes : input_axes_)
            for (int l : axes) {
                ++uses[static_cast<std::size_t>(l)];
                present |= label_mask{1} << l;
            }
        if (spec.explicit_output) {
            label_mask seen = 0;
            for (int l : spec.output.labels) {
                if (l == ellipsis_mark) {
                    for (std::size_t j = 0; j < broadcast_rank_; ++j)
                        out_labels_.push_back(static_cast<int>(letter_labels + j));
                    continue;
                }
                const label_mask bit = label_mask{1} << l;
                if ((present & bit) == 0)
                    spec_fail(fmt::format("output index '{}' does not appear in any operand", label_char(l)));
                if ((seen & bit) != 0)
                    spec_fail(fmt::format("index '{}' appears more than once in the output", label_char(l)));
                seen |= bit;
                out_labels_.push_back(l);
            }
        } else {
            // NumPy's implicit output: the broadcast axes, then every index used exactly once, in
            // alphabetical (ASCII) order: upper case first.
            for (std::size_t j = 0; j < broadcast_rank_; ++j) out_labels_.push_back(static_cast<int>(letter_labels + j));
            for (int l = 26; l < 52; ++l)
                if (uses[static_cast<std::size_t>(l)] == 1) out_labels_.push_back(l);
            for (int l = 0; l < 26; ++l)
                if (uses[static_cast<std::size_t>(l)] == 1) out_labels_.push_back(l);
        }
        if (out_labels_.size() > max_rank)
            shape_fail(fmt::format("the result would have rank {}, above the maximum rank {}", out_labels_.size(),
                                   max_rank));
        out_mask_ = mask_of(out_labels_);
    }

    void normalize_inputs() {
        for (std::size_t i = 0; i < input_axes_.size(); ++i) {
            const std::vector<int>& axes = input_axes_[i];
            einsum_input m;
            m.rank = static_cast<std::uint8_t>(axes.size());
            slot_labels s;
            for (std::size_t a = 0; a < axes.size(); ++a) {
                std::int8_t at = position(s.labels, axes[a]);
                if (at < 0) {
                    at = static_cast<std::int8_t>(s.labels.size());
                    s.labels.push_back(axes[a]);
                }
                m.axis_to[a] = static_cast<std::uint8_t>(at);
                const auto l = static_cast<std::size_t>(axes[a]);
                m.broadcast[a] = l >= letter_labels && (*key_.shapes[i])[a] == 1 && extent_[l] != 1;
            }
            s.mask = mask_of(s.labels);
            p_.maps.push_back(m);
            slots_.push_back(std::move(s));
        }
    }

    shape shape_of(const std::vector<int>& labels) const {
        std::array<std::size_t, max_rank> dims{};
        for (std::size_t i = 0; i < labels.size(); ++i) dims[i] = extent_[static_cast<std::size_t>(labels[i])];
        return shape(std::span<const std::size_t>(dims.data(), labels.size()));
    }

    /// Adds a loop step over slot x (and y when binary) that writes `result` labels; returns its slot.
    std::size_t add_loop(std::size_t x, std::size_t y, const std::vector<int>& result, bool binary) {
        einsum_op op;
        op.kind = einsum_kind::loop;
        op.binary = binary;
        op.x = static_cast<std::uint16_t>(x);
        op.y = static_cast<std::uint16_t>(binary ? y : x);
        const std::vector<int>& lx = slots_[x].labels;
        const std::vector<int> none;
        const std::vector<int>& ly = binary ? slots_[y].labels : none;
        std::vector<int> order = result;
        const label_mask all = slots_[x].mask | (binary ? slots_[y].mask : 0);
        const label_mask summed = all & ~mask_of(result);
        for (int l : lx)
            if ((summed >> l) & 1) order.push_back(l);
        for (int l : ly)
            if (((summed >> l) & 1) && position(order, l) < 0) order.push_back(l);
        op.loop.outer = static_cast<std::uint8_t>(result.size());
        op.loop.inner = static_cast<std::uint8_t>(order.size() - result.size());
        for (std::size_t i = 0; i < order.size(); ++i) {
            op.loop.axis_x[i] = position(lx, order[i]);
            op.loop.axis_y[i] = position(ly, order[i]);
            op.loop.axis_o[i] = position(result, order[i]);
            op.loop.extent[i] = extent_[static_cast<std::size_t>(order[i])];
        }
        return finish(op, result);
    }

    std::size_t add_product(std::size_t x, std::size_t y, label_mask batch, label_mask contracted, bool last) {
        const std::vector<int>& lx = slots_[x].labels;
        const std::vector<int>& ly = slots_[y].labels;
        std::vector<int> bs, ms, ks, ns;
        for (int l : lx) {
            const label_mask bit = label_mask{1} << l;
            if (batch & bit) bs.push_back(l);
            else if (contracted & bit) ks.push_back(l);
            else ms.push_back(l);
        }
        for (int l : ly)
            if (!((batch | contracted) & (label_mask{1} << l))) ns.push_back(l);
        einsum_op op;
        op.kind = einsum_kind::product;
        op.binary = true;
        op.x = static_cast<std::uint16_t>(x);
        op.y = static_cast<std::uint16_t>(y);
        einsum_product& p = op.product;
        p.batch = static_cast<std::uint8_t>(bs.size());
        p.m = static_cast<std::uint8_t>(ms.size());
        p.k = static_cast<std::uint8_t>(ks.size());
        p.n = static_cast<std::uint8_t>(ns.size());
        std::size_t at = 0;
        for (const auto* group : {&bs, &ms, &ks})
            for (int l : *group) p.perm_x[at++] = static_cast<std::uint8_t>(position(lx, l));
        at = 0;
        for (const auto* group : {&bs, &ks, &ns})
            for (int l : *group) p.perm_y[at++] = static_cast<std::uint8_t>(position(ly, l));
        std::vector<int> result = bs;
        result.insert(result.end(), ms.begin(), ms.end());
        result.insert(result.end(), ns.begin(), ns.end());
        const auto extents = [&](const std::vector<int>& labels, const std::array<std::uint8_t, max_rank>& perm,
                                 std::array<std::size_t, max_rank>& ext) {
            for (std::size_t a = 0; a < labels.size(); ++a) ext[a] = extent_[static_cast<std::size_t>(labels[perm[a]])];
        };
        extents(lx, p.perm_x, p.ext_x);
        extents(ly, p.perm_y, p.ext_y);
        extents(result, identity_axes, p.ext_out);
        const auto product_of = [&](const std::vector<int>& labels) {
            std::size_t n = 1;
            for (int l : labels) n *= extent_[static_cast<std::size_t>(l)];
            return n;
        };
        const auto matrix = [&](std::size_t rows, std::size_t cols) {
            std::array<std::size_t, max_rank> dims{};
            for (std::size_t a = 0; a < bs.size(); ++a) dims[a] = extent_[static_cast<std::size_t>(bs[a])];
            dims[bs.size()] = rows;
            dims[bs.size() + 1] = cols;
            return shape(std::span<const std::size_t>(dims.data(), bs.size() + 2));
        };
        const std::size_t m = product_of(ms), k = product_of(ks), n = product_of(ns), b = product_of(bs);
        p.x_matrix = matrix(m, k);
        p.y_matrix = matrix(k, n);
        p.out_matrix = matrix(m, n);
        p.x_empty = b * m * k == 0;
        p.y_empty = b * k * n == 0;
        p.out_empty = b * m * n == 0;
        if (!last) return finish(op, result);
        // The last step writes the caller's output, visited in the product's [batch, m, n] order.
        for (std::size_t i = 0; i < result.size(); ++i)
            op.out_perm[i] = static_cast<std::uint8_t>(position(out_labels_, result[i]));
        p_.ops.push_back(op);
        p_.ops.back().out = static_cast<std::uint16_t>(slots_.size());
        slots_.push_back({out_labels_, out_mask_});
        return slots_.size() - 1;
    }

    std::size_t finish(einsum_op op, const std::vector<int>& result) {
        op.out = static_cast<std::uint16_t>(slots_.size());
        // Loop steps and intermediate results are written in their own label order: identity.
        op.out_perm = identity_axes;
        p_.ops.push_back(op);
        slots_.push_back({result, mask_of(result)});
        return slots_.size() - 1;
    }

    /// An index that only one operand has and the output lacks is summed out of it first.
    void sum_lonely_labels() {
        const std::size_t n = slots_.size();
        current_.clear();
        for (std::size_t i = 0; i < n; ++i) {
            label_mask others = out_mask_;
            for (std::size_t j = 0; j < n; ++j)
                if (j != i) others |= slots_[j].mask;
            const label_mask lonely = slots_[i].mask & ~others;
            if (lonely == 0) {
                current_.push_back(i);
                continue;
            }
            std::vector<int> keep;
            for (int l : slots_[i].labels)
                if (!((lonely >> l) & 1)) keep.push_back(l);
            current_.push_back(add_loop(i, i, keep, false));
        }
    }

    /// The labels the result of contracting `a` and `b` keeps, given the other operands.
    label_mask kept(label_mask a, label_mask b, label_mask others) const { return (a | b) & (others | out_mask_); }

    double step_cost(label_mask a, label_mask b, label_mask result) const {
        return extent_product(a | b, extent_) + extent_product(result, extent_);
    }

    std::vector<path_step> search_path() const {
        const std::size_t n = current_.size();
        std::vector<label_mask> masks;
        for (std::size_t id : current_) masks.push_back(slots_[id].mask);
        std::vector<path_step> path;
        if (n <= optimal_path_limit) {
            optimal_path(masks, path);
        } else {
            greedy_path(masks, path);
        }
        return path;
    }

    // Exhaustive search over subsets: best[S] is the cheapest way to contract the operands in S
    // into one tensor (3^n splits; 243 for n = 5).
    void optimal_path(const std::vector<label_mask>& masks, std::vector<path_step>& path) const {
        const std::size_t n = masks.size();
        const std::size_t full = (std::size_t{1} << n) - 1;
        std::vector<label_mask> labels(full + 1, 0), result(full + 1, 0);
        std::vector<double> best(full + 1, std::numeric_limits<double>::infinity());
        std::vector<std::size_t> split(full + 1, 0);
        for (std::size_t set = 1; set <= full; ++set) {
            for (std::size_t i = 0; i < n; ++i)
                if ((set >> i) & 1) labels[set] |= masks[i];
        }
        for (std::size_t set = 1; set <= full; ++set) result[set] = labels[set] & (labels[full ^ set] | out_mask_);
        for (std::size_t i = 0; i < n; ++i) best[std::size_t{1} << i] = 0;
        for (std::size_t set = 1; set <= full; ++set) {
            if (std::has_single_bit(set)) continue;
            if (set != full && static_cast<std::size_t>(std::popcount(result[set])) > max_rank) continue;
            const std::size_t low = set & (~set + 1);
            // Each split once: the part holding the lowest operand is `a`.
            for (std::size_t a = (set - 1) & set; a != 0; a = (a - 1) & set) {
                if (!(a & low)) continue;
                const std::size_t b = set ^ a;
                const double c = best[a] + best[b] + step_cost(result[a], result[b], result[set]);
                if (c < best[set]) {
                    best[set] = c;
                    split[set] = a;
                }
            }
        }
        if (!(best[full] < std::numeric_limits<double>::infinity()))
            shape_fail(fmt::format("every contraction order has an intermediate of rank above {}", max_rank));
        // Emit the tree in post-order, as positions in NumPy's shrinking operand list.
        std::vector<std::size_t> list;  // subsets standing in the list
        for (std::size_t i = 0; i < n; ++i) list.push_back(std::size_t{1} << i);
        const auto emit = [&](auto&& self, std::size_t set) -> void {
            if (std::has_single_bit(set)) return;
            self(self, split[set]);
            self(self, set ^ split[set]);
            const auto pa = static_cast<std::size_t>(std::find(list.begin(), list.end(), split[set]) - list.begin());
            const auto pb = static_cast<std::size_t>(std::find(list.begin(), list.end(), set ^ split[set]) - list.begin());
            path.push_back({std::min(pa, pb), std::max(pa, pb)});  // sorted, as NumPy prints paths
            list.erase(list.begin() + static_cast<std::ptrdiff_t>(std::max(pa, pb)));
            list.erase(list.begin() + static_cast<std::ptrdiff_t>(std::min(pa, pb)));
            list.push_back(set);
        };
        emit(emit, full);
    }

    // Greedy: repeatedly contract the pair whose step costs least.
    void greedy_path(std::vector<label_mask> masks, std::vector<path_step>& path) const {
        while (masks.size() > 1) {
            double best = std::numeric_limits<double>::infinity();
            path_step pick{0, 0};
            label_mask pick_result = 0;
            for (std::size_t i = 0; i < masks.size(); ++i)
                for (std::size_t j = i + 1; j < masks.size(); ++j) {
                    label_mask others = 0;
                    for (std::size_t k = 0; k < masks.size(); ++k)
                        if (k != i && k != j) others |= masks[k];
                    const label_mask r = kept(masks[i], masks[j], others);
                    if (masks.size() > 2 && static_cast<std::size_t>(std::popcount(r)) > max_rank) continue;
                    const double c = step_cost(masks[i], masks[j], r);
                    if (c < best) {
                        best = c;
                        pick = {i, j};
                        pick_result = r;
                    }
                }
            if (!(best < std::numeric_limits<double>::infinity()))
                shape_fail(fmt::format("the greedy search found no order that keeps every intermediate within rank {}; "
                                       "give prepare a path",
                                       max_rank));
            path.push_back(pick);
            masks.erase(masks.begin() + static_cast<std::ptrdiff_t>(pick[1]));
            masks.erase(masks.begin() + static_cast<std::ptrdiff_t>(pick[0]));
            masks.push_back(pick_result);
        }
    }

    void contract_pairs() {
        std::vector<path_step> path;
        if (!key_.path.empty()) {
            path.assign(key_.path.begin(), key_.path.end());
            if (path.size() + 1 != current_.size())
                spec_fail(fmt::format("the path has {} step{} but {} operands need {}", path.size(),
                                      path.size() == 1 ? "" : "s", current_.size(), current_.size() - 1));
        } else {
            path = search_path();
        }
        std::vector<std::size_t> list = current_;
        for (std::size_t step = 0; step < path.size(); ++step) {
            const auto [i, j] = path[step];
            if (i >= list.size() || j >= list.size() || i == j)
                spec_fail(fmt::format("path step {} ({}, {}) must name two different operands among 0..{}", step, i, j,
                                      list.size() - 1));
            const std::size_t x = list[i], y = list[j];
            label_mask others = 0;
            for (std::size_t k = 0; k < list.size(); ++k)
                if (k != i && k != j) others |= slots_[list[k]].mask;
            const bool last = list.size() == 2;
            const label_mask mx = slots_[x].mask, my = slots_[y].mask;
            const label_mask result = kept(mx, my, others);
            if (!last && static_cast<std::size_t>(std::popcount(result)) > max_rank)
                shape_fail(fmt::format("path step {} ({}, {}) would make an intermediate of rank {}, above {}", step, i,
                                       j, std::popcount(result), max_rank));
            const label_mask contracted = mx & my & ~result;
            const label_mask batch = mx & my & result;
            p_.flops += extent_product(mx | my, extent_);
            p_.cost += step_cost(mx, my, result);
            const double m = extent_product(mx & ~my, extent_), n = extent_product(my & ~mx, extent_);
            // Matrix products pay off when something is summed and the products are not mere dot
            // products; elementwise and outer products run as loops.
            const bool product = contracted != 0 && (m > 1 || n > 1) &&
                                 static_cast<std::size_t>(std::popcount(batch)) + 2 <= max_rank;
            std::size_t made = 0;
            if (product) {
                made = add_product(x, y, batch, contracted, last);
            } else {
                std::vector<int> labels;
                if (last) {
                    labels = out_labels_;
                } else {
                    for (int l : slots_[x].labels)
                        if ((result >> l) & 1) labels.push_back(l);
                    for (int l : slots_[y].labels)
                        if (((result >> l) & 1) && position(labels, l) < 0) labels.push_back(l);
                }
                made = add_loop(x, y, labels, true);
            }
            p_.path.push_back({i, j});
            list.erase(list.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
            list.erase(list.begin() + static_cast<std::ptrdiff_t>(std::min(i, j)));
            list.push_back(made);
        }
    }

    const plan_key& key_;
    einsum_program& p_;
    std::size_t broadcast_rank_ = 0;
    std::array<std::size_t, 64> extent_{};
    std::vector<std::vector<int>> input_axes_;
    std::vector<int> out_labels_;
    label_mask out_mask_ = 0;
    std::vector<slot_labels> slots_;
    std::vector<std::size_t> current_;
};

}  // namespace

std::uint64_t hash_of(const plan_key& key) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ull;
    const auto mix = [&h](std::uint64_t v) {
        h ^= v;
        h *= 0x100000001b3ull;
    };
    for (char c : key.spec) mix(static_cast<unsigned char>(c));
    mix(key.dtype);
    for (const shape* s : key.shapes) {
        mix(s->rank());
        for (std::size_t d : s->dims()) mix(d);
    }
    for (const path_step& st : key.path) {
        mix(st[0]);
        mix(st[1]);
    }
    return h;
}

std::shared_ptr<const einsum_program> make_einsum_program(const plan_key& key) {
    auto p = std::make_shared<einsum_program>();
    p->spec.assign(key.spec);
    p->dtype = key.dtype;
    for (const shape* s : key.shapes) p->inputs.push_back(*s);
    p->given_path.assign(key.path.begin(), key.path.end());
    planner(key, *p).run();
    return p;
}

const std::shared_ptr<const einsum_program>& find_plan_slow(session& s, const plan_key& key,
                                                           plan_slots::entry& slot) {
    plan_cache& cache = session_access::core(s).plans();
    const std::uint64_t hash = hash_of(key);
    session_counters& counters = session_access::counters(s);
    std::shared_ptr<const einsum_program> plan = cache.find(key, hash);
    if (plan != nullptr) {
        ++counters.plan_cache_hits;
    } else {
        plan = cache.insert(make_einsum_program(key), hash);
        ++counters.plan_cache_misses;
    }
    slot.spec = key.spec.data();
    slot.plan = std::move(plan);
    return slot.plan;
}

struct plan_cache::impl {
    using entry = std::pair<std::uint64_t, std::shared_ptr<const einsum_program>>;
    std::mutex mutex;
    std::list<entry> lru;  // most recently used first
    std::unordered_multimap<std::uint64_t, std::list<entry>::iterator> index;

    std::list<entry>::iterator lookup(const plan_key& key, std::uint64_t hash) {
        auto [lo, hi] = index.equal_range(hash);
        for (; lo != hi; ++lo)
            if (lo->second->second->matches(key)) return lo->second;
        return lru.end();
    }
};

plan_cache::plan_cache(std::size_t capacity) : impl_(std::make_unique<impl>()), capacity_(capacity) {}

plan_cache::~plan_cache() = default;

std::shared_ptr<const einsum_program> plan_cache::find(const plan_key& key, std::uint64_t hash) {
    std::lock_guard lock(impl_->mutex);
    const auto it = impl_->lookup(key, hash);
    if (it == impl_->lru.end()) return nullptr;
    impl_->lru.splice(impl_->lru.begin(), impl_->lru, it);
    return it->second;
}

std::shared_ptr<const einsum_program> plan_cache::insert(std::shared_ptr<const einsum_program> plan,
                                                         std::uint64_t hash) {
    std::vector<const shape*> shapes;
    for (const shape& s : plan->inputs) shapes.push_back(&s);
    const plan_key key{plan->spec, plan->dtype, shapes, plan->given_path};
    std::lock_guard lock(impl_->mutex);
    if (const auto it = impl_->lookup(key, hash); it != impl_->lru.end()) return it->second;  // a race: keep the first
    impl_->lru.emplace_front(hash, std::move(plan));
    impl_->index.emplace(hash, impl_->lru.begin());
    if (impl_->lru.size() > capacity_) {
        const auto victim = std::prev(impl_->lru.end());
        auto [lo, hi] = impl_->index.equal_range(victim->first);
        for (; lo != hi; ++lo)
            if (lo->second == victim) {
                impl_->index.erase(lo);
                break;
            }
        impl_->lru.pop_back();
        evictions_.fetch_add(1, std::memory_order_relaxed);
    }
    return impl_->lru.front().second;
}

void throw_einsum_out_shape(std::string_view spec, const shape& expected, const shape& got) {
    throw shape_error(fmt::format("einsum \"{}\": out has shape {} but the result has shape {}", spec, to_string(got),
                                  to_string(expected)));
}

void throw_einsum_alias(std::string_view spec, std::size_t operand) {
    throw alias_error(fmt::format("einsum \"{}\": out overlaps operand {}; einsum cannot write over its inputs",
                                  spec, operand));
}

void throw_einsum_plan_operands(std::string_view spec, std::size_t expected, std::size_t given) {
    throw spec_error(fmt::format("einsum \"{}\": the plan takes {} operand{} but {} {} given", spec, expected,
                                 expected == 1 ? "" : "s", given, given == 1 ? "was" : "were"));
}

void throw_einsum_operand_list(std::string_view spec, std::size_t given, std::size_t limit) {
    if (given == 0)
        throw spec_error(fmt::format("einsum \"{}\": the operand list is empty; einsum needs at least one operand", spec));
    throw spec_error(fmt::format("einsum \"{}\": the operand list holds {} operands, above the limit of {} for a "
                                 "runtime list (max_einsum_operands); contract the network in parts",
                                 spec, given, limit));
}

void throw_einsum_plan_shape(std::string_view spec, std::size_t operand, const shape& expected, const shape& got) {
    throw shape_error(fmt::format("einsum \"{}\": operand {} has shape {} but the plan was prepared for {}", spec,
                                  operand, to_string(got), to_string(expected)));
}

}  // namespace tessera::detail
