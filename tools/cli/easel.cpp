// easel: train, topology, list, bench, model, plan, eval, predict. `easel --help` and `easel
// SUBCOMMAND --help` list every flag with its default; `easel --help` ends with the exit codes
// (exit_codes.hpp). User errors print one line and exit with 2 (a bad request) or 1 (the run
// failed): cli::report.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/mpi_comm.hpp"
#include "engine/config.hpp"
#include "engine/log.hpp"
#include "tools/bench/bench_model.hpp"
#include "tools/cli/cli.hpp"
#include "tools/cli/exit_codes.hpp"
#include "tools/cli/sweep.hpp"

namespace {

// The value of the last FLAG VALUE / FLAG=VALUE among the arguments after the subcommand (the
// last, as the flag parser takes it); nullopt when FLAG is not there.
std::optional<std::string> find_value(int argc, char** argv, const std::string& flag) {
  std::optional<std::string> v;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag && i + 1 < argc) v = argv[i + 1];
    if (a.rfind(flag + "=", 0) == 0) v = a.substr(flag.size() + 1);
  }
  return v;
}

// The long flags on the command line after the subcommand, without dashes or values.
std::vector<std::string> given_flags(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) out.push_back(a.substr(2, a.find('=') - 2));
  }
  return out;
}

// The first flag of subcommand `sub` given twice (under any of its names: --prefetch and
// --no-prefetch are one), or given an empty value (`--out=`, `--out ""`: the flag parser would
// take the next argument as the value, or read a number as 0), among the arguments after the
// subcommand; an empty string when there is none. The last value would win silently.
std::string repeated_or_empty(int argc, char** argv, const CLI::App& sub) {
  std::vector<std::pair<const CLI::Option*, std::string>> seen;  // and the name it was given as
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty()) {
      const CLI::Option* prev = i > 2 ? sub.get_option_no_throw(argv[i - 1]) : nullptr;
      if (prev != nullptr && prev->get_expected_min() > 0)
        return std::string(argv[i - 1]) + ": empty value";
      return "an empty argument" + (i > 2 ? " after " + std::string(argv[i - 1]) : std::string());
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) continue;
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (eq != std::string::npos && eq + 1 == a.size()) return name + ": empty value";
    const CLI::Option* o = sub.get_option_no_throw(name);
    if (o == nullptr) continue;  // the parser names it
    for (const auto& [earlier, as] : seen)
      if (earlier == o) return name + (as == name ? ": given twice" : ": the same flag as " + as);
    seen.emplace_back(o, name);
  }
  return {};
}

// The first --flag among the arguments after the subcommand (and its own: data pack) that it
// does not have, named with the nearest flag it has; empty when every flag is known (the
// parser refused something else).
std::string unknown_flag(const CLI::App& top, int argc, char** argv) {
  const CLI::App* sub = &top;
  std::string path = top.get_name();
  int i = 2;
  for (; i < argc && argv[i][0] != '-'; ++i) {
    const auto own =
        sub->get_subcommands([&](const CLI::App* c) { return c->get_name() == argv[i]; });
    if (own.empty()) break;
    sub = own.front();
    path += " " + sub->get_name();
  }
  std::vector<std::string> names;
  for (const CLI::Option* o : sub->get_options())
    for (const std::string& n : o->get_lnames())
      names.push_back("--" + n);
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) continue;
    const std::string name = a.substr(0, a.find('='));
    if (sub->get_option_no_throw(name) != nullptr) continue;
    return name + ": no such flag of easel " + path + easel::cli::did_you_mean(name, names) +
           " (see easel " + path + " --help)";
  }
  return {};
}

