// An ONNX graph as easel layers: each node either becomes a layer (Conv, Gemm, MatMul,
// BatchNormalization, Relu, pools, LRN, Dropout, Add, Concat), folds into one (a MatMul's Add of
// a constant: the bias), or renames a tensor (Flatten and Reshape to N x K, Identity, Dropout
// at inference, a final Softmax: the loss applies it). Shapes are followed node by node so that
// a Reshape is checked to be a flatten and an inner product after one knows its input's C.
#include "nets/models/onnx_import.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/config.hpp"
#include "nets/graph.hpp"
#include "nets/models/onnx_attr.hpp"
#include "nets/models/onnx_lrn.hpp"

namespace easel {

namespace {

constexpr int64_t kMaxDim = int64_t{1} << 20;           // any side, count or kernel
constexpr int64_t kMaxSide = 65536;                     // a tensor's H and W
constexpr int64_t kMaxFloats = int64_t{1} << 31;        // one initializer
constexpr int64_t kMaxFileBytes = int64_t{2000} << 20;  // protobuf's own limit is 2 GiB

// A tensor while the graph is walked: the easel layer that computes it ("data": the input) and
// its shape, N x C x H x W (rank 4) or N x C (rank 2; flat_c: the C of the 4-D tensor it
// flattens, 0 if none).
struct Tensor {
  std::string layer;
  int rank = 4;
  int64_t c = 0, h = 1, w = 1, flat_c = 0;
};

struct Layer {
  std::string name, type, body;  // body: its TOML keys after name and type
  std::vector<std::string> inputs;
  std::vector<OnnxParam> params;
  bool matmul_without_bias = false;  // a MatMul whose Add of a constant may be its bias
};

class Importer {
 public:
  Importer(const onnx::GraphProto& g, std::string file) : g_(g), file_(std::move(file)) {}
  Result<OnnxNet> run();

 private:
  Status refuse(const onnx::NodeProto& n, const std::string& why) const {
    return invalid_argument("--net: " + file_ + ": node '" + printable(n.name()) + "' (" +
                            printable(n.op_type()) + "): " + why);
  }
  Status read_initializers();
  Status read_input();
  Status node(const onnx::NodeProto& n);
  Result<const Tensor*> in(const onnx::NodeProto& n, int i) const;
  const onnx::TensorProto* constant(const onnx::NodeProto& n, int i) const;
  Result<OnnxParam> floats(const onnx::NodeProto& n, int i, size_t rank) const;
  std::string layer_name(const onnx::NodeProto& n, int weight_input);
  Tensor& add_layer(const onnx::NodeProto& n, Layer l, const Tensor& out);
  Status conv(const onnx::NodeProto& n);
  Status gemm(const onnx::NodeProto& n);
  Status batch_norm(const onnx::NodeProto& n);
  Status pool(const onnx::NodeProto& n);
  Status lrn(const onnx::NodeProto& n);
  void add_lrn(const onnx::NodeProto& out, std::string name, const Tensor& x, const TorchLrn& p);
  Result<int> torch_lrn(int first);
  Status join(const onnx::NodeProto& n);
  Status add_bias(const onnx::NodeProto& n, const onnx::TensorProto& b, const Tensor& x);
  Status reshape(const onnx::NodeProto& n);
  Status pad(const onnx::NodeProto& n);
  Status window(const onnx::NodeProto& n, const Tensor& x, int64_t kh, int64_t kw, Layer& l,
                Tensor& out, bool ceil);

  const onnx::GraphProto& g_;
  std::string file_;
  std::map<std::string, const onnx::TensorProto*> consts_;
  std::map<std::string, Tensor> tensors_;
  std::vector<Layer> layers_;
  std::set<std::string> names_;
  std::string input_name_;
  Tensor input_;
};

// Attributes by name (nets/models/onnx_attr.hpp).
const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* name) {
  return onnx_attr::find(n, name);
}
using onnx_attr::float_of;
using onnx_attr::int_of;
using onnx_attr::ints_of;
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i)
    s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// The element count of `dims`, or -1 past kMaxFloats (or a negative dim).
int64_t count_of(const google::protobuf::RepeatedField<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > kMaxFloats) return -1;
    n *= d;
    if (n > kMaxFloats) return -1;
  }
  return n;
}

