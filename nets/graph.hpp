// The wiring of a NetSpec, checked and sorted before anything is built: every input resolved to
// a layer (or the images), the layers in a topological order, every ReLU that may run as its
// producer's post-op fused into it. Errors name the net and the layer: a name used twice, an
// input that names no layer, a cycle, a layer whose output nothing reads.
#pragma once

#include <vector>

#include "engine/status.hpp"
#include "nets/net.hpp"

namespace easel {

// The name a layer uses for the input images.
inline constexpr const char* kDataInput = "data";

struct NetGraph {
  // In topological order; the last one feeds the loss. A fused layer is named "conv1+relu1".
  std::vector<LayerSpec> layers;
  // in[i][j]: the layer (index into layers) that input j of layer i reads, -1 for the images.
  std::vector<std::vector<int>> in;
};

// Resolves, sorts (stably: among layers that are ready, the one listed first) and fuses. The
// layer listed last is the net's output; it may be read by no layer, and every other layer
// must be read by one.
Result<NetGraph> resolve_graph(const NetSpec& spec);

// Fills every layer's layout and input shapes (src, more_src) from `input` ([N, C, H, W]) in
// the graph's order, checks each layer (validate(), its fillers against its parameters) and
// returns every layer's output shape. Errors name the net and the layer.
Result<std::vector<Shape4>> infer_shapes(NetGraph& g, const NetSpec& spec, const Shape4& input,
                                         Layout layout);

// Gradient buffers shared among the layers' outputs whose lives in the backward pass do not
// overlap: `in` is the graph's inputs per layer (NetGraph::in), floats[i] layer i's output size.
// Returns each output's buffer; sizes[b] is the floats buffer b needs (Net::create allocates
// them; net_cost sums them).
std::vector<int> share_diffs(const std::vector<std::vector<int>>& in,
                             const std::vector<int64_t>& floats, std::vector<int64_t>* sizes);

// What a net costs on its spec's input, without building it (`easel list`, the fit check).
struct NetCost {
  int64_t params = 0;        // trained parameters (what published counts give)
  int64_t state_floats = 0;  // state kept in the arena beside them (batch norm's statistics)
  int64_t arena_floats = 0;  // the padded arena: weights, gradients and momentum each take this
  int64_t activation_floats = 0;  // per image: every layer's output
  int64_t gradient_floats = 0;    // per image: the outputs' gradients as Net allocates them,
                                  // shared by their lives (share_diffs)
  double forward_flops = 0;       // per image
  double train_flops = 0;         // per image: forward + backward
};
Result<NetCost> net_cost(const NetSpec& spec);

}  // namespace easel
