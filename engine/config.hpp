// The run's configuration: every field has a flag of the same name (`--lr-policy` <->
// lr_policy) and a TOML key spelled like the flag without dashes in front (`lr-policy = "inv"`).
// Flags override the file. Defaults are those of Caffe's LeNet solver with the paper's default
// algorithm on all cores.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/status.hpp"
#include "engine/topology.hpp"

namespace easel {

struct TrainConfig {
  std::string net = "lenet";
  std::string data = "fashion-mnist";
  std::string algo = "sync-easgd";
  double epochs = 10;      // used when iterations == 0
  int64_t iterations = 0;  // iterations of the run (each group steps once per iteration)
  int64_t batch = 64;      // per group
  double lr = 0.01;
  std::string lr_policy = "inv";
  double lr_gamma = 1e-4, lr_power = 0.75;
  int64_t lr_stepsize = 1000;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  uint64_t seed = 1;
  PlanRequest plan;  // --groups, --threads-per-group, --threads, --cpus, --oversubscribe
  std::string placement = "dram";
  double target_accuracy = 0;      // 0: none; stop when the test accuracy reaches it
  int64_t eval_every = 0;          // iterations between evaluations; 0: once per epoch
  std::string out;                 // output directory; empty: runs/<date>-<time>-<algo>
  bool overwrite = false;          // allow an --out that already holds results
  std::string layout = "auto";     // auto | nhwc | nchw (auto: nhwc on the CPU, nchw on GPUs)
  std::string impl = "fast";       // fast | ref
  std::string precision = "fp32";  // fp32 | bf16: arithmetic of the fast kernels
  std::string device = "cpu";
  // EASGD and friends (DESIGN.md 4)
  // The elastic moving rate: alpha = lr * rho when rho >= 0 is given, a fixed alpha when
  // alpha >= 0 is given, else the EASGD paper's choice beta = P * alpha = 0.9.
  double rho = -1;
  double alpha = -1;
  int64_t tau = 1;
  std::string momentum_form = "nesterov";  // nesterov | heavy-ball
  std::string reduce = "tree";             // tree | serial
  std::string pack = "single";             // single | per-layer
  std::string overlap = "off";             // on | off
  std::string collective = "tree";         // tree | ring
  std::string progress = "auto";           // auto | bar | lines | none
  bool prefetch = true;
  bool checkpoint = true;  // write --out/checkpoint.bin after every evaluation
  std::string resume;      // a run's --out to continue from (its config.json and checkpoint.bin)
  std::string log_level;   // empty: EASEL_LOG or info
  // Every other setting that fixes the run, as its front end writes them (easel train: the
  // config.json keys a resumed run may not change, as JSON); part of a checkpoint's identity.
  std::string settings;
};

// Reads a TOML config file and returns it as command-line arguments ("--key=value", in file
// order), so that the flag parser applies them before the real flags. Every key must be one of
// `known_flags` (names without the leading dashes); nested tables are refused. Errors name the
// file, the line and the key.
Result<std::vector<std::string>> config_file_args(const std::string& path,
                                                  const std::vector<std::string>& known_flags,
                                                  const std::vector<std::string>& boolean_flags);

}  // namespace easel
