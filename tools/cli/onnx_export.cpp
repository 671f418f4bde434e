// A net as an ONNX model, opset 13: each easel layer as the ONNX nodes that compute the same
// values in NCHW (docs/EXPORT.md), the weights as initializers, checked by the ONNX checker.
#include "tools/cli/onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <exception>

#include "nets/graph.hpp"
#include "tools/cli/trained_run.hpp"

namespace easel::cli {

namespace {

constexpr int64_t kOpset = 13;
constexpr int64_t kIrVersion = 7;  // opset 13's

// One easel layer's view while its nodes are written: its descriptor (shapes filled), its name
// in the net description (a fused "conv1+relu1" splits into the layer and its ReLU), its input
// tensors and their ranks (4: N x C x H x W; 2: an inner product's N x C), its parameters.
struct LayerView {
  const OpDesc* d = nullptr;
  std::string name, relu;
  std::vector<std::string> inputs;
  std::vector<int> ranks;
  std::vector<const Segment*> params;
};

Status refuse(const LayerView& l, const std::string& why) {
  return invalid_argument("layer " + l.name + " (" + op_kind_name(l.d->kind) +
                          "): cannot be written as ONNX: " + why);
}

class GraphWriter {
 public:
  GraphWriter(onnx::GraphProto* g, const float* weights) : g_(g), weights_(weights) {}

  onnx::NodeProto* node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs, const std::string& output) {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : inputs)
      n->add_input(i);
    n->add_output(output);
    return n;
  }
  static void ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const char* name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto* n, const char* name, float v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  // An initializer of `count` floats (from the arena at `offset`, or `data`) named `name`.
  std::string tensor(const std::string& name, const std::vector<int64_t>& dims, const float* data,
                     int64_t count) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(data),
                                static_cast<size_t>(count) * sizeof(float)));  // little-endian
    return name;
  }
  // An int64 initializer (a Pad's pads).
  std::string ints_tensor(const std::string& name, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      t->add_int64_data(x);
    return name;
  }
  std::string param(const LayerView& l, size_t i) {
    const Segment& s = *l.params[i];
    return tensor(l.name + "." + s.name.substr(s.name.rfind('.') + 1), s.dims, weights_ + s.offset,
                  s.count);
  }
  const float* weights() const { return weights_; }

 private:
  onnx::GraphProto* g_;
  const float* weights_;
};

// The node's output: the layer's name, or, with a fused ReLU, the ReLU's after a Relu node.
std::string finish(GraphWriter& w, const LayerView& l) {
  if (l.relu.empty()) return l.name;
  w.node("Relu", l.relu, {l.name}, l.relu);
  return l.relu;
}

Status image_input(const LayerView& l) {
  if (l.ranks[0] != 4)
    return refuse(l,
                  "it reads an inner product's N x C output, where ONNX's op takes N x C x H x W");
  return {};
}

Result<std::string> write_conv(GraphWriter& w, const LayerView& l) {
  EASEL_RETURN_IF_ERROR(image_input(l));
  const OpDesc& d = *l.d;
  std::vector<std::string> in = {l.inputs[0], w.param(l, 0)};
  if (d.bias) in.push_back(w.param(l, 1));
  onnx::NodeProto* n = w.node("Conv", l.name, in, l.name);
  GraphWriter::ints(n, "kernel_shape", {d.kh, d.kw});
  GraphWriter::ints(n, "strides", {d.stride_h, d.stride_w});
  GraphWriter::ints(n, "pads", {d.pad_h, d.pad_w, d.pad_h, d.pad_w});
  GraphWriter::integer(n, "group", d.group);
  return finish(w, l);
}

// easel's pooled size (Caffe's ceil rounding, clipped) as ONNX's floor rounding over a larger
// padding at the end: the trailing pad that makes floor((in + pad + end - k) / s) + 1 = out.
int64_t end_pad(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t out) {
  if ((in + 2 * pad - k) / s + 1 == out) return pad;
  return (out - 1) * s + k - in - pad;
}

