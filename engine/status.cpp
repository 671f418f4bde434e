#include "engine/status.hpp"

namespace easel {

const char* code_name(Code c) {
  switch (c) {
    case Code::ok:
      return "ok";
    case Code::invalid_argument:
      return "invalid argument";
    case Code::not_found:
      return "not found";
    case Code::data_error:
      return "data error";
    case Code::unavailable:
      return "unavailable";
    case Code::io_error:
      return "i/o error";
    case Code::internal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

void check_failed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "easel: check failed: %s at %s:%d%s%s\n", expr, file, line, msg ? ": " : "",
               msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace easel