// What is wrong with a constant's data against its shape ("": nothing). A type other than
// float32 and int64 is refused where a node reads it.
std::string tensor_problem(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return "its data is in an external file (not read)";
  const int64_t n = count_of(t.dims());
  if (n < 0) return "its shape is beyond 2^31 elements";
  const bool f32 = t.data_type() == onnx::TensorProto::FLOAT;
  if (!f32 && t.data_type() != onnx::TensorProto::INT64) return "";
  const int64_t bytes = f32 ? 4 : 8;
  const int64_t held = t.has_raw_data() ? static_cast<int64_t>(t.raw_data().size())
                       : f32            ? t.float_data_size() * int64_t{4}
                                        : t.int64_data_size() * int64_t{8};
  if (held == n * bytes) return "";
  return "holds " + std::to_string(held) + " bytes where its shape " +
         dims_text({t.dims().begin(), t.dims().end()}) + " needs " + std::to_string(n * bytes);
}

Status Importer::read_initializers() {
  for (const onnx::TensorProto& t : g_.initializer()) {
    if (std::string why = tensor_problem(t); !why.empty())
      return invalid_argument("--net: " + file_ + ": initializer '" + printable(t.name()) +
                              "': " + why);
    consts_[t.name()] = &t;
  }
  for (const onnx::NodeProto& n : g_.node())  // Constant nodes hold their tensor
    if (n.op_type() == "Constant" && n.output_size() == 1)
      if (const auto* a = attr(n, "value"); a && a->has_t()) {
        if (std::string why = tensor_problem(a->t()); !why.empty())
          return refuse(n, "its value " + why);
        consts_[n.output(0)] = &a->t();
      }
  return {};
}

Status Importer::read_input() {
  int inputs = 0;
  for (const onnx::ValueInfoProto& v : g_.input()) {
    if (consts_.count(v.name())) continue;
    ++inputs;
    input_name_ = v.name();
    const auto& shape = v.type().tensor_type().shape();
    const std::string where = "--net: " + file_ + ": input '" + printable(v.name()) + "': ";
    if (v.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT)
      return invalid_argument(where + "not float32 (easel's images are float32)");
    if (shape.dim_size() != 4)
      return invalid_argument(where + "has " + std::to_string(shape.dim_size()) +
                              " dimensions, not N x C x H x W");
    int64_t chw[3];
    for (int i = 1; i < 4; ++i) {
      const auto& d = shape.dim(i);
      if (!d.has_dim_value() || d.dim_value() < 1 || d.dim_value() > (i == 1 ? 4096 : 65536))
        return invalid_argument(where + "dimension " + std::to_string(i) +
                                " is not a fixed size within easel's limits (C <= 4096, "
                                "H and W <= 65536)");
      chw[i - 1] = d.dim_value();
    }
    input_ = {"data", 4, chw[0], chw[1], chw[2], 0};
  }
  if (inputs != 1)
    return invalid_argument("--net: " + file_ + ": the graph has " + std::to_string(inputs) +
                            " inputs (easel's nets read one: the images)");
  tensors_[input_name_] = input_;
  return {};
}

Result<const Tensor*> Importer::in(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty())
    return refuse(n, "input " + std::to_string(i) + " is missing");
  auto it = tensors_.find(n.input(i));
  if (it == tensors_.end())
    return refuse(n, "input '" + printable(n.input(i)) +
                         "' is not computed by an earlier node (a constant where easel needs a "
                         "tensor, or nodes out of order)");
  return &it->second;
}

const onnx::TensorProto* Importer::constant(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size()) return nullptr;
  auto it = consts_.find(n.input(i));
  return it == consts_.end() ? nullptr : it->second;
}

// Input i as a float32 constant of `rank` dimensions (0: any).
Result<OnnxParam> Importer::floats(const onnx::NodeProto& n, int i, size_t rank) const {
  const onnx::TensorProto* t = constant(n, i);
  if (!t) return refuse(n, "input " + std::to_string(i) + " is not a constant (an initializer)");
  if (t->data_type() != onnx::TensorProto::FLOAT)
    return refuse(n, "initializer '" + printable(t->name()) + "' is not float32");
  OnnxParam p;
  p.name = n.input(i);
  p.dims.assign(t->dims().begin(), t->dims().end());
  if (rank && p.dims.size() != rank)
    return refuse(n, "initializer '" + printable(t->name()) + "' has shape " + dims_text(p.dims) +
                         ", not " + std::to_string(rank) + "-D");
  if (t->has_raw_data()) {
    p.values.resize(t->raw_data().size() / 4);
    std::memcpy(p.values.data(), t->raw_data().data(), p.values.size() * 4);  // little-endian
  } else {
    p.values.assign(t->float_data().begin(), t->float_data().end());
  }
  return p;
}

