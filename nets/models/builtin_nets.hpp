// The built-in net descriptions, compiled in by nets/models/embed_nets.py from the .toml files
// listed in nets/meson.build (builtin_nets.cpp is generated in the build directory).
#pragma once

#include <span>
#include <string_view>

namespace easel {

struct BuiltinNet {
  const char* file;       // "lenet.toml"
  std::string_view text;  // its contents
};
std::span<const BuiltinNet> builtin_nets();

}  // namespace easel
