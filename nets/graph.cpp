#include "nets/graph.hpp"

#include <algorithm>
#include <initializer_list>
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

// The most values one image's input or layer output, one parameter or one window may hold:
// 2^40 (4 TiB of floats), beyond any machine, and far enough from int64's end that every size,
// count and operation count computed from shapes within it (net_cost, the op definitions) fits.
constexpr int64_t kMaxValues = int64_t{1} << 40;

// The product of dims, or -1 when it passes kMaxValues (never overflowing on the way).
int64_t bounded_product(std::initializer_list<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(p, d, &p) || p > kMaxValues) return -1;
  return p;
}

// Why a layer's shapes are beyond kMaxValues; empty when they are not.
std::string beyond_limit(const OpDesc& d, const Shape4& dst) {
  const std::string over = " holds more than 2^40 values";
  if (bounded_product({dst.c, dst.h, dst.w}) < 0)
    return "output " + dst.to_string() + over + " per image";
  if (bounded_product({d.kh, d.kw}) < 0)  // 1x1 but for the windowed kinds
    return "window " + std::to_string(d.kh) + "x" + std::to_string(d.kw) + over;
  const auto params = param_shapes(d);
  for (size_t i = 0; i < params.size(); ++i) {
    int64_t n = 1;
    std::string dims;
    for (int64_t x : params[i]) {
      if (n >= 0) n = bounded_product({n, x});
      dims += (dims.empty() ? "" : "x") + std::to_string(x);
    }
    if (n < 0) return param_name(d, i) + " " + dims + over;
  }
  return {};
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
  if (bounded_product({input.c, input.h, input.w}) < 0)
    return invalid_argument("net '" + spec.name + "': input " + input.to_string() +
                            " holds more than 2^40 values per image");
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
    // Every input within kMaxValues (the images checked above, each output below): the sizes
    // validate and dst_shape compute fit; the output's and the parameters' are checked here.
    out[i] = dst_shape(d);
    if (std::string why = beyond_limit(d, out[i]); !why.empty())
      return invalid_argument(where(spec, l.name) + why);
    const size_t params = param_shapes(d).size();
    if (l.fillers.size() != params)
      return invalid_argument(where(spec, l.name) + "has " + std::to_string(params) +
                              " parameters but " + std::to_string(l.fillers.size()) + " fillers");
  }
  return out;
}

// Backward visits layers L-1 .. 0: output i's gradient is first written at the
// backward of its last reader (the highest layer reading it) and read last at layer i's own,
// so it lives over backward steps [L-1-last, L-1-i]. Interval colouring in order of start: a
// tensor takes a buffer free by then (the smallest that holds it, else the largest, grown),
// or a new one. The last layer (read by none; its gradient is diff_logits_) gets its own.
// Returns each output's buffer; sizes[b] is the floats buffer b needs.
std::vector<int> share_diffs(const std::vector<std::vector<int>>& in,
                             const std::vector<int64_t>& floats, std::vector<int64_t>* sizes) {
  const int n = static_cast<int>(in.size());
  std::vector<int> last(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i)
    for (int t : in[static_cast<size_t>(i)])
      if (t >= 0) last[static_cast<size_t>(t)] = std::max(last[static_cast<size_t>(t)], i);
  std::vector<int> order;  // by start of life in backward time: the last reader, descending
  for (int i = 0; i < n; ++i)
    if (last[static_cast<size_t>(i)] >= 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return last[static_cast<size_t>(a)] > last[static_cast<size_t>(b)];
  });
  std::vector<int> buffer(static_cast<size_t>(n), -1);
  std::vector<int> busy_until;  // per buffer: the layer whose backward reads it last
  sizes->clear();
  for (int i : order) {
    const int64_t need = floats[static_cast<size_t>(i)];
    int pick = -1;
    for (int b = 0; b < static_cast<int>(sizes->size()); ++b) {
      // Free when its tensor's own backward (at layer busy_until) ran before this one is
      // written (at layer last[i]): busy_until > last[i] in layer order.
      if (busy_until[static_cast<size_t>(b)] <= last[static_cast<size_t>(i)]) continue;
      const int64_t have = (*sizes)[static_cast<size_t>(b)];
      if (pick < 0) {
        pick = b;
        continue;
      }
      const int64_t best = (*sizes)[static_cast<size_t>(pick)];
      const bool fits = have >= need, best_fits = best >= need;
      if ((fits && (!best_fits || have < best)) || (!fits && !best_fits && have > best)) pick = b;
    }
    if (pick < 0) {
      pick = static_cast<int>(sizes->size());
      sizes->push_back(0);
      busy_until.push_back(0);
    }
    (*sizes)[static_cast<size_t>(pick)] = std::max((*sizes)[static_cast<size_t>(pick)], need);
    busy_until[static_cast<size_t>(pick)] = i;
    buffer[static_cast<size_t>(i)] = pick;
  }
  for (int i = 0; i < n; ++i)
    if (buffer[static_cast<size_t>(i)] < 0) {
      buffer[static_cast<size_t>(i)] = static_cast<int>(sizes->size());
      sizes->push_back(floats[static_cast<size_t>(i)]);
    }
  return buffer;
}

Result<NetCost> net_cost(const NetSpec& spec) {
  EASEL_ASSIGN_OR_RETURN(NetGraph g, resolve_graph(spec));
  EASEL_ASSIGN_OR_RETURN(
      std::vector<Shape4> shapes,
      infer_shapes(g, spec, {1, spec.channels, spec.height, spec.width}, Layout::nchw));
  NetCost c;
  ArenaLayout arena;
  std::vector<int64_t> floats;  // per layer output, per image
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
    floats.push_back(shapes[i].count());
    const bool diff_src = std::any_of(g.in[i].begin(), g.in[i].end(), [](int t) { return t >= 0; });
    c.forward_flops += forward_flops(d);
    c.train_flops += forward_flops(d) + backward_flops(d, diff_src);
  }
  c.arena_floats = arena.total_floats();
  std::vector<int64_t> sizes;
  share_diffs(g.in, floats, &sizes);
  for (int64_t n : sizes)
    c.gradient_floats += n;
  return c;
}

}  // namespace easel
