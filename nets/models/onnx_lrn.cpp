// The LRN subgraph of torch.onnx.export (onnx_lrn.hpp): a walk over its nodes that evaluates
// the int64 shape nodes and steps the data path through its ten expected ops, in order.
#include "nets/models/onnx_lrn.hpp"

#include <algorithm>
#include <cstring>

#include "engine/config.hpp"
#include "nets/models/onnx_attr.hpp"

namespace easel {

namespace {

constexpr int64_t kBatch = -2;  // N in a computed shape: not known when the graph is read
constexpr size_t kMaxInts = 64;

// An int64 tensor of the shape computation (a bool of Equal as 0 or 1).
struct Ints {
  std::vector<int64_t> dims, v;
};

// The data path's ops, in order; Pad may repeat (torch writes a second, all-zero Pad).
enum Step { kUnsqueeze, kReshape5, kPad, kPool, kSqueeze, kReshape4, kMul, kAdd, kPow, kDiv };

class LrnMatcher {
 public:
  LrnMatcher(const OnnxConsts& consts, const OnnxRefuse& refuse, std::string x,
             std::vector<int64_t> shape)
      : consts_(consts), refuse_(refuse), x_(std::move(x)), cur_(x_) {
    shapes_[x_] = std::move(shape);
  }
  Result<TorchLrn> run(const onnx::GraphProto& g, int first);

 private:
  Status node(const onnx::NodeProto& n);
  Result<Ints> evaluate(const onnx::NodeProto& n);
  Result<Ints> reshape_ints(const onnx::NodeProto& n, const Ints& a);
  Result<Ints> slice(const onnx::NodeProto& n, const Ints& a);
  Status data_step(const onnx::NodeProto& n);
  Status pad(const onnx::NodeProto& n);
  Status pool(const onnx::NodeProto& n);
  Status squeeze(const onnx::NodeProto& n);
  Status reshape(const onnx::NodeProto& n, Step step);
  Status scale(const onnx::NodeProto& n);
  Result<const Ints*> ints(const onnx::NodeProto& n, int i);
  Result<std::vector<int64_t>> axes(const onnx::NodeProto& n);
  Status expect(const onnx::NodeProto& n, Step step, const char* what) const;

