// The settings of a run: the same table as `easel train`'s flags and config file keys (every
// flag NAME of `easel train --help` is a setting NAME here, with the same text for its value and
// the same default). Setting by name keeps the public API free of easel's internal types.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "easel/status.hpp"

namespace easel::api {

class Config {
 public:
  Config();  // every setting at its default (easel train's)
  ~Config();
  Config(const Config& other);
  Config& operator=(const Config& other);
  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;

  // Sets one setting from its text, as `--NAME VALUE` would: set("algo", "sync-easgd"),
  // set("groups", "2"), set("iterations", "100"), set("lr", "0.01"), set("overlap", "true").
  // A boolean's negation flag is a name too, holding the opposite (set("no-prefetch", "true")
  // sets prefetch false; get("no-prefetch") reads "true" then). Errors name the
  // setting and the value; an unknown name is not_found. The net is a setting too ("net": a
  // built-in net such as lenet or resnet18, or the path of a net description file, docs/NETS.md;
  // validate() checks such a file whole, naming the file, the layer and the field).
  Status set(std::string_view name, std::string_view value);
  // The setting's value as text (what set() reads back to the same value); not_found when no
  // setting has that name.
  Status get(std::string_view name, std::string* value) const;
  // Checks the ranges and the rules between settings (what `easel train` refuses before it
  // starts); Run::train() calls it too.
  Status validate() const;

  // The names of every setting, in `easel train --help` order.
  static std::vector<std::string> setting_names();
  // The setting a misspelt `name` is nearest to ("lr" for "lrr"), by the rule easel train's
  // "did you mean" uses (a few edits, case folded); "" when none is near or `name` is one.
  static std::string nearest_name(std::string_view name);
  // Whether a resumed run (the `resume` setting) may give this setting a value of its own (the
  // run's length, its evaluations, checkpoints and data threads, and what no run directory
  // keeps: progress, log-level; `easel train --help` marks them "may change on --resume");
  // every other setting must be the checkpoint run's (read_run_settings, easel/run.hpp).
  // False for an unknown name and for out and overwrite (a resumed run stays in its own).
  static bool may_change_on_resume(std::string_view name);

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace easel::api
