// A config file: a flat TOML table whose keys are a command's flag names without the dashes
// (`lr-policy = "inv"` for --lr-policy). The engine knows no flag: the caller names them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/status.hpp"

namespace easel {

// Reads a TOML config file and returns it as command-line arguments ("--key=value", in file
// order), so that the flag parser applies them before the real flags. Every key must be one of
// `known_flags` (names without the leading dashes); the keys of `boolean_flags` must be true or
// false, the others strings or numbers; nested tables are refused. Errors name the file, the
// line and the key.
Result<std::vector<std::string>> config_file_args(const std::string& path,
                                                  const std::vector<std::string>& known_flags,
                                                  const std::vector<std::string>& boolean_flags);

// A TOML document as plain values, for readers other than the flag lists (net descriptions).
// Every value carries the line it starts on (0 when unknown).
struct TomlField;
struct TomlValue {
  enum class Type { string, integer, floating, boolean, array, table };
  Type type = Type::table;
  int line = 0;
  std::string str;
  int64_t integer = 0;
  double floating = 0;
  bool boolean = false;
  std::vector<TomlValue> items;   // array
  std::vector<TomlField> fields;  // table, keys in sorted order

  const TomlValue* find(std::string_view key) const;  // a table's field, or nullptr
};
// A table's key and value: a struct, not a std::pair, which clang cannot instantiate with
// TomlValue still incomplete.
struct TomlField {
  std::string key;
  TomlValue value;
};
const char* toml_type_name(TomlValue::Type t);  // "a string", "an integer", ...

// Parses TOML text; `origin` (a file's path, or "built-in net lenet") prefixes a syntax error
// with its line: "origin:12: expected ...". Dates and times are refused as values.
Result<TomlValue> parse_toml(std::string_view text, const std::string& origin);

// Text as one line of a message: control characters (a newline in a quoted TOML key, say) and
// backslashes escaped as \xNN.
std::string printable(std::string_view text);

}  // namespace easel
