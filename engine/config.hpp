// A config file: a flat TOML table whose keys are a command's flag names without the dashes
// (`lr-policy = "inv"` for --lr-policy). The engine knows no flag: the caller names them.
#pragma once

#include <string>
#include <string_view>
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

// Text as one line of a message: control characters (a newline in a quoted TOML key, say) and
// backslashes escaped as \xNN.
std::string printable(std::string_view text);

}  // namespace easel
