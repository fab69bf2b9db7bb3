// reduce_tree_streams reads four subtrees side by side and must still build reduce_tree's tree
// exactly: checked with a join that is neither associative nor commutative, so any other grouping
// or order of the leaves gives another value.
#include <tessera/detail/reduce_leaves.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

namespace {

using tessera::detail::reductions::reduce_tree;
using tessera::detail::reductions::reduce_tree_streams;

// join(a, b) = a * k + b (mod 2^64), with leaf i = i + 1: (a k + b) k + c and a k + (b k + c)
// differ, and so do a k + b and b k + a.
constexpr auto leaf = [](std::size_t i) { return static_cast<std::uint64_t>(i) + 1; };
constexpr auto join = [](std::uint64_t a, std::uint64_t b) { return a * 1'000'003u + b; };

TEST(ReduceTreeTest, TheStreamedTreeIsTheTree) {
    for (std::size_t n = 1; n <= 600; ++n)
        ASSERT_EQ(reduce_tree_streams<std::uint64_t>(0, n, leaf, join),
                  reduce_tree<std::uint64_t>(0, n, leaf, join))
            << n << " leaves";
    for (const std::size_t n : {1023u, 1024u, 1025u, 4097u, 65536u, 100'001u})
        ASSERT_EQ(reduce_tree_streams<std::uint64_t>(0, n, leaf, join),
                  reduce_tree<std::uint64_t>(0, n, leaf, join))
            << n << " leaves";
    // A range that is a subtree elsewhere in a larger tree (as a parallel chunk reduces it).
    EXPECT_EQ(reduce_tree_streams<std::uint64_t>(4096, 4096 + 3000, leaf, join),
              reduce_tree<std::uint64_t>(4096, 4096 + 3000, leaf, join));
}

}  // namespace
