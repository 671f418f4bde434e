#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/memory.hpp"
#include "engine/topology.hpp"
#include "engine/worker.hpp"

namespace easel {
namespace {

std::set<int> current_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::set<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.insert(c);
  }
  return out;
}

// The first PU of up to `n` cores of this machine.
std::vector<int> some_cpus(int n) {
  auto t = detect_topology();
  EASEL_CHECK(t.ok());
  std::vector<int> cpus;
  for (const auto& core : t->cores) {
    if (static_cast<int>(cpus.size()) == n) break;
    cpus.push_back(core.front());
  }
  return cpus;
}

// Whether this process may pin threads at all (containers may forbid it).
bool can_pin(const std::vector<int>& cpus) {
  bool ok = false;
  std::thread([&] { ok = pin_current_thread(cpus); }).join();
  return ok;
}

TEST(Worker, RunsOnAPinnedThreadWithItsTeam) {
  GroupSpec spec;
  spec.id = 0;
  spec.cpus = some_cpus(2);
  const int n = static_cast<int>(spec.cpus.size());
  auto w = WorkerThread::start(spec, /*pin=*/true);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ((*w)->threads(), n);
  EXPECT_EQ((*w)->spec().cpus, spec.cpus);

  std::thread::id worker_id;
  int max_threads = 0, team_size = 0;
  std::set<int> affinity;
  std::vector<std::set<int>> member_affinity(static_cast<size_t>(n));
  (*w)->run([&] {
    worker_id = std::this_thread::get_id();
    max_threads = omp_get_max_threads();
    affinity = current_affinity();
#pragma omp parallel
    {
#pragma omp single
      team_size = omp_get_num_threads();
      const int i = omp_get_thread_num();
      if (i < n) member_affinity[static_cast<size_t>(i)] = current_affinity();
    }
  });
  EXPECT_NE(worker_id, std::this_thread::get_id());
  EXPECT_EQ(max_threads, n);
  EXPECT_EQ(team_size, n);
  if (!can_pin(spec.cpus)) GTEST_SKIP() << "this process may not pin threads";
  // The worker thread is OpenMP thread 0 of its team: it ends up on the group's first cpu.
  const std::set<int> group(spec.cpus.begin(), spec.cpus.end());
  for (int c : affinity)
    EXPECT_TRUE(group.count(c)) << "worker may run on cpu " << c;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(member_affinity[static_cast<size_t>(i)], std::set<int>{spec.cpus[i]})
        << "OpenMP thread " << i;
  }
}

TEST(Worker, UnpinnedStillSizesTheTeam) {
  GroupSpec spec;
  spec.cpus = {0, 0, 0};  // three threads, unpinned: the cpu values are not used
  auto w = WorkerThread::start(spec, /*pin=*/false);
  ASSERT_TRUE(w.ok());
  int max_threads = 0;
  (*w)->run([&] { max_threads = omp_get_max_threads(); });
  EXPECT_EQ(max_threads, 3);
}

TEST(Worker, ExceptionsPropagateThroughTheFuture) {
  GroupSpec spec;
  spec.cpus = some_cpus(1);
  auto w = WorkerThread::start(spec, true);
  ASSERT_TRUE(w.ok());
  auto f = (*w)->post([] { throw std::runtime_error("boom"); });
  EXPECT_THROW(f.get(), std::runtime_error);
  // The worker keeps serving after a failed task.
  int x = 0;
  (*w)->run([&] { x = 5; });
  EXPECT_EQ(x, 5);
}

TEST(Worker, DestructorDrainsPostedWork) {
  std::atomic<int> done{0};
  {
    GroupSpec spec;
    spec.cpus = some_cpus(1);
    auto w = WorkerThread::start(spec, true);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 100; ++i) {
      (void)(*w)->post([&] {
        if (done.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        done.fetch_add(1);
      });
    }
  }
  EXPECT_EQ(done.load(), 100);
}

TEST(Worker, SeveralWorkersRunConcurrently) {
  const std::vector<int> cpus = some_cpus(4);
  std::vector<std::unique_ptr<WorkerThread>> workers;
  for (size_t i = 0; i < 4; ++i) {
    GroupSpec spec;
    spec.id = static_cast<int>(i);
    spec.cpus = {cpus[i % cpus.size()]};
    auto w = WorkerThread::start(spec, true);
    ASSERT_TRUE(w.ok());
    workers.push_back(std::move(w).value());
  }
  // Every worker waits until all four are inside a task at once: only concurrent threads pass.
  std::atomic<int> inside{0};
  std::vector<std::future<void>> futures;
  std::vector<std::thread::id> ids(4);
  std::vector<int> met(4, 0);
  for (size_t i = 0; i < 4; ++i) {
    futures.push_back(workers[i]->post([&, i] {
      ids[i] = std::this_thread::get_id();
      inside.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (inside.load() < 4 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      met[i] = inside.load() == 4;
    }));
  }
  for (auto& f : futures)
    f.get();
  EXPECT_EQ(met, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), 4u);
}

TEST(Worker, RefusesAnEmptyGroup) {
  GroupSpec spec;
  auto w = WorkerThread::start(spec, true);
  EXPECT_FALSE(w.ok());
}

// Two threads pinned to one cpu, each busy for 300 ms of wall time: each spends a good part of
// it runnable while the other runs, and thread_runqueue_seconds() must see that.
TEST(Worker, RunqueueSecondsSeeAThreadWaitingForItsCpu) {
  if (thread_runqueue_seconds() < 0) GTEST_SKIP() << "no /proc/thread-self/schedstat";
  std::atomic<int> pinned{0};
  double waited[2] = {0, 0};
  auto busy = [&](int i) {
    if (pin_current_thread({0})) pinned.fetch_add(1);
    const double q0 = thread_runqueue_seconds();
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < end)
      x = x + 1;
    waited[i] = thread_runqueue_seconds() - q0;
  };
  std::thread a(busy, 0), b(busy, 1);
  a.join();
  b.join();
  if (pinned.load() != 2) GTEST_SKIP() << "cannot pin threads here";
  EXPECT_GE(waited[0], 0.0);
  EXPECT_GE(waited[1], 0.0);
  // Sharing one cpu for 300 ms each, they wait about 150 ms each; alone they would wait ~0.
  EXPECT_GT(waited[0] + waited[1], 0.1) << waited[0] << " " << waited[1];
}

// A pinned group on a machine of several nodes (numa_node set) binds its thread's buffers to
// its locality's nodes; on one node (numa_node -1) nothing is bound.
TEST(WorkerThread, PinnedGroupBindsItsNodes) {
  GroupSpec spec;
  spec.cpus = {sched_getcpu()};
  spec.numa_node = 0;
  spec.dram_node = 0;
  spec.hbw_node = 0;
  auto w = WorkerThread::start(spec, true);
  ASSERT_TRUE(w.ok());
  NodeBinding seen;
  (*w)->run([&] { seen = thread_node_binding(); });
  EXPECT_EQ(seen.dram_node, 0);
  EXPECT_EQ(seen.hbw_node, 0);
  spec.numa_node = -1;
  auto one = WorkerThread::start(spec, true);
  ASSERT_TRUE(one.ok());
  (*one)->run([&] { seen = thread_node_binding(); });
  EXPECT_EQ(seen.dram_node, -1);
}

}  // namespace
}  // namespace easel
