#include "tools/cli/child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

namespace easel::cli {

namespace fs = std::filesystem;

namespace {

std::atomic<int> g_signal{0};
std::atomic<pid_t> g_child{0};
static_assert(std::atomic<pid_t>::is_always_lock_free);

extern "C" void on_signal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  const pid_t child = g_child.load();
  if (child > 0) ::kill(child, sig);
}

// In the child, before exec: the default signal actions, stdin from /dev/null, the output to
// `fd` (when >= 0).
void become_child(int fd) {
  ::setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGUSR1})
    sigaction(sig, &dfl, nullptr);
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
}

}  // namespace

void forward_signals_to_child() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  for (int sig : {SIGINT, SIGTERM, SIGUSR1})
    sigaction(sig, &sa, nullptr);
}

int child_signal() {
  return g_signal.load();
}

int run_child(const std::string& exe, const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  int fd = -1;
  if (!log.empty()) {
    fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  if (pid == 0) {
    become_child(fd);
    ::execvp(exe.c_str(), argv.data());
    ::_exit(127);
  }
  if (fd >= 0) ::close(fd);
  ::setpgid(pid, pid);  // either side may win the race; both ask the same
  g_child.store(pid);
  // A signal that came between the check and the fork reaches the child now.
  if (const int sig = g_signal.load(); sig != 0) ::kill(pid, sig);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      g_child.store(0);
      return -1;
    }
  g_child.store(0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

}  // namespace easel::cli
