#include "nets/graph.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace easel {

namespace {

std::string where(const NetSpec& spec, const std::string& layer) {
  return "net '" + spec.name + "', layer " + layer + ": ";
}

// in[i] for the layers as listed (indices into spec.layers, -1 the images).
Result<std::vector<std::vector<int>>> resolve_inputs(const NetSpec& spec) {
  std::map<std::string, int, std::less<>> index;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const std::string& name = spec.layers[i].name;
    if (name.empty())
      return invalid_argument("net '" + spec.name + "': layer " + std::to_string(i + 1) +
                              " has no name");
    if (name == kDataInput)
      return invalid_argument(where(spec, name) + "the name '" + kDataInput +
                              "' is the input images'");
    if (!index.emplace(name, static_cast<int>(i)).second)
      return invalid_argument(where(spec, name) + "the name is used by another layer too");
  }
  std::vector<std::vector<int>> in(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    if (l.inputs.empty()) {
      in[i].push_back(static_cast<int>(i) - 1);  // the layer before, or the images
      continue;
    }
    for (const std::string& name : l.inputs) {
      if (name == kDataInput) {
        in[i].push_back(-1);
        continue;
      }
      const auto it = index.find(name);
      if (it == index.end())
        return invalid_argument(where(spec, l.name) + "input '" + name + "' names no layer");
      if (it->second == static_cast<int>(i))
        return invalid_argument(where(spec, l.name) + "reads its own output");
      in[i].push_back(it->second);
    }
  }
  return in;
}

// Kahn's algorithm, taking among the ready layers the one listed first.
Result<std::vector<int>> topological_order(const NetSpec& spec,
                                           const std::vector<std::vector<int>>& in) {
  const size_t n = in.size();
  std::vector<int> missing(n, 0);
  std::vector<std::vector<int>> readers(n);
  for (size_t i = 0; i < n; ++i)
    for (int p : in[i])
      if (p >= 0) {
        ++missing[i];
        readers[static_cast<size_t>(p)].push_back(static_cast<int>(i));
      }
  std::vector<int> order;
  std::vector<bool> done(n, false);
  while (order.size() < n) {
    int next = -1;
    for (size_t i = 0; i < n && next < 0; ++i)
      if (!done[i] && missing[i] == 0) next = static_cast<int>(i);
    if (next < 0) {
      std::string cycle;
      for (size_t i = 0; i < n; ++i)
        if (!done[i]) cycle += (cycle.empty() ? "" : ", ") + spec.layers[i].name;
      return invalid_argument("net '" + spec.name + "': layers " + cycle +
                              " read each other in a cycle");
    }
    done[static_cast<size_t>(next)] = true;
    order.push_back(next);
    for (int r : readers[static_cast<size_t>(next)])
      --missing[static_cast<size_t>(r)];
  }
  return order;
}

}  // namespace

