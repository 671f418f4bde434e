// torch.onnx.export writes nn.LocalResponseNorm (torch.nn.functional.local_response_norm on an
// N x C x H x W tensor x) not as ONNX's LRN but as the ops of its Python body, about 40 nodes:
//   div = Unsqueeze(x * x, 1) -> Reshape [N, 1, C, H, -1] -> Pad (size/2, (size-1)/2 on C)
//         -> AveragePool [size, 1, 1] -> Squeeze 1 (or an If on that dimension being 1)
//         -> Reshape [N, C, H, W];  y = x / Pow(div * alpha + k, beta)
// with the shapes and pads computed by Shape, Gather, Unsqueeze, Concat, ConstantOfShape,
// Reshape, Slice, Transpose, Cast and Equal nodes of constants. match_torch_lrn recognises
// exactly that subgraph as one LRN across channels: it evaluates the shape nodes (int64, at
// most 64 values each) and checks every node of the data path and every constant it reads.
// Built only with Meson's onnx feature.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/status.hpp"

namespace easel {

struct TorchLrn {
  int64_t size = 0;                  // the channels summed (odd)
  float alpha = 0, beta = 0, k = 0;  // PyTorch's: k + alpha/size * sum, easel's lrn keys alike
  int last = 0;                      // the index of its last node (the Div) in the graph
};

using OnnxConsts = std::map<std::string, const onnx::TensorProto*>;
// A refusal naming the node: "--net: FILE: node 'NAME' (OP): why".
using OnnxRefuse = std::function<Status(const onnx::NodeProto&, const std::string&)>;

// Requires: g.node(first) is a Mul of the tensor x by itself, x being N x c x h x w; `consts`
// holds the graph's initializers and Constant nodes' values by name. Returns the LRN that
// nodes first..last compute, or refuses (through `refuse`) the first node that is not that
// pattern's, saying what was expected.
Result<TorchLrn> match_torch_lrn(const onnx::GraphProto& g, int first, int64_t c, int64_t h,
                                 int64_t w, const OnnxConsts& consts, const OnnxRefuse& refuse);

}  // namespace easel
