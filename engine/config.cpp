#include "engine/config.hpp"

#include <toml++/toml.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string_view>

namespace easel {

namespace {

std::string line_of(const toml::node& n) {
  const auto& src = n.source();
  return src.begin.line ? ":" + std::to_string(src.begin.line) : "";
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f && c != '\\') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out;
}

namespace {

// A key as messages show it.
std::string shown(const std::string& key) {
  return "'" + printable(key) + "'";
}

}  // namespace

Result<std::vector<std::string>> config_file_args(const std::string& path,
                                                  const std::vector<std::string>& known_flags,
                                                  const std::vector<std::string>& boolean_flags) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return not_found("--config: " + path + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec))
    return invalid_argument("--config: " + path + ": not a regular file");
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << path << ":" << e.source().begin.line << ": " << printable(e.description());
    return data_error("--config: " + os.str());
  }
  std::vector<std::string> args;
  for (const auto& [key_view, node] : table) {
    const std::string key(key_view.str());
    const std::string where = path + line_of(node);
    if (key == "config") return data_error(where + ": 'config' cannot be set inside a config file");
    if (std::find(known_flags.begin(), known_flags.end(), key) == known_flags.end())
      return data_error(where + ": unknown key " + shown(key) +
                        " (keys are the flag names of `easel train --help`)");
    const bool is_bool =
        std::find(boolean_flags.begin(), boolean_flags.end(), key) != boolean_flags.end();
    if (is_bool) {
      if (!node.is_boolean())
        return data_error(where + ": key " + shown(key) + " must be true or false");
      args.push_back("--" + key + "=" + (node.as_boolean()->get() ? "true" : "false"));
      continue;
    }
    std::string value;
    if (auto s = node.as_string()) {
      value = s->get();
      if (value.empty())
        return data_error(where + ": key " + shown(key) +
                          " is empty (remove the key for its default)");
    } else if (auto i = node.as_integer()) {
      value = std::to_string(i->get());
    } else if (auto f = node.as_floating_point()) {
      std::ostringstream os;
      os.precision(17);
      os << f->get();
      value = os.str();
    } else if (node.is_boolean()) {
      return data_error(where + ": key " + shown(key) + " takes a value, not true/false");
    } else {
      return data_error(where + ": key " + shown(key) + " must be a string or a number");
    }
    args.push_back("--" + key + "=" + value);
  }
  return args;
}

const TomlValue* TomlValue::find(std::string_view key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

const char* toml_type_name(TomlValue::Type t) {
  switch (t) {
    case TomlValue::Type::string:
      return "a string";
    case TomlValue::Type::integer:
      return "an integer";
    case TomlValue::Type::floating:
      return "a number";
    case TomlValue::Type::boolean:
      return "true or false";
    case TomlValue::Type::array:
      return "an array";
    case TomlValue::Type::table:
      return "a table";
  }
  return "?";
}

namespace {

Result<TomlValue> convert(const toml::node& n, const std::string& origin) {
  TomlValue v;
  v.line = static_cast<int>(n.source().begin.line);
  if (auto s = n.as_string()) {
    v.type = TomlValue::Type::string;
    v.str = s->get();
  } else if (auto i = n.as_integer()) {
    v.type = TomlValue::Type::integer;
    v.integer = i->get();
  } else if (auto f = n.as_floating_point()) {
    v.type = TomlValue::Type::floating;
    v.floating = f->get();
  } else if (auto b = n.as_boolean()) {
    v.type = TomlValue::Type::boolean;
    v.boolean = b->get();
  } else if (auto a = n.as_array()) {
    v.type = TomlValue::Type::array;
    for (const toml::node& item : *a) {
      EASEL_ASSIGN_OR_RETURN(TomlValue x, convert(item, origin));
      v.items.push_back(std::move(x));
    }
  } else if (auto t = n.as_table()) {
    v.type = TomlValue::Type::table;
    for (const auto& [key, node] : *t) {
      EASEL_ASSIGN_OR_RETURN(TomlValue x, convert(node, origin));
      v.fields.push_back({std::string(key.str()), std::move(x)});
    }
  } else {
    return data_error(origin + ":" + std::to_string(v.line) +
                      ": dates and times are not values easel reads");
  }
  return v;
}

}  // namespace

Result<TomlValue> parse_toml(std::string_view text, const std::string& origin) {
  toml::table table;
  try {
    table = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ": " << printable(e.description());
    return data_error(os.str());
  }
  return convert(table, origin);
}

}  // namespace easel
