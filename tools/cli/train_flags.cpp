// The train settings on the command line: every flag comes from the table (train_settings());
// `easel train`'s become an easel::api::Config, a resumed run's config.json becomes flags.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>

#include "easel/config.hpp"
#include "easel/run.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/nearest.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

namespace fs = std::filesystem;

namespace {

// The one mapping of a status's code to an exit code (README, "Exit codes"), for the internal
// and the public codes alike (the same names).
template <class C>
Failure failure_of_code(C code) {
  return code == C::invalid_argument || code == C::not_found || code == C::data_error
             ? Failure::request
             : Failure::run;
}

}  // namespace

Failure failure_of(const Status& st) {
  return failure_of_code(st.code());
}

Failure failure_of(const api::Status& st) {
  return failure_of_code(st.code());
}

int report(const Status& st, Failure failure) {
  if (st.ok()) return 0;
  if (failure_agreed() && process_rank() != 0) return static_cast<int>(failure);  // rank 0 says it
  std::fprintf(stderr, "easel: %s\n", st.message().c_str());
  return static_cast<int>(failure);
}

int report(const api::Status& st, Failure failure) {
  if (st.ok()) return 0;
  if (failure_agreed() && process_rank() != 0) return static_cast<int>(failure);
  std::fprintf(stderr, "easel: %s\n", st.message().c_str());
  return static_cast<int>(failure);
}

SettingValues default_setting_values() {
  SettingValues values;
  for (const Setting& s : train_settings()) {
    const std::string text = s.default_text();
    values.push_back({text, text == "true"});
  }
  return values;
}

void add_setting_flags(CLI::App& app, unsigned command, SettingValues& values) {
  const auto settings = train_settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    if (!s.takes(command)) continue;
    std::string help = s.help;
    if (command == kTrainCommand && s.may_change() && std::string_view(s.name) != "resume")
      help += " [may change on --resume]";
    const std::string flag = "--" + std::string(s.name);
    if (s.field.type == SettingType::boolean) {
      CLI::Option* o =
          app.add_flag(s.negation ? flag + ",!--" + s.negation : flag, values[i].on, help);
      // A pair's default is not obvious from its names: say it (a lone flag is off).
      if (s.negation)
        o->option_text(s.default_text() == "true" ? "(default: on)" : "(default: off)");
      continue;
    }
    const char* type = s.field.type == SettingType::integer ? "INT"
                       : s.field.type == SettingType::real  ? "FLOAT"
                                                            : "TEXT";
    app.add_option(flag, values[i].text, help)->capture_default_str()->type_name(type);
  }
}

namespace {

// CLI11's help, but a flag pair reads "--prefetch,--no-prefetch" rather than
// "--prefetch,--no-prefetch{false}" (the value the second name sets, which reads as the default).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    for (size_t open = name.find('{'); open != std::string::npos; open = name.find('{', open)) {
      const size_t close = name.find('}', open);
      if (close == std::string::npos) break;
      name.erase(open, close - open + 1);
    }
    return name;
  }
};

}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string near = easel::nearest(word, candidates);
  return near.empty() ? "" : " (did you mean " + near + "?)";
}

std::shared_ptr<CLI::Formatter> help_formatter() {
  return std::make_shared<HelpFormatter>();
}

std::vector<std::string> setting_names(unsigned command, bool booleans_only) {
  std::vector<std::string> out;
  for (const Setting& s : train_settings())
    if (s.takes(command) && (!booleans_only || s.field.type == SettingType::boolean))
      out.push_back(s.name);
  return out;
}

Result<TrainConfig> parse_settings(SettingValues& values, unsigned command,
                                   const std::vector<std::string>& given,
                                   const std::string& source) {
  TrainConfig cfg;
  const auto settings = train_settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    if (!s.takes(command)) continue;
    if (s.field.type == SettingType::boolean) values[i].text = values[i].on ? "true" : "false";
    Status st = s.field.parse(s, values[i].text, cfg);
    if (st.ok()) continue;
    const bool on_command_line = std::any_of(
        given.begin(), given.end(), [&](const std::string& g) { return find_setting(g) == &s; });
    if (source.empty() || on_command_line) return st;
    return invalid_argument(source + ": key '" + s.name + "': " + st.message());
  }
  EASEL_RETURN_IF_ERROR(validate_config(cfg));
  return cfg;
}

namespace {

// Whether a given setting came from the command line rather than `source`.
bool on_command_line(const Setting& s, const std::vector<std::string>& given) {
  return std::any_of(given.begin(), given.end(),
                     [&](const std::string& g) { return find_setting(g) == &s; });
}

}  // namespace

api::Status train_settings_config(SettingValues& values, const std::vector<std::string>& given,
                                  const std::string& source, api::Config* config) {
  const auto settings = train_settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    if (!s.takes(kTrainCommand)) continue;
    if (s.field.type == SettingType::boolean) values[i].text = values[i].on ? "true" : "false";
    api::Status st = config->set(s.name, values[i].text);
    if (st.ok()) continue;
    if (source.empty() || on_command_line(s, given)) return st;
    return {st.code(), source + ": key '" + s.name + "': " + st.message()};
  }
  return config->validate();
}

Result<std::vector<std::string>> resume_args(const std::string& dir,
                                             const std::vector<std::string>& given) {
  for (const std::string& g : given)
    if (g != "help" && !api::Config::may_change_on_resume(g))
      return invalid_argument("--resume: --" + g +
                              " cannot change when a run continues (its config.json fixes it)");
  std::vector<std::pair<std::string, std::string>> settings;
  if (api::Status st = api::read_run_settings(dir, &settings); !st.ok())
    return Status(st.code() == api::Code::not_found  ? Code::not_found
                  : st.code() == api::Code::io_error ? Code::io_error
                                                     : Code::data_error,
                  st.message());
  // --epochs alone replaces the run's length in iterations, if it had one.
  const auto given_has = [&](const char* f) {
    return std::find(given.begin(), given.end(), f) != given.end();
  };
  const bool epochs_only = given_has("epochs") && !given_has("iterations");
  std::vector<std::string> args;
  for (const auto& [key, value] : settings)
    if (!(epochs_only && key == "iterations")) args.push_back("--" + key + "=" + value);
  return args;
}

}  // namespace easel::cli