Result<std::string> write_pool(GraphWriter& w, const LayerView& l) {
  EASEL_RETURN_IF_ERROR(image_input(l));
  const OpDesc& d = *l.d;
  const Shape4 o = dst_shape(d);
  const int64_t eh = end_pad(d.src.h, d.kh, d.stride_h, d.pad_h, o.h);
  const int64_t ew = end_pad(d.src.w, d.kw, d.stride_w, d.pad_w, o.w);
  const bool avg = d.kind == OpKind::avg_pool;
  // easel's (Caffe's) average divides by the window clipped to the input plus its padding:
  // ONNX's count_include_pad=1 counts every padded element, the end's extra one too.
  if (avg && (d.pad_h > 0 || d.pad_w > 0) && (eh > d.pad_h || ew > d.pad_w))
    return refuse(l,
                  "its last window runs past the padding (ceil rounding), where easel divides "
                  "by the window within input + padding and ONNX's AveragePool by all of it");
  std::string src = l.inputs[0];
  std::vector<int64_t> pads = {d.pad_h, d.pad_w, eh, ew};
  if (avg && (d.pad_h > 0 || d.pad_w > 0)) {
    // The padded zeros count in the divisor: as an explicit Pad, not count_include_pad=1,
    // which OpenCV's importer (4.6) ignores (it counts them only in a model from PyTorch).
    const std::string pad_name = l.name + "_pad";
    w.node(
        "Pad", pad_name,
        {src, w.ints_tensor(pad_name + ".pads", {0, 0, d.pad_h, d.pad_w, 0, 0, d.pad_h, d.pad_w})},
        pad_name);
    src = pad_name;
    pads = {0, 0, eh - d.pad_h, ew - d.pad_w};  // 0: the refusal above
  }
  onnx::NodeProto* n = w.node(avg ? "AveragePool" : "MaxPool", l.name, {src}, l.name);
  GraphWriter::ints(n, "kernel_shape", {d.kh, d.kw});
  GraphWriter::ints(n, "strides", {d.stride_h, d.stride_w});
  GraphWriter::ints(n, "pads", pads);
  // Where an average pool's trailing window runs past the input (ceil rounding, no padding),
  // easel divides by the elements within the input, as count_include_pad=0 does.
  if (avg) GraphWriter::integer(n, "count_include_pad", 0);
  return finish(w, l);
}

Result<std::string> write_inner_product(GraphWriter& w, const LayerView& l, Layout layout) {
  const OpDesc& d = *l.d;
  std::string a = l.inputs[0];
  if (l.ranks[0] == 4) {
    w.node("Flatten", l.name + "_flatten", {a}, l.name + "_flatten");
    a = l.name + "_flatten";
  }
  const Segment& s = *l.params[0];
  std::string weights;
  if (layout == Layout::nhwc && d.src.h * d.src.w > 1) {
    // ONNX's Flatten gives chw order; easel's weights follow the run's layout (hwc for nhwc).
    const std::vector<float> chw = chw_inner_product(d, w.weights() + s.offset);
    weights = w.tensor(l.name + ".weights", s.dims, chw.data(), s.count);
  } else {
    weights = w.param(l, 0);
  }
  std::vector<std::string> in = {a, weights};
  if (d.bias) in.push_back(w.param(l, 1));
  onnx::NodeProto* n = w.node("Gemm", l.name, in, l.name);
  GraphWriter::integer(n, "transB", 1);  // weights {oc, k}: y = x W^T + b
  return finish(w, l);
}

Result<std::string> write_batch_norm(GraphWriter& w, const LayerView& l) {
  const OpDesc& d = *l.d;
  onnx::NodeProto* n =
      w.node("BatchNormalization", l.name,
             {l.inputs[0], w.param(l, 0), w.param(l, 1), w.param(l, 2), w.param(l, 3)}, l.name);
  GraphWriter::real(n, "epsilon", d.eps);
  GraphWriter::real(n, "momentum", 1.f - d.bn_momentum);  // ONNX's weighs the running value
  return finish(w, l);
}

// Within channel, ONNX has no op: x / (k + alpha/n^2 * sum over the zero-padded n x n window of
// x^2)^beta as Mul, Pad, AveragePool (the padded zeros counted: the sum / n^2), Mul, Add, Pow,
// Div.
Result<std::string> write_lrn_within(GraphWriter& w, const LayerView& l) {
  const OpDesc& d = *l.d;
  const int64_t n = d.local_size, h = (n - 1) / 2;
  const std::string& x = l.inputs[0];
  const std::string p = l.name + "_";
  w.node("Mul", p + "square", {x, x}, p + "square");
  w.node("Pad", p + "pad", {p + "square", w.ints_tensor(p + "pad.pads", {0, 0, h, h, 0, 0, h, h})},
         p + "pad");
  onnx::NodeProto* avg = w.node("AveragePool", p + "mean", {p + "pad"}, p + "mean");
  GraphWriter::ints(avg, "kernel_shape", {n, n});
  const auto scalar = [&](const char* what, float v) { return w.tensor(p + what, {}, &v, 1); };
  w.node("Mul", p + "scaled", {p + "mean", scalar("alpha", d.alpha)}, p + "scaled");
  w.node("Add", p + "base", {p + "scaled", scalar("k", d.k)}, p + "base");
  w.node("Pow", p + "power", {p + "base", scalar("beta", d.beta)}, p + "power");
  w.node("Div", l.name, {x, p + "power"}, l.name);
  return finish(w, l);
}

Result<std::string> write_lrn(GraphWriter& w, const LayerView& l) {
  EASEL_RETURN_IF_ERROR(image_input(l));
  const OpDesc& d = *l.d;
  if (d.lrn_within_channel) return write_lrn_within(w, l);
  // Both divide alpha by the size: k + alpha/n * sum of squares.
  onnx::NodeProto* n = w.node("LRN", l.name, {l.inputs[0]}, l.name);
  GraphWriter::integer(n, "size", d.local_size);
  GraphWriter::real(n, "alpha", d.alpha);
  GraphWriter::real(n, "beta", d.beta);
  GraphWriter::real(n, "bias", d.k);
  return finish(w, l);
}