  const OnnxConsts& consts_;
  const OnnxRefuse& refuse_;
  OnnxConsts branch_consts_;  // the Constants of an If's branch
  std::string x_, cur_;       // x; the data path's latest tensor
  std::map<std::string, Ints> ints_;
  std::map<std::string, std::vector<int64_t>> shapes_;  // x and the data path's tensors
  int step_ = kUnsqueeze;
  int64_t pad_before_ = 0, pad_after_ = 0;
  TorchLrn out_;
};

std::string text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + (v[i] == kBatch ? std::string("N") : std::to_string(v[i]));
  return s + "]";
}

// Input i as int64 values: computed earlier, or a constant of at most kMaxInts.
Result<const Ints*> LrnMatcher::ints(const onnx::NodeProto& n, int i) {
  if (i >= n.input_size() || n.input(i).empty())
    return refuse_(n, "input " + std::to_string(i) + " is missing");
  if (auto it = ints_.find(n.input(i)); it != ints_.end()) return &it->second;
  const onnx::TensorProto* t = nullptr;
  for (const OnnxConsts* m : {&consts_, static_cast<const OnnxConsts*>(&branch_consts_)})
    if (auto c = m->find(n.input(i)); c != m->end()) t = c->second;
  if (!t || t->data_type() != onnx::TensorProto::INT64 || t->dims_size() > 2)
    return refuse_(n, "input '" + printable(n.input(i)) +
                          "' is not an int64 shape computed in the LRN pattern PyTorch writes");
  Ints v;
  v.dims.assign(t->dims().begin(), t->dims().end());
  const size_t count = t->has_raw_data() ? t->raw_data().size() / 8 : t->int64_data_size();
  size_t declared = 1;  // its dims' product (an If branch's Constant is not checked on reading)
  for (int64_t d : v.dims)
    declared *=
        d >= 0 && d <= static_cast<int64_t>(kMaxInts) ? static_cast<size_t>(d) : kMaxInts + 1;
  if (count > kMaxInts || declared != count)
    return refuse_(n, "a shape constant of more than 64 values, or not of its dims' count");
  v.v.resize(count);
  for (size_t k = 0; k < count; ++k)
    if (t->has_raw_data())
      std::memcpy(&v.v[k], t->raw_data().data() + 8 * k, 8);  // little-endian
    else
      v.v[k] = t->int64_data(static_cast<int>(k));
  return &(ints_[n.input(i)] = std::move(v));
}

// Unsqueeze's and Squeeze's axes: an attribute (opset 11, 12) or input 1.
Result<std::vector<int64_t>> LrnMatcher::axes(const onnx::NodeProto& n) {
  if (n.input_size() < 2) return onnx_attr::ints_of(n, "axes", {});
  EASEL_ASSIGN_OR_RETURN(const Ints* a, ints(n, 1));
  return a->v;
}

Result<Ints> LrnMatcher::reshape_ints(const onnx::NodeProto& n, const Ints& a) {
  EASEL_ASSIGN_OR_RETURN(const Ints* s, ints(n, 1));
  Ints r{s->v, a.v};
  int64_t known = 1, free = -1;
  for (size_t i = 0; i < r.dims.size(); ++i) {
    if (r.dims[i] == 0 && i < a.dims.size()) r.dims[i] = a.dims[i];
    if (r.dims[i] > static_cast<int64_t>(kMaxInts))  // more values than a shape tensor holds
      return refuse_(n, "a shape " + text(s->v) + " of more than 64 values");
    if (r.dims[i] == -1 && free < 0)
      free = static_cast<int64_t>(i);
    else if (r.dims[i] < 0)
      return refuse_(n, "a shape " + text(s->v) + " it cannot compute");
    else
      known *= r.dims[i];
  }
  const auto count = static_cast<int64_t>(a.v.size());
  if (free >= 0 && known > 0 && count % known == 0)
    r.dims[static_cast<size_t>(free)] = count / known;
  else if (free >= 0 || known != count)
    return refuse_(n, "shape " + text(s->v) + " does not fit " + std::to_string(count) + " values");
  return r;
}

// Slice of a 1-D or 2-D int64 tensor on one axis, any step (torch reverses the pads' rows).
Result<Ints> LrnMatcher::slice(const onnx::NodeProto& n, const Ints& a) {
  EASEL_ASSIGN_OR_RETURN(const Ints* starts, ints(n, 1));
  EASEL_ASSIGN_OR_RETURN(const Ints* ends, ints(n, 2));
  std::vector<int64_t> ax{0}, steps{1};
  if (n.input_size() > 3 && !n.input(3).empty()) {
    EASEL_ASSIGN_OR_RETURN(const Ints* v, ints(n, 3));
    ax = v->v;
  }
  if (n.input_size() > 4 && !n.input(4).empty()) {
    EASEL_ASSIGN_OR_RETURN(const Ints* v, ints(n, 4));
    steps = v->v;
  }
  const auto rank = static_cast<int64_t>(a.dims.size());
  if (rank < 1 || rank > 2 || starts->v.size() != 1 || ends->v.size() != 1 || ax.size() != 1 ||
      steps.size() != 1 || steps[0] == 0 || ax[0] < -rank || ax[0] >= rank)
    return refuse_(n, "a slice other than one axis of a 1-D or 2-D shape tensor");
  const size_t axis = static_cast<size_t>(ax[0] < 0 ? ax[0] + rank : ax[0]);
  const int64_t len = a.dims[axis], step = steps[0];
  const auto clamp = [&](int64_t v) {
    if (v < 0) v += len;
    return step > 0 ? std::clamp<int64_t>(v, 0, len) : std::clamp<int64_t>(v, -1, len - 1);
  };
  const int64_t inner = rank == 2 && axis == 0 ? a.dims[1] : 1;
  const int64_t outer = rank == 2 && axis == 1 ? a.dims[0] : 1;
  std::vector<int64_t> picked;
  for (int64_t i = clamp(starts->v[0]), e = clamp(ends->v[0]); step > 0 ? i < e : i > e; i += step)
    picked.push_back(i);
  Ints r{a.dims, {}};
  r.dims[axis] = static_cast<int64_t>(picked.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p : picked)
      for (int64_t q = 0; q < inner; ++q)
        r.v.push_back(a.v[static_cast<size_t>((o * len + p) * inner + q)]);
  return r;
}

// A node of the shape computation, its int64 result; inputs are computed shapes or constants.
Result<Ints> LrnMatcher::evaluate(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Shape") {
    auto it = shapes_.find(n.input(0));
    if (it == shapes_.end() || onnx_attr::find(n, "start") || onnx_attr::find(n, "end"))
      return refuse_(n, "not the shape of the LRN's input or of its data path");
    return Ints{{static_cast<int64_t>(it->second.size())}, it->second};
  }
  EASEL_ASSIGN_OR_RETURN(const Ints* a, ints(n, 0));
  if (op == "Cast" || op == "Unsqueeze") {
    if (op == "Cast" && onnx_attr::int_of(n, "to", 0) != onnx::TensorProto::INT64)
      return refuse_(n, "a cast to other than int64");
    Ints r = *a;
    if (op == "Unsqueeze") {
      EASEL_ASSIGN_OR_RETURN(std::vector<int64_t> ax, axes(n));
      if (ax != std::vector<int64_t>{0} || a->dims.size() > 1)
        return refuse_(n, "a shape unsqueezed other than on axis 0");
      r.dims.insert(r.dims.begin(), 1);
    }
    return r;
  }
  if (op == "Gather" || op == "Equal") {
    EASEL_ASSIGN_OR_RETURN(const Ints* b, ints(n, 1));
    if (a->dims.size() > 1 || b->dims.size() > 1 || onnx_attr::int_of(n, "axis", 0) != 0 ||
        (op == "Equal" && b->v.size() != 1))
      return refuse_(n, "not on 1-D shapes (axis 0)");
    Ints r{b->dims, {}};
    const auto len = static_cast<int64_t>(a->v.size());
    for (int64_t i : b->v) {
      if (op == "Equal") {
        r = {a->dims, {}};
        for (int64_t v : a->v)
          r.v.push_back(v == i);
        break;
      }
      if (i < -len || i >= len) return refuse_(n, "an index out of its shape");
      r.v.push_back(a->v[static_cast<size_t>(i < 0 ? i + len : i)]);
    }
    return r;
  }
  if (op == "Concat") {
    if (onnx_attr::int_of(n, "axis", 0) != 0) return refuse_(n, "a concat other than on axis 0");
    Ints r{{0}, {}};
    for (int i = 0; i < n.input_size(); ++i) {
      EASEL_ASSIGN_OR_RETURN(const Ints* b, ints(n, i));
      if (b->dims.size() != 1) return refuse_(n, "a concat of other than 1-D shapes");
      r.v.insert(r.v.end(), b->v.begin(), b->v.end());
    }
    r.dims[0] = static_cast<int64_t>(r.v.size());
    return r;
  }
  if (op == "ConstantOfShape") {
    const auto* value = onnx_attr::find(n, "value");
    if (a->v.size() != 1 || a->v[0] < 0 || a->v[0] > static_cast<int64_t>(kMaxInts) || !value ||
        value->t().data_type() != onnx::TensorProto::INT64 || value->t().raw_data().size() != 8)
      return refuse_(n, "not an int64 filler of at most 64 values");
    int64_t fill = 0;
    std::memcpy(&fill, value->t().raw_data().data(), 8);
    return Ints{a->v, std::vector<int64_t>(static_cast<size_t>(a->v[0]), fill)};
  }
  if (op == "Reshape") return reshape_ints(n, *a);
  if (op == "Slice") return slice(n, *a);
  if (op == "Transpose") {
    const auto perm = onnx_attr::ints_of(n, "perm", {1, 0});
    if (a->dims.size() != 2 || perm != std::vector<int64_t>{1, 0})
      return refuse_(n, "a transpose other than a 2-D shape tensor's");
    Ints r{{a->dims[1], a->dims[0]}, {}};
    for (int64_t j = 0; j < a->dims[1]; ++j)
      for (int64_t i = 0; i < a->dims[0]; ++i)
        r.v.push_back(a->v[static_cast<size_t>(i * a->dims[1] + j)]);
    return r;
  }
  return refuse_(n, "not an op of the LRN pattern PyTorch writes");
}

