// Shared fixtures: the thread counts executor-sensitive tests run at (1, 2 and the machine's).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace tessera::test {

/// 1, 2 and the machine's thread count, without duplicates.
inline std::vector<int> thread_counts() {
    std::vector<int> counts{1, 2};
    const int machine = static_cast<int>(std::thread::hardware_concurrency());
    if (machine > 2) counts.push_back(machine);
    return counts;
}

inline std::string thread_count_name(const ::testing::TestParamInfo<int>& info) {
    return "threads" + std::to_string(info.param);
}

}  // namespace tessera::test
