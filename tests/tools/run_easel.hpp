// Runs the built `easel` program from a test, as a user would: its exit code, standard output
// and standard error. Shared by the CLI's tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace easel_test {

struct Out {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// `env` (e.g. "EASEL_TOPOLOGY_XML='f.xml' ", or empty) stands before the command; the output
// goes through files in a directory of this process's own (`tag` names it).
inline Out run_easel(const std::string& args, const std::string& env = "",
                     const std::string& tag = "io") {
  namespace fs = std::filesystem;
  const char* root = std::getenv("EASEL_BUILD_ROOT");
  const std::string exe = std::string(root != nullptr ? root : ".") + "/tools/easel";
  const fs::path d =
      fs::path(::testing::TempDir()) / ("easel_run_" + std::to_string(::getpid()) + "_" + tag);
  fs::create_directories(d);
  const std::string cmd = env + exe + " " + args + " >" + (d / "out").string() + " 2>" +
                          (d / "err").string() + " </dev/null";
  const int rc = std::system(cmd.c_str());
  Out o;
  o.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
  o.out = slurp(d / "out");
  o.err = slurp(d / "err");
  return o;
}

}  // namespace easel_test
