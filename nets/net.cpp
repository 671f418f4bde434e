#include "nets/net.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/log.hpp"
#include "engine/span_ops.hpp"

namespace easel {

struct Net::Layer {
  LayerSpec spec;
  std::unique_ptr<Op> op;
  std::vector<int> segments;  // arena segment index per param
  // Pointers into the arena for the current call (rebuilt per call: the arena may change).
  std::vector<const float*> w;
  std::vector<float*> dw;
};

Net::~Net() = default;

namespace {

// Fuses a ReLU that directly follows a conv or inner product into it (a post-op). The result
// is identical; it saves one pass over the activations and one buffer.
std::vector<LayerSpec> fuse_relu(const std::vector<LayerSpec>& in) {
  std::vector<LayerSpec> out;
  for (const auto& l : in) {
    if (l.op.kind == OpKind::relu && !out.empty() && !out.back().op.fused_relu &&
        fuses_relu(out.back().op.kind)) {
      out.back().op.fused_relu = true;
      out.back().name += "+" + l.name;
      continue;
    }
    out.push_back(l);
  }
  return out;
}

Result<Buffer> alloc_floats(int64_t n, MemKind kind) {
  return Buffer::allocate(static_cast<size_t>(n) * sizeof(float), kind);
}

}  // namespace

Result<std::unique_ptr<Net>> Net::create(const NetSpec& spec, int64_t batch, Layout layout,
                                         Device& device, MemKind activations, int replicas) {
  if (batch <= 0)
    return invalid_argument("--batch: must be positive, got " + std::to_string(batch));
  if (spec.layers.empty()) return invalid_argument("net '" + spec.name + "' has no layers");
  std::unique_ptr<Net> net(new Net());
  net->spec_ = spec;
  net->batch_ = batch;
  net->layout_ = layout;

  Shape4 shape{batch, spec.channels, spec.height, spec.width};
  // The activations and their gradients, summed layer by layer before any is allocated: a net
  // that cannot fit in this machine's memory is refused up front (huge images would otherwise
  // take the machine's memory page by page).
  const double memory = is_host_kind(activations) ? physical_memory_bytes() : 0;
  const int copies = std::max(replicas, 1);
  double act_bytes = 0;  // of one replica
  for (const LayerSpec& ls : fuse_relu(spec.layers)) {
    auto layer = std::make_unique<Layer>();
    layer->spec = ls;
    OpDesc& d = layer->spec.op;
    d.layout = layout;
    d.src = shape;
    // Each layer its own random stream (read only by the kinds that draw, such as dropout).
    d.seed ^= 0x9e3779b97f4a7c15ull * (net->layers_.size() + 1);
    if (std::string why = validate(d); !why.empty())
      return invalid_argument("net '" + spec.name + "', layer " + ls.name + ": " + why);
    act_bytes += 2.0 * static_cast<double>(dst_shape(d).count()) * sizeof(float);
    if (memory > 0 && act_bytes * copies > memory) {
      char gib[32];
      std::snprintf(gib, sizeof gib, "%.1f", memory / double(1u << 30));
      return invalid_argument("net '" + spec.name + "' on " + std::to_string(spec.channels) + "x" +
                              std::to_string(spec.height) + "x" + std::to_string(spec.width) +
                              " images, batch " + std::to_string(batch) + ", " +
                              std::to_string(copies) +
                              " group(s): their activations need more than this machine's " + gib +
                              " GiB of memory (by layer " + ls.name + ")");
    }
    const auto shapes = param_shapes(d);
    if (ls.fillers.size() != shapes.size())
      return invalid_argument("net '" + spec.name + "', layer " + ls.name + ": has " +
                              std::to_string(shapes.size()) + " parameters but " +
                              std::to_string(ls.fillers.size()) + " fillers");
    const auto [fan_in, fan_out] = fans(d);
    static const char* kParamNames[] = {"weights", "bias"};
    for (size_t p = 0; p < shapes.size(); ++p) {
      Segment s;
      s.name = ls.name + "." + (p < 2 ? kParamNames[p] : std::to_string(p));
      s.dims = shapes[p];
      s.count = 1;
      for (int64_t x : s.dims)
        s.count *= x;
      s.fan_in = fan_in;
      s.fan_out = fan_out;
      s.filler = ls.fillers[p];
      s.lr_mult = p < ls.lr_mult.size() ? ls.lr_mult[p] : 1.f;
      s.decay_mult = p < ls.decay_mult.size() ? ls.decay_mult[p] : 1.f;
      layer->segments.push_back(net->params_.add(std::move(s)));
    }
    EASEL_ASSIGN_OR_RETURN(layer->op, device.make_op(d));
    log_debug("net", ls.name + ": " + layer->op->impl() + " -> " + dst_shape(d).to_string());
    layer->w.resize(shapes.size());
    layer->dw.resize(shapes.size());
    shape = dst_shape(d);
    EASEL_ASSIGN_OR_RETURN(Buffer act, alloc_floats(shape.count(), activations));
    EASEL_ASSIGN_OR_RETURN(Buffer diff, alloc_floats(shape.count(), activations));
    net->acts_.push_back(std::move(act));
    net->diffs_.push_back(std::move(diff));
    net->layers_.push_back(std::move(layer));
  }
  if (shape.per_image() != spec.classes)
    return invalid_argument(
        "net '" + spec.name + "': last layer has " + std::to_string(shape.per_image()) +
        " outputs per image but the data has " + std::to_string(spec.classes) + " classes");
  EASEL_ASSIGN_OR_RETURN(net->loss_, device.make_loss(batch, spec.classes));
  EASEL_ASSIGN_OR_RETURN(net->prob_, alloc_floats(batch * spec.classes, activations));
  EASEL_ASSIGN_OR_RETURN(net->diff_logits_, alloc_floats(batch * spec.classes, activations));
  return net;
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
  const float* src = i == 0 ? input_ : acts_[i - 1].as<float>();
  l.op->forward(src, acts_[i].as<float>(), l.w, training);
}

void Net::backward_layer(size_t i, const float* weights, float* diff) {
  Layer& l = *layers_[i];
  for (size_t p = 0; p < l.segments.size(); ++p) {
    const int64_t off = params_.segment(l.segments[p]).offset;
    l.w[p] = weights + off;
    l.dw[p] = diff + off;
  }
  const float* src = i == 0 ? input_ : acts_[i - 1].as<float>();
  const float* diff_dst =
      i + 1 == layers_.size() ? diff_logits_.as<float>() : diffs_[i].as<float>();
  float* diff_src = i == 0 ? nullptr : diffs_[i - 1].as<float>();
  l.op->backward(src, acts_[i].as<float>(), diff_dst, diff_src, l.w, l.dw);
}

StepStats Net::train_step(const float* images, const int32_t* labels, const float* weights,
                          float* diff) {
  input_ = images;
  for (size_t i = 0; i < layers_.size(); ++i)
    forward_layer(i, weights, true);
  StepStats st;
  st.loss =
      loss_->forward(acts_.back().as<float>(), labels, prob_.as<float>(), batch_, &st.correct) /
      static_cast<double>(batch_);
  loss_->backward(prob_.as<float>(), labels, diff_logits_.as<float>(), batch_,
                  1.f / static_cast<float>(batch_));
  for (size_t i = layers_.size(); i-- > 0;)
    backward_layer(i, weights, diff);
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
  for (size_t i = 0; i < layers_.size(); ++i) {
    const OpDesc& d = layers_[i]->spec.op;
    // The first layer computes no data gradient.
    f += forward_flops(d) + backward_flops(d, /*diff_src=*/i != 0);
  }
  return f / static_cast<double>(batch_);
}

}  // namespace easel