// A layer's name: its weights' PyTorch name ("layer1.0.conv1" of "layer1.0.conv1.weight"), else
// the node's ("/layer1/layer1.0/relu/Relu" as "layer1.layer1.0.relu.Relu"), in the characters a
// name keeps in every message, unique.
std::string Importer::layer_name(const onnx::NodeProto& n, int weight_input) {
  std::string s = n.name();
  if (weight_input >= 0 && weight_input < n.input_size()) {
    const std::string& w = n.input(weight_input);
    if (w.size() > 7 && w.compare(w.size() - 7, 7, ".weight") == 0) s = w.substr(0, w.size() - 7);
  }
  while (!s.empty() && s[0] == '/')
    s.erase(0, 1);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      c = c == '/' ? '.' : '_';
  if (s.empty() || s == "data") s = "node" + std::to_string(layers_.size());
  std::string out = s;
  for (int k = 2; names_.count(out); ++k)
    out = s + "_" + std::to_string(k);
  names_.insert(out);
  return out;
}

Tensor& Importer::add_layer(const onnx::NodeProto& n, Layer l, const Tensor& out) {
  Tensor t = out;
  t.layer = l.name;
  layers_.push_back(std::move(l));
  return tensors_[n.output(0)] = t;
}

// Symmetric pads [t, l, b, r] of a 2-D window, no dilation, no auto_pad: kernel, stride and pad
// keys, and the output's size (ceil: Caffe's and PyTorch's ceil_mode, the last window starting
// within the input or its leading padding).
Status Importer::window(const onnx::NodeProto& n, const Tensor& x, int64_t kh, int64_t kw, Layer& l,
                        Tensor& out, bool ceil) {
  if (x.rank != 4) return refuse(n, "its input is N x C, not N x C x H x W");
  const auto* ap = attr(n, "auto_pad");
  if (ap && ap->s() != "NOTSET" && ap->s() != "VALID")
    return refuse(n, "auto_pad " + printable(ap->s()) + " (easel takes explicit pads)");
  for (int64_t d : ints_of(n, "dilations", {1, 1}))
    if (d != 1) return refuse(n, "a dilation of " + std::to_string(d) + " (easel's is 1)");
  const auto s = ints_of(n, "strides", {1, 1});
  const auto p = ints_of(n, "pads", {0, 0, 0, 0});
  if (s.size() != 2 || p.size() != 4) return refuse(n, "not a 2-D window (strides, pads)");
  if (p[0] != p[2] || p[1] != p[3])
    return refuse(n, "asymmetric pads " + dims_text(p) + " (easel pads both sides alike)");
  for (int64_t v : {kh, kw, s[0], s[1]})
    if (v < 1 || v > kMaxDim) return refuse(n, "a kernel or stride out of [1, 2^20]");
  if (p[0] < 0 || p[1] < 0 || p[0] > kMaxDim || p[1] > kMaxDim)
    return refuse(n, "pads out of [0, 2^20]");
  const auto side = [&](int64_t in, int64_t k, int64_t st, int64_t pad) -> int64_t {
    if (in + 2 * pad < k) return 0;
    if (!ceil) return (in + 2 * pad - k) / st + 1;
    int64_t o = (in + 2 * pad - k + st - 1) / st + 1;
    if ((o - 1) * st >= in + pad) --o;
    return o;
  };
  out = x;
  out.h = side(x.h, kh, s[0], p[0]);
  out.w = side(x.w, kw, s[1], p[1]);
  if (out.h < 1 || out.w < 1) return refuse(n, "its window is larger than its padded input");
  if (out.h > kMaxSide || out.w > kMaxSide)
    return refuse(n, "an output side beyond " + std::to_string(kMaxSide));
  l.body += "kernel_h = " + std::to_string(kh) + "\nkernel_w = " + std::to_string(kw) +
            "\nstride_h = " + std::to_string(s[0]) + "\nstride_w = " + std::to_string(s[1]) +
            "\npad_h = " + std::to_string(p[0]) + "\npad_w = " + std::to_string(p[1]) + "\n";
  return {};
}

