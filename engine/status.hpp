// Status and Result: the error channel for user and environment errors (bad flags, bad files,
// missing hardware). Broken invariants are not Status values: they abort through EASEL_CHECK.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace easel {

enum class Code {
  ok = 0,
  invalid_argument,  // a flag, config field or hyper-parameter is wrong
  not_found,         // a file, device or named thing does not exist
  data_error,        // a file exists but its contents are malformed
  unavailable,       // the machine lacks what was asked (HBW memory, GPU, MPI)
  io_error,          // reading or writing failed
  internal,          // a library call failed in a way the user cannot fix
};

const char* code_name(Code c);

// A Status is ok or carries a code and one human-readable line (what, which file/field, why).
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return {}; }

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "data_error: train-images-idx3-ubyte: wrong magic 0x00000000 (expected 0x00000803)"
  std::string to_string() const;

 private:
  Code code_ = Code::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) {
  return {Code::invalid_argument, std::move(m)};
}
inline Status not_found(std::string m) {
  return {Code::not_found, std::move(m)};
}
inline Status data_error(std::string m) {
  return {Code::data_error, std::move(m)};
}
inline Status unavailable(std::string m) {
  return {Code::unavailable, std::move(m)};
}
inline Status io_error(std::string m) {
  return {Code::io_error, std::move(m)};
}
inline Status internal_error(std::string m) {
  return {Code::internal, std::move(m)};
}

// Result<T>: a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const char* msg);

}  // namespace easel

// Broken invariant: print the expression and file:line, then abort.
#define EASEL_CHECK(cond)                                                   \
  do {                                                                      \
    if (!(cond)) ::easel::check_failed(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)
#define EASEL_CHECK_MSG(cond, msg)                                        \
  do {                                                                    \
    if (!(cond)) ::easel::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)

// Propagate a non-ok Status to the caller.
#define EASEL_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::easel::Status easel_status_ = (expr);        \
    if (!easel_status_.ok()) return easel_status_; \
  } while (0)

#define EASEL_CONCAT_INNER(a, b) a##b
#define EASEL_CONCAT(a, b) EASEL_CONCAT_INNER(a, b)
// EASEL_ASSIGN_OR_RETURN(auto x, make_x()); declares x or returns the error.
#define EASEL_ASSIGN_OR_RETURN(lhs, expr) \
  EASEL_ASSIGN_OR_RETURN_IMPL(EASEL_CONCAT(easel_result_, __LINE__), lhs, expr)
#define EASEL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