const char* const kStepNames[] = {"Unsqueeze of x*x on axis 1",
                                  "Reshape to [N, 1, C, H, -1]",
                                  "Pad of the channels",
                                  "AveragePool [size, 1, 1]",
                                  "Squeeze of axis 1",
                                  "Reshape to [N, C, H, W]",
                                  "Mul by alpha",
                                  "Add of k",
                                  "Pow by beta",
                                  "Div of x"};

// n is the data path's step `step` (a Pad may follow a Pad) and reads its latest tensor.
Status LrnMatcher::expect(const onnx::NodeProto& n, Step step, const char* what) const {
  const bool again = step == kPad && step_ == kPool;
  if (step_ != step && !again)
    return refuse_(
        n, std::string("a ") + what + " where PyTorch's LRN pattern has its " + kStepNames[step_]);
  const int data = step == kDiv ? 1 : 0;
  if (n.input_size() <= data || n.input(data) != cur_ || n.output_size() != 1)
    return refuse_(n, "does not read the LRN's " + std::string(kStepNames[step]) + " input");
  return {};
}

Status LrnMatcher::pad(const onnx::NodeProto& n) {
  EASEL_RETURN_IF_ERROR(expect(n, kPad, "Pad"));
  EASEL_ASSIGN_OR_RETURN(const Ints* p, ints(n, 1));
  const auto* mode = onnx_attr::find(n, "mode");
  bool ok = p->v.size() == 10 && (!mode || mode->s() == "constant") &&
            (n.input_size() < 3 || n.input(2).empty());
  for (size_t i = 0; ok && i < 10; ++i)
    ok = i % 5 == 2 ? p->v[i] >= 0 && p->v[i] <= 49 : p->v[i] == 0;
  if (!ok) return refuse_(n, "pads " + text(p->v) + " other than zeros around the channels of 5-D");
  pad_before_ += p->v[2];
  pad_after_ += p->v[7];
  shapes_[cur_ = n.output(0)] = shapes_[n.input(0)];
  shapes_[cur_][2] += p->v[2] + p->v[7];
  step_ = kPool;
  return {};
}