// `easel train` without --data (on the command line, in the config file or the resumed run's
// config.json: `args`) trains on the default data set, Fashion-MNIST's 1x28x28 images in 10
// classes (BenchInput's default). A net that declares another input (resnet18's 3x224x224,
// cifar10-quick's 3x32x32) would be built for those images and train on them without a word:
// refused, naming what to pass.
easel::Status check_default_data(const std::string& net, const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--data" || a.rfind("--data=", 0) == 0) return {};
  const easel::bench::BenchInput in = easel::bench::bench_input(net), fmnist;
  if (in.channels == fmnist.channels && in.height == fmnist.height && in.width == fmnist.width &&
      in.classes == fmnist.classes)
    return {};
  const std::string shape = std::to_string(in.channels) + "x" + std::to_string(in.height) + "x" +
                            std::to_string(in.width);
  const std::string classes = std::to_string(in.classes);
  return easel::invalid_argument(
      "--net " + net + " takes " + shape + " images in " + classes +
      " classes, but without --data it would train on Fashion-MNIST's 1x28x28 in 10: pass "
      "--data (a directory, e.g. an image folder DIR:" +
      std::to_string(in.height) + ", or synthetic:1024:" + shape + ":" + classes + ")");
}

// `easel train`: the default data's check (`args`: every flag, the config file's and the resumed
// run's included), then the run.
int train_command(easel::cli::SettingValues& values, const std::vector<std::string>& given,
                  const std::string& source, const std::vector<std::string>& args) {
  const auto settings = easel::train_settings();
  for (size_t i = 0; i < settings.size(); ++i)
    if (std::string_view(settings[i].name) == "net")
      if (easel::Status st = check_default_data(values[i].text, args); !st.ok())
        return easel::cli::report(st, easel::cli::Failure::request);
  return easel::cli::run_train(values, given, source);
}

// The subcommand's help when one was named, else easel's own; for a flag the parser refused.
int parse_error(const CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  using easel::cli::Failure;
  std::string commands;
  std::vector<std::string> names;
  const CLI::App* sub = nullptr;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands += (commands.empty() ? "" : ", ") + c->get_name();
    names.push_back(c->get_name());
    if (argc > 1 && c->get_name() == argv[1]) sub = c;
  }
  if (argc > 1 && sub == nullptr && argv[1][0] != '-')
    return easel::cli::report(
        easel::invalid_argument("unknown command '" + std::string(argv[1]) + "'" +
                                easel::cli::did_you_mean(argv[1], names) +
                                " (commands: " + commands + "; see easel --help)"),
        Failure::request);
  if (sub != nullptr)
    if (const std::string bad = unknown_flag(*sub, argc, argv); !bad.empty())
      return easel::cli::report(easel::invalid_argument(bad), Failure::request);
  return easel::cli::report(
      easel::invalid_argument(std::string(e.what()) + " (see easel" +
                              (sub ? " " + std::string(argv[1]) : "") + " --help)"),
      Failure::request);
}

// The arguments for the flag parser, in the reverse order CLI11 wants: a config file's keys (or
// a resumed run's config.json) become flags placed before the real ones, so the real ones win;
// *source is then that file (where the values not on the command line came from).
easel::Result<std::vector<std::string>> parser_args(int argc, char** argv,
                                                    const std::vector<std::string>& given,
                                                    std::string* source) {
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i)
    args.emplace_back(argv[i]);
  const std::string cfg_file = find_value(argc, argv, "--config").value_or("");
  const std::optional<std::string> resume_dir = find_value(argc, argv, "--resume");
  const bool is_train = argc > 1 && std::strcmp(argv[1], "train") == 0;
  if (!is_train || (!resume_dir && cfg_file.empty())) return args;
  auto extra = resume_dir ? easel::cli::resume_args(*resume_dir, given)
                          : easel::config_file_args(
                                cfg_file, easel::cli::setting_names(easel::kTrainCommand),
                                easel::cli::setting_names(easel::kTrainCommand, true));
  if (!extra.ok()) return extra.status();
  // Inserted just after "train" (which is last in the reversed vector).
  args.insert(args.end() - 1, extra.value().rbegin(), extra.value().rend());
  *source = resume_dir ? *resume_dir + "/config.json" : cfg_file;
  return args;
}

