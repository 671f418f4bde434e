// The shared-memory Comm: every rank is a thread of this process. Ranks publish their buffer
// pointers in a slot table, then read their peers' buffers directly; each algorithm step ends
// at a reusable barrier. Summation orders depend only on (size, algorithm), never on timing.
//
// tree:  binomial-tree reduction into the root (child partial added to the parent's), then a
//        binomial-tree broadcast. allreduce = reduce to rank 0 + broadcast from rank 0.
// ring:  reduce-scatter over P chunks along the ring (chunk j summed in rank order j, j+1, ...,
//        j-1, ending at its owner j-1), then a ring allgather; reduce gathers the chunks to the
//        root; broadcast is a chunk-pipelined chain from the root.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"
#include "engine/trace.hpp"
#include "engine/worker.hpp"

namespace easel {

const char* collective_algo_name(CollectiveAlgo a) {
  switch (a) {
    case CollectiveAlgo::tree:
      return "tree";
    case CollectiveAlgo::ring:
      return "ring";
  }
  return "unknown";
}

namespace {

// dst[i] = a[i] + b[i] on [begin, end). dst may alias a or b.
void add_range(float* dst, const float* a, const float* b, int64_t begin, int64_t end) {
  if (values_ignored()) return;  // simulated, compute injected (engine/span_ops.hpp)
#pragma omp simd
  for (int64_t i = begin; i < end; ++i)
    dst[i] = a[i] + b[i];
}

void copy_range(float* dst, const float* src, int64_t begin, int64_t end) {
  if (end > begin && dst != src && !values_ignored()) {
    std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin) * sizeof(float));
  }
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins (pause) until done() or `spin` seconds have passed, offering the core to any other
// runnable thread every ~20 us; true once done().
template <typename Done>
bool spin_until(Done done, double spin) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto budget = std::chrono::duration<double>(spin);
  auto last_yield = t0;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    const auto t = clock::now();
    if (t - t0 > budget) return false;
    if (t - last_yield > std::chrono::microseconds(20)) {
      std::this_thread::yield();
      last_yield = t;
    }
  }
}

// Sleeps on the futex of `a` while it holds `old`, for at most `seconds`.
void futex_wait_for(const std::atomic<uint32_t>& a, uint32_t old, double seconds) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - static_cast<double>(ts.tv_sec)) * 1e9);
  ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&a), FUTEX_WAIT_PRIVATE, old, &ts, nullptr,
            0);
}

void futex_wake_all(std::atomic<uint32_t>& a) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
            nullptr, 0);
}

// A reusable barrier: arrivals counted in `count_`, released by bumping `gen_`. A waiter first
// spins (pause) for up to `spin` seconds, offering its core to any other runnable thread every
// ~20 us, then sleeps on the futex of gen_. Spinning suits one rank per core: the release is
// seen within a cache-line transfer, and the last arrival needs no wake-up system call when
// nobody sleeps (`sleepers_`). With more ranks than cores (spin 0) the waiters yield a few
// times and sleep, so that 8 ranks on 2 cores make progress. A sleeper gives up after the stall
// timeout (engine/worker.hpp), naming the ranks that have not arrived.
class Barrier {
 public:
  Barrier(int size, double spin) : size_(size), spin_(spin), arrived_(static_cast<size_t>(size)) {}

  void arrive_and_wait(int rank) {
    const uint32_t gen = gen_.load(std::memory_order_acquire);
    arrived_[static_cast<size_t>(rank)].store(gen + 1, std::memory_order_relaxed);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_seq_cst);
      if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(gen_);
      return;
    }
    for (int i = 0; i < 256; ++i) {
      if (gen_.load(std::memory_order_acquire) != gen) return;
    }
    if (spin_ > 0 && spin_until([&] { return gen_.load(std::memory_order_acquire) != gen; }, spin_))
      return;
    for (int i = 0; i < 16; ++i) {
      if (gen_.load(std::memory_order_acquire) != gen) return;
      std::this_thread::yield();
    }
    sleep_until_released(rank, gen);
  }

 private:
  void sleep_until_released(int rank, uint32_t gen) {
    using clock = std::chrono::steady_clock;
    const double limit = stall_timeout_seconds();
    const auto t0 = clock::now();
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    struct Leave {
      std::atomic<int>& n;
      ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
    } leave{sleepers_};
    while (gen_.load(std::memory_order_acquire) == gen) {
      throw_if_stalled();
      const double waited = std::chrono::duration<double>(clock::now() - t0).count();
      if (waited >= limit) stalled(stall_message(rank, gen, waited));
      futex_wait_for(gen_, gen, std::min(0.1, limit - waited));
    }
  }

  std::string stall_message(int rank, uint32_t gen, double waited) const {
    std::string missing;
    for (size_t r = 0; r < arrived_.size(); ++r)
      if (arrived_[r].load(std::memory_order_relaxed) != gen + 1)
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    return "group " + std::to_string(rank) + " waited " + std::to_string(waited) +
           " s at the shared-memory Comm's barrier for group(s) " + missing +
           " (EASEL_STALL_TIMEOUT)";
  }

  const int size_;
  const double spin_;
  std::vector<std::atomic<uint32_t>> arrived_;  // [rank] = the generation it arrived in + 1
  alignas(64) std::atomic<int> count_{0};
  alignas(64) std::atomic<uint32_t> gen_{0};
  alignas(64) std::atomic<int> sleepers_{0};
};

