// A worker group's thread team: ONE pinned std::thread that owns an OpenMP team of exactly the
// group's cpus (each OpenMP thread pinned to its own cpu). Work is posted to the thread and
// runs there, so that every oneDNN primitive and every OpenMP region of the group uses the
// group's team and only its cores. Several WorkerThreads run at once, one per group.
// The std::thread is OpenMP thread 0 of its team, so when pinned it ends on spec.cpus[0];
// OpenMP thread i of the team is pinned to spec.cpus[i].
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/topology.hpp"

namespace easel {

// Seconds the calling thread has spent runnable but not running (waiting on a run queue while
// other threads had its cpu), from Linux's /proc/thread-self/schedstat; -1 where the kernel
// does not tell. Cheap enough to call per round, not per step.
double thread_runqueue_seconds();

class WorkerThread {
 public:
  // Starts the thread; when `pin` the thread and its OpenMP team are bound to spec.cpus
  // (a failed pin is logged once, never fatal: containers may forbid it).
  static Result<std::unique_ptr<WorkerThread>> start(const GroupSpec& spec, bool pin);
  ~WorkerThread();  // drains posted work, then joins

  // Runs fn on the group's thread; the future is ready when it returns (exceptions propagate).
  std::future<void> post(std::function<void()> fn);
  // post(fn).get()
  void run(std::function<void()> fn) { post(std::move(fn)).get(); }

  const GroupSpec& spec() const { return spec_; }
  int threads() const { return static_cast<int>(spec_.cpus.size()); }

 private:
  WorkerThread(GroupSpec spec, bool pin);
  void loop();

  GroupSpec spec_;
  bool pin_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                             // guarded by mu_
  std::thread thread_;
};

// ---- stalls: a named timeout on the waits of a group ----
// The waits that may never end when a group stalls (the shared-memory Comm's barrier, a centre
// lock, easgd-rr's turn) give up after stall_timeout_seconds() and call stalled(), which records
// the first such message for the process and throws Stalled. Once one wait has stalled, every
// bounded wait throws at once (stall_declared), so that all groups unwind from their round.
struct Stalled : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// EASEL_STALL_TIMEOUT (seconds, > 0) when set and valid, else 300, read once; the trainer sets
// each run's deadline with set_stall_timeout_seconds (run_plan.cpp; 0: read the variable again).
double stall_timeout_seconds();
void set_stall_timeout_seconds(double seconds);
// Records `what` ("group 1 waited 300 s at ... for ...") if it is the first stall, and throws.
[[noreturn]] void stalled(const std::string& what);
// Records `what` as stalled() does, without throwing (the trainer's watch of the groups' steps).
void declare_stall(const std::string& what);
bool stall_declared();
std::string first_stall();  // empty when none
void clear_stall();         // before a run
// Throws Stalled when a stall is declared (a bounded wait's check while it sleeps).
void throw_if_stalled();

// Pins the calling thread to `cpus` (sched_setaffinity); false if the OS refused.
bool pin_current_thread(const std::vector<int>& cpus);

}  // namespace easel