// The commands the flag parser does not read: `easel --version` (-V), `easel sweep`, which
// passes any train flag on to its cells, and `easel launch`, which passes them to mpirun's
// ranks. -1 when argv names none.
int early_command(int argc, char** argv) {
  using easel::cli::report;
  if (argc > 1 && (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0)) {
    if (argc > 2)
      return report(easel::invalid_argument(std::string(argv[1]) + " takes nothing after it"),
                    easel::cli::Failure::request);
    return easel::cli::run_version();
  }
  if (argc > 1 && std::strcmp(argv[1], "sweep") == 0)
    return easel::cli::run_sweep(std::vector<std::string>(argv + 2, argv + argc));
  if (argc > 1 && std::strcmp(argv[1], "launch") == 0)
    return easel::cli::run_launch(std::vector<std::string>(argv + 2, argv + argc));
  return -1;
}

// `easel train` and its flags: --config, every train setting, --explain [--json].
CLI::App* add_train_command(CLI::App& app, easel::cli::SettingValues& values,
                            std::string& config_path, easel::cli::ExplainFlags& explain) {
  CLI::App* train = app.add_subcommand("train", "train a net with one of the algorithms");
  train->add_option("--config", config_path,
                    "TOML file with any of these flags as keys (flags override it)");
  easel::cli::add_setting_flags(*train, easel::kTrainCommand, values);
  train->add_flag("--explain", explain.explain,
                  "print what the run will do (the groups, the exchange path, the collective, the "
                  "memory fit) and exit; nothing is trained or written");
  train->add_flag("--json", explain.json, "with --explain: as one JSON object");
  train->add_option("--time-exchange", explain.time_exchange,
                    "with --explain: also build the run as planned and time this many rounds of "
                    "its algorithm (the plan's exchange path and collective, each group's "
                    "gradient left out)");
  return train;
}

// `run` on the settings of `command` (their errors exit 2), with the log level they set.
int with_settings(easel::cli::SettingValues& values, unsigned command,
                  const std::vector<std::string>& given, const std::string& source,
                  const std::function<int(const easel::TrainConfig&)>& run) {
  auto cfg = easel::cli::parse_settings(values, command, given, source);
  if (!cfg.ok()) return easel::cli::report(cfg.status(), easel::cli::Failure::request);
  if (cfg->log_level) easel::set_log_level(*cfg->log_level);
  return run(*cfg);
}

// The commands that read their own arguments (early_command), listed for --help and completion.
void add_own_parsers(CLI::App& app) {
  app.add_subcommand("sweep",
                     "run train over the product of lists of its flags, resumable; "
                     "`easel sweep report DIR` tabulates and plots it (easel sweep --help)");
  app.add_subcommand("launch",
                     "mpirun -np N easel train, relaunched from its checkpoint when a rank dies "
                     "(easel launch --help)");
}

}  // namespace

namespace {

// `easel list [--net NET] [--json]`: what the subcommand's flags set (it runs when no other
// command was parsed).
struct ListFlags {
  bool json = false;
  std::string net;
};

void add_list_command(CLI::App& app, ListFlags& f) {
  CLI::App* list = app.add_subcommand("list", "list the nets and algorithms");
  list->add_option("--net", f.net,
                   "only this net's line: a built-in name, a description file (docs/NETS.md) or "
                   "an ONNX file");
  list->add_flag("--json", f.json,
                 "print them as one JSON object: nets (name, params, weight_bytes, "
                 "flops_per_image, input, classes) and algorithms");
}

}  // namespace

