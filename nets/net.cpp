#include "nets/net.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "devices/activations.hpp"
#include "engine/log.hpp"
#include "engine/span_ops.hpp"
#include "engine/trace.hpp"
#include "nets/graph.hpp"

namespace easel {

struct Net::Layer {
  LayerSpec spec;
  std::unique_ptr<Op> op;
  std::vector<int> segments;  // arena segment index per param
  std::vector<int> in;        // per input: the layer it reads, -1 the images
  // Per input: its data gradient is written straight into the tensor's (this layer is the
  // first, in backward order, to write it) rather than into scratch_[j] and then added.
  std::vector<bool> direct;
  // Pointers for the current call (rebuilt per call: the arena may change).
  std::vector<const float*> w, srcs;
  std::vector<float*> dw, diff_srcs;
};

Net::~Net() = default;

namespace {

// An activation buffer of n elements of type t; a failure names the buffer class
// ("activations: cannot allocate ...").
Result<Buffer> alloc_acts(int64_t n, DType t, MemKind kind) {
  auto b = Buffer::allocate(static_cast<size_t>(n) * dtype_bytes(t), kind);
  if (!b.ok()) return Status(b.status().code(), "activations: " + b.status().message());
  return b;
}

// Refuses a net whose activations and their gradients (outputs shapes_of, summed layer by
// layer), times the replicas the process holds, exceed this machine's memory (host kinds
// only): checked before any is allocated, since huge images would otherwise take the memory
// page by page. The error names the layer at which the sum passes it.
Status check_activations_fit(const NetSpec& spec, const NetGraph& graph,
                             const std::vector<Shape4>& shapes_of, int64_t batch, DType act,
                             MemKind activations, int replicas) {
  const double memory = is_host_kind(activations) ? physical_memory_bytes() : 0;
  const int copies = std::max(replicas, 1);
  double act_bytes = 0;  // of one replica
  for (size_t i = 0; i < graph.layers.size(); ++i) {
    act_bytes += 2.0 * static_cast<double>(shapes_of[i].count()) * dtype_bytes(act);
    if (memory > 0 && act_bytes * copies > memory) {
      char gib[32];
      std::snprintf(gib, sizeof gib, "%.1f", memory / double(1u << 30));
      return invalid_argument("net '" + spec.name + "' on " + std::to_string(spec.channels) + "x" +
                              std::to_string(spec.height) + "x" + std::to_string(spec.width) +
                              " images, batch " + std::to_string(batch) + ", " +
                              std::to_string(copies) +
                              " group(s): their activations need more than this machine's " + gib +
                              " GiB of memory (by layer " + graph.layers[i].name + ")");
    }
  }
  return {};
}

// Adds the parameters of layer `layer` (ls, its descriptor completed as d) to `params` as
// segments named "LAYER.PARAM"; returns their indices. State parameters (batch norm's
// statistics) get no learning rate and no decay.
std::vector<int> add_param_segments(const LayerSpec& ls, const OpDesc& d, int layer,
                                    ArenaLayout* params) {
  const auto shapes = param_shapes(d);
  const auto [fan_in, fan_out] = fans(d);
  const size_t first_state = shapes.size() - static_cast<size_t>(state_params(d));
  std::vector<int> segments;
  for (size_t p = 0; p < shapes.size(); ++p) {
    Segment s;
    s.name = ls.name + "." + param_name(d, p);
    s.dims = shapes[p];
    s.count = 1;
    for (int64_t x : s.dims)
      s.count *= x;
    s.fan_in = fan_in;
    s.fan_out = fan_out;
    s.filler = ls.fillers[p];
    s.state = p >= first_state;
    s.layer = layer;
    s.lr_mult = s.state ? 0.f : p < ls.lr_mult.size() ? ls.lr_mult[p] : 1.f;
    s.decay_mult = s.state ? 0.f : p < ls.decay_mult.size() ? ls.decay_mult[p] : 1.f;
    segments.push_back(params->add(std::move(s)));
  }
  return segments;
}

// Per layer, per input j (`in`: NetGraph::in): whether its data gradient goes straight into
// the tensor's. Backward runs in reverse order: the first reader met writes a tensor's
// gradient, the others write theirs into scratch and add it; (*scratch_floats)[j] is the
// largest tensor an input j so adds (the images need no gradient: direct, no scratch).
std::vector<std::vector<bool>> direct_inputs(const std::vector<std::vector<int>>& in,
                                             const std::vector<Shape4>& shapes_of,
                                             std::vector<int64_t>* scratch_floats) {
  std::vector<std::vector<bool>> direct(in.size());
  std::vector<bool> written(in.size(), false);
  for (size_t i = in.size(); i-- > 0;) {
    for (size_t j = 0; j < in[i].size(); ++j) {
      const int t = in[i][j];
      const bool straight = t < 0 || !written[static_cast<size_t>(t)];
      direct[i].push_back(straight);
      if (t < 0) continue;
      written[static_cast<size_t>(t)] = true;
      if (straight) continue;
      if (scratch_floats->size() <= j) scratch_floats->resize(j + 1, 0);
      (*scratch_floats)[j] =
          std::max((*scratch_floats)[j], shapes_of[static_cast<size_t>(t)].count());
    }
  }
  return direct;
}

}  // namespace

Result<std::unique_ptr<Net>> Net::create(const NetSpec& spec, int64_t batch, Layout layout,
                                         Device& device, MemKind activations, int replicas) {
  if (batch <= 0)
    return invalid_argument("--batch: must be positive, got " + std::to_string(batch));
  // The whole wiring is checked before anything is built or allocated.
  EASEL_ASSIGN_OR_RETURN(NetGraph graph, resolve_graph(spec));
  std::unique_ptr<Net> net(new Net());
  net->spec_ = spec;
  net->batch_ = batch;
  net->layout_ = layout;
  net->device_ = &device;
  const DType act = device.activation_type();
  net->act_ = act;

  const Shape4 input{batch, spec.channels, spec.height, spec.width};
  EASEL_ASSIGN_OR_RETURN(const std::vector<Shape4> shapes_of,
                         infer_shapes(graph, spec, input, layout));
  EASEL_RETURN_IF_ERROR(
      check_activations_fit(spec, graph, shapes_of, batch, act, activations, replicas));
  for (size_t i = 0; i < graph.layers.size(); ++i) {
    const LayerSpec& ls = graph.layers[i];
    auto layer = std::make_unique<Layer>();
    layer->spec = ls;
    layer->in = graph.in[i];
    OpDesc& d = layer->spec.op;
    // Each layer its own random stream (read only by the kinds that draw, such as dropout).
    d.seed ^= 0x9e3779b97f4a7c15ull * (i + 1);
    d.act = act;
    layer->segments = add_param_segments(ls, d, static_cast<int>(i), &net->params_);
    layer->w.resize(layer->segments.size());
    layer->dw.resize(layer->segments.size());
    layer->srcs.resize(layer->in.size());
    layer->diff_srcs.resize(layer->in.size());
    net->layers_.push_back(std::move(layer));
  }
  std::vector<int64_t> scratch_floats;
  std::vector<std::vector<bool>> direct = direct_inputs(graph.in, shapes_of, &scratch_floats);
  for (size_t i = 0; i < net->layers_.size(); ++i)
    net->layers_[i]->direct = std::move(direct[i]);
  for (auto& l : net->layers_) {
    EASEL_ASSIGN_OR_RETURN(l->op, device.make_op(l->spec.op));
    const Shape4 shape = dst_shape(l->spec.op);
    log_debug("net", l->spec.name + ": " + l->op->impl() + " -> " + shape.to_string());
    EASEL_ASSIGN_OR_RETURN(Buffer dst, alloc_acts(shape.count(), act, activations));
    net->acts_.push_back(std::move(dst));
  }
  std::vector<int64_t> floats, sizes;
  for (const Shape4& sh : shapes_of)
    floats.push_back(sh.count());
  const std::vector<int> shared = share_diffs(graph.in, floats, &sizes);
  for (int64_t n : sizes) {
    EASEL_ASSIGN_OR_RETURN(Buffer b, alloc_acts(n, act, activations));
    net->diff_pool_.push_back(std::move(b));
  }
  for (int b : shared)
    net->diffs_.push_back(net->diff_pool_[static_cast<size_t>(b)].as<float>());
  char line[128];
  std::snprintf(line, sizeof line, "outputs %.1f MB, their gradients %.1f MB in %zu buffers",
                static_cast<double>(net->unshared_gradient_bytes()) / 1e6,
                static_cast<double>(net->gradient_bytes()) / 1e6, net->diff_pool_.size());
  log_debug("net", line);
  for (int64_t n : scratch_floats) {
    EASEL_ASSIGN_OR_RETURN(Buffer b, alloc_acts(std::max<int64_t>(n, 1), act, activations));
    net->scratch_.push_back(std::move(b));
  }
  const Shape4 shape = shapes_of.back();
  if (shape.per_image() != spec.classes)
    return invalid_argument(
        "net '" + spec.name + "': last layer has " + std::to_string(shape.per_image()) +
        " outputs per image but the data has " + std::to_string(spec.classes) + " classes");
  EASEL_ASSIGN_OR_RETURN(net->loss_, device.make_loss(batch, spec.classes));
  EASEL_ASSIGN_OR_RETURN(net->prob_, alloc_acts(batch * spec.classes, DType::f32, activations));
  EASEL_ASSIGN_OR_RETURN(net->diff_logits_, alloc_acts(batch * spec.classes, act, activations));
  return net;
}

std::vector<float> Net::output_values(size_t i) const {
  const Buffer& b = i < acts_.size() ? acts_[i] : acts_.back();
  const int64_t n = static_cast<int64_t>(b.bytes() / dtype_bytes(act_));
  std::vector<uint8_t> raw(b.bytes());
  if (is_host_kind(b.kind()))
    std::memcpy(raw.data(), b.data(), b.bytes());
  else
    device_->download(raw.data(), b.data(), b.bytes());
  std::vector<float> out(static_cast<size_t>(n));
  activations_to_f32(raw.data(), act_, out.data(), n);
  return out;
}

Shape4 Net::input_shape() const {
  return {batch_, spec_.channels, spec_.height, spec_.width};
}

void Net::init_params(float* weights, uint64_t seed) const {
  span_zero(weights, params_.total_floats());
  const auto& segs = params_.segments();
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segs[i];
    Rng rng = Rng::stream(seed, i);
    float* w = weights + s.offset;
    const Filler& f = s.filler;
    switch (f.kind) {
      case Filler::Kind::constant:
        for (int64_t j = 0; j < s.count; ++j)
          w[j] = f.value;
        break;
      case Filler::Kind::xavier: {  // Caffe: uniform(-a, a), a = sqrt(3 / fan_in)
        const float a = std::sqrt(3.f / static_cast<float>(s.fan_in));
        for (int64_t j = 0; j < s.count; ++j)
          w[j] = rng.uniform(-a, a);
        break;
      }
      case Filler::Kind::gaussian:
        for (int64_t j = 0; j < s.count; ++j)
          w[j] = f.std * rng.normal();
        break;
      case Filler::Kind::uniform:
        for (int64_t j = 0; j < s.count; ++j)
          w[j] = rng.uniform(f.min, f.max);
        break;
      case Filler::Kind::msra: {  // Caffe: gaussian, std = sqrt(2 / fan_in)
        const float sd = std::sqrt(2.f / static_cast<float>(s.fan_in));
        for (int64_t j = 0; j < s.count; ++j)
          w[j] = sd * rng.normal();
        break;
      }
    }
  }
}