Status Importer::conv(const onnx::NodeProto& n) {
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  EASEL_ASSIGN_OR_RETURN(OnnxParam w, floats(n, 1, 4));
  const int64_t group = int_of(n, "group", 1);
  if (group < 1 || group > kMaxDim || w.dims[0] > kMaxDim || w.dims[1] * group != x->c ||
      w.dims[0] % group != 0)
    return refuse(n, "weights " + dims_text(w.dims) + " in " + std::to_string(group) +
                         " groups do not fit its input's " + std::to_string(x->c) + " channels");
  const auto k = ints_of(n, "kernel_shape", {w.dims[2], w.dims[3]});
  if (k.size() != 2 || k[0] != w.dims[2] || k[1] != w.dims[3])
    return refuse(n, "kernel_shape does not match its weights " + dims_text(w.dims));
  Layer l{layer_name(n, 1), "conv", "", {x->layer}, {}, false};
  Tensor out;
  EASEL_RETURN_IF_ERROR(window(n, *x, k[0], k[1], l, out, false));
  out.c = w.dims[0];
  l.body += "outputs = " + std::to_string(out.c) + "\ngroup = " + std::to_string(group) + "\n";
  l.params.push_back(std::move(w));
  if (n.input_size() > 2 && !n.input(2).empty()) {
    EASEL_ASSIGN_OR_RETURN(OnnxParam b, floats(n, 2, 1));
    if (b.dims[0] != out.c) return refuse(n, "its bias " + dims_text(b.dims) + " is not [oc]");
    l.params.push_back(std::move(b));
  } else {
    l.body += "bias = false\n";
  }
  add_layer(n, std::move(l), out);
  return {};
}

// Gemm (y = x W^T + b, or x W + b) and MatMul (y = x W; a following Add gives its bias).
Status Importer::gemm(const onnx::NodeProto& n) {
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  const bool matmul = n.op_type() == "MatMul";
  if (x->rank != 2) return refuse(n, "its input is not N x K (a Flatten first)");
  if (int_of(n, "transA", 0) != 0 || float_of(n, "alpha", 1) != 1.f ||
      float_of(n, "beta", 1) != 1.f)
    return refuse(n, "transA, alpha or beta other than 0, 1, 1");
  EASEL_ASSIGN_OR_RETURN(OnnxParam w, floats(n, 1, 2));
  const bool trans = !matmul && int_of(n, "transB", 0) != 0;
  const int64_t oc = trans ? w.dims[0] : w.dims[1], k = trans ? w.dims[1] : w.dims[0];
  if (k != x->c || oc > kMaxDim)
    return refuse(n, "weights " + dims_text(w.dims) + " do not take its input's " +
                         std::to_string(x->c) + " columns");
  if (!trans) {  // easel's weights are [oc, k]
    std::vector<float> t(w.values.size());
    for (int64_t i = 0; i < k; ++i)
      for (int64_t o = 0; o < oc; ++o)
        t[static_cast<size_t>(o * k + i)] = w.values[static_cast<size_t>(i * oc + o)];
    w.values = std::move(t);
    w.dims = {oc, k};
  }
  w.flat_channels = x->flat_c;
  Layer l{layer_name(n, 1),
          "inner_product",
          "outputs = " + std::to_string(oc) + "\n",
          {x->layer},
          {},
          false};
  l.params.push_back(std::move(w));
  if (!matmul && n.input_size() > 2 && !n.input(2).empty()) {
    EASEL_ASSIGN_OR_RETURN(OnnxParam b, floats(n, 2, 0));
    if (static_cast<int64_t>(b.values.size()) != oc)
      return refuse(n, "its bias " + dims_text(b.dims) + " is not [" + std::to_string(oc) + "]");
    b.dims = {oc};
    l.params.push_back(std::move(b));
  } else {
    l.matmul_without_bias = matmul;
  }
  add_layer(n, std::move(l), {"", 2, oc, 1, 1, 0});
  return {};
}

Status Importer::batch_norm(const onnx::NodeProto& n) {
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  if (int_of(n, "training_mode", 0) != 0 || n.output_size() != 1)
    return refuse(n, "training mode (running statistics as outputs): export in eval mode");
  const float eps = float_of(n, "epsilon", 1e-5f);
  if (!(eps >= 1e-12f && eps <= 1.f)) return refuse(n, "epsilon " + number(eps) + " not in (0, 1]");
  Layer l{layer_name(n, 1),
          "batch_norm",
          "eps = " + number(eps) + "\nmomentum = " +
              number(1.0 - static_cast<double>(float_of(n, "momentum", 0.9f))) + "\n",
          {x->layer},
          {},
          false};
  for (int i = 1; i <= 4; ++i) {
    EASEL_ASSIGN_OR_RETURN(OnnxParam p, floats(n, i, 1));
    if (p.dims[0] != x->c)
      return refuse(n, "parameter " + std::to_string(i) + " " + dims_text(p.dims) +
                           " is not one per channel (" + std::to_string(x->c) + ")");
    l.params.push_back(std::move(p));
  }
  add_layer(n, std::move(l), *x);
  return {};
}

