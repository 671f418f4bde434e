// What the collective tests share: ranks as threads of this process, and an integer-valued input
// whose every partial sum is exact in float.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/worker.hpp"

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

// What the other ranks saw when rank `missing` never arrived: fn(rank) ran on each of them, a
// Stalled it threw counted; the first stall message (engine/worker.hpp), the seconds until all
// returned and how many threw. The caller sets the stall timeout.
struct StallSeen {
  std::string what;
  double seconds = 0;
  int threw = 0;
};
inline StallSeen run_without(int p, int missing, const std::function<void(int)>& fn) {
  clear_stall();
  std::vector<int> threw(static_cast<size_t>(p), 0);
  const auto t0 = std::chrono::steady_clock::now();
  run_ranks(p, [&](int r) {
    if (r == missing) return;
    try {
      fn(r);
    } catch (const Stalled&) {
      threw[static_cast<size_t>(r)] = 1;
    }
  });
  StallSeen seen;
  seen.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  seen.what = first_stall();
  for (int x : threw)
    seen.threw += x;
  return seen;
}

}  // namespace easel::test
