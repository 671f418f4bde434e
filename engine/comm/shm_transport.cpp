// The shared-memory transport: every rank is a thread of this process. A transfer is a
// rendezvous in the pair's mailbox: the sender publishes a pointer to its span, the receiver
// copies or adds straight from it (one pass, no staging copy; or, for groups sharing a GPU, its
// device's kernels do: ShmCombine) and releases it. Waits spin while
// ranks have cores of their own, then sleep on a futex, and give up after the stall timeout
// naming the peer (engine/worker.hpp). The collective algorithms live above it
// (engine/comm/collectives/).
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
#include "engine/comm/transport.hpp"
#include "engine/span_ops.hpp"
#include "engine/trace.hpp"
#include "engine/worker.hpp"

namespace easel {

namespace {

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
  Barrier(int size, double spin, int first_group)
      : size_(size), spin_(spin), first_(first_group), arrived_(static_cast<size_t>(size)) {}

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
        missing += (missing.empty() ? "" : ", ") + std::to_string(first_ + static_cast<int>(r));
    return "group " + std::to_string(first_ + rank) + " waited " + std::to_string(waited) +
           " s at the shared-memory Comm's barrier for group(s) " + missing +
           " (EASEL_STALL_TIMEOUT)";
  }

  const int size_;
  const double spin_;
  const int first_;                             // the group number of rank 0 in messages
  std::vector<std::atomic<uint32_t>> arrived_;  // [rank] = the generation it arrived in + 1
  alignas(64) std::atomic<int> count_{0};
  alignas(64) std::atomic<uint32_t> gen_{0};
  alignas(64) std::atomic<int> sleepers_{0};
};

// The mailbox of one ordered pair (src -> dst). The sender's k-th transfer to dst publishes its
// span and sets posted = k; the receiver waits for posted >= k, reads the span (copy or add)
// and sets taken = k; the sender's step returns once taken >= k. Each side counts its own
// transfers (sends: the sender's thread only; recvs: the receiver's only).
struct alignas(64) Mailbox {
  std::atomic<uint32_t> posted{0};
  std::atomic<int> posted_sleepers{0};
  const float* span = nullptr;
  int64_t n = 0;
  uint32_t sends = 0;
  alignas(64) std::atomic<uint32_t> taken{0};
  std::atomic<int> taken_sleepers{0};
  uint32_t recvs = 0;
};

// The host combine: one pass, straight from the sender's span.
void combine_on_host(const Transfer& x, const float* in) {
  if (values_ignored() || x.recv_n == 0) return;  // simulated, compute injected
  float* dst = x.dst;
  if (x.op == RecvOp::copy) {
    if (dst != in) std::memcpy(dst, in, static_cast<size_t>(x.recv_n) * sizeof(float));
    return;
  }
  const float* own = x.own;
  const int64_t n = x.recv_n;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = own[i] + in[i];
}

class ShmTransport final : public Transport {
 public:
  ShmTransport(int size, const ShmOptions& o)
      : size_(size),
        spin_(o.spin_seconds),
        first_(o.first_group),
        combine_(o.combine),
        barrier_(size, o.spin_seconds, o.first_group),
        boxes_(static_cast<size_t>(size) * static_cast<size_t>(size)),
        wait_s_(static_cast<size_t>(size)),
        waiting_on_(static_cast<size_t>(size)) {
    for (auto& w : waiting_on_)
      w.store(-1, std::memory_order_relaxed);
  }

  int size() const override { return size_; }
  std::string name() const override {
    return std::string(combine_ ? combine_->kind() : "shm") + "(" + std::to_string(size_) + ")";
  }
  bool scratch_on_device() const override { return combine_ && combine_->on_device(); }
  int node_of(int) const override { return 0; }
  int nodes() const override { return 1; }
  int first_local() const override { return 0; }
  int local_size() const override { return size_; }

