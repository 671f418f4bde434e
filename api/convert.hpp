// Between the internal types and the public API's (api/ only; never installed).
#pragma once

#include "api/run_dir.hpp"
#include "easel/config.hpp"
#include "easel/data.hpp"
#include "easel/status.hpp"
#include "engine/status.hpp"
#include "nets/data/dataset.hpp"
#include "run/train_config.hpp"

namespace easel::api {

// The same code and message.
Status from_internal(const ::easel::Status& st);

struct Config::Impl {
  TrainConfig cfg;
  // Each setting's text as last set (train_settings() order): a run directory's config.json
  // keeps text settings as given.
  run_dir::SettingTexts texts = run_dir::default_texts();
};

struct Data::Impl {
  DataSplit split;
  bool has_train = false, has_test = false;
  std::string name = "memory";  // what the run's info names: the spec, or "memory"
};

}  // namespace easel::api