Result<NetGraph> resolve_graph(const NetSpec& spec) {
  if (spec.layers.empty()) return invalid_argument("net '" + spec.name + "' has no layers");
  EASEL_ASSIGN_OR_RETURN(std::vector<std::vector<int>> in, resolve_inputs(spec));
  const size_t n = spec.layers.size();
  std::vector<int> readers(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int p : in[i])
      if (p >= 0) ++readers[static_cast<size_t>(p)];
  for (size_t i = 0; i + 1 < n; ++i)
    if (readers[i] == 0)
      return invalid_argument(where(spec, spec.layers[i].name) +
                              "its output is read by no layer (only the last layer, " +
                              spec.layers.back().name + ", feeds the loss)");
  if (readers[n - 1] > 0)
    return invalid_argument(where(spec, spec.layers.back().name) +
                            "the last layer feeds the loss, but other layers read it too");
  EASEL_ASSIGN_OR_RETURN(std::vector<int> order, topological_order(spec, in));

  // Fuse a ReLU into the layer it reads when that layer's kind takes it as a post-op and the
  // ReLU is its only reader: the result is identical, one pass and one buffer fewer.
  std::vector<int> into(n, -1);  // listed index -> index in the graph
  NetGraph g;
  for (int li : order) {
    const LayerSpec& l = spec.layers[static_cast<size_t>(li)];
    const std::vector<int>& inputs = in[static_cast<size_t>(li)];
    if (l.op.kind == OpKind::relu && inputs.size() == 1 && inputs[0] >= 0 &&
        readers[static_cast<size_t>(inputs[0])] == 1) {
      const int p = into[static_cast<size_t>(inputs[0])];
      LayerSpec& prod = g.layers[static_cast<size_t>(p)];
      if (fuses_relu(prod.op.kind) && !prod.op.fused_relu) {
        prod.op.fused_relu = true;
        prod.name += "+" + l.name;
        into[static_cast<size_t>(li)] = p;
        continue;
      }
    }
    into[static_cast<size_t>(li)] = static_cast<int>(g.layers.size());
    g.layers.push_back(l);
    std::vector<int> mapped;
    for (int p : inputs)
      mapped.push_back(p < 0 ? -1 : into[static_cast<size_t>(p)]);
    g.in.push_back(std::move(mapped));
  }
  // Every other layer is read, so each leads to the last listed one: it is sorted last (or,
  // a ReLU fused, its producer is).
  EASEL_CHECK(into[n - 1] == static_cast<int>(g.layers.size()) - 1);
  return g;
}

Result<std::vector<Shape4>> infer_shapes(NetGraph& g, const NetSpec& spec, const Shape4& input,
                                         Layout layout) {
  std::vector<Shape4> out(g.layers.size());
  auto shape_of = [&](int t) { return t < 0 ? input : out[static_cast<size_t>(t)]; };
  for (size_t i = 0; i < g.layers.size(); ++i) {
    LayerSpec& l = g.layers[i];
    OpDesc& d = l.op;
    d.layout = layout;
    d.src = shape_of(g.in[i][0]);
    d.more_src.clear();
    for (size_t j = 1; j < g.in[i].size(); ++j)
      d.more_src.push_back(shape_of(g.in[i][j]));
    if (std::string why = validate(d); !why.empty())
      return invalid_argument(where(spec, l.name) + why);
    const size_t params = param_shapes(d).size();
    if (l.fillers.size() != params)
      return invalid_argument(where(spec, l.name) + "has " + std::to_string(params) +
                              " parameters but " + std::to_string(l.fillers.size()) + " fillers");
    out[i] = dst_shape(d);
  }
  return out;
}

Result<NetCost> net_cost(const NetSpec& spec) {
  EASEL_ASSIGN_OR_RETURN(NetGraph g, resolve_graph(spec));
  EASEL_ASSIGN_OR_RETURN(
      std::vector<Shape4> shapes,
      infer_shapes(g, spec, {1, spec.channels, spec.height, spec.width}, Layout::nchw));
  NetCost c;
  ArenaLayout arena;
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const OpDesc& d = g.layers[i].op;
    const auto params = param_shapes(d);
    const size_t first_state = params.size() - static_cast<size_t>(state_params(d));
    for (size_t p = 0; p < params.size(); ++p) {
      Segment s;
      s.dims = params[p];
      s.count = 1;
      for (int64_t x : s.dims)
        s.count *= x;
      (p < first_state ? c.params : c.state_floats) += s.count;
      arena.add(std::move(s));
    }
    c.activation_floats += shapes[i].count();
    const bool diff_src = std::any_of(g.in[i].begin(), g.in[i].end(), [](int t) { return t >= 0; });
    c.forward_flops += forward_flops(d);
    c.train_flops += forward_flops(d) + backward_flops(d, diff_src);
  }
  c.arena_floats = arena.total_floats();
  return c;
}

}  // namespace easel
