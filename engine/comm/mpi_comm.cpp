// Starting and ending MPI, the process-level answers (rank, count, fault injection) and the
// simulation's hooks under SMPI; the world itself is engine/comm/mpi_world.hpp.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/comm/mpi_world.hpp"

namespace easel {

namespace {

using mpi_detail::launched_by_mpi;
using mpi_detail::MpiWorld;

std::unique_ptr<MpiWorld>& world_slot() {
  static std::unique_ptr<MpiWorld> w;
  return w;
}

bool& agreed_slot() {
  static bool agreed = false;
  return agreed;
}

}  // namespace

Status mpi_start(int* argc, char*** argv) {
  if (world_slot() || !launched_by_mpi()) return {};
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return unavailable("MPI_Init_thread failed (launched by mpirun, but MPI did not start)");
  world_slot() = std::make_unique<MpiWorld>(provided >= MPI_THREAD_MULTIPLE);
  EASEL_RETURN_IF_ERROR(world_slot()->start());  // every rank refuses together
  // Injected compute: the values are not computed, so neither are the exchange's O(n) passes.
  set_values_ignored(sim_injected_flops() > 0);
  return {};
}

int mpi_finish(int exit_code, bool every_rank) {
  auto& w = world_slot();
  if (!w) return exit_code;
  if (agreed_slot()) every_rank = true;
  if (exit_code != 0 && w->size() > 1 && !every_rank)
    w->abort("exited with code " + std::to_string(exit_code) + "; stopping the job", exit_code);
#if EASEL_HAVE_SMPI
  // tools/simulate reads this line: the simulated seconds of the whole run on rank 0's clock
  // (a run refused at its start has none).
  if (w->rank() == 0 && !every_rank)
    std::fprintf(stderr, "easel: simulated %d ranks under SMPI, compute %s: %.6f simulated s\n",
                 w->size(), sim_injected_flops() > 0 ? "model (injected)" : "real (timed)",
                 MPI_Wtime());
#endif
  w.reset();
  MPI_Finalize();
  return exit_code;
}

Status agree_on_outcome(MpiComm& world, const Status& mine) {
  const int n = world.size();
  const bool root = world.rank() == 0;
  const int32_t failed = mine.ok() ? 0 : 1;
  std::vector<int32_t> all(root ? static_cast<size_t>(n) : 0);
  world.gather_bytes(&failed, sizeof failed, all.data(), 0);
  int32_t first = -1;
  for (int q = 0; root && q < n && first < 0; ++q)
    if (all[static_cast<size_t>(q)] != 0) first = q;
  world.broadcast_bytes(&first, sizeof first, 0);
  if (first < 0) return {};
  // The first failing rank's code and message, to every rank.
  int32_t head[2] = {static_cast<int32_t>(mine.code()),
                     static_cast<int32_t>(std::min<size_t>(mine.message().size(), 4096))};
  world.broadcast_bytes(head, sizeof head, first);
  std::string message = mine.message();
  message.resize(static_cast<size_t>(head[1]));
  if (!message.empty()) world.broadcast_bytes(message.data(), message.size(), first);
  agreed_slot() = true;
  const bool known = head[0] > 0 && head[0] <= static_cast<int32_t>(Code::internal);
  const Code code = known ? static_cast<Code>(head[0]) : Code::internal;
  return Status(code, first == 0 ? message : "rank " + std::to_string(first) + ": " + message);
}

bool failure_agreed() {
  return agreed_slot();
}

MpiComm* mpi_world() {
  return world_slot().get();
}

int process_rank() {
  return world_slot() ? world_slot()->rank() : 0;
}

int process_count() {
  return world_slot() ? world_slot()->size() : 1;
}

double sim_injected_flops() {
#if EASEL_HAVE_SMPI
  static const double flops = [] {
    const char* v = std::getenv("EASEL_SIM_STEP_FLOPS");
    if (v == nullptr || *v == '\0') return 0.0;
    char* end = nullptr;
    const double f = std::strtod(v, &end);
    return end != v && *end == '\0' && f > 0 ? f : 0.0;
  }();
  return world_slot() ? flops : 0;
#else
  return 0;
#endif
}

bool sim_inject_step() {
#if EASEL_HAVE_SMPI
  const double f = sim_injected_flops();
  if (f <= 0) return false;
  smpi_execute_flops(f);
  return true;
#else
  return false;
#endif
}

double sim_clock_seconds() {
#if EASEL_HAVE_SMPI
  // Only a rank's own actor has a simulated clock (not a library's helper thread).
  if (world_slot() && simgrid::s4u::Actor::self() != nullptr) return MPI_Wtime();
#endif
  return -1;
}

bool mpi_fault_fail() {
  return world_slot() && world_slot()->fault_fail();
}

}  // namespace easel

#if EASEL_HAVE_SMPI
// Simulated with injected compute (tools/simulate --compute model): every large allocation of a
// rank (std::vector arenas, the Comm's scratch, the evaluation copy) takes SMPI's shared
// malloc, whose pages all ranks share (smpi/shared-malloc:global), so hundreds of ranks of a
// 233 MB net fit; their values do not matter then. Only allocations made by a rank's own actor
// and only while compute is injected; the program is linked -Bsymbolic-functions so that its
// own code calls these. A registry tells a shared block at delete.
#include <mutex>
#include <new>
#include <unordered_set>

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
  if (bytes >= kSharedFrom && align <= 4096 && injecting() &&
      simgrid::s4u::Actor::self() != nullptr) {
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
#endif  // EASEL_HAVE_SMPI