void Net::forward_layer(size_t i, const float* weights, bool training) {
  Layer& l = *layers_[i];
  for (size_t p = 0; p < l.segments.size(); ++p)
    l.w[p] = weights + params_.segment(l.segments[p]).offset;
  for (size_t j = 0; j < l.in.size(); ++j)
    l.srcs[j] = l.in[j] < 0 ? input_ : acts_[static_cast<size_t>(l.in[j])].as<float>();
  l.op->forward_n(l.srcs, acts_[i].as<float>(), l.w, training);
}

void Net::backward_layer(size_t i, const float* weights, float* diff) {
  Layer& l = *layers_[i];
  for (size_t p = 0; p < l.segments.size(); ++p) {
    const int64_t off = params_.segment(l.segments[p]).offset;
    l.w[p] = weights + off;
    l.dw[p] = diff + off;
  }
  for (size_t j = 0; j < l.in.size(); ++j) {
    const int t = l.in[j];
    l.srcs[j] = t < 0 ? input_ : acts_[static_cast<size_t>(t)].as<float>();
    l.diff_srcs[j] = t < 0         ? nullptr  // the images need no gradient
                     : l.direct[j] ? diffs_[static_cast<size_t>(t)]
                                   : scratch_[j].as<float>();
  }
  const float* diff_dst = i + 1 == layers_.size() ? diff_logits_.as<float>() : diffs_[i];
  l.op->backward_n(l.srcs, acts_[i].as<float>(), diff_dst, l.diff_srcs, l.w, l.dw);
  // The other readers' gradients, added where the tensors live: on the device's own stream,
  // in order with the ops (a GPU's memory is not the host's).
  for (size_t j = 0; j < l.in.size(); ++j) {
    if (l.in[j] < 0 || l.direct[j]) continue;
    const size_t t = static_cast<size_t>(l.in[j]);
    device_->add_activations(diffs_[t], scratch_[j].data(), act_,
                             static_cast<int64_t>(acts_[t].bytes() / dtype_bytes(act_)));
  }
}