Status LrnMatcher::pool(const onnx::NodeProto& n) {
  EASEL_RETURN_IF_ERROR(expect(n, kPool, "AveragePool"));
  const auto k = onnx_attr::ints_of(n, "kernel_shape", {});
  const int64_t size = k.size() == 3 ? k[0] : 0;
  const auto* ap = onnx_attr::find(n, "auto_pad");
  if (k.size() != 3 || k[1] != 1 || k[2] != 1 || size % 2 == 0 || size < 1 || size > 99 ||
      onnx_attr::ints_of(n, "strides", {1, 1, 1}) != std::vector<int64_t>{1, 1, 1} ||
      onnx_attr::ints_of(n, "pads", {0, 0, 0, 0, 0, 0}) != std::vector<int64_t>(6, 0) ||
      onnx_attr::int_of(n, "ceil_mode", 0) != 0 || (ap && ap->s() != "NOTSET"))
    return refuse_(n, "not a [size, 1, 1] window of stride 1 without padding, size odd <= 99");
  if (pad_before_ != size / 2 || pad_after_ != (size - 1) / 2)
    return refuse_(n, "its channels are padded " + std::to_string(pad_before_) + " and " +
                          std::to_string(pad_after_) + ", not " + std::to_string(size / 2) +
                          " and " + std::to_string((size - 1) / 2) + " for a window of " +
                          std::to_string(size));
  out_.size = size;
  shapes_[cur_ = n.output(0)] = shapes_[x_];
  shapes_[cur_].insert(shapes_[cur_].begin() + 1, 1);
  step_ = kSqueeze;
  return {};
}

