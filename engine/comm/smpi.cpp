// The simulator's side of engine/comm/smpi.hpp, built only with -Dmpi=smpi (SimGrid's SMPI): its
// clock, its injected compute, its shared pages and the ranks' watchdogs, and the program's
// operator new and delete that put large blocks on the shared pages under injected compute.
#include "engine/comm/smpi.hpp"

#include <smpi/smpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <string>
#include <unordered_set>
#include <xbt/config.hpp>

namespace easel::smpi {

bool built() {
  return true;
}

bool launched() {
  const char* v = std::getenv("SMPI_GLOBAL_SIZE");  // exported by smpirun
  return v != nullptr && *v != '\0';
}

void sleep_seconds(unsigned seconds) {
  smpi_sleep(seconds);  // simulated seconds
}

double step_flops() {
  static const double flops = [] {
    const char* v = std::getenv("EASEL_SIM_STEP_FLOPS");
    if (v == nullptr || *v == '\0') return 0.0;
    char* end = nullptr;
    const double f = std::strtod(v, &end);
    return end != v && *end == '\0' && f > 0 ? f : 0.0;
  }();
  return flops;
}

void execute_flops(double flops) {
  smpi_execute_flops(flops);
}

void execute_seconds(double seconds) {
  smpi_execute_flops(seconds * simgrid::s4u::this_actor::get_host()->get_speed());
}

bool computation_timed() {
  return launched() && simgrid::config::get_value<bool>("smpi/simulate-computation");
}

bool in_rank_actor() {
  return simgrid::s4u::Actor::self() != nullptr;
}

// Under injected compute no rank's values matter, so the large buffers of every rank share the
// same few physical pages (smpi/shared-malloc:global), and 512 ranks of a 233 MB net fit in this
// machine's memory.
void* shared_malloc(size_t bytes) {
  return smpi_shared_malloc(bytes, __FILE__, __LINE__);
}

void shared_free(void* p) {
  smpi_shared_free(p);
}

namespace {

// The watchdog's message: rank `self`'s wait (`ws`) has lasted `s` simulated seconds.
void report_stall(int self, const WaitState& ws, double s) {
  if (ws.peer >= 0)
    std::fprintf(stderr,
                 "easel: rank %d: rank %d %s in %s for %.0f simulated s (it stalled or "
                 "died; EASEL_MPI_TIMEOUT=%g); stopping the simulation\n",
                 self, ws.peer, ws.verb ? ws.verb : "sent no message", ws.what, s, ws.timeout_s);
  else
    std::fprintf(stderr,
                 "easel: rank %d: no rank sent a message in %s for %.0f simulated s; "
                 "stopping the simulation\n",
                 self, ws.what, s);
  std::fflush(stderr);
}

}  // namespace

void start_watchdog(const WaitState* ws, int rank, double timeout_s) {
  const double period = std::max(timeout_s / 64, 1e-3);
  const int self = rank;
  simgrid::s4u::ActorPtr a = simgrid::s4u::Actor::create(
      "easel-watchdog-" + std::to_string(rank), simgrid::s4u::this_actor::get_host(),
      [ws, self, period] {
        for (;;) {
          if (!ws->waiting || ws->timeout_s <= 0) {
            simgrid::s4u::this_actor::sleep_for(period);
            continue;
          }
          // Wake exactly at this wait's deadline: the rank that began waiting first (on the
          // one that stalled) is the first to report, as with real clocks.
          const double s = simgrid::s4u::Engine::get_clock() - ws->since;
          if (s < ws->timeout_s) {
            simgrid::s4u::this_actor::sleep_for(ws->timeout_s - s + 1e-9);
            continue;
          }
          report_stall(self, *ws, s);
          ::_exit(3);
        }
      });
  a->daemonize();
}

}  // namespace easel::smpi

