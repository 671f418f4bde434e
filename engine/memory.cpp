// Memory kinds and their allocators. This is the only file that includes <memkind.h>.
#include "engine/memory.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "easel_config.h"
#include "engine/comm/mpi_comm.hpp"  // sim_injected_flops
#include "engine/comm/smpi.hpp"
#include "engine/log.hpp"

#if EASEL_HAVE_MEMKIND
#include <memkind.h>
#endif

namespace easel {
namespace {

constexpr size_t kAlign = 64;
// Nothing real is larger than this (256 TiB); bigger requests are refused before the allocator
// sees them, so that size arithmetic below cannot overflow.
constexpr size_t kMaxBytes = size_t{1} << 48;

constexpr MemKind kAllKinds[] = {MemKind::dram,       MemKind::hbw,         MemKind::hbw_preferred,
                                 MemKind::interleave, MemKind::pinned_host, MemKind::device};
constexpr BufferClass kAllClasses[] = {BufferClass::centre,      BufferClass::weights,
                                       BufferClass::grads,       BufferClass::momentum,
                                       BufferClass::activations, BufferClass::dataset};

std::string join_kind_names() {
  std::string s;
  for (MemKind k : kAllKinds) {
    if (!s.empty()) s += ", ";
    s += mem_kind_name(k);
  }
  return s;
}

std::string join_class_names() {
  std::string s = "all";
  for (BufferClass c : kAllClasses) {
    s += ", ";
    s += buffer_class_name(c);
  }
  return s;
}

std::string mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

Status alloc_failed(size_t bytes, MemKind kind, const char* why) {
  return unavailable("cannot allocate " + mib(bytes) + " of " + mem_kind_name(kind) + " memory (" +
                     why + ")");
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

#if EASEL_HAVE_MEMKIND
memkind_t memkind_of(MemKind k) {
  switch (k) {
    case MemKind::hbw:
      return MEMKIND_HBW;
    case MemKind::hbw_preferred:
      return MEMKIND_HBW_PREFERRED;
    case MemKind::interleave:
      return MEMKIND_INTERLEAVE;
    case MemKind::dram:
    case MemKind::pinned_host:
    case MemKind::device:
      return MEMKIND_DEFAULT;
  }
  return MEMKIND_DEFAULT;
}
#endif

// Plain aligned allocation (the path without memkind), counted (plain_buffer_bytes).
std::atomic<uint64_t> g_plain_bytes{0};
void* plain_alloc(size_t bytes) {
  void* p = ::operator new (bytes, std::align_val_t{kAlign}, std::nothrow);
  if (p != nullptr) g_plain_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}
void plain_free(void* p, size_t bytes) {
  g_plain_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  ::operator delete (p, std::align_val_t{kAlign});
}

}  // namespace

const char* mem_kind_name(MemKind k) {
  switch (k) {
    case MemKind::dram:
      return "dram";
    case MemKind::hbw:
      return "hbw";
    case MemKind::hbw_preferred:
      return "hbw-preferred";
    case MemKind::interleave:
      return "interleave";
    case MemKind::pinned_host:
      return "pinned-host";
    case MemKind::device:
      return "device";
  }
  return "unknown";
}

Result<MemKind> parse_mem_kind(std::string_view name) {
  for (MemKind k : kAllKinds) {
    if (name == mem_kind_name(k)) return k;
  }
  return invalid_argument("unknown memory kind '" + std::string(name) +
                          "' (accepted: " + join_kind_names() + ")");
}

const char* buffer_class_name(BufferClass c) {
  switch (c) {
    case BufferClass::centre:
      return "centre";
    case BufferClass::weights:
      return "weights";
    case BufferClass::grads:
      return "grads";
    case BufferClass::momentum:
      return "momentum";
    case BufferClass::activations:
      return "activations";
    case BufferClass::dataset:
      return "dataset";
  }
  return "unknown";
}

Result<Placement> parse_placement(std::string_view spec) {
  Placement p;
  spec = trim(spec);
  if (spec.empty()) return p;
  if (spec.find('=') == std::string_view::npos) {
    // A plain kind: every class gets it.
    auto k = parse_mem_kind(spec);
    if (!k.ok()) return invalid_argument("placement: " + k.status().message());
    for (MemKind& slot : p.kind)
      slot = *k;
    return p;
  }
  // Split into class=kind items; "all" is applied before the others wherever it appears.
  std::vector<std::pair<std::string_view, MemKind>> items;
  bool seen[kBufferClassCount + 1] = {};
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view item = trim(spec.substr(pos, end - pos));
    pos = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return invalid_argument("placement item '" + std::string(item) +
                              "' is not class=kind (classes: " + join_class_names() +
                              "; kinds: " + join_kind_names() + ")");
    }
    const std::string_view cls = trim(item.substr(0, eq));
    const std::string_view kind_name = trim(item.substr(eq + 1));
    int index = -1;
    if (cls == "all") {
      index = kBufferClassCount;
    } else {
      for (BufferClass c : kAllClasses) {
        if (cls == buffer_class_name(c)) index = static_cast<int>(c);
      }
    }
    if (index < 0) {
      return invalid_argument("placement: unknown buffer class '" + std::string(cls) +
                              "' (accepted: " + join_class_names() + ")");
    }
    if (seen[index]) {
      return invalid_argument("placement: buffer class '" + std::string(cls) + "' given twice");
    }
    seen[index] = true;
    auto k = parse_mem_kind(kind_name);
    if (!k.ok()) {
      return invalid_argument("placement " + std::string(cls) + ": " + k.status().message());
    }
    items.emplace_back(cls, *k);
  }
  for (const auto& [cls, k] : items) {
    if (cls == "all") {
      for (MemKind& slot : p.kind)
        slot = k;
    }
  }
  for (const auto& [cls, k] : items) {
    for (BufferClass c : kAllClasses) {
      if (cls == buffer_class_name(c)) p[c] = k;
    }
  }
  return p;
}

