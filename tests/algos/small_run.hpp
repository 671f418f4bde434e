// The small training problem the algorithm tests share: a synthetic 4-class set of 8x8 images
// and an MLP, with groups as oversubscribed threads of this process.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "run/trainer.hpp"

namespace easel::test {

inline DataSplit& small_data() {
  static DataSplit d = [] {
    auto r = load_data("synthetic:1024:1x8x8:4", MemKind::dram, 3);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  return d;
}

inline TrainConfig small_config(const std::string& algo, int groups) {
  TrainConfig c;
  c.net = "mlp";
  c.data = "synthetic";
  c.algo = algo;
  c.iterations = 120;
  c.eval_every = 60;
  c.batch = 16;
  c.lr = 0.05;
  c.lr_policy = LrSchedule::Policy::fixed;
  c.momentum = 0.9;
  c.weight_decay = 1e-4;
  c.rho = 1.0;
  c.seed = 42;
  c.plan.groups = GroupCount::of(groups);
  c.plan.threads_per_group = 1;
  c.plan.oversubscribe = true;
  c.progress = Progress::none;
  return c;
}

// The GPU path tests' run: an MLP on synthetic data, one thread per group, the reference ops
// (bit-for-bit comparable with the stand-in GPU's), 40 iterations evaluated every 20.
inline TrainConfig gpu_config(const std::string& algo, const std::string& device) {
  TrainConfig c;
  c.net = "mlp";
  c.data = "synthetic";
  c.algo = algo;
  c.iterations = 40;
  c.eval_every = 20;
  c.batch = 16;
  c.lr = 0.05;
  c.lr_policy = LrSchedule::Policy::fixed;
  c.seed = 7;
  c.impl = ImplChoice::ref;
  c.layout = Layout::nchw;
  c.device = parse_device(device).value();
  c.plan.threads_per_group = 1;
  c.plan.oversubscribe = true;
  c.progress = Progress::none;
  return c;
}

// Trains `c` on small_data(); a failed run fails the test and gives an empty summary.
inline TrainSummary run(const TrainConfig& c, TrainObserver* obs = nullptr) {
  auto r = train(c, small_data(), obs);
  EXPECT_TRUE(r.ok()) << c.algo << ": " << r.status().to_string();
  return r.ok() ? std::move(r).value() : TrainSummary{};
}

}  // namespace easel::test
