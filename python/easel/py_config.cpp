// easel.Config: the public Config (include/easel/config.hpp) set by name as easel train's flags,
// refusing a name or a value with easel train's own line.
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>

#include "easel/config.hpp"
#include "python/easel/module.hpp"

namespace py = pybind11;

namespace easel::python {

namespace {

// A setting's name as Python spells it: eval_every is eval-every (a keyword cannot hold '-').
std::string setting_name(std::string name) {
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

// A value as the text its flag would take: True is "true", 0.01 is "0.01" (repr: the shortest
// text that reads back as the same double), a path its string.
std::string setting_text(const std::string& name, py::handle value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(value) || py::isinstance<py::str>(value))
    return py::str(value).cast<std::string>();
  if (py::isinstance<py::float_>(value)) return py::repr(value).cast<std::string>();
  if (py::hasattr(value, "__fspath__"))
    return py::module_::import("os").attr("fspath")(value).cast<std::string>();
  throw py::value_error("--" + name + ": a " +
                        py::str(value.get_type().attr("__name__")).cast<std::string>() +
                        " is not a setting's value (text, a number, a bool or a path)");
}

// Config.set: easel train's messages, the unknown name's included (with its "did you mean").
void set_setting(api::Config& cfg, const std::string& key, py::handle value) {
  const std::string name = setting_name(key);
  std::string unused;
  if (!cfg.get(name, &unused).ok()) {
    const std::string near = api::Config::nearest_name(name);
    throw py::value_error("--" + name + ": no such flag of easel train" +
                          (near.empty() ? "" : " (did you mean --" + near + "?)") +
                          " (see easel train --help)");
  }
  if (api::Status st = cfg.set(name, setting_text(name, value)); !st.ok()) raise(st);
}

std::string get_setting(const api::Config& cfg, const std::string& key) {
  std::string text;
  if (api::Status st = cfg.get(setting_name(key), &text); !st.ok()) raise(st);
  return text;
}

// easel.Config(net='lenet', eval_every='5'): the settings that differ from easel train's
// defaults, as keywords that make the same Config again.
std::string config_repr(const api::Config& cfg) {
  const api::Config defaults;
  std::string out = "easel.Config(";
  for (const std::string& name : api::Config::setting_names()) {
    const std::string text = get_setting(cfg, name);
    if (text == get_setting(defaults, name)) continue;
    if (out.back() != '(') out += ", ";
    std::string keyword = name;
    std::replace(keyword.begin(), keyword.end(), '-', '_');
    out += keyword + "=" + py::repr(py::str(text)).cast<std::string>();
  }
  return out + ")";
}

}  // namespace

void bind_config(py::module_& m) {
  py::class_<api::Config>(m, "Config")
      .def(py::init([](const py::kwargs& settings) {
             auto cfg = std::make_unique<api::Config>();
             for (auto [key, value] : settings)
               set_setting(*cfg, key.cast<std::string>(), value);
             return cfg;
           }),
           "Every setting at easel train's default, then the keywords (eval_every=... is "
           "--eval-every)")
      .def("__setitem__", &set_setting)
      .def("__getitem__", &get_setting)
      .def("set", &set_setting)
      .def("get", &get_setting)
      .def("validate",
           [](const api::Config& cfg) {
             if (api::Status st = cfg.validate(); !st.ok()) raise(st);
           })
      .def("__repr__", &config_repr)
      .def("copy", [](const api::Config& cfg) { return api::Config(cfg); })
      .def("to_dict",
           [](const api::Config& cfg) {
             py::dict d;
             for (const std::string& name : api::Config::setting_names())
               d[py::str(name)] = get_setting(cfg, name);
             return d;
           })
      .def_static("names", &api::Config::setting_names)
      .def_static("nearest_name", &api::Config::nearest_name);
}

}  // namespace easel::python