size_t Net::gradient_bytes() const {
  size_t n = 0;
  for (const Buffer& b : diff_pool_)
    n += b.bytes();
  return n;
}

size_t Net::unshared_gradient_bytes() const {
  size_t n = 0;
  for (const Buffer& b : acts_)
    n += b.bytes();
  return n;
}

void Net::set_draw(uint64_t stream, uint64_t n) {
  for (auto& l : layers_)
    l->op->set_draw(stream, n);
}

StepStats Net::train_step(const float* images, const int32_t* labels, float* weights, float* diff) {
  input_ = images;
  // With a trace (engine/trace.hpp) every layer's forward and backward is a span; on a GPU
  // a span times the launch, not the kernel.
  {
    TraceSpan span("forward", "compute");
    for (size_t i = 0; i < layers_.size(); ++i) {
      TraceSpan layer(layers_[i]->spec.name.c_str(), "forward");
      forward_layer(i, weights, true);
    }
  }
  StepStats st;
  {
    TraceSpan span("loss", "compute");
    st.loss =
        loss_->forward(acts_.back().as<float>(), labels, prob_.as<float>(), batch_, &st.correct) /
        static_cast<double>(batch_);
    loss_->backward(prob_.as<float>(), labels, diff_logits_.as<float>(), batch_,
                    1.f / static_cast<float>(batch_));
  }
  TraceSpan span("backward", "compute");
  for (size_t i = layers_.size(); i-- > 0;) {
    TraceSpan layer(layers_[i]->spec.name.c_str(), "backward");
    backward_layer(i, weights, diff);
  }
  return st;
}

