// How much memory this process can still take: the least of what the machine, the container
// and the process's own limits leave. Readers of untrusted files check a size a header claims
// against it before allocating, so that an honest but too large file is refused with a reason
// instead of ending in std::bad_alloc (or the kernel's OOM killer) half-way through.
#pragma once

#include <cstdint>
#include <string>

namespace easel {

struct MemoryBound {
  uint64_t bytes = UINT64_MAX;  // UINT64_MAX: nothing bounds it (no source could be read)
  std::string source;           // what sets the bound: "RLIMIT_AS", "cgroup memory.max", ...
};

// The minimum over: physical memory; MemAvailable (/proc/meminfo); for the process's cgroup
// and each of its ancestors, its limit minus its working set (cgroup v2 memory.max -
// (memory.current - inactive_file); v1 memory.limit_in_bytes - (memory.usage_in_bytes -
// total_inactive_file)); RLIMIT_AS minus the address space in use (VmSize) and RLIMIT_DATA
// minus the data segment in use (VmData), both soft limits from /proc/self/limits. A source
// that cannot be read is left out. `root` prefixes every path read: "" in production, a fake
// tree in tests (physical memory, which is no file, then counts only when `root` is empty).
MemoryBound available_memory(const std::string& root = "");

// available_memory().bytes.
uint64_t available_memory_bytes();

}  // namespace easel