// What each rank publishes for the current collective; written by its rank before a barrier,
// read by peers after it.
struct alignas(64) RankSlot {
  const float* src = nullptr;  // the rank's input
  const float* cur = nullptr;  // tree reduce: the rank's current partial sum
  float* work = nullptr;       // the rank's in/out or scratch buffer
  int64_t n = 0;
  int root = 0;
  double wait_s = 0.0;         // accumulated barrier wait (owned by the rank)
  std::vector<float> scratch;  // grown on demand, never shrunk (owned by the rank)
};

class ShmComm final : public Comm {
 public:
  ShmComm(int size, CollectiveAlgo algo, double spin)
      : size_(size), algo_(algo), barrier_(size, spin), slots_(static_cast<size_t>(size)) {}

  int size() const override { return size_; }
  std::string name() const override {
    return std::string("shm-") + collective_algo_name(algo_) + "(" + std::to_string(size_) + ")";
  }

  void allreduce_sum(int rank, float* buf, int64_t n) override {
    check_rank(rank);
    if (size_ == 1 || n == 0) return;
    if (algo_ == CollectiveAlgo::tree) {
      tree_reduce(rank, buf, buf, n, 0);
      tree_broadcast(rank, buf, n, 0);
    } else {
      ring_allreduce(rank, buf, n);
    }
  }

  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    check_rank(rank);
    check_rank(root);
    if (n == 0) return;
    if (size_ == 1) {
      copy_range(dst, src, 0, n);
      return;
    }
    if (algo_ == CollectiveAlgo::tree) {
      tree_reduce(rank, src, dst, n, root);
    } else {
      ring_reduce(rank, src, dst, n, root);
    }
  }

  void broadcast(int rank, float* buf, int64_t n, int root) override {
    check_rank(rank);
    check_rank(root);
    if (size_ == 1 || n == 0) return;
    if (algo_ == CollectiveAlgo::tree) {
      tree_broadcast(rank, buf, n, root);
    } else {
      ring_broadcast(rank, buf, n, root);
    }
  }

  void barrier(int rank) override {
    check_rank(rank);
    if (size_ > 1) wait(rank);
  }

  double wait_seconds(int rank) const override {
    check_rank(rank);
    return slots_[static_cast<size_t>(rank)].wait_s;
  }

 private:
  void check_rank(int rank) const { EASEL_CHECK(rank >= 0 && rank < size_); }
  RankSlot& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }

  // Barrier wait, timed into the rank's wait seconds.
  void wait(int rank) {
    TraceSpan span("barrier", "wait");
    const auto t0 = std::chrono::steady_clock::now();
    barrier_.arrive_and_wait(rank);
    const auto t1 = std::chrono::steady_clock::now();
    slot(rank).wait_s += std::chrono::duration<double>(t1 - t0).count();
  }

  // Publishes the rank's pointers and waits for everyone's; checks all ranks agree on n/root.
  void publish(int rank, const float* src, float* work, int64_t n, int root) {
    RankSlot& s = slot(rank);
    s.src = src;
    s.cur = src;
    s.work = work;
    s.n = n;
    s.root = root;
    wait(rank);
    EASEL_CHECK_MSG(slot(0).n == n && slot(0).root == root,
                    "ranks called a collective with different sizes or roots");
  }

  float* scratch(int rank, int64_t n) {
    std::vector<float>& s = slot(rank).scratch;
    if (static_cast<int64_t>(s.size()) < n) s.resize(static_cast<size_t>(n));
    return s.data();
  }

  int64_t chunk_begin(int j, int64_t n) const { return n * j / size_; }

  // ---- tree ----

  void tree_reduce(int rank, const float* src, float* dst, int64_t n, int root) {
    const int p = size_;
    const int v = (rank - root + p) % p;
    // The root accumulates straight into dst; inner nodes into their scratch.
    float* acc = rank == root ? dst : (v % 2 == 0 && v + 1 < p ? scratch(rank, n) : nullptr);
    publish(rank, src, acc, n, root);
    RankSlot& me = slot(rank);
    for (int mask = 1; mask < p; mask <<= 1) {
      if (v % (2 * mask) == 0 && v + mask < p) {
        const int peer = (v + mask + root) % p;
        add_range(acc, me.cur, slot(peer).cur, 0, n);
        me.cur = acc;
      }
      wait(rank);  // this round's partials are complete; peers may read them next round
    }
    if (rank == root && me.cur != dst) copy_range(dst, me.cur, 0, n);  // only when p == 1
  }

  void tree_broadcast(int rank, float* buf, int64_t n, int root) {
    const int p = size_;
    const int v = (rank - root + p) % p;
    publish(rank, buf, buf, n, root);
    for (int mask = 1; mask < p; mask <<= 1) {
      if (v >= mask && v < 2 * mask) {
        const int peer = (v - mask + root) % p;
        copy_range(buf, slot(peer).work, 0, n);
      }
      wait(rank);
    }
  }

  // ---- ring ----

  // Reduce-scatter along the ring: at step s rank r adds its own chunk (r-1-s) to the partial
  // held by rank r-1 (read from r-1's src at step 0, from r-1's work afterwards). Rank r ends
  // holding the full sum of chunk (r+1) mod p in work.
  void ring_reduce_scatter(int rank, const float* src, float* work, int64_t n) {
    const int p = size_;
    const int prev = (rank - 1 + p) % p;
    for (int s = 0; s < p - 1; ++s) {
      const int c = ((rank - 1 - s) % p + p) % p;
      const float* partial = s == 0 ? slot(prev).src : slot(prev).work;
      add_range(work, partial, src, chunk_begin(c, n), chunk_begin(c + 1, n));
      wait(rank);
    }
  }

  void ring_allreduce(int rank, float* buf, int64_t n) {
    const int p = size_;
    publish(rank, buf, buf, n, 0);
    ring_reduce_scatter(rank, buf, buf, n);
    // Allgather: at step s rank r copies chunk (r-s) from rank r-1.
    const int prev = (rank - 1 + p) % p;
    for (int s = 0; s < p - 1; ++s) {
      const int c = ((rank - s) % p + p) % p;
      copy_range(buf, slot(prev).work, chunk_begin(c, n), chunk_begin(c + 1, n));
      wait(rank);
    }
  }

  void ring_reduce(int rank, const float* src, float* dst, int64_t n, int root) {
    const int p = size_;
    float* work = scratch(rank, n);
    publish(rank, src, work, n, root);
    ring_reduce_scatter(rank, src, work, n);
    if (rank == root) {  // gather: chunk j is owned by rank j-1
      for (int j = 0; j < p; ++j) {
        const int owner = (j - 1 + p) % p;
        copy_range(dst, slot(owner).work, chunk_begin(j, n), chunk_begin(j + 1, n));
      }
    }
    wait(rank);  // peers' scratch stays untouched until the root has read it
  }

  // Chain from the root, pipelined over p chunks: at step t the rank at ring distance d copies
  // chunk t-(d-1) from its predecessor.
  void ring_broadcast(int rank, float* buf, int64_t n, int root) {
    const int p = size_;
    const int d = (rank - root + p) % p;
    const int prev = (rank - 1 + p) % p;
    publish(rank, buf, buf, n, root);
    const int chunks = p;
    for (int t = 0; t < chunks + p - 2; ++t) {
      const int k = t - (d - 1);
      if (d > 0 && k >= 0 && k < chunks) {
        copy_range(buf, slot(prev).work, chunk_begin(k, n), chunk_begin(k + 1, n));
      }
      wait(rank);
    }
  }

  const int size_;
  const CollectiveAlgo algo_;
  Barrier barrier_;
  std::vector<RankSlot> slots_;
};

}  // namespace

void wait_for_counter(const std::atomic<uint32_t>& counter, uint32_t target, double spin_seconds) {
  auto reached = [&](uint32_t v) { return static_cast<int32_t>(v - target) >= 0; };
  if (reached(counter.load(std::memory_order_acquire))) return;
  if (spin_seconds > 0 &&
      spin_until([&] { return reached(counter.load(std::memory_order_acquire)); }, spin_seconds))
    return;
  for (uint32_t v = counter.load(std::memory_order_acquire); !reached(v);
       v = counter.load(std::memory_order_acquire))
    counter.wait(v, std::memory_order_acquire);
}

std::unique_ptr<Comm> make_shm_comm(int size, CollectiveAlgo algo, double spin_seconds) {
  EASEL_CHECK_MSG(size >= 1, "a Comm needs at least one rank");
  EASEL_CHECK_MSG(spin_seconds >= 0, "a negative barrier spin");
  return std::make_unique<ShmComm>(size, algo, spin_seconds);
}

}  // namespace easel
