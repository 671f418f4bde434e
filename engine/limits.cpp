#include "engine/limits.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

namespace easel {
namespace {

// The first whitespace-separated number of the file, or nothing ("max", missing, empty).
std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word.empty() || word[0] < '0' || word[0] > '9') return std::nullopt;
  return std::strtoull(word.c_str(), nullptr, 10);
}

// The number after `key` on the first line that starts with it ("MemAvailable:", "VmSize:"),
// times `scale`.
std::optional<uint64_t> read_keyed(const std::string& path, std::string_view key, uint64_t scale) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.size() <= key.size() || line.compare(0, key.size(), key) != 0) continue;
    const char* p = line.c_str() + key.size();
    while (*p == ' ' || *p == '\t')
      ++p;
    if (*p < '0' || *p > '9') return std::nullopt;
    return std::strtoull(p, nullptr, 10) * scale;
  }
  return std::nullopt;
}

// The soft limit of /proc/self/limits' row `name` ("Max address space"); nothing when unlimited.
std::optional<uint64_t> read_rlimit(const std::string& path, std::string_view name) {
  return read_keyed(path, name, 1);
}

void take(MemoryBound* b, std::optional<uint64_t> bytes, const std::string& source) {
  if (bytes && *bytes < b->bytes) *b = {*bytes, source};
}

uint64_t minus(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

// The process's path in the hierarchy `controller` ("" for v2's "0::" line) of /proc/self/cgroup.
std::optional<std::string> cgroup_path(const std::string& root, const std::string& controller) {
  std::ifstream f(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::stringstream names(line.substr(a + 1, b - a - 1));
    for (std::string n; std::getline(names, n, ',');)
      if (n == controller) return line.substr(b + 1);
    if (controller.empty() && b == a + 1) return line.substr(b + 1);
  }
  return std::nullopt;
}

// For `dir` and each ancestor up to `mount`: limit - (usage - inactive file pages).
void take_cgroup(MemoryBound* b, const std::string& mount, std::string dir, const char* limit,
                 const char* usage, const char* inactive, const std::string& source) {
  for (;;) {
    const std::string at = mount + dir;
    if (const auto lim = read_number(at + "/" + limit); lim && *lim < (uint64_t{1} << 62)) {
      const uint64_t used = read_number(at + "/" + usage).value_or(0);
      const uint64_t cache = read_keyed(at + "/memory.stat", inactive, 1).value_or(0);
      take(b, minus(*lim, minus(used, cache)), source);
    }
    if (dir.empty() || dir == "/") break;
    dir = dir.substr(0, dir.find_last_of('/'));
  }
}

}  // namespace

MemoryBound available_memory(const std::string& root) {
  MemoryBound b;
  if (root.empty()) {
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && size > 0)
      take(&b, static_cast<uint64_t>(pages) * static_cast<uint64_t>(size), "physical memory");
  }
  take(&b, read_keyed(root + "/proc/meminfo", "MemAvailable:", 1024), "MemAvailable");
  // cgroup v2 (the unified hierarchy) and v1 (the memory controller's own mount). Inside a
  // container the process's path may not exist under the mount (its root is the container's
  // cgroup): then the mount's own files are the container's.
  const auto walk = [&](const std::string& mount, const std::string& controller, const char* limit,
                        const char* usage, const char* inactive, const std::string& source) {
    std::string dir = cgroup_path(root, controller).value_or("");
    if (dir == "/" || !std::ifstream(mount + dir + "/" + limit)) dir.clear();
    take_cgroup(&b, mount, dir, limit, usage, inactive, source);
  };
  walk(root + "/sys/fs/cgroup", "", "memory.max", "memory.current", "inactive_file ",
       "cgroup memory.max");
  walk(root + "/sys/fs/cgroup/memory", "memory", "memory.limit_in_bytes", "memory.usage_in_bytes",
       "total_inactive_file ", "cgroup memory.limit_in_bytes");
  const std::string status = root + "/proc/self/status", limits = root + "/proc/self/limits";
  if (const auto as = read_rlimit(limits, "Max address space"))
    take(&b, minus(*as, read_keyed(status, "VmSize:", 1024).value_or(0)), "RLIMIT_AS");
  if (const auto data = read_rlimit(limits, "Max data size"))
    take(&b, minus(*data, read_keyed(status, "VmData:", 1024).value_or(0)), "RLIMIT_DATA");
  return b;
}

uint64_t available_memory_bytes() {
  return available_memory().bytes;
}

}  // namespace easel
