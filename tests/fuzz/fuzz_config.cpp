// libFuzzer target: config_file_args (engine/config.cpp), the TOML config reader of `easel
// train --config`, with the train command's real flag names.
#include <cstdint>
#include <string>

#include "engine/config.hpp"
#include "run/train_config.hpp"
#include "tests/fuzz/memfile.hpp"
#include "tools/cli/cli.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> known = easel::cli::setting_names(easel::kTrainCommand);
  static const std::vector<std::string> booleans =
      easel::cli::setting_names(easel::kTrainCommand, /*booleans_only=*/true);
  easel::fuzz::MemFile file("config.toml", data, size);
  auto r = easel::config_file_args(file.path(), known, booleans);
  if (r.ok()) {
    for (const std::string& a : r.value())
      if (a.rfind("--", 0) != 0 || a.find('=') == std::string::npos) __builtin_trap();
  } else if (r.status().message().find(file.path()) == std::string::npos ||
             r.status().message().find('\n') != std::string::npos) {
    __builtin_trap();  // every error is one line naming the file
  }
  return 0;
}
