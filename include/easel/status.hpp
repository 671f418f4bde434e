// easel's public error type: every call of the public API that can fail returns a Status (or
// fills an out-parameter and returns one). Nothing in the public API throws or exits.
#pragma once

#include <string>
#include <utility>

namespace easel::api {

enum class Code {
  ok = 0,
  invalid_argument,  // a setting, an array's shape or a label is wrong
  not_found,         // a file, a net or a setting does not exist
  data_error,        // a file exists but its contents are malformed
  unavailable,       // the machine lacks what was asked (HBW memory, GPU)
  io_error,          // reading or writing failed
  internal,          // the run failed in a way the caller cannot fix (or training diverged)
};

// "invalid_argument", "not_found", ...
const char* code_name(Code code);

// Ok, or a code and one line naming what is wrong (the setting, the file, the array).
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: labels[3] is 10, outside [0, 10)"; "ok" when ok.
  std::string to_string() const;

 private:
  Code code_ = Code::ok;
  std::string message_;
};

}  // namespace easel::api
