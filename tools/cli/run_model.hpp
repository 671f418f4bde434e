// A trained model read back from a run directory (`easel train --out DIR`): the net its
// config.json names, built on its data set's input, with the weights of its checkpoint.bin, and
// easel's own forward pass over it on the CPU. `easel export` writes it out (export_cmd.cpp).
#pragma once

#include <string>
#include <vector>

#include "engine/status.hpp"
#include "nets/data/dataset.hpp"
#include "nets/net.hpp"
#include "run/train_config.hpp"

namespace easel::cli {

struct RunModel {
  std::string dir;
  TrainConfig cfg;  // config.json's settings
  NetSpec spec;     // built on the data set's input and classes
  // The layout the run trained in: an inner product reading a C x H x W tensor holds its
  // weights in that layout's order (devices/op.hpp, param_shapes).
  Layout layout = Layout::nchw;
  std::string weights_from;    // which model: "centre" or "replica 0"
  int64_t step = 0;            // the checkpoint's iterations
  std::vector<float> weights;  // the arena as the net's params() lays it out
  DataSplit data;              // the run's data set (held in memory)
};

// The model `which` names: "final" (the model the run evaluated last: its centre for the
// algorithms that keep one, else group 0's replica), "centre", "replica" (group 0's) or "best"
// (refused: a run directory keeps only its latest checkpoint). Errors name the directory, the
// file or the flag: no config.json, no checkpoint.bin (a run with --no-checkpoint or stopped
// before its first evaluation), a checkpoint of another net.
Result<RunModel> load_run_model(const std::string& dir, const std::string& which);

// The first min(n, count) images of the test set (the training set when the data has none),
// normalised as the run's evaluation does (never cropped or flipped): [n, C, H, W] in `layout`.
std::vector<float> eval_images(const RunModel& m, int64_t n, Layout layout);

// easel's forward pass on the CPU (the run's layout, fp32, inference: dropout off, batch norm
// on its running statistics) over images [n, C, H, W] in m.layout: the logits [n, classes].
Result<std::vector<float>> forward_logits(const RunModel& m, const std::vector<float>& images,
                                          int64_t n);

}  // namespace easel::cli
