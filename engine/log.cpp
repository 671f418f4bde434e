// The logger: one mutex-guarded write per line, so lines from several threads never interleave.
#include "engine/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace easel {
namespace {

LogLevel level_from_env() {
  LogLevel level = LogLevel::info;
  if (const char* env = std::getenv("EASEL_LOG")) {
    if (!parse_log_level(env, &level)) {
      std::fprintf(stderr,
                   "[easel:log] EASEL_LOG=%s is not a level (debug, info, warn, error); using "
                   "info\n",
                   env);
      level = LogLevel::info;
    }
  }
  return level;
}

// The threshold, read from EASEL_LOG the first time it is needed.
std::atomic<int>& threshold() {
  static std::atomic<int> t{static_cast<int>(level_from_env())};
  return t;
}

std::mutex& write_mutex() {
  static std::mutex mu;
  return mu;
}

struct OnceKeys {
  std::mutex mu;
  std::set<std::string, std::less<>> keys;  // guarded by mu
};

OnceKeys& once_keys() {
  static OnceKeys k;
  return k;
}

}  // namespace

void set_log_level(LogLevel level) {
  threshold().store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel log_level() {
  return static_cast<LogLevel>(threshold().load(std::memory_order_relaxed));
}

bool parse_log_level(std::string_view name, LogLevel* out) {
  LogLevel l;
  if (name == "debug") {
    l = LogLevel::debug;
  } else if (name == "info") {
    l = LogLevel::info;
  } else if (name == "warn" || name == "warning") {
    l = LogLevel::warn;
  } else if (name == "error") {
    l = LogLevel::error;
  } else {
    return false;
  }
  if (out) *out = l;
  return true;
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error:
      return "error";
    case LogLevel::warn:
      return "warn";
    case LogLevel::info:
      return "info";
    case LogLevel::debug:
      return "debug";
  }
  return "info";
}

void log(LogLevel level, std::string_view subsystem, std::string_view message) {
  if (static_cast<int>(level) > threshold().load(std::memory_order_relaxed)) return;
  std::string line;
  line.reserve(subsystem.size() + message.size() + 24);
  line += "[easel:";
  line += subsystem;
  line += "] ";
  line += message;
  line += '\n';
  std::lock_guard<std::mutex> lock(write_mutex());
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void log_once(LogLevel level, std::string_view subsystem, std::string_view key,
              std::string_view message) {
  {
    OnceKeys& k = once_keys();
    std::lock_guard<std::mutex> lock(k.mu);
    if (!k.keys.emplace(key).second) return;
  }
  log(level, subsystem, message);
}

}  // namespace easel