Status Importer::pool(const onnx::NodeProto& n) {
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  if (n.op_type() == "GlobalAveragePool") {
    if (x->rank != 4) return refuse(n, "its input is N x C, not N x C x H x W");
    add_layer(n, {layer_name(n, -1), "global_avg_pool", "", {x->layer}, {}, false},
              {"", 4, x->c, 1, 1, 0});
    return {};
  }
  const bool avg = n.op_type() == "AveragePool";
  if (n.output_size() != 1) return refuse(n, "it outputs indices too");
  if (int_of(n, "storage_order", 0) != 0) return refuse(n, "storage_order 1");
  const auto k = ints_of(n, "kernel_shape", {});
  if (k.size() != 2) return refuse(n, "not a 2-D kernel_shape");
  // easel's (Caffe's, PyTorch's count_include_pad) average divides by the window within input
  // and padding; without padding the two counts agree.
  const auto p = ints_of(n, "pads", {0, 0, 0, 0});
  if (avg && int_of(n, "count_include_pad", 0) == 0 &&
      std::any_of(p.begin(), p.end(), [](int64_t v) { return v != 0; }))
    return refuse(n, "count_include_pad 0 with padding (easel counts the padding)");
  const bool ceil = int_of(n, "ceil_mode", 0) != 0;
  Layer l{layer_name(n, -1),
          avg ? "avg_pool" : "max_pool",
          std::string("ceil_mode = ") + (ceil ? "true" : "false") + "\n",
          {x->layer},
          {},
          false};
  Tensor out;
  EASEL_RETURN_IF_ERROR(window(n, *x, k[0], k[1], l, out, ceil));
  add_layer(n, std::move(l), out);
  return {};
}

Status Importer::lrn(const onnx::NodeProto& n) {
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  const int64_t size = int_of(n, "size", 0);
  if (x->rank != 4 || size < 1 || size > 99 || size % 2 == 0)
    return refuse(n,
                  "size " + std::to_string(size) + " (easel's is odd, 1 to 99) on N x C x H x W");
  add_lrn(n, layer_name(n, -1), *x,
          {size, float_of(n, "alpha", 1e-4f), float_of(n, "beta", 0.75f), float_of(n, "bias", 1)});
  return {};
}

// Both divide alpha by the size: k + alpha/size * the sum of squares.
void Importer::add_lrn(const onnx::NodeProto& out, std::string name, const Tensor& x,
                       const TorchLrn& p) {
  add_layer(out,
            {std::move(name),
             "lrn",
             "local_size = " + std::to_string(p.size) + "\nalpha = " + number(p.alpha) +
                 "\nbeta = " + number(p.beta) + "\nk = " + number(p.k) + "\n",
             {x.layer},
             {},
             false},
            x);
}

// nodes[first] is a Mul of a tensor by itself: PyTorch's LRN (onnx_lrn.hpp) through the node
// it returns, the last of the pattern; its layer is named as the Mul's module ("/2/Mul": "2").
Result<int> Importer::torch_lrn(int first) {
  const onnx::NodeProto& n = g_.node(first);
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  if (x->rank != 4) return refuse(n, "a square of N x C (easel's Mul is LRN's, of N x C x H x W)");
  EASEL_ASSIGN_OR_RETURN(TorchLrn p,
                         match_torch_lrn(g_, first, x->c, x->h, x->w, consts_,
                                         [this](const onnx::NodeProto& m, const std::string& why) {
                                           return refuse(m, why);
                                         }));
  onnx::NodeProto named;
  const size_t slash = n.name().rfind('/');
  named.set_name(slash == std::string::npos || slash == 0 ? n.name() : n.name().substr(0, slash));
  add_lrn(g_.node(p.last), layer_name(named, -1), *x, p);
  return p.last;
}