std::string placement_to_string(const Placement& p) {
  bool uniform = true;
  for (MemKind k : p.kind)
    uniform = uniform && k == p.kind[0];
  if (uniform) return std::string("all=") + mem_kind_name(p.kind[0]);
  std::string s;
  for (BufferClass c : kAllClasses) {
    if (!s.empty()) s += ',';
    s += buffer_class_name(c);
    s += '=';
    s += mem_kind_name(p[c]);
  }
  return s;
}

std::string placement_text(const Placement& p) {
  bool uniform = true;
  for (MemKind k : p.kind)
    uniform = uniform && k == p.kind[0];
  if (uniform) return mem_kind_name(p.kind[0]);
  std::string s;
  for (int i = 0; i < kBufferClassCount; ++i) {
    if (p.kind[i] == MemKind::dram) continue;
    s += (s.empty() ? "" : ",") + std::string(buffer_class_name(static_cast<BufferClass>(i))) +
         "=" + mem_kind_name(p.kind[i]);
  }
  return s;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) : 0;
}

bool hbw_available() {
#if EASEL_HAVE_MEMKIND
  static const bool available = memkind_check_available(MEMKIND_HBW) == 0;
  return available;
#else
  return false;
#endif
}

namespace {

std::atomic<const ExternalMemory*> g_external{nullptr};

thread_local NodeBinding t_binding;

// Linux's memory policies (linux/mempolicy.h), for the raw system calls below: libnuma is not
// a dependency.
constexpr int kMpolPreferred = 1;
constexpr int kMpolBind = 2;
constexpr unsigned kMpolMfStrict = 1;
constexpr int kMaxNode = 1024;

size_t page_rounded(size_t bytes) {
  const long page = sysconf(_SC_PAGE_SIZE);
  const size_t ps = page > 0 ? static_cast<size_t>(page) : 4096;
  return (bytes + ps - 1) / ps * ps;
}

// Anonymous pages bound to `node` (MPOL_BIND when `strict`, else MPOL_PREFERRED), untouched:
// the first touch allocates them there. nullptr with `why` when the kernel refuses.
void* bound_alloc(size_t bytes, int node, bool strict, std::string* why) {
  if (node < 0 || node >= kMaxNode) {
    *why = "node " + std::to_string(node) + " out of range";
    return nullptr;
  }
  const size_t len = page_rounded(bytes);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *why = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  unsigned long mask[kMaxNode / (8 * sizeof(unsigned long))] = {};
  mask[static_cast<size_t>(node) / (8 * sizeof(unsigned long))] |=
      1UL << (static_cast<size_t>(node) % (8 * sizeof(unsigned long)));
  const long rc = syscall(SYS_mbind, p, len, strict ? kMpolBind : kMpolPreferred, mask,
                          static_cast<unsigned long>(kMaxNode), strict ? kMpolMfStrict : 0U);
  if (rc != 0) {
    *why = std::string("mbind to node ") + std::to_string(node) + ": " + std::strerror(errno);
    munmap(p, len);
    return nullptr;
  }
  return p;
}

// The node `kind` is bound to on this thread and how strictly; -1 for none.
int binding_for(MemKind kind, bool* strict) {
  *strict = kind == MemKind::hbw;
  switch (kind) {
    case MemKind::dram:
      return t_binding.dram_node;
    case MemKind::hbw:
    case MemKind::hbw_preferred:
      return t_binding.hbw_node;
    default:
      return -1;
  }
}

// The kind a host buffer asked as `kind` takes: hbw is refused where there is none (or no
// memkind), hbw-preferred and, without memkind, interleave fall back to dram, each fallback
// logged once.
Result<MemKind> host_kind_used(MemKind kind) {
  MemKind got = kind;
#if EASEL_HAVE_MEMKIND
  if (kind == MemKind::hbw && !hbw_available()) {
    return unavailable(
        "no high-bandwidth memory on this machine (memkind found no high-bandwidth NUMA node: "
        "KNL cache mode, or no MCDRAM/HBM; set MEMKIND_HBW_NODES to name nodes, or use "
        "hbw-preferred)");
  }
  if (kind == MemKind::hbw_preferred && !hbw_available()) {
    log_once(LogLevel::warn, "memory", kHbwFallbackLogKey,
             "hbw-preferred: no high-bandwidth memory on this machine, using dram");
    got = MemKind::dram;
  }
#else
  if (kind == MemKind::hbw) {
    return unavailable(
        "no high-bandwidth memory: easel was built without memkind (install libmemkind-dev and "
        "rebuild, or use hbw-preferred)");
  }
  if (kind == MemKind::hbw_preferred) {
    log_once(LogLevel::warn, "memory", kHbwFallbackLogKey,
             "hbw-preferred: built without memkind, using dram");
    got = MemKind::dram;
  }
  if (kind == MemKind::interleave) {
    log_once(LogLevel::warn, "memory", "interleave-fallback",
             "interleave: built without memkind, using dram");
    got = MemKind::dram;
  }
#endif
  return got;
}

}  // namespace