int easel_main(int argc, char** argv) {
  using namespace easel;
  using cli::Failure;
  using cli::report;
  if (const int rc = early_command(argc, argv); rc >= 0) return rc;
  cli::SettingValues values = cli::default_setting_values();
  CLI::App app{"easel: train deep networks on a node split into worker groups (SC17 algorithms)",
               "easel"};
  app.require_subcommand(1);
  app.formatter(cli::help_formatter());  // before the subcommands, which inherit it
  app.footer(
      "easel --version (-V) prints the build; easel help COMMAND is easel COMMAND --help.\n\n" +
      cli::exit_codes_help());
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  std::string config_path;
  cli::ExplainFlags explain;
  CLI::App* train = add_train_command(app, values, config_path, explain);
  CLI::App* topo =
      app.add_subcommand("topology", "print the machine and the worker-group plan the flags give");
  cli::add_setting_flags(*topo, kTopologyCommand, values);
  bool topology_json = false;
  topo->add_flag("--json", topology_json,
                 "print the machine and the plan as one JSON object (see docs/TOPOLOGY.md)");
  ListFlags list;
  add_list_command(app, list);
  bench::BenchFlags bench_flags;
  CLI::App* bench = cli::add_bench_flags(app, bench_flags);
  add_own_parsers(app);
  // The commands that run themselves (each -1 when it was not the one parsed); completion last,
  // as its script covers every command added before it.
  const std::vector<std::function<int()>> self_run = {
      cli::add_model_commands(app),    cli::add_data_commands(app),   cli::add_runs_command(app),
      cli::add_eval_command(app),      cli::add_predict_command(app), cli::add_export_command(app),
      cli::add_completion_command(app)};

  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (argc < 2 || sub->get_name() != argv[1]) continue;
    if (const std::string bad = repeated_or_empty(argc, argv, *sub); !bad.empty())
      return report(invalid_argument(bad + " (see easel " + argv[1] + " --help)"),
                    Failure::request);
  }
  const std::vector<std::string> given = given_flags(argc, argv);
  std::string source;  // where the values not on the command line came from
  auto parsed_args = parser_args(argc, argv, given, &source);
  if (!parsed_args.ok()) return report(parsed_args.status(), Failure::request);
  std::vector<std::string>& args = *parsed_args;
  const std::vector<std::string> all_args = args;  // the parser consumes args
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return parse_error(app, argc, argv, e);
  }
  if (bench->parsed()) return cli::run_bench(bench_flags);
  for (const auto& command : self_run)
    if (const int rc = command(); rc >= 0) return rc;
  if (!train->parsed() && !topo->parsed()) return cli::run_list(list.json, list.net);
  if (train->parsed() && explain.json && !explain.explain)
    return report(invalid_argument("--json: only with --explain"), Failure::request);
  if (train->parsed() && explain.time_exchange != 0 && !explain.explain)
    return report(invalid_argument("--time-exchange: only with --explain"), Failure::request);
  if (train->parsed() && explain.explain)
    return with_settings(values, kTrainCommand, given, source,
                         [&](const TrainConfig& c) { return cli::run_explain(c, explain); });
  if (train->parsed()) return train_command(values, given, source, all_args);
  const bool fit = std::any_of(given.begin(), given.end(),
                               [](const std::string& f) { return f == "net" || f == "data"; });
  return with_settings(values, kTopologyCommand, given, source, [&](const TrainConfig& c) {
    return cli::run_topology(c, topology_json, fit);
  });
}

// Under mpirun every rank runs easel_main; only rank 0 reports (the others log only errors), and
// a rank that fails stops the whole job (mpi_finish) instead of leaving the others waiting. A
// refusal at MPI's start is every rank's at once (the run's variables): rank 0 says it, and each
// rank ends MPI and exits with its code.
int main(int argc, char** argv) {
  if (easel::Status st = easel::mpi_start(&argc, &argv); !st.ok()) {
    const easel::cli::Failure failure = easel::cli::failure_of(st);
    if (easel::process_rank() == 0) easel::cli::report(st, failure);
    return easel::mpi_finish(static_cast<int>(failure), true);
  }
  if (easel::process_rank() != 0) easel::set_log_level(easel::LogLevel::error);
  // `easel help [COMMAND]` is `easel [COMMAND] --help`.
  std::vector<char*> args(argv, argv + argc);
  static char help_flag[] = "--help";
  if (argc > 1 && std::strcmp(argv[1], "help") == 0 && argc <= 3) {
    args.erase(args.begin() + 1);
    args.push_back(help_flag);
  }
  return easel::mpi_finish(easel_main(static_cast<int>(args.size()), args.data()));
}