// Add of two tensors, or of a MatMul's output and a constant (its bias); Concat on channels.
Status Importer::join(const onnx::NodeProto& n) {
  const bool add = n.op_type() == "Add";
  if (add && n.input_size() == 2) {
    for (int i = 0; i < 2; ++i)
      if (const onnx::TensorProto* b = constant(n, 1 - i)) {
        EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, i));
        return add_bias(n, *b, *x);
      }
  }
  if (!add && int_of(n, "axis", 0) != 1 && !(int_of(n, "axis", 0) == -3))
    return refuse(n, "axis " + std::to_string(int_of(n, "axis", 0)) + " (easel joins channels)");
  Layer l{layer_name(n, -1), add ? "add" : "concat", "", {}, {}, false};
  Tensor out;
  for (int i = 0; i < n.input_size(); ++i) {
    EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, i));
    if (i == 0) {
      out = *x;
      out.c = 0;
    }
    if (x->rank != 4 || x->h != out.h || x->w != out.w || (add && i && x->c != out.c))
      return refuse(n, "its inputs' shapes differ or are not N x C x H x W");
    out.c = add ? x->c : out.c + x->c;
    if (out.c > kMaxDim) return refuse(n, "more than 2^20 channels");
    l.inputs.push_back(x->layer);
  }
  if (n.input_size() < 2) return refuse(n, "fewer than 2 inputs");
  add_layer(n, std::move(l), out);
  return {};
}

Status Importer::add_bias(const onnx::NodeProto& n, const onnx::TensorProto& b, const Tensor& x) {
  Layer* ip = nullptr;
  for (Layer& l : layers_)
    if (l.name == x.layer && l.matmul_without_bias) ip = &l;
  if (!ip) return refuse(n, "adds a constant to a tensor that is not a MatMul's (no easel layer)");
  EASEL_ASSIGN_OR_RETURN(OnnxParam p, floats(n, n.input(0) == b.name() ? 0 : 1, 0));
  if (static_cast<int64_t>(p.values.size()) != x.c)
    return refuse(n, "its constant " + dims_text(p.dims) + " is not one per output (" +
                         std::to_string(x.c) + ")");
  p.dims = {x.c};
  ip->params.push_back(std::move(p));
  ip->matmul_without_bias = false;
  tensors_[n.output(0)] = x;
  return {};
}

// Flatten (axis 1) and Reshape to [N, C*H*W]: the same tensor, N x K.
Status Importer::reshape(const onnx::NodeProto& n) {
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  const int64_t k = x->c * x->h * x->w;
  if (n.op_type() == "Flatten") {
    if (int_of(n, "axis", 1) != 1) return refuse(n, "an axis other than 1");
  } else {
    const onnx::TensorProto* s = constant(n, 1);
    if (!s || s->data_type() != onnx::TensorProto::INT64 || count_of(s->dims()) != 2)
      return refuse(n, "its shape is not a constant of 2 int64");
    int64_t v[2];
    for (int i = 0; i < 2; ++i)
      if (s->has_raw_data())
        std::memcpy(&v[i], s->raw_data().data() + 8 * i, 8);
      else
        v[i] = s->int64_data(i);
    // [N or 0 or -1, K or -1]: N x K only when the second is K or -1 with a batch first.
    if (!(v[1] == k || (v[1] == -1 && v[0] != -1)))
      return refuse(n, "shape " + dims_text({v[0], v[1]}) + " is not [N, " + std::to_string(k) +
                           "] (easel reshapes only to a flattened N x C*H*W)");
  }
  Tensor t = *x;
  if (x->rank == 4) t = {x->layer, 2, k, 1, 1, x->h * x->w > 1 ? x->c : 0};
  tensors_[n.output(0)] = t;
  return {};
}

// torch.onnx.export writes an average pool's padding as a Pad before it, all zeros where
// there is none: that Pad is the identity; any other is refused.
Status Importer::pad(const onnx::NodeProto& n) {
  EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
  const onnx::TensorProto* p = constant(n, 1);
  const auto* mode = attr(n, "mode");
  const int64_t count = p ? count_of(p->dims()) : -1;
  bool zeros = p && p->data_type() == onnx::TensorProto::INT64 && count >= 0 && count <= 16 &&
               (!mode || mode->s() == "constant");
  for (int64_t i = 0; zeros && i < count; ++i) {
    int64_t v = 0;
    if (p->has_raw_data())
      std::memcpy(&v, p->raw_data().data() + 8 * i, 8);
    else
      v = p->int64_data(static_cast<int>(i));
    zeros = v == 0;
  }
  if (!zeros) return refuse(n, "a padding other than none (easel pads within a conv or pool)");
  tensors_[n.output(0)] = *x;
  return {};
}

