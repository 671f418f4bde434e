// Config: the train settings table (algos/train_config.hpp) behind names and text.
#include "api/convert.hpp"

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

}  // namespace

Status Config::set(std::string_view name, std::string_view value) {
  if (!find_setting(name)) return unknown_setting(name);
  return from_internal(set_setting(impl_->cfg, name, value));
}

Status Config::get(std::string_view name, std::string* value) const {
  const Setting* s = find_setting(name);
  if (!s) return unknown_setting(name);
  *value = s->field.show(impl_->cfg);
  return {};
}

Status Config::validate() const {
  return from_internal(validate_config(impl_->cfg));
}

std::vector<std::string> Config::setting_names() {
  std::vector<std::string> names;
  for (const Setting& s : train_settings())
    names.emplace_back(s.name);
  return names;
}

}  // namespace easel::api