  void step(int rank, const Transfer& x, const char* what) override {
    check_rank(rank);
    Mailbox* out = nullptr;
    uint32_t k_out = 0;
    if (x.send_peer >= 0) {
      check_rank(x.send_peer);
      out = &box(rank, x.send_peer);
      k_out = ++out->sends;
      out->span = x.send;
      out->n = x.send_n;
      out->posted.store(k_out, std::memory_order_seq_cst);
      if (out->posted_sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(out->posted);
    }
    if (x.recv_peer >= 0) {
      check_rank(x.recv_peer);
      Mailbox& in = box(x.recv_peer, rank);
      const uint32_t k = ++in.recvs;
      wait_until(in.posted, in.posted_sleepers, k, rank, x.recv_peer, what, "send");
      EASEL_CHECK_MSG(in.n == x.recv_n, "a transfer's receive and send differ in length");
      if (combine_)
        combine_->combine(rank, x.recv_peer, x, in.span);
      else
        combine_on_host(x, in.span);
      in.taken.store(k, std::memory_order_seq_cst);
      if (in.taken_sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(in.taken);
    }
    if (out != nullptr)
      wait_until(out->taken, out->taken_sleepers, k_out, rank, x.send_peer, what, "receive");
  }

  void barrier(int rank) override {
    check_rank(rank);
    if (size_ == 1) return;
    TraceSpan span("barrier", "wait");
    const auto t0 = std::chrono::steady_clock::now();
    barrier_.arrive_and_wait(rank);
    wait_s_[static_cast<size_t>(rank)].s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  double wait_seconds(int rank) const override {
    check_rank(rank);
    return wait_s_[static_cast<size_t>(rank)].s;
  }

 private:
  struct alignas(64) Seconds {
    double s = 0;
  };

  void check_rank(int rank) const { EASEL_CHECK(rank >= 0 && rank < size_); }
  std::string group(int rank) const { return std::to_string(first_ + rank); }
  Mailbox& box(int src, int dst) {
    return boxes_[static_cast<size_t>(src) * static_cast<size_t>(size_) + static_cast<size_t>(dst)];
  }

  // Waits until `a` reaches k (modulo 2^32), timed into rank's wait seconds: checks a few times,
  // spins up to spin_, yields a little, then sleeps on a's futex; past the stall timeout names
  // `peer` and what it did not do.
  void wait_until(const std::atomic<uint32_t>& a, std::atomic<int>& sleepers, uint32_t k, int rank,
                  int peer, const char* what, const char* verb) {
    auto reached = [&] { return static_cast<int32_t>(a.load(std::memory_order_acquire) - k) >= 0; };
    for (int i = 0; i < 256; ++i)
      if (reached()) return;
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    struct Account {
      ShmTransport* self;
      int rank;
      clock::time_point t0;
      ~Account() {
        self->wait_s_[static_cast<size_t>(rank)].s +=
            std::chrono::duration<double>(clock::now() - t0).count();
      }
    } account{this, rank, t0};
    if (spin_ > 0 && spin_until(reached, spin_)) return;
    for (int i = 0; i < 16; ++i) {
      if (reached()) return;
      std::this_thread::yield();
    }
    const double limit = stall_timeout_seconds();
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    waiting_on_[static_cast<size_t>(rank)].store(peer, std::memory_order_relaxed);
    struct Leave {
      std::atomic<int>& n;
      std::atomic<int>& on;
      ~Leave() {
        n.fetch_sub(1, std::memory_order_relaxed);
        on.store(-1, std::memory_order_relaxed);
      }
    } leave{sleepers, waiting_on_[static_cast<size_t>(rank)]};
    for (;;) {
      const uint32_t v = a.load(std::memory_order_seq_cst);
      if (static_cast<int32_t>(v - k) >= 0) return;
      throw_if_stalled();
      const double waited = std::chrono::duration<double>(clock::now() - t0).count();
      if (waited >= limit)
        stalled("group " + group(rank) + " waited " + std::to_string(waited) + " s for group " +
                group(peer) + " to " + verb + " in " + what + "; " + culprit(peer) +
                " (EASEL_STALL_TIMEOUT)");
      futex_wait_for(a, v, std::min(0.1, limit - waited));
    }
  }

  // The rank at the end of the chain of waits that starts at `peer`: the one that has not reached
  // the collective (or a cycle, which would be a bug of an algorithm).
  std::string culprit(int peer) const {
    int q = peer;
    for (int hops = 0; hops < size_; ++hops) {
      const int next = waiting_on_[static_cast<size_t>(q)].load(std::memory_order_relaxed);
      if (next < 0) return "group " + group(q) + " has not reached it";
      q = next;
    }
    return "the groups wait for each other in a cycle";
  }

  const int size_;
  const double spin_;
  const int first_;
  const std::shared_ptr<ShmCombine> combine_;  // null: combine_on_host
  Barrier barrier_;
  std::vector<Mailbox> boxes_;                // [src * size + dst]
  std::vector<Seconds> wait_s_;               // [rank], owned by the rank's thread
  std::vector<std::atomic<int>> waiting_on_;  // [rank]: the peer it sleeps waiting for, or -1
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

std::unique_ptr<Transport> make_shm_transport(int size, const ShmOptions& options) {
  EASEL_CHECK_MSG(size >= 1, "a transport needs at least one rank");
  EASEL_CHECK_MSG(options.spin_seconds >= 0, "a negative spin");
  return std::make_unique<ShmTransport>(size, options);
}

std::unique_ptr<Transport> make_shm_transport(int size, double spin_seconds) {
  ShmOptions o;
  o.spin_seconds = spin_seconds;
  return make_shm_transport(size, o);
}

}  // namespace easel