Status Importer::node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return refuse(n, "an op of domain '" + printable(n.domain()) + "'");
  if (op == "Constant") return {};
  if (n.output_size() < 1) return refuse(n, "no output");
  if (op == "Identity" || op == "Dropout" || op == "Softmax") {
    if (op == "Dropout" && n.output_size() > 1 && !n.output(1).empty())
      return refuse(n, "its mask is an output");
    if (const onnx::TensorProto* c = constant(n, 0); c && op == "Identity") {
      consts_[n.output(0)] = c;
      return {};
    }
    EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
    if (op == "Softmax") {
      const bool last = g_.output_size() == 1 && g_.output(0).name() == n.output(0);
      if (!last || x->rank != 2) return refuse(n, "a Softmax other than the output's of N x C");
    }
    // At inference Dropout is the identity: easel's dropout layer is added for training.
    if (op == "Dropout") {
      float ratio = float_of(n, "ratio", 0.5f);
      if (const onnx::TensorProto* r = constant(n, 1);
          r && r->data_type() == onnx::TensorProto::FLOAT && r->raw_data().size() == 4)
        std::memcpy(&ratio, r->raw_data().data(), 4);
      if (!(ratio >= 0 && ratio <= 0.99f)) return refuse(n, "a ratio outside [0, 0.99]");
      add_layer(
          n,
          {layer_name(n, -1), "dropout", "ratio = " + number(ratio) + "\n", {x->layer}, {}, false},
          *x);
      return {};
    }
    tensors_[n.output(0)] = *x;
    return {};
  }
  if (op == "Pad") return pad(n);
  if (op == "Conv") return conv(n);
  if (op == "Gemm" || op == "MatMul") return gemm(n);
  if (op == "BatchNormalization") return batch_norm(n);
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") return pool(n);
  if (op == "LRN") return lrn(n);
  if (op == "Add" || op == "Concat") return join(n);
  if (op == "Flatten" || op == "Reshape") return reshape(n);
  if (op == "Relu") {
    EASEL_ASSIGN_OR_RETURN(const Tensor* x, in(n, 0));
    add_layer(n, {layer_name(n, -1), "relu", "", {x->layer}, {}, false}, *x);
    return {};
  }
  return refuse(n, "easel has no layer for this op");
}

Result<OnnxNet> Importer::run() {
  EASEL_RETURN_IF_ERROR(read_initializers());
  EASEL_RETURN_IF_ERROR(read_input());
  for (const onnx::NodeProto& n : g_.node())  // each node's first output names what it computes
    if (n.output_size() < 1 || n.output(0).empty()) return refuse(n, "it has no output");
  for (int i = 0; i < g_.node_size(); ++i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.op_type() == "Mul" && n.input_size() == 2 && n.input(0) == n.input(1) &&
        n.domain().empty()) {
      EASEL_ASSIGN_OR_RETURN(i, torch_lrn(i));
    } else {
      EASEL_RETURN_IF_ERROR(node(n));
    }
  }
  if (g_.output_size() != 1)
    return invalid_argument("--net: " + file_ + ": the graph has " +
                            std::to_string(g_.output_size()) +
                            " outputs (easel's nets have one: the class scores)");
  auto out = tensors_.find(g_.output(0).name());
  if (out == tensors_.end() || out->second.layer == "data" || layers_.empty())
    return invalid_argument("--net: " + file_ + ": its output is not computed by its nodes");
  if (out->second.c > 1'000'000)
    return invalid_argument("--net: " + file_ + ": more than 1,000,000 classes");
  // The output's layer goes last: easel's loss reads the layer listed last.
  const std::string last = out->second.layer;
  std::stable_partition(layers_.begin(), layers_.end(),
                        [&](const Layer& l) { return l.name != last; });
  OnnxNet net;
  std::ostringstream d;
  std::string stem = file_.substr(file_.rfind('/') + 1);
  stem = stem.substr(0, stem.size() - 5);  // ".onnx"
  for (char& ch : stem)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.')
      ch = '_';
  d << "name = \"" << (stem.empty() ? "onnx" : stem) << "\"\n"
    << "description = \"imported from ONNX\"\n\n[input]\nchannels = " << input_.c
    << "\nheight = " << input_.h << "\nwidth = " << input_.w << "\nclasses = " << out->second.c
    << "\n";
  for (Layer& l : layers_) {
    d << "\n[[layer]]\nname = \"" << l.name << "\"\ntype = \"" << l.type << "\"\ninputs = [";
    for (size_t i = 0; i < l.inputs.size(); ++i)
      d << (i ? ", " : "") << '"' << l.inputs[i] << '"';
    d << "]\n" << l.body;
    if (!l.params.empty()) net.params.emplace_back(l.name, std::move(l.params));
  }
  net.description = d.str();
  return net;
}

}  // namespace

