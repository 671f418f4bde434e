// Net descriptions the tests share (docs/NETS.md's format), and a helper that writes one to a
// file for the code paths that take --net FILE.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace easel::test {

// A small graph net of the kinds ResNet and GoogLeNet need: conv -> batch norm (+ fused ReLU) ->
// floor-mode max pool, a residual join (a conv and batch norm branch added to its input; the
// pool's gradient is the sum of two readers'), a concat of the join and a 1x1 conv of it, global
// average pooling, fc. Any input of 3 channels and at least 3x3 pixels fits.
constexpr const char* kBnJoinNet = R"(
name = "bn-join"
description = "batch norm, add, concat and global average pooling"
[input]
channels = 3
height = 12
width = 12
classes = 5
[[layer]]
name = "conv1"
type = "conv"
outputs = 8
kernel = 3
pad = 1
bias = false
[[layer]]
name = "bn1"
type = "batch_norm"
[[layer]]
name = "relu1"
type = "relu"
[[layer]]
name = "pool1"
type = "max_pool"
kernel = 3
stride = 2
pad = 1
ceil_mode = false
[[layer]]
name = "branch"
type = "conv"
inputs = ["pool1"]
outputs = 8
kernel = 3
pad = 1
bias = false
[[layer]]
name = "branch_bn"
type = "batch_norm"
momentum = 0.2
[[layer]]
name = "join"
type = "add"
inputs = ["branch_bn", "pool1"]
[[layer]]
name = "join_relu"
type = "relu"
[[layer]]
name = "squeeze"
type = "conv"
inputs = ["join_relu"]
outputs = 4
kernel = 1
[[layer]]
name = "cat"
type = "concat"
inputs = ["join_relu", "squeeze"]
[[layer]]
name = "gap"
type = "global_avg_pool"
[[layer]]
name = "fc"
type = "inner_product"
outputs = "classes"
)";

// Writes `text` to `file` in the test's temporary directory, once per process; returns the path.
inline std::string write_test_net(const std::string& file, const char* text) {
  const std::string path = ::testing::TempDir() + file;
  std::ofstream f(path);
  f << text;
  EXPECT_TRUE(f.good()) << path;
  return path;
}

}  // namespace easel::test