Result<std::string> write_join(GraphWriter& w, const LayerView& l) {
  for (int r : l.ranks)
    if (r != l.ranks[0]) return refuse(l, "it joins N x C x H x W and N x C tensors");
  if (l.d->kind == OpKind::concat) {
    GraphWriter::integer(w.node("Concat", l.name, l.inputs, l.name), "axis", 1);
  } else {
    w.node(l.inputs.size() == 2 ? "Add" : "Sum", l.name, l.inputs, l.name);
  }
  return finish(w, l);
}

// The layer's nodes; returns the tensor that holds its output.
Result<std::string> write_layer(GraphWriter& w, const LayerView& l, Layout layout) {
  switch (l.d->kind) {
    case OpKind::conv:
      return write_conv(w, l);
    case OpKind::max_pool:
    case OpKind::avg_pool:
      return write_pool(w, l);
    case OpKind::inner_product:
      return write_inner_product(w, l, layout);
    case OpKind::batch_norm:
      return write_batch_norm(w, l);
    case OpKind::lrn:
      return write_lrn(w, l);
    case OpKind::add:
    case OpKind::concat:
      return write_join(w, l);
    case OpKind::relu:
      w.node("Relu", l.name, {l.inputs[0]}, l.name);
      return l.name;
    case OpKind::dropout:
      return l.inputs[0];  // inference: the identity
    case OpKind::global_avg_pool:
      EASEL_RETURN_IF_ERROR(image_input(l));
      w.node("GlobalAveragePool", l.name, {l.inputs[0]}, l.name);
      return l.name;
  }
  return refuse(l, "no ONNX mapping for this kind");
}

void value_info(onnx::ValueInfoProto* v, const std::string& name,
                const std::vector<int64_t>& dims) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("N");
  for (int64_t d : dims)
    t->mutable_shape()->add_dim()->set_dim_value(d);
}

// Renames the tensor `from` (the last layer's output, read by no node) to `to`.
void rename_output(onnx::GraphProto* g, const std::string& from, const std::string& to) {
  for (onnx::NodeProto& n : *g->mutable_node())
    for (std::string& o : *n.mutable_output())
      if (o == from) o = to;
}

// Every layer's nodes into g, in the graph's order; the last one's output renamed "logits".
Status write_graph(onnx::GraphProto* g, const NetSpec& spec, Layout layout,
                   const ArenaLayout& params, const float* weights) {
  EASEL_ASSIGN_OR_RETURN(NetGraph graph, resolve_graph(spec));
  EASEL_RETURN_IF_ERROR(
      infer_shapes(graph, spec, {1, spec.channels, spec.height, spec.width}, layout).status());
  GraphWriter w(g, weights);
  std::vector<std::string> tensor(graph.layers.size());
  std::vector<int> rank(graph.layers.size());
  for (size_t i = 0; i < graph.layers.size(); ++i) {
    LayerView l;
    l.d = &graph.layers[i].op;
    const std::string& name = graph.layers[i].name;
    l.name = name.substr(0, name.find('+'));
    if (l.d->fused_relu) l.relu = name.substr(name.find('+') + 1);
    for (int t : graph.in[i]) {
      l.inputs.push_back(t < 0 ? kDataInput : tensor[static_cast<size_t>(t)]);
      l.ranks.push_back(t < 0 ? 4 : rank[static_cast<size_t>(t)]);
    }
    for (const Segment& s : params.segments())
      if (s.layer == static_cast<int>(i)) l.params.push_back(&s);
    EASEL_ASSIGN_OR_RETURN(tensor[i], write_layer(w, l, layout));
    const OpKind k = l.d->kind;
    const bool keeps_rank = k == OpKind::relu || k == OpKind::dropout || k == OpKind::batch_norm ||
                            k == OpKind::add || k == OpKind::concat;
    rank[i] = k == OpKind::inner_product ? 2 : keeps_rank ? l.ranks[0] : 4;
  }
  if (tensor.back() == kDataInput)
    return invalid_argument("net " + spec.name + ": computes nothing (its layers are dropout)");
  rename_output(g, tensor.back(), "logits");
  return {};
}

}  // namespace

bool onnx_available() {
  return true;
}

Result<std::string> onnx_model(const NetSpec& spec, Layout layout, const ArenaLayout& params,
                               const float* weights, const OnnxOptions& options) {
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("easel");
  model.add_opset_import()->set_version(kOpset);  // the default domain
  for (const auto& [key, value] : options.metadata) {
    onnx::StringStringEntryProto* e = model.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  }
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(spec.name);
  EASEL_RETURN_IF_ERROR(write_graph(g, spec, layout, params, weights));
  value_info(g->add_input(), kDataInput, {spec.channels, spec.height, spec.width});
  std::string out = "logits";
  if (options.softmax) {
    GraphWriter::integer(GraphWriter(g, weights).node("Softmax", "prob", {"logits"}, "prob"),
                         "axis", 1);
    out = "prob";
  }
  value_info(g->add_output(), out, {spec.classes});
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return internal_error(std::string("the ONNX checker refuses the model written: ") + e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return internal_error("the ONNX model of " + spec.name + " does not serialise (over 2 GiB?)");
  return bytes;
}

}  // namespace easel::cli
