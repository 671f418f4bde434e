// Config: the train settings table (run/train_config.hpp) behind names and text.
#include "api/convert.hpp"
#include "engine/nearest.hpp"

namespace easel::api {

Config::Config() : impl_(std::make_unique<Impl>()) {}
Config::~Config() = default;
Config::Config(const Config& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Config& Config::operator=(const Config& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;

namespace {

Status unknown_setting(std::string_view name) {
  return {Code::not_found, "there is no setting '" + std::string(name) +
                               "' (Config::setting_names() lists them, as `easel train --help` "
                               "does)"};
}

// A boolean's negation ("no-prefetch") holds the opposite of the setting it negates.
bool is_negation(const Setting& s, std::string_view name) {
  return s.negation && name == s.negation;
}
std::string_view flip(std::string_view text) {
  return text == "true" ? "false" : text == "false" ? "true" : text;
}

}  // namespace

Status Config::set(std::string_view name, std::string_view value) {
  const Setting* s = find_setting(name);
  if (!s) return unknown_setting(name);
  if (is_negation(*s, name)) {
    if (value != "true" && value != "false")
      return {Code::invalid_argument,
              "--" + std::string(name) + ": '" + std::string(value) + "' is not true or false"};
    value = flip(value);
  }
  if (Status st = from_internal(set_setting(impl_->cfg, s->name, value)); !st.ok()) return st;
  impl_->texts[static_cast<size_t>(s - train_settings().data())] = std::string(value);
  return {};
}

Status Config::get(std::string_view name, std::string* value) const {
  const Setting* s = find_setting(name);
  if (!s) return unknown_setting(name);
  *value = s->field.show(impl_->cfg);
  if (is_negation(*s, name)) *value = std::string(flip(*value));
  return {};
}

Status Config::validate() const {
  return from_internal(validate_config(impl_->cfg));
}

std::string Config::nearest_name(std::string_view name) {
  return nearest(std::string(name), setting_names());
}

bool Config::may_change_on_resume(std::string_view name) {
  const Setting* s = find_setting(name);
  return s && s->may_change();
}

std::vector<std::string> Config::setting_names() {
  std::vector<std::string> names;
  for (const Setting& s : train_settings())
    names.emplace_back(s.name);
  return names;
}

}  // namespace easel::api
