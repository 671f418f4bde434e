// The public Status and its conversion from the internal one.
#include "api/convert.hpp"

namespace easel::api {

const char* code_name(Code code) {
  switch (code) {
    case Code::ok:
      return "ok";
    case Code::invalid_argument:
      return "invalid_argument";
    case Code::not_found:
      return "not_found";
    case Code::data_error:
      return "data_error";
    case Code::unavailable:
      return "unavailable";
    case Code::io_error:
      return "io_error";
    case Code::internal:
      return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  return ok() ? std::string("ok") : std::string(code_name(code_)) + ": " + message_;
}

Status from_internal(const ::easel::Status& st) {
  switch (st.code()) {
    case ::easel::Code::ok:
      return {};
    case ::easel::Code::invalid_argument:
      return {Code::invalid_argument, st.message()};
    case ::easel::Code::not_found:
      return {Code::not_found, st.message()};
    case ::easel::Code::data_error:
      return {Code::data_error, st.message()};
    case ::easel::Code::unavailable:
      return {Code::unavailable, st.message()};
    case ::easel::Code::io_error:
      return {Code::io_error, st.message()};
    case ::easel::Code::internal:
      return {Code::internal, st.message()};
  }
  return {Code::internal, st.message()};
}

}  // namespace easel::api