EvalStats Net::evaluate(const float* images, const int32_t* labels, int64_t n,
                        const float* weights) {
  EASEL_CHECK(n >= 0 && n <= batch_);
  input_ = images;
  for (size_t i = 0; i < layers_.size(); ++i)
    forward_layer(i, weights, false);
  EvalStats st;
  st.count = n;
  st.loss_sum = loss_->forward(acts_.back().as<float>(), labels, prob_.as<float>(), n, &st.correct);
  return st;
}

std::vector<LayerInfo> Net::describe() const {
  std::vector<LayerInfo> out;
  for (const auto& l : layers_) {
    LayerInfo info;
    info.name = l->spec.name;
    info.kind = op_kind_name(l->spec.op.kind);
    if (l->spec.op.fused_relu) info.kind += "+relu";
    info.impl = l->op->impl();
    for (int t : l->in)
      info.inputs.push_back(t < 0 ? kDataInput : layers_[static_cast<size_t>(t)]->spec.name);
    info.dst = dst_shape(l->spec.op);
    for (int s : l->segments)
      info.params += params_.segment(s).count;
    info.forward_flops = forward_flops(l->spec.op);
    info.backward_flops = backward_flops(l->spec.op);
    out.push_back(std::move(info));
  }
  return out;
}

double Net::flops_per_image_train() const {
  double f = 0;
  for (const auto& l : layers_) {
    // A layer that reads only the images computes no data gradient.
    const bool diff_src = std::any_of(l->in.begin(), l->in.end(), [](int t) { return t >= 0; });
    f += forward_flops(l->spec.op) + backward_flops(l->spec.op, diff_src);
  }
  return f / static_cast<double>(batch_);
}

}  // namespace easel
