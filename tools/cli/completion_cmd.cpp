// `easel completion bash|zsh`: the shell's completion script, generated from the flags the
// program registers (train's, topology's, model's and plan's from the settings table; each
// command's own), so a new flag or algorithm completes without a script to edit. zsh runs the
// same function through its bashcompinit.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "algos/list.hpp"
#include "nets/models/models.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

namespace {

// One command's words: its path ("train", "data pack"), its flags and its own commands.
struct CommandWords {
  std::string path;
  std::vector<std::string> flags, commands;
};

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words)
    s += (s.empty() ? "" : " ") + w;
  return s;
}

// The fixed values a flag takes, where there are some (--algo, --net's built-in nets, the
// settings' names); the other flags that take a value complete file names.
std::vector<std::string> flag_values(const std::string& flag) {
  std::vector<std::string> v;
  if (flag == "--algo") {
    for (const AlgoEntry& a : algo_list())
      v.emplace_back(a.name);
  } else if (flag == "--net" || flag == "--nets") {
    for (const ModelEntry& m : model_list())
      v.push_back(m.name);
  } else if (flag == "--by") {  // sweep report
    v = {"time-to-target", "throughput"};
  } else if (const Setting* s = find_setting(flag.substr(2)); s != nullptr && s->field.names) {
    v = s->field.names();
  }
  return v;
}

// `easel sweep` reads its own arguments (train's flags and four of its own), and `sweep
// report` its own: their words, as the parser in sweep_cmd.cpp and sweep_report.cpp takes them.
void add_sweep(const CommandWords& train, std::vector<CommandWords>& out) {
  CommandWords sweep{"sweep", train.flags, {"report"}};
  for (const char* f : {"--set", "--grid", "--out"})
    sweep.flags.emplace_back(f);
  out.push_back(std::move(sweep));
  out.push_back({"sweep report", {"--by", "--target", "--help"}, {}});
}

void collect(const CLI::App& app, const std::string& prefix, std::vector<CommandWords>& out,
             std::map<std::string, bool>& takes_value) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (prefix.empty() && sub->get_name() == "sweep") continue;  // add_sweep's, after train
    CommandWords c{prefix + sub->get_name(), {}, {}};
    if (c.path == "completion") c.commands = {"bash", "zsh"};
    for (const CLI::Option* o : sub->get_options()) {
      for (const std::string& n : o->get_lnames()) {
        c.flags.push_back("--" + n);
        takes_value["--" + n] = takes_value["--" + n] || o->get_type_size() != 0;
      }
    }
    for (const CLI::App* s : sub->get_subcommands([](const CLI::App*) { return true; }))
      c.commands.push_back(s->get_name());
    out.push_back(c);
    collect(*sub, c.path + " ", out, takes_value);
    if (c.path == "train") add_sweep(c, out);
  }
}

// The bash function: the command is the first word, and the second when it names one of the
// first's own (data pack, sweep report); after a flag that takes a value its values (or file
// names), else the command's flags and commands. `--flag=value` is split at '=' by bash.
std::string bash_function(const std::vector<CommandWords>& commands,
                          const std::map<std::string, bool>& takes_value) {
  std::vector<std::string> top, nested;
  for (const CommandWords& c : commands)
    (c.path.find(' ') == std::string::npos ? top : nested).push_back(c.path);
  top.emplace_back("help");
  std::string s =
      "_easel() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words=\"\"\n"
      "  local cmd=${COMP_WORDS[1]}\n"
      "  if [ \"$cur\" = \"=\" ]; then cur=\"\"; fi\n"
      "  if [ \"$prev\" = \"=\" ]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi\n"
      "  if [ \"$COMP_CWORD\" -gt 2 ]; then\n"
      "    case \"$cmd ${COMP_WORDS[2]}\" in\n";
  if (!nested.empty()) {
    std::string alts;
    for (const std::string& n : nested)
      alts += (alts.empty() ? "" : "|") + ("\"" + n + "\"");
    s += "      " + alts + ") cmd=\"$cmd ${COMP_WORDS[2]}\" ;;\n";
  }
  s += "    esac\n  fi\n";
  s += "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n    words=\"" + join(top) + " --version --help\"\n";
  s += "  elif [ \"$cmd\" = help ]; then\n    words=\"" + join(top) + "\"\n  else\n";
  s += "    case \"$prev\" in\n";
  for (const auto& [flag, value] : takes_value) {
    if (!value) continue;
    const std::vector<std::string> v = flag_values(flag);
    s += "      " + flag + ") " +
         (v.empty() ? std::string("return ;;")  // -o default: file names
                    : "COMPREPLY=($(compgen -W \"" + join(v) + "\" -- \"$cur\")); return ;;") +
         "\n";
  }
  s += "    esac\n    case \"$cmd\" in\n";
  for (const CommandWords& c : commands) {
    std::vector<std::string> words = c.commands;
    words.insert(words.end(), c.flags.begin(), c.flags.end());
    s += "      \"" + c.path + "\") words=\"" + join(words) + "\" ;;\n";
  }
  s += "    esac\n  fi\n"
       "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
       "}\n";
  return s;
}

std::string script(const CLI::App& app, const std::string& shell) {
  std::vector<CommandWords> commands;
  std::map<std::string, bool> takes_value;
  collect(app, "", commands, takes_value);
  for (const char* f : {"--set", "--grid", "--out", "--target", "--by"})  // sweep's own
    takes_value[f] = true;
  const std::string head =
      shell == "bash"
          ? "# easel's bash completion, generated by `easel completion bash` from its flags.\n"
            "# Load it with: source <(easel completion bash)  (e.g. in ~/.bashrc), or save it as\n"
            "# ~/.local/share/bash-completion/completions/easel\n"
          : "# easel's zsh completion, generated by `easel completion zsh` from its flags: the\n"
            "# bash function through zsh's bashcompinit. Load it with\n"
            "# source <(easel completion zsh) in ~/.zshrc, after compinit.\n"
            "autoload -U +X bashcompinit && bashcompinit\n";
  return head + bash_function(commands, takes_value) + "complete -o default -F _easel easel\n";
}

}  // namespace

CompletionCommand add_completion_command(CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand(
      "completion", "print the shell completion script: source <(easel completion bash)");
  c->add_option("SHELL", *shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
  const CLI::App* root = &app;
  return [c, shell, root]() -> int {
    if (!c->parsed()) return -1;
    std::fputs(script(*root, *shell).c_str(), stdout);
    return 0;
  };
}

}  // namespace easel::cli
