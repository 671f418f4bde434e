// oneTBB's pipeline runner: the only file of easel that includes oneTBB. Each runner is a
// task_arena of `threads` slots, one of them the driver's (the thread that calls run()), so its
// threads - 1 workers come from oneTBB's pool and are pinned to the runner's cpus whenever they
// enter the arena. The pool is raised (global_control) to the sum the live runners ask for, so
// that --data-threads is honoured even above the core count (oneTBB's default pool has one
// worker fewer than the cores).
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_scheduler_observer.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "engine/log.hpp"
#include "engine/tsan.hpp"
#include "engine/worker.hpp"
#include "nets/data/pipeline.hpp"

namespace easel {
namespace {

// The workers the live runners ask for, and the global_control that lets oneTBB's pool hold
// them (never lowered: a pool larger than needed only parks threads).
struct Pool {
  std::mutex mu;
  int workers = 0;                               // guarded by mu
  std::unique_ptr<tbb::global_control> control;  // guarded by mu
  size_t limit = 0;                              // guarded by mu

  void add(int n) {
    std::lock_guard lock(mu);
    workers += n;
    // oneTBB's pool is max_allowed_parallelism - 1 workers; the external threads need none.
    const size_t want = static_cast<size_t>(workers) + 1;
    const size_t now =
        tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
    if (want <= std::max(limit, now)) return;
    // The smallest of the live controls applies: make the new one before dropping the old.
    auto next =
        std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, want);
    control = std::move(next);
    limit = want;
  }
  void remove(int n) {
    std::lock_guard lock(mu);
    workers -= n;
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

// Pins every worker that enters the arena to the runner's cpus (once it has left, another
// arena's observer pins it to its own). Under TSan (engine/tsan.hpp) the hand-offs libtbb makes
// are shown: cpus_ from the constructor to the callbacks, and from them to the destructor
// (observe(false) returns once no callback runs).
class PinObserver final : public tbb::task_scheduler_observer {
 public:
  PinObserver(tbb::task_arena& arena, std::vector<int> cpus)
      : tbb::task_scheduler_observer(arena), cpus_(std::move(cpus)) {
    tsan_release(&cpus_);
    if (!cpus_.empty()) observe(true);
  }
  ~PinObserver() override {
    observe(false);
    tsan_acquire(&cpus_);
  }
  void on_scheduler_entry(bool worker) override {
    if (!worker) return;  // the driver pinned itself
    tsan_acquire(&cpus_);
    if (!pin_current_thread(cpus_)) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        log_warn("data",
                 "cannot pin the data pipeline's threads (the OS refused); they run "
                 "where the OS puts them");
    }
    tsan_release(&cpus_);
  }

 private:
  std::vector<int> cpus_;
};

// A runner's share of the pool, taken before its arena asks oneTBB for workers.
class PoolShare {
 public:
  explicit PoolShare(int workers) : workers_(workers) { pool().add(workers_); }
  ~PoolShare() { pool().remove(workers_); }
  PoolShare(const PoolShare&) = delete;
  PoolShare& operator=(const PoolShare&) = delete;

 private:
  int workers_;
};

// TSan's name (engine/tsan.hpp) for the hand-off from a runner's driver to the stages of its
// run. A stage reaches the runner only through the copy of its lambda that oneTBB made on the
// driver, so the first name it acquires cannot be one of the runner's: this one is shared by
// every runner (an order that is real within a runner and stronger than real across runners).
char run_start;

class TbbRunner final : public PipelineRunner {
 public:
  TbbRunner(int threads, const std::vector<int>& cpus)
      : threads_(threads), share_(threads - 1), arena_(threads, 1), observer_(arena_, cpus) {}

  // The chunks travel between the stages as pointers into items_ (one item per token: at most
  // `tokens` chunks are in flight, so chunk k and chunk k + tokens never are at once), so that
  // oneTBB's code neither allocates nor copies them. Under TSan (engine/tsan.hpp) the hand-offs
  // libtbb makes are shown: the driver's history into the run (run_start), each serial stage's
  // calls in order, each chunk from next to work to done and its item back to next (the item's
  // address), and the run's history back out to the driver.
  void run(const PipelineStages& s, int live) override {
    const size_t tokens = static_cast<size_t>(std::max(1, live));
    if (items_.size() < tokens) items_.resize(tokens);
    size_t k = 0;
    auto next = [&](tbb::flow_control& fc) -> PipelineChunk* {
      tsan_acquire(&run_start);
      tsan_acquire(&next_order_);
      PipelineChunk* c = &items_[k++ % tokens];
      tsan_acquire(c);  // the chunk it held before is done
      *c = {};
      if (!s.next(c)) fc.stop();
      tsan_release(c);
      tsan_release(&next_order_);
      return c;
    };
    auto work = [&](PipelineChunk* c) {
      tsan_acquire(&run_start);
      tsan_acquire(c);
      s.work(*c);
      tsan_release(c);
      return c;
    };
    auto done = [&](PipelineChunk* c) {
      tsan_acquire(&run_start);
      tsan_acquire(&done_order_);
      tsan_acquire(c);
      s.done(*c);
      tsan_release(c);
      tsan_release(&done_order_);
    };
    const auto chain =
        tbb::make_filter<void, PipelineChunk*>(tbb::filter_mode::serial_in_order, next) &
        tbb::make_filter<PipelineChunk*, PipelineChunk*>(tbb::filter_mode::parallel, work) &
        tbb::make_filter<PipelineChunk*, void>(tbb::filter_mode::serial_in_order, done);
    tsan_release(&run_start);
    arena_.execute([&] { tbb::parallel_pipeline(tokens, chain); });
    tsan_acquire(&next_order_);
    tsan_acquire(&done_order_);
  }
  int threads() const override { return threads_; }
  const char* name() const override { return "oneTBB"; }

 private:
  int threads_;
  PoolShare share_;
  tbb::task_arena arena_;
  PinObserver observer_;
  std::vector<PipelineChunk> items_;      // the chunks in flight, one per token
  char next_order_ = 0, done_order_ = 0;  // TSan's names of the serial stages' orders
};

}  // namespace

std::unique_ptr<PipelineRunner> make_tbb_pipeline_runner(int threads,
                                                         const std::vector<int>& cpus) {
  return std::make_unique<TbbRunner>(std::max(1, threads), cpus);
}

}  // namespace easel
