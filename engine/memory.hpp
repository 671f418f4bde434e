// Memory kinds and the allocators behind them. Host kinds go through memkind when it is built
// in (EASEL_HAVE_MEMKIND), else through an aligned plain allocator (only `dram` then works;
// `hbw` is refused and `hbw-preferred` falls back with one logged line).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "engine/status.hpp"

namespace easel {

enum class MemKind {
  dram,           // ordinary memory (memkind's MEMKIND_DEFAULT)
  hbw,            // high-bandwidth memory, required: fail when the machine has none
  hbw_preferred,  // high-bandwidth memory when there is any, else DRAM (logged once)
  interleave,     // pages interleaved over all NUMA nodes (MEMKIND_INTERLEAVE)
  pinned_host,    // page-locked host memory for device transfers (CUDA device only)
  device,         // device memory (CUDA device only)
};

const char* mem_kind_name(MemKind k);  // "dram", "hbw", "hbw-preferred", ...
// Parses the names above; error names the value and lists the accepted ones.
Result<MemKind> parse_mem_kind(std::string_view name);

// Buffer classes that the placement options address separately.
enum class BufferClass { centre, weights, grads, momentum, activations, dataset };
constexpr int kBufferClassCount = 6;
const char* buffer_class_name(BufferClass c);  // "centre", "weights", ...

// Where each buffer class goes. Default: everything in dram.
struct Placement {
  MemKind kind[kBufferClassCount] = {MemKind::dram, MemKind::dram, MemKind::dram,
                                     MemKind::dram, MemKind::dram, MemKind::dram};
  MemKind& operator[](BufferClass c) { return kind[static_cast<int>(c)]; }
  MemKind operator[](BufferClass c) const { return kind[static_cast<int>(c)]; }
};
// Parses "all=hbw-preferred" or "weights=hbw,dataset=dram,..." (comma-separated class=kind;
// "all" sets every class first). A plain kind name ("hbw") means all=kind.
Result<Placement> parse_placement(std::string_view spec);
// Every class spelled out ("all=dram", or "centre=dram,weights=hbw,..."), as summaries show it.
std::string placement_to_string(const Placement& p);
// The short form parse_placement reads back: a kind name when every class has it ("dram"), else
// the classes that are not dram ("weights=hbw,dataset=interleave"), as --placement takes it.
std::string placement_text(const Placement& p);

// True when memkind is built in and reports high-bandwidth memory (MEMKIND_HBW_NODES honoured).
bool hbw_available();
// The log_once key of "hbw-preferred falls back to DRAM": the allocator's and the memory fit's
// (run/fit.hpp) say it under this one key, so a run says it once, whichever sees it first.
inline constexpr const char* kHbwFallbackLogKey = "hbw-preferred-fallback";

// The NUMA nodes (os indices) that the calling thread's host buffers go to: a worker group's
// thread takes its locality's (WorkerThread sets them on a machine of more than one node).
// With a node set, Buffer::allocate binds the pages explicitly (mbind) rather than trusting
// memkind: its HBW kinds pick the node nearest the cpu the calling thread runs on when an
// arena grows, but an arena's cached pages may come from another group's node.
//   dram          -> dram_node, preferred (the kernel may spill when it is full)
//   hbw           -> hbw_node, bound (never elsewhere)
//   hbw-preferred -> hbw_node, preferred
// -1 leaves that kind to memkind (or the plain allocator) as before; interleave is never bound.
// A refused mbind (a container's seccomp) is logged once and the buffer taken the usual way.
struct NodeBinding {
  int dram_node = -1;
  int hbw_node = -1;
};
void set_thread_node_binding(const NodeBinding& b);
NodeBinding thread_node_binding();

// The NUMA node holding the page at `p` (move_pages), -1 where the kernel does not say.
int node_of_address(const void* p);

// This machine's physical memory in bytes (0 where unknown), for refusing allocations that
// could never fit before they take it page by page.
double physical_memory_bytes();

// Host kinds are every kind but `device`: the CPU can read and write them.
inline bool is_host_kind(MemKind k) {
  return k != MemKind::device;
}

// `pinned_host` and `device` memory belong to an accelerator runtime, which the engine does not
// know: the CUDA device (devices/cuda) installs these hooks once, before its first allocation.
// Until then both kinds are refused with a reason. Device memory is taken on the calling
// thread's current GPU.
struct ExternalMemory {
  void* (*alloc)(size_t bytes, MemKind kind, std::string* why) = nullptr;
  void (*free)(void* p, MemKind kind) = nullptr;
  // dst <- src, either of them device memory of any GPU; returns when the bytes have landed.
  void (*copy)(void* dst, const void* src, size_t bytes) = nullptr;
  void (*zero)(void* p, size_t bytes) = nullptr;  // device memory
};
void install_external_memory(const ExternalMemory& m);

// dst <- src (bytes) between buffers of any kinds (memcpy when both are host kinds).
void copy_bytes(void* dst, MemKind dst_kind, const void* src, MemKind src_kind, size_t bytes);

// An owned, 64-byte aligned host allocation of a given kind. Move-only.
class Buffer {
 public:
  Buffer() = default;
  // Allocates `bytes` (may be 0) of `kind`. hbw with no HBW -> unavailable; pinned_host/device
  // before a device installed ExternalMemory -> unavailable with a reason. hbw_preferred may
  // fall back to dram (kind() says).
  static Result<Buffer> allocate(size_t bytes, MemKind kind);
  // Wraps `bytes` of host memory at `p` that the caller owns (kind() says dram: where the caller
  // allocated it is theirs to know). Never freed here: the caller keeps it valid while this
  // Buffer, or the one it is moved into, lives (Dataset::owner is how a data set does).
  static Buffer borrow(void* p, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  MemKind kind() const { return kind_; }       // the kind actually obtained
  int node() const { return node_; }           // the node it was bound to (NodeBinding), or -1
  bool borrowed() const { return borrowed_; }  // from borrow(): the caller's memory
  void zero();                                 // all bytes <- 0, device memory too

 private:
  void release();
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemKind kind_ = MemKind::dram;
  bool from_memkind_ = false;
  bool external_ = false;    // from ExternalMemory
  bool mapped_ = false;      // mmap'd and bound to node_ (NodeBinding)
  bool sim_shared_ = false;  // SMPI's shared malloc (simulated runs with injected compute)
  bool borrowed_ = false;    // the caller's memory (borrow): not freed
  int node_ = -1;
};

// The bytes Buffers now hold from the C++ heap (the path without memkind or a binding): what
// a measure of the heap's growth (run/fit_probe.hpp) takes away to keep only other allocations.
uint64_t plain_buffer_bytes();

}  // namespace easel
