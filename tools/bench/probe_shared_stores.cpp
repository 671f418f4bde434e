// probe_shared_stores: what a store costs when another core has just read the line. One thread
// on each of two cpus takes turns: the writer overwrites a buffer, then the reader sums it. The
// writer's stores go through the cache (span_copy) or are streamed (engine/span_ops.hpp's
// stream_store); a third mode has the reader sum a buffer of its own, so that nobody shares
// the writer's lines. Prints the median per-call times of the write and of the read. This is
// the measurement behind the streamed stores of sync-easgd's partitioned exchange.
//
//   probe_shared_stores [--floats N] [--iters K] [--cpus A,B]   (defaults: 215552, 400, 0,1)
//
// N = 215552 floats is half of LeNet's arena (0.86 MB): the slice another group reads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/arena.hpp"
#include "engine/span_ops.hpp"
#include "engine/worker.hpp"

namespace easel {
namespace {

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

enum class Mode { through_cache, streamed, nobody_shares };

struct Times {
  double write_us = 0, read_us = 0;
};

Times run(Mode mode, int64_t n, int iters, int cpu_w, int cpu_r) {
  std::vector<float> src(static_cast<size_t>(n), 1.f);
  auto shared = Arena::create(n, MemKind::dram);
  auto own = Arena::create(n, MemKind::dram);
  if (!shared.ok() || !own.ok()) {
    std::fprintf(stderr, "probe_shared_stores: cannot allocate %lld floats\n",
                 static_cast<long long>(n));
    std::exit(1);
  }
  float* buf = shared->data();
  const float* read_from = mode == Mode::nobody_shares ? own->data() : buf;
  std::atomic<int> turn{0};  // 0: the writer's, 1: the reader's
  std::vector<double> w_us, r_us;
  std::thread writer([&] {
    pin_current_thread({cpu_w});
    for (int it = 0; it < iters; ++it) {
      while (turn.load(std::memory_order_acquire) != 0) {
      }
      src[0] = static_cast<float>(it);
      const double t0 = now();
      if (mode == Mode::streamed) {
        stream_store(buf, src.data(), n);
        stream_fence();
      } else {
        span_copy(buf, src.data(), n);
      }
      w_us.push_back(1e6 * (now() - t0));
      turn.store(1, std::memory_order_release);
    }
  });
  pin_current_thread({cpu_r});
  volatile float sink = 0;
  for (int it = 0; it < iters; ++it) {
    while (turn.load(std::memory_order_acquire) != 1) {
    }
    const double t0 = now();
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i)
      s += read_from[i];
    sink = sink + s;
    r_us.push_back(1e6 * (now() - t0));
    turn.store(0, std::memory_order_release);
  }
  writer.join();
  return {median(w_us), median(r_us)};
}

}  // namespace
}  // namespace easel

int main(int argc, char** argv) {
  using namespace easel;
  int64_t n = 215552;
  int iters = 400, cpu_a = 0, cpu_b = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--floats" && v) {
      n = std::atoll(v);
      ++i;
    } else if (a == "--iters" && v) {
      iters = std::atoi(v);
      ++i;
    } else if (a == "--cpus" && v && std::sscanf(v, "%d,%d", &cpu_a, &cpu_b) == 2) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "probe_shared_stores: bad argument '%s' (usage: --floats N --iters K "
                   "--cpus A,B)\n",
                   a.c_str());
      return 2;
    }
  }
  if (n < 16 || n > (int64_t{1} << 30) || iters < 1 || cpu_a < 0 || cpu_b < 0 || cpu_a == cpu_b) {
    std::fprintf(stderr,
                 "probe_shared_stores: --floats must be in [16, 2^30], --iters >= 1, and the "
                 "two --cpus distinct and >= 0\n");
    return 2;
  }
  std::printf("%lld floats (%.2f MB), writer on cpu %d, reader on cpu %d, %d turns, medians\n",
              static_cast<long long>(n), static_cast<double>(n) * 4 / 1e6, cpu_a, cpu_b, iters);
  const struct {
    Mode mode;
    const char* name;
  } modes[] = {{Mode::through_cache, "stores through the cache, the reader then reads them"},
               {Mode::streamed, "streamed stores, the reader then reads them"},
               {Mode::nobody_shares, "stores through the cache, the reader reads its own"}};
  for (const auto& m : modes) {
    const Times t = run(m.mode, n, iters, cpu_a, cpu_b);
    std::printf("%-56s write %7.1f us   read %7.1f us\n", m.name, t.write_us, t.read_us);
  }
  return 0;
}
