// A trained net as an ONNX model (opset 13), with Debian's ONNX library (libonnx-dev: the
// protobuf schema and the checker). Built when Meson's `onnx` feature finds it
// (tools/cli/onnx_export.cpp); without it, onnx_absent.cpp refuses in one line.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/arena.hpp"
#include "engine/status.hpp"
#include "nets/net.hpp"

namespace easel::cli {

// Whether this build writes ONNX.
bool onnx_available();

struct OnnxOptions {
  bool softmax = false;  // the output is Softmax(logits) ("prob"), not the logits ("logits")
  // The model's metadata_props (where it came from: the run directory, the step, the weights).
  std::vector<std::pair<std::string, std::string>> metadata;
};

// The ONNX model of `spec` (resolved as Net::create does; its input C x H x W, a dynamic batch
// "N") with its parameters from `weights`, laid out as `params` (a Net of spec's params()) in
// `layout`, serialised, after the ONNX checker has accepted it. Input "data" [N, C, H, W] float,
// NCHW; output "logits" [N, classes] (or "prob"). Every layer becomes ONNX nodes that compute
// the same values (docs/EXPORT.md has the table); a layer that ONNX cannot express so is
// refused (invalid_argument) naming the layer, its kind and why. unavailable: built without
// ONNX.
Result<std::string> onnx_model(const NetSpec& spec, Layout layout, const ArenaLayout& params,
                               const float* weights, const OnnxOptions& options);

}  // namespace easel::cli