// Simulated with injected compute (tools/simulate --compute model): every large allocation of a
// rank (std::vector arenas, the Comm's scratch, the evaluation copy) takes SMPI's shared
// malloc, whose pages all ranks share (smpi/shared-malloc:global), so hundreds of ranks of a
// 233 MB net fit; their values do not matter then. Only allocations made by a rank's own actor
// and only while compute is injected; the program is linked -Bsymbolic-functions so that its
// own code calls these. A registry tells a shared block at delete.
namespace {

// 16 MB and more: the arenas' vectors (the Comm's scratch, an arena's copies), whose values do
// not matter. Not the 1 MB compressed-input chunk of an IDX file: zlib's input shared between
// ranks that interleave (a rank yields at MPI_Wtime) read as 'corrupt gzip stream' (Fashion-MNIST
// under --compute model); control data must stay private.
constexpr size_t kSharedFrom = size_t{16} << 20;

// The registry's own nodes come from malloc, not from the operator new below: erase() frees a
// node while the lock is held, and through sim_delete that would take the lock again (the
// self-deadlock that stopped model runs of nets with blocks of 1 MB or more at their first
// free, e.g. alexnet-cifar in build_run).
template <class T>
struct MallocAllocator {
  using value_type = T;
  MallocAllocator() = default;
  template <class U>
  MallocAllocator(const MallocAllocator<U>&) {}
  T* allocate(size_t n) {
    if (void* p = std::malloc(n * sizeof(T))) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const MallocAllocator<U>&) const {
    return true;
  }
};

struct SharedBlocks {
  std::mutex mu;
  std::unordered_set<void*, std::hash<void*>, std::equal_to<void*>, MallocAllocator<void*>> set;
};
SharedBlocks& shared_blocks() {
  static SharedBlocks* b = new SharedBlocks;  // never destroyed: deletes may come late
  return *b;
}

bool injecting() {
  static const bool on = [] {
    const char* v = std::getenv("EASEL_SIM_STEP_FLOPS");
    return v != nullptr && std::strtod(v, nullptr) > 0;
  }();
  return on;
}

void* sim_new(size_t bytes, size_t align, bool nothrow) {
  if (bytes >= kSharedFrom && align <= 4096 && injecting() && easel::smpi::in_rank_actor()) {
    void* p = smpi_shared_malloc(bytes, __FILE__, __LINE__);
    if (p != nullptr) {
      SharedBlocks& b = shared_blocks();
      std::lock_guard lock(b.mu);
      b.set.insert(p);
      return p;
    }
  }
  void* p = nullptr;
  if (align <= alignof(std::max_align_t))
    p = std::malloc(bytes == 0 ? 1 : bytes);
  else if (posix_memalign(&p, align, bytes == 0 ? align : bytes) != 0)
    p = nullptr;
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}

void sim_delete(void* p) {
  if (p == nullptr) return;
  if (injecting()) {
    SharedBlocks& b = shared_blocks();
    std::unique_lock lock(b.mu);
    if (b.set.erase(p) != 0) {
      lock.unlock();
      smpi_shared_free(p);
      return;
    }
  }
  std::free(p);
}

}  // namespace

void* operator new(size_t n) {
  return sim_new(n, 0, false);
}
void* operator new[](size_t n) {
  return sim_new(n, 0, false);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return sim_new(n, 0, true);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return sim_new(n, 0, true);
}
void* operator new(size_t n, std::align_val_t a) {
  return sim_new(n, static_cast<size_t>(a), false);
}
void* operator new[](size_t n, std::align_val_t a) {
  return sim_new(n, static_cast<size_t>(a), false);
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return sim_new(n, static_cast<size_t>(a), true);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return sim_new(n, static_cast<size_t>(a), true);
}
void operator delete(void* p) noexcept {
  sim_delete(p);
}
void operator delete[](void* p) noexcept {
  sim_delete(p);
}
void operator delete(void* p, size_t) noexcept {
  sim_delete(p);
}
void operator delete[](void* p, size_t) noexcept {
  sim_delete(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  sim_delete(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  sim_delete(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  sim_delete(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  sim_delete(p);
}
