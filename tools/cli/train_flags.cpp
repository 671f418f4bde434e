// The train settings on the command line: every flag comes from the table (train_settings()).
#include <algorithm>
#include <cstdio>

#include "tools/cli/cli.hpp"

namespace easel::cli {

Failure failure_of(const Status& st) {
  return st.code() == Code::invalid_argument ? Failure::request : Failure::run;
}

int report(const Status& st, Failure failure) {
  if (st.ok()) return 0;
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
      app.add_flag(s.negation ? flag + ",!--" + s.negation : flag, values[i].on, help);
      continue;
    }
    const char* type = s.field.type == SettingType::integer ? "INT"
                       : s.field.type == SettingType::real  ? "FLOAT"
                                                            : "TEXT";
    app.add_option(flag, values[i].text, help)->capture_default_str()->type_name(type);
  }
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

}  // namespace easel::cli
