// Running another program as this one's child, for the commands that drive runs (`easel sweep`'s
// cells, `easel launch`'s mpirun): its exit as a shell reports it, and a signal this process
// catches passed on to it once, so that it checkpoints and stops (a second one ends it at once,
// as train does).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace easel::cli {

// From now on SIGINT, SIGTERM and SIGUSR1 are caught: each goes to the running child (its own
// process group, so that a terminal's Ctrl-C reaches it once, from here) and child_signal()
// keeps the first.
void forward_signals_to_child();
// The first signal caught since forward_signals_to_child(); 0 when none.
int child_signal();

// Runs `exe` (a path, or a name looked up on PATH) with `args` (after argv[0]), its output
// appended to `log` (empty: this process's own stdout and stderr), stdin from /dev/null; returns
// its exit status as a shell reports it (128 + the signal that killed it), or -1 if it did not
// start.
int run_child(const std::string& exe, const std::vector<std::string>& args,
              const std::filesystem::path& log);

// This program's own path (/proc/self/exe); empty when it cannot be read.
std::string self_exe();

}  // namespace easel::cli
