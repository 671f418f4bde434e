// The exit codes of every easel command: the one table that `easel --help` prints and README's
// "Exit codes" section shows, row for row (tests/tools/test_cli.cpp:
// Cli.ExitCodeTableIsTheReadmes). Failure (cli.hpp) and failure_of give codes 1 and 2 from a
// status's code; train_cmd.cpp's exit_code gives 0, 3, 4 and 128 + N from how a run ended.
#pragma once

#include <string>
#include <string_view>

namespace easel::cli {

struct ExitCodeRow {
  const char* code;     // "0", ..., "128 + N"
  const char* meaning;  // Markdown: `flag` in backquotes (the help drops them)
};

inline constexpr ExitCodeRow kExitCodes[] = {
    {"0", "done: the run completed or reached `--target-accuracy`"},
    {"1",
     "the run failed: this machine or build lacks what was asked (a GPU for `--device cuda`, "
     "high-bandwidth memory for `--placement hbw` or `CLASS=hbw`, the memory to load the data "
     "set), reading or writing a file failed, or training failed"},
    {"2",
     "a bad request: a flag, config key or value is invalid; it names a file, net or data set "
     "that does not exist or whose contents are malformed (a corrupt image, a broken shard); or "
     "it asks what this machine's plan refuses (groups or threads past its cores, `--cpus` it "
     "lacks, replicas that do not fit its memory, a resume past its end)"},
    {"3", "training diverged (a non-finite loss; `summary.json` says where)"},
    {"4", "a group stalled past its deadline (under `--on-failure stop`)"},
    {"128 + N", "stopped by signal N (130 SIGINT, 143 SIGTERM, 138 SIGUSR1) with a checkpoint"},
};

// The table as `easel --help` ends: "Exit codes:", then each row, its meaning without
// backquotes, wrapped to lines of at most `width` characters under a column of its own.
inline std::string exit_codes_help(size_t width = 100) {
  constexpr size_t kIndent = 11;
  std::string out = "Exit codes:\n";
  for (const ExitCodeRow& row : kExitCodes) {
    std::string line = "  " + std::string(row.code);
    line.resize(kIndent, ' ');
    std::string_view rest = row.meaning;
    bool first = true;
    while (!rest.empty()) {
      const size_t space = rest.find(' ');
      std::string word(rest.substr(0, space));
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
      std::erase(word, '`');
      if (!first && line.size() + 1 + word.size() > width) {
        out += line + "\n";
        line.assign(kIndent, ' ');
        first = true;
      }
      line += (first ? "" : " ") + word;
      first = false;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace easel::cli
