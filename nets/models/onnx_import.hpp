// A net from an ONNX file (what torch.onnx.export writes, opsets 11 to 17) as easel's own net
// description (the TOML of nets/models/description.hpp) plus its initial weights, read with
// Debian's ONNX library (libonnx-dev). Built when Meson's `onnx` feature finds it
// (onnx_import.cpp); without it, onnx_import_absent.cpp refuses in one line. docs/NETS.md has
// the op table. Whatever easel cannot compute exactly so is refused, never approximated.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/status.hpp"
#include "nets/net.hpp"

namespace easel {

// A parameter as the ONNX file holds it, in easel's order within its layer (conv: weights
// [oc, ic/g, kh, kw], bias; inner product: weights [oc, k], bias; batch norm: scale, shift,
// running mean, running variance).
struct OnnxParam {
  std::string name;  // the ONNX tensor's (PyTorch's parameter name: "layer1.0.conv1.weight")
  std::vector<int64_t> dims;
  std::vector<float> values;
  // An inner product's weights whose columns are a flattened N x C x H x W tensor (chw order):
  // C, so that they are put in hwc order for an nhwc net. 0: a plain N x K input.
  int64_t flat_channels = 0;
};

struct OnnxNet {
  std::string description;  // the TOML description (its [input] the graph input's C x H x W)
  // Per layer that has parameters (its name in `description`), its parameters.
  std::vector<std::pair<std::string, std::vector<OnnxParam>>> params;
};

// True when `name` is an ONNX file (it ends in .onnx).
bool is_onnx_file(std::string_view name);

// Reads and converts `path`. Errors are one line naming the file and, where one is at fault,
// the node (its name and op type) or initializer and why: not ONNX or truncated, an op,
// attribute or shape easel does not compute, an initializer whose data does not match its
// shape, dimensions beyond easel's limits (checked before anything of their size is allocated).
// unavailable: built without ONNX.
Result<OnnxNet> import_onnx(const std::string& path);

// Checks that the net built from onnx.description on the data's shape (`spec`) takes the file's
// parameters as they are: the data's channels (and, before an inner product, its height and
// width) must be the file's input's. Errors name the file and the layer.
Status check_onnx_fits(const OnnxNet& onnx, const NetSpec& spec, const std::string& path);

// Writes the imported parameters into `weights` (net.params().total_floats(), laid out as the
// net's arena in its layout): the net must be built from import_onnx(path)'s description.
Status load_onnx_weights(const OnnxNet& onnx, const Net& net, float* weights);

}  // namespace easel