// Squeeze of axis 1, or an If whose taken branch is that Squeeze (torch tests the dimension).
Status LrnMatcher::squeeze(const onnx::NodeProto& n) {
  EASEL_RETURN_IF_ERROR(n.op_type() == "If" ? Status{} : expect(n, kSqueeze, "Squeeze"));
  if (n.op_type() == "If") {
    if (step_ != kSqueeze) return expect(n, kSqueeze, "If");
    EASEL_ASSIGN_OR_RETURN(const Ints* cond, ints(n, 0));
    const auto* branch =
        onnx_attr::find(n, cond->v == std::vector<int64_t>{1} ? "then_branch" : "else_branch");
    if (cond->v != std::vector<int64_t>{1} || !branch || n.output_size() != 1)
      return refuse_(n, "its condition is not that the pooled tensor's dimension 1 is 1");
    const onnx::GraphProto& b = branch->g();
    for (int i = 0; i < b.node_size(); ++i)  // its Constants, then the Squeeze
      if (b.node(i).op_type() == "Constant" && b.node(i).output_size() == 1 &&
          onnx_attr::find(b.node(i), "value"))
        branch_consts_[b.node(i).output(0)] = &onnx_attr::find(b.node(i), "value")->t();
      else if (i != b.node_size() - 1 || b.node(i).op_type() != "Squeeze" ||
               b.node(i).output_size() != 1 || b.output_size() != 1 ||
               b.output(0).name() != b.node(i).output(0))
        return refuse_(n, "its then branch is not Constants and a Squeeze");
    EASEL_RETURN_IF_ERROR(squeeze(b.node(b.node_size() - 1)));
    shapes_[cur_ = n.output(0)] = shapes_[x_];
    return {};
  }
  EASEL_ASSIGN_OR_RETURN(std::vector<int64_t> ax, axes(n));
  if (ax != std::vector<int64_t>{1}) return refuse_(n, "axes " + text(ax) + ", not [1]");
  shapes_[cur_ = n.output(0)] = shapes_[x_];
  step_ = kReshape4;
  return {};
}

// The Reshape to [N, 1, C, H, -1] after the Unsqueeze, or back to [N, C, H, W] after the
// Squeeze: N may be the batch's (computed), 0 (copied) or the exporter's fixed batch.
Status LrnMatcher::reshape(const onnx::NodeProto& n, Step step) {
  EASEL_RETURN_IF_ERROR(expect(n, step, "Reshape"));
  EASEL_ASSIGN_OR_RETURN(const Ints* s, ints(n, 1));
  const std::vector<int64_t>& x = shapes_[x_];
  std::vector<int64_t> want{1, x[1], x[2], x[3]};
  if (step == kReshape4) want.erase(want.begin());
  const std::vector<int64_t>& v = s->v;
  bool ok = v.size() == want.size() + 1 && (v[0] == kBatch || v[0] >= 0);
  for (size_t i = 0; ok && i < want.size(); ++i)
    ok = v[i + 1] == want[i] || (i + 1 == want.size() && v[i + 1] == -1);
  if (!ok)
    return refuse_(n, "shape " + text(v) + ", not " + kStepNames[step] + " of C, H, W " +
                          text({x[1], x[2], x[3]}));
  shapes_[cur_ = n.output(0)] = shapes_[n.input(0)];
  step_ = step + 1;
  return {};
}

