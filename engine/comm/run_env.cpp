#include "engine/comm/run_env.hpp"

#include <cstdlib>
#include <cstring>

#include "engine/status.hpp"

namespace easel {

namespace {

// Rank 0's values once the world has agreed on them; empty before.
std::vector<std::string>& agreed() {
  static std::vector<std::string> v;
  return v;
}

}  // namespace

const char* run_env(const char* name) {
  size_t i = 0;
  while (i < kRunEnvNames.size() && std::strcmp(kRunEnvNames[i], name) != 0)
    ++i;
  EASEL_CHECK_MSG(i < kRunEnvNames.size(), "run_env reads only the variables of kRunEnvNames");
  if (const std::vector<std::string>& run = agreed(); !run.empty())
    return run[i].empty() ? nullptr : run[i].c_str();
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

void set_run_env(std::vector<std::string> values) {
  EASEL_CHECK(values.size() == kRunEnvNames.size());
  agreed() = std::move(values);
}

}  // namespace easel
