// What the collective tests share: ranks as threads of this process, and an integer-valued input
// whose every partial sum is exact in float.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace easel::test {

// Runs fn(rank) on `p` threads, one per rank, and joins them.
inline void run_ranks(int p, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back(fn, r);
  for (auto& t : threads)
    t.join();
}

// Integer-valued input of rank r: every partial sum is exact in float.
inline float value(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * (i % 13) + rank);
}

}  // namespace easel::test