// Mul by alpha, Add of k, Pow by beta: each a float32 scalar constant.
Status LrnMatcher::scale(const onnx::NodeProto& n) {
  const Step step = n.op_type() == "Mul" ? kMul : n.op_type() == "Add" ? kAdd : kPow;
  EASEL_RETURN_IF_ERROR(expect(n, step, n.op_type().c_str()));
  auto c = n.input_size() == 2 ? consts_.find(n.input(1)) : consts_.end();
  const onnx::TensorProto* t = c == consts_.end() ? nullptr : c->second;
  float v = 0;
  if (!t || t->data_type() != onnx::TensorProto::FLOAT || t->dims_size() > 1 ||
      (t->has_raw_data() ? t->raw_data().size() != 4 : t->float_data_size() != 1))
    return refuse_(n, "its second input is not a float32 scalar constant");
  if (t->has_raw_data())
    std::memcpy(&v, t->raw_data().data(), 4);
  else
    v = t->float_data(0);
  (step == kMul ? out_.alpha : step == kAdd ? out_.k : out_.beta) = v;
  shapes_[cur_ = n.output(0)] = shapes_[x_];
  step_ = step + 1;
  return {};
}

Status LrnMatcher::data_step(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Unsqueeze") {
    EASEL_RETURN_IF_ERROR(expect(n, kUnsqueeze, "Unsqueeze"));
    EASEL_ASSIGN_OR_RETURN(std::vector<int64_t> ax, axes(n));
    if (ax != std::vector<int64_t>{1}) return refuse_(n, "axes " + text(ax) + ", not [1]");
    shapes_[cur_ = n.output(0)] = shapes_[x_];
    shapes_[cur_].insert(shapes_[cur_].begin() + 1, 1);
    step_ = kReshape5;
    return {};
  }
  if (op == "Reshape") return reshape(n, step_ == kReshape4 ? kReshape4 : kReshape5);
  if (op == "Pad") return pad(n);
  if (op == "AveragePool") return pool(n);
  if (op == "Squeeze" || op == "If") return squeeze(n);
  if (op == "Mul" || op == "Add" || op == "Pow") return scale(n);
  if (op == "Div") {
    EASEL_RETURN_IF_ERROR(expect(n, kDiv, "Div"));
    if (n.input(0) != x_) return refuse_(n, "does not divide the LRN's input");
    step_ = kDiv + 1;
    return {};
  }
  return refuse_(n, "not an op of the LRN pattern PyTorch writes (expected its " +
                        std::string(kStepNames[step_]) + ")");
}

// A node reading the data path (other than by Shape) is its next step; any other computes
// a shape from constants and shapes.
Status LrnMatcher::node(const onnx::NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return refuse_(n, "an op of another domain");
  if (n.op_type() == "Constant") return {};
  bool data = n.op_type() == "Div";
  for (const std::string& i : n.input())
    data = data || (i == cur_ && n.op_type() != "Shape");
  if (data || n.op_type() == "If") return data_step(n);
  if (n.output_size() != 1) return refuse_(n, "not one output");
  EASEL_ASSIGN_OR_RETURN(Ints r, evaluate(n));
  if (r.v.size() > kMaxInts) return refuse_(n, "a shape tensor of more than 64 values");
  ints_[n.output(0)] = std::move(r);
  return {};
}

Result<TorchLrn> LrnMatcher::run(const onnx::GraphProto& g, int first) {
  cur_ = g.node(first).output(0);  // x * x
  shapes_[cur_] = shapes_[x_];
  for (int i = first + 1; i < g.node_size(); ++i) {
    EASEL_RETURN_IF_ERROR(node(g.node(i)));
    if (step_ > kDiv) {
      out_.last = i;
      return out_;
    }
  }
  return refuse_(g.node(first), "the LRN pattern PyTorch writes ends before its Div");
}

}  // namespace

Result<TorchLrn> match_torch_lrn(const onnx::GraphProto& g, int first, int64_t c, int64_t h,
                                 int64_t w, const OnnxConsts& consts, const OnnxRefuse& refuse) {
  const onnx::NodeProto& mul = g.node(first);
  LrnMatcher m(consts, refuse, mul.input(0), {kBatch, c, h, w});
  return m.run(g, first);
}

}  // namespace easel
