// easel's public API, the one header an embedding program includes. See docs/API.md.
//
//   easel::api::Config cfg;
//   cfg.set("algo", "sync-easgd"); cfg.set("groups", "2"); cfg.set("iterations", "200");
//   easel::api::Data data;
//   if (auto st = data.load("fashion-mnist"); !st.ok()) { ... st.to_string() ... }
//   easel::api::Run run;
//   run.on_evaluation([](const easel::api::Evaluation& e) { ...; return true; });
//   if (auto st = run.train(cfg, data); !st.ok()) { ... }
//   easel::api::save_weights("centre.bin", run.weights());
#pragma once

#include "easel/config.hpp"
#include "easel/data.hpp"
#include "easel/run.hpp"
#include "easel/status.hpp"
