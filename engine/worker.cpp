// A worker group's pinned thread and its OpenMP team.
#include "engine/worker.hpp"

#include <omp.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "engine/comm/smpi.hpp"
#include "engine/log.hpp"
#include "engine/memory.hpp"

namespace easel {
namespace {

constexpr int kMaxCpus = 4096;

std::string list_string(const std::vector<int>& cpus) {
  std::string s;
  for (int c : cpus) {
    if (!s.empty()) s += ',';
    s += std::to_string(c);
  }
  return s;
}

struct StallState {
  std::mutex mu;
  std::string first;  // guarded by mu
  std::atomic<bool> declared{false};
  std::atomic<double> timeout{0};  // 0: not read yet
};

StallState& stall_state() {
  static StallState s;
  return s;
}

}  // namespace

double stall_timeout_seconds() {
  StallState& s = stall_state();
  double t = s.timeout.load(std::memory_order_relaxed);
  if (t > 0) return t;
  t = 300;
  if (const char* env = std::getenv("EASEL_STALL_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end != env && *end == '\0' && v > 0)
      t = v;
    else
      log_warn("worker", std::string("EASEL_STALL_TIMEOUT=") + env +
                             ": not a positive number of seconds; the stall timeout is 300 s");
  }
  s.timeout.store(t, std::memory_order_relaxed);
  return t;
}

void set_stall_timeout_seconds(double seconds) {
  stall_state().timeout.store(seconds, std::memory_order_relaxed);
}

void declare_stall(const std::string& what) {
  StallState& s = stall_state();
  {
    std::lock_guard lock(s.mu);
    if (s.first.empty()) s.first = what;
  }
  s.declared.store(true, std::memory_order_release);
}

void stalled(const std::string& what) {
  declare_stall(what);
  throw Stalled(what);
}

bool stall_declared() {
  return stall_state().declared.load(std::memory_order_acquire);
}

std::string first_stall() {
  StallState& s = stall_state();
  std::lock_guard lock(s.mu);
  return s.first;
}

void clear_stall() {
  StallState& s = stall_state();
  std::lock_guard lock(s.mu);
  s.first.clear();
  s.declared.store(false, std::memory_order_release);
}

void throw_if_stalled() {
  if (stall_declared()) throw Stalled(first_stall());
}

bool pin_current_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  if (set == nullptr) return false;
  const size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  CPU_ZERO_S(size, set);
  for (int c : cpus) {
    if (c < 0 || c >= kMaxCpus) {
      CPU_FREE(set);
      return false;
    }
    CPU_SET_S(static_cast<size_t>(c), size, set);
  }
  const int rc = sched_setaffinity(0, size, set);
  CPU_FREE(set);
  return rc == 0;
}

double thread_runqueue_seconds() {
  // schedstat: "<ns on cpu> <ns waiting on a run queue> <timeslices>"
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (f == nullptr) return -1;
  unsigned long long run_ns = 0, wait_ns = 0;
  const int n = std::fscanf(f, "%llu %llu", &run_ns, &wait_ns);
  std::fclose(f);
  return n == 2 ? static_cast<double>(wait_ns) * 1e-9 : -1;
}

// Under SimGrid's SMPI (smpi::built()) a rank may call MPI only from its own thread
// (MPI_THREAD_SINGLE; every rank is a simulated process in one real one): a group's work runs
// inline on the thread that posts it, with an OpenMP team of one, and a rank has one group (its
// inline WorkerThread count is per rank: SMPI gives every rank its own copy of this global).
namespace {
int inline_live_workers = 0;
}

Result<std::unique_ptr<WorkerThread>> WorkerThread::start(const GroupSpec& spec, bool pin) {
  if (spec.cpus.empty()) {
    return invalid_argument("worker group " + std::to_string(spec.id) + " has no cpus");
  }
  if (smpi::built() && inline_live_workers > 0)
    return invalid_argument(
        "--groups: a simulated (SMPI) rank runs one worker group (MPI is called from the rank's "
        "own thread); give each group a rank (-np) instead");
  std::unique_ptr<WorkerThread> w;
  try {
    w.reset(new WorkerThread(spec, pin));
  } catch (const std::system_error& e) {
    return unavailable("cannot start the thread of worker group " + std::to_string(spec.id) + ": " +
                       e.what());
  }
  // The thread pins itself and builds its team first; wait for that to finish.
  w->run([] {});
  return w;
}

WorkerThread::WorkerThread(GroupSpec spec, bool pin) : spec_(std::move(spec)), pin_(pin) {
  if (smpi::built()) {  // inline: no thread
    ++inline_live_workers;
    omp_set_num_threads(1);
    return;
  }
  thread_ = std::thread([this] { loop(); });
}

WorkerThread::~WorkerThread() {
  if (smpi::built()) {
    --inline_live_workers;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::future<void> WorkerThread::post(std::function<void()> fn) {
  std::packaged_task<void()> task(std::move(fn));
  std::future<void> f = task.get_future();
  if (smpi::built()) {  // inline, on the posting (the rank's own) thread
    task();
    return f;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return f;
}

void WorkerThread::loop() {
  const int n = static_cast<int>(spec_.cpus.size());
  if (pin_ && !pin_current_thread(spec_.cpus)) {
    log_once(LogLevel::warn, "worker", "pin-failed",
             "cannot pin worker group " + std::to_string(spec_.id) + " to cpus " +
                 list_string(spec_.cpus) + " (sched_setaffinity: " + std::strerror(errno) +
                 "); running unpinned");
  }
  // On a machine of more than one node, the group's buffers go to its locality's nodes.
  if (pin_ && spec_.numa_node >= 0) {
    set_thread_node_binding(NodeBinding{spec_.dram_node, spec_.hbw_node});
  }
  // This pthread gets its own libgomp team: size it to the group and pin each member.
  omp_set_num_threads(n);
  const bool pin = pin_;
  const std::vector<int>& cpus = spec_.cpus;
  bool team_pin_failed = false;
#pragma omp parallel num_threads(n) reduction(|| : team_pin_failed)
  {
    const int i = omp_get_thread_num();
    if (pin && i < n && !pin_current_thread({cpus[static_cast<size_t>(i)]})) {
      team_pin_failed = true;
    }
  }
  if (team_pin_failed) {
    log_once(LogLevel::warn, "worker", "team-pin-failed",
             "cannot pin the OpenMP team of worker group " + std::to_string(spec_.id) +
                 "; its threads run unpinned");
  }

  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace easel
