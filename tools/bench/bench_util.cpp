// Shared helpers of the bench sections: clocks, synchronised starts, workers, peak RSS.
#include <sys/resource.h>
#include <ctime>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "tools/bench/bench.hpp"

namespace easel::bench {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double run_together(const std::vector<std::unique_ptr<WorkerThread>>& workers,
                    const std::function<void(int)>& fn, std::vector<double>* each) {
  const int w = static_cast<int>(workers.size());
  std::atomic<int> arrived{0};
  std::vector<double> t0(static_cast<size_t>(w)), t1(static_cast<size_t>(w));
  std::vector<std::future<void>> done;
  for (int i = 0; i < w; ++i) {
    done.push_back(workers[static_cast<size_t>(i)]->post([&, i] {
      arrived.fetch_add(1, std::memory_order_acq_rel);
      while (arrived.load(std::memory_order_acquire) < w)
        std::this_thread::yield();
      t0[static_cast<size_t>(i)] = seconds_now();
      fn(i);
      t1[static_cast<size_t>(i)] = seconds_now();
    }));
  }
  for (auto& f : done)
    f.get();
  if (each) {
    each->resize(static_cast<size_t>(w));
    for (size_t i = 0; i < t0.size(); ++i)
      (*each)[i] = t1[i] - t0[i];
  }
  return *std::max_element(t1.begin(), t1.end()) - *std::min_element(t0.begin(), t0.end());
}

Result<std::vector<std::unique_ptr<WorkerThread>>> one_worker_per_core(const Topology& topo) {
  std::vector<std::unique_ptr<WorkerThread>> out;
  for (int c = 0; c < topo.core_count(); ++c) {
    GroupSpec spec;
    spec.id = c;
    spec.cpus = {topo.cores[static_cast<size_t>(c)][0]};
    EASEL_ASSIGN_OR_RETURN(auto w, WorkerThread::start(spec, true));
    out.push_back(std::move(w));
  }
  return out;
}

long peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

}  // namespace easel::bench
