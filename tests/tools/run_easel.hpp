// Runs the built `easel` program from a test, as a user would: its exit code, standard output
// and standard error. Shared by the CLI's tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace easel_test {

// A fresh, empty folder for one test: under the test temporary directory, named for the test
// program (`tag`), this process and `name`. The programs that share a process differ by tag;
// two runs on one machine (a CI clone beside a checkout) by process.
inline std::filesystem::path tmp_dir(const std::string& tag, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path d = fs::path(::testing::TempDir()) /
                     ("easel_" + tag + "_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

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

// Starts `easel ARGS` (fork and exec, stdout and stderr into files of d); returns its pid.
inline pid_t start_easel(const std::vector<std::string>& args, const std::filesystem::path& d) {
  namespace fs = std::filesystem;
  const char* root = std::getenv("EASEL_BUILD_ROOT");
  const std::string exe = std::string(root ? root : ".") + "/tools/easel";
  fs::remove(d / "out");  // an earlier run's lines are not this one's
  fs::remove(d / "err");
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>(exe.c_str())};
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (!std::freopen((d / "out").c_str(), "w", stdout) ||
        !std::freopen((d / "err").c_str(), "w", stderr))
      ::_exit(126);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits (at most ~60 s) until `file` holds at least `lines` lines.
inline bool wait_for_lines(const std::filesystem::path& file, int lines) {
  namespace fs = std::filesystem;
  for (int i = 0; i < 6000; ++i) {
    const std::string text = fs::exists(file) ? slurp(file) : std::string();
    if (std::count(text.begin(), text.end(), '\n') >= lines) return true;
    ::usleep(10000);
  }
  return false;
}

// The exit code, or 128 + the signal that ended it.
inline int wait_exit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace easel_test