void set_thread_node_binding(const NodeBinding& b) {
  t_binding = b;
}

NodeBinding thread_node_binding() {
  return t_binding;
}

int node_of_address(const void* p) {
  if (p == nullptr) return -1;
  void* pages[1] = {const_cast<void*>(p)};
  int status = -1;
  if (syscall(SYS_move_pages, 0, 1UL, pages, nullptr, &status, 0) != 0) return -1;
  return status >= 0 ? status : -1;
}

void install_external_memory(const ExternalMemory& m) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<ExternalMemory>> kept;  // installed hooks live forever
  std::lock_guard<std::mutex> lock(mu);
  kept.push_back(std::make_unique<ExternalMemory>(m));
  g_external.store(kept.back().get(), std::memory_order_release);
}

void copy_bytes(void* dst, MemKind dst_kind, const void* src, MemKind src_kind, size_t bytes) {
  if (bytes == 0) return;
  if (is_host_kind(dst_kind) && is_host_kind(src_kind)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const ExternalMemory* ext = g_external.load(std::memory_order_acquire);
  EASEL_CHECK(ext != nullptr);  // device memory exists only once a device installed the hooks
  ext->copy(dst, src, bytes);
}

Result<Buffer> Buffer::allocate(size_t bytes, MemKind kind) {
  if (kind == MemKind::pinned_host || kind == MemKind::device) {
    const ExternalMemory* ext = g_external.load(std::memory_order_acquire);
    if (ext == nullptr)
      return unavailable(std::string("memory kind '") + mem_kind_name(kind) +
                         "' belongs to a GPU: it needs --device cuda (and a build with CUDA); "
                         "host buffers take dram, hbw, hbw-preferred or interleave");
    Buffer b;
    b.kind_ = kind;
    b.bytes_ = bytes;
    if (bytes == 0) return b;
    if (bytes > kMaxBytes) return alloc_failed(bytes, kind, "larger than any machine's memory");
    std::string why;
    b.ptr_ = ext->alloc(bytes, kind, &why);
    if (b.ptr_ == nullptr) return alloc_failed(bytes, kind, why.c_str());
    b.external_ = true;
    return b;
  }
  // Simulated with injected compute (tools/simulate --compute model; never outside SMPI): no
  // rank's values matter, so the large buffers of every rank share the same few physical pages
  // (SMPI's global shared malloc), and 512 ranks of a 233 MB net fit in this machine's memory.
  if (bytes >= (size_t{1} << 20) && bytes <= kMaxBytes && sim_injected_flops() > 0) {
    Buffer b;
    b.kind_ = is_host_kind(kind) ? MemKind::dram : kind;
    b.bytes_ = bytes;
    b.ptr_ = smpi::shared_malloc(bytes);
    b.sim_shared_ = true;
    return b;
  }
  if (bytes > 0 && bytes <= kMaxBytes) {
    bool strict = false;
    if (const int node = binding_for(kind, &strict); node >= 0) {
      std::string why;
      if (void* p = bound_alloc(bytes, node, strict, &why); p != nullptr) {
        Buffer b;
        b.kind_ = kind;
        b.bytes_ = bytes;
        b.ptr_ = p;
        b.mapped_ = true;
        b.node_ = node;
        return b;
      }
      log_once(LogLevel::warn, "memory", "bind-failed",
               std::string(mem_kind_name(kind)) + " buffers of this group: " + why +
                   "; taking them without binding");
    }
  }
  // Decide the kind actually used.
  EASEL_ASSIGN_OR_RETURN(const MemKind got, host_kind_used(kind));
  const bool use_memkind = EASEL_HAVE_MEMKIND;

  Buffer b;
  b.kind_ = got;
  b.bytes_ = bytes;
  if (bytes == 0) return b;
  if (bytes > kMaxBytes) return alloc_failed(bytes, kind, "larger than any machine's memory");

  void* p = nullptr;
  if (use_memkind) {
#if EASEL_HAVE_MEMKIND
    const int err = memkind_posix_memalign(memkind_of(got), &p, kAlign, bytes);
    if (err != 0 || p == nullptr) {
      return alloc_failed(bytes, kind, err == ENOMEM ? "out of memory" : "memkind refused");
    }
    b.from_memkind_ = true;
#endif
  } else {
    p = plain_alloc(bytes);
    if (p == nullptr) return alloc_failed(bytes, kind, "out of memory");
  }
  b.ptr_ = p;
  return b;
}

uint64_t plain_buffer_bytes() {
  return g_plain_bytes.load(std::memory_order_relaxed);
}

Buffer Buffer::borrow(void* p, size_t bytes) {
  Buffer b;
  b.ptr_ = p;
  b.bytes_ = bytes;
  b.borrowed_ = true;
  return b;
}

void Buffer::zero() {
  if (bytes_ == 0 || sim_shared_) return;  // SMPI's shared pages: no rank's values matter
  if (external_ && kind_ == MemKind::device) {
    g_external.load(std::memory_order_acquire)->zero(ptr_, bytes_);
  } else {
    std::memset(ptr_, 0, bytes_);
  }
}

void Buffer::release() {
  if (ptr_ != nullptr && !borrowed_) {
    if (external_) {
      g_external.load(std::memory_order_acquire)->free(ptr_, kind_);
    } else if (sim_shared_) {
      smpi::shared_free(ptr_);
    } else if (mapped_) {
      munmap(ptr_, page_rounded(bytes_));
    } else if (from_memkind_) {
#if EASEL_HAVE_MEMKIND
      memkind_free(memkind_of(kind_), ptr_);
#endif
    } else {
      plain_free(ptr_, bytes_);
    }
  }
  ptr_ = nullptr;
  bytes_ = 0;
  from_memkind_ = false;
  external_ = false;
  mapped_ = false;
  sim_shared_ = false;
  borrowed_ = false;
  node_ = -1;
}

Buffer::~Buffer() {
  release();
}

Buffer::Buffer(Buffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      kind_(o.kind_),
      from_memkind_(std::exchange(o.from_memkind_, false)),
      external_(std::exchange(o.external_, false)),
      mapped_(std::exchange(o.mapped_, false)),
      sim_shared_(std::exchange(o.sim_shared_, false)),
      borrowed_(std::exchange(o.borrowed_, false)),
      node_(std::exchange(o.node_, -1)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    kind_ = o.kind_;
    from_memkind_ = std::exchange(o.from_memkind_, false);
    external_ = std::exchange(o.external_, false);
    mapped_ = std::exchange(o.mapped_, false);
    sim_shared_ = std::exchange(o.sim_shared_, false);
    borrowed_ = std::exchange(o.borrowed_, false);
    node_ = std::exchange(o.node_, -1);
  }
  return *this;
}

}  // namespace easel
