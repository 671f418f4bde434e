// A small logger with subsystems. Lines go to stderr as "[easel:subsystem] message".
// log_once() prints a given key only the first time (fallbacks, refusals).
#pragma once

#include <string>
#include <string_view>

namespace easel {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

// Global threshold; lines above it are dropped. Default info; EASEL_LOG=debug|info|warn|error.
void set_log_level(LogLevel level);
LogLevel log_level();
// Parses "debug", "info", "warn", "error"; false when the name is unknown.
bool parse_log_level(std::string_view name, LogLevel* out);
// The name parse_log_level reads back: "error", "warn", "info", "debug".
const char* log_level_name(LogLevel level);

void log(LogLevel level, std::string_view subsystem, std::string_view message);
// Logs `message` at `level` only the first time `key` is seen in this process.
void log_once(LogLevel level, std::string_view subsystem, std::string_view key,
              std::string_view message);

inline void log_error(std::string_view sub, std::string_view m) {
  log(LogLevel::error, sub, m);
}
inline void log_warn(std::string_view sub, std::string_view m) {
  log(LogLevel::warn, sub, m);
}
inline void log_info(std::string_view sub, std::string_view m) {
  log(LogLevel::info, sub, m);
}
inline void log_debug(std::string_view sub, std::string_view m) {
  log(LogLevel::debug, sub, m);
}

}  // namespace easel