bool is_onnx_file(std::string_view name) {
  return name.size() > 5 && name.substr(name.size() - 5) == ".onnx";
}

Result<OnnxNet> import_onnx(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found("--net: " + path + ": no such file");
  if (!S_ISREG(st.st_mode)) return invalid_argument("--net: " + path + ": not a regular file");
  if (st.st_size > kMaxFileBytes)
    return invalid_argument("--net: " + path + ": larger than 2000 MiB (ONNX's protobuf limit)");
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("--net: " + path + ": cannot be opened");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&f) || !model.has_graph())
    return invalid_argument("--net: " + path + ": not an ONNX model (or truncated)");
  int64_t opset = -1;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 11 || opset > 17)
    return invalid_argument("--net: " + path + ": opset " + std::to_string(opset) +
                            " (easel reads opsets 11 to 17)");
  Importer im(model.graph(), path);
  EASEL_ASSIGN_OR_RETURN(OnnxNet net, im.run());
  try {  // after the sizes are checked: the checker reads every initializer
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    return invalid_argument("--net: " + path + ": the ONNX checker refuses it: " + printable(why));
  }
  return net;
}

Status check_onnx_fits(const OnnxNet& onnx, const NetSpec& spec, const std::string& path) {
  EASEL_ASSIGN_OR_RETURN(NetGraph g, resolve_graph(spec));
  EASEL_RETURN_IF_ERROR(
      infer_shapes(g, spec, {1, spec.channels, spec.height, spec.width}, Layout::nchw).status());
  std::map<std::string, const std::vector<OnnxParam>*> by_name;
  for (const auto& [name, params] : onnx.params)
    by_name[name] = &params;
  for (const LayerSpec& l : g.layers) {
    const std::string name = l.name.substr(0, l.name.find('+'));
    const auto shapes = param_shapes(l.op);
    auto it = by_name.find(name);
    for (size_t i = 0; i < shapes.size(); ++i) {
      int64_t count = 1;
      for (int64_t d : shapes[i])
        count *= d;
      const OnnxParam* p =
          it == by_name.end() || i >= it->second->size() ? nullptr : &(*it->second)[i];
      if (!p || static_cast<int64_t>(p->values.size()) != count)
        return invalid_argument(
            "--net: " + path + ": layer " + name + ": parameter " + std::to_string(i + 1) + " is " +
            (p ? dims_text(p->dims) : "missing") + " in the file but " + dims_text(shapes[i]) +
            " on the data's " + std::to_string(spec.channels) + "x" + std::to_string(spec.height) +
            "x" + std::to_string(spec.width) + " (the file's weights fit its own input)");
    }
  }
  return {};
}

Status load_onnx_weights(const OnnxNet& onnx, const Net& net, float* weights) {
  const std::vector<LayerInfo> info = net.describe();
  std::map<std::string, const std::vector<OnnxParam>*> by_name;
  for (const auto& [name, params] : onnx.params)
    by_name[name] = &params;
  std::map<int, size_t> next;  // per layer, its next parameter
  for (const Segment& s : net.params().segments()) {
    const std::string& full = info[static_cast<size_t>(s.layer)].name;
    const std::string name = full.substr(0, full.find('+'));
    auto it = by_name.find(name);
    const size_t i = next[s.layer]++;
    if (it == by_name.end() || i >= it->second->size() ||
        static_cast<int64_t>((*it->second)[i].values.size()) != s.count)
      return invalid_argument("--net: the ONNX file has no parameter of " + s.name + "'s size");
    const OnnxParam& p = (*it->second)[i];
    float* dst = weights + s.offset;
    const int64_t c = p.flat_channels;
    if (net.layout() == Layout::nhwc && c > 0 && s.dims.size() == 2) {
      // Flatten's chw columns in the hwc order of an nhwc net's inner product.
      const int64_t k = s.dims[1], hw = k / c;
      for (int64_t o = 0; o < s.dims[0]; ++o)
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t q = 0; q < hw; ++q)
            dst[o * k + q * c + ci] = p.values[static_cast<size_t>(o * k + ci * hw + q)];
    } else {
      std::memcpy(dst, p.values.data(), p.values.size() * sizeof(float));
    }
  }
  return {};
}

}  // namespace easel
