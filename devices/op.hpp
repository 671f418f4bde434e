// Layer operations, device-neutral: a plain description (OpDesc), and an Op that a Device
// builds from it once at set-up (describe -> choose -> execute). Ops work on raw pointers to
// the device's memory: activations in the net's Layout, parameters as the segments of a flat
// arena, in the user formats given below. All sizes, workspaces and primitives are fixed at
// creation: forward/backward never allocate.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/rng.hpp"
#include "engine/status.hpp"
#include "engine/tensor.hpp"

namespace easel {

// One enumerator per op kind. Everything else about a kind is its OpDef, one file each under
// devices/ops/ with one row in devices/ops/list.cpp (in this order); see docs/DESIGN.md, "How to
// add a layer".
enum class OpKind {
  conv,
  max_pool,
  avg_pool,
  inner_product,
  relu,
  lrn,
  dropout,
  batch_norm,
  add,
  concat,
  global_avg_pool,
};
const char* op_kind_name(OpKind k);

// The element type of activations (an op's src, more_src, dst and their gradients). Parameters,
// their gradients and the arenas are f32 always (master weights). bf16 is the upper half of an
// IEEE float (uint16_t in memory), rounded to nearest even from f32: a device that keeps
// activations in bf16 (Device::activation_type, the CUDA device at --precision bf16) takes the
// ops' `float*` activation pointers as pointers to such elements.
enum class DType : uint8_t {
  f32,
  bf16,
};
const char* dtype_name(DType t);
inline size_t dtype_bytes(DType t) {
  return t == DType::bf16 ? 2 : 4;
}

struct OpDesc {
  OpKind kind = OpKind::relu;
  Layout layout = Layout::nchw;
  // What every activation pointer of forward/backward (src, more_src, dst, diff_dst, diff_src)
  // points to; Net::create sets the device's Device::activation_type(). A device refuses a type
  // it does not keep activations in.
  DType act = DType::f32;
  Shape4 src;  // the first (or only) input; includes the batch size N
  // Kinds of several inputs (OpDef::max_inputs > 1: element-wise add, concatenation): the
  // shapes of the inputs after the first, in order. Empty for the one-input kinds.
  std::vector<Shape4> more_src;

  // conv (kernel kh x kw) and pooling (window kh x kw); stride and padding for both.
  int64_t oc = 0;  // conv and inner_product: output channels
  int64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t group = 1;        // conv: groups (AlexNet's conv2/4/5)
  bool bias = true;         // conv and inner_product
  bool fused_relu = false;  // conv, inner_product, batch_norm: ReLU applied to dst (a post-op)
  // Pooling's output size. ceil_mode (Caffe's rule): out = ceil((in + 2p - k) / s) + 1, clipped
  // so that the last window starts inside the input (plus padding). Otherwise floor (PyTorch's
  // default): out = floor((in + 2p - k) / s) + 1.
  bool ceil_mode = true;

  // lrn, Caffe's definitions (n = local_size, odd): across channels (the default),
  //   dst = src / (k + alpha/n * sum_{n channels centred on c} src^2)^beta;
  // within channel (lrn_within_channel, Caffe's WITHIN_CHANNEL region),
  //   dst = src / (k + alpha/n^2 * sum_{n x n window centred on (h, w), zero padded} src^2)^beta
  // (Caffe fixes k at 1 there: a net mirroring Caffe leaves k = 1).
  int64_t local_size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 1.f;
  bool lrn_within_channel = false;

  // batch_norm, PyTorch's definition, per channel c over the N x H x W values of the batch:
  //   dst = scale[c] * (src - mean[c]) / sqrt(var[c] + eps) + shift[c]
  // In training mean and var are the batch's (var biased), and the running statistics move:
  //   running = (1 - bn_momentum) * running + bn_momentum * batch_stat
  // with the batch variance unbiased there (times m / (m - 1), m = N*H*W; m = 1 counts as 1).
  // Not training: mean and var are the running statistics.
  float eps = 1e-5f;
  float bn_momentum = 0.1f;

  // dropout: in training, each element kept with probability 1-ratio and scaled by 1/(1-ratio);
  // identity when not training.
  float ratio = 0.5f;
  uint64_t seed = 0;
};

// "conv 8x20x12x12 nchw": the kind, src shape and layout (and " bf16" for bf16 activations), for
// log lines and refusals.
std::string describe_op(const OpDesc& d);

// Output shape; invalid descriptors are caught by validate().
Shape4 dst_shape(const OpDesc& d);
// Empty string when the descriptor is consistent, else what is wrong ("conv1: kernel 5x5
// larger than padded input 3x3").
std::string validate(const OpDesc& d);

// How many inputs a node of this kind takes: 1 + d.more_src.size() must lie in [min, max].
std::pair<int, int> input_range(OpKind k);
// The trailing parameters of param_shapes() that are state, not trained (batch norm's running
// mean and variance): a training forward() updates them in place through its `weights` (which
// the caller owns and may write: a replica's own arena), backward() writes their diff_weights as
// 0, and the update rules leave them (lr and decay multipliers 0). Averaging algorithms average
// them with the weights.
int state_params(const OpDesc& d);
// The name of parameter i ("weights", "bias", "scale", ...), for the arena's segment names.
std::string param_name(const OpDesc& d, size_t i);

// Parameter shapes in user format, in order:
//   conv:          weights {oc, ic/group, kh, kw} (oihw / goihw flattened), bias {oc}
//   inner_product: weights {oc, ic_total} where ic_total = C*H*W flattened in the src layout's
//                  own order (chw for nchw, hwc for nhwc), bias {oc}
//   batch_norm:    scale {c}, shift {c}, running_mean {c}, running_var {c} (the last two state)
//   others:        none
std::vector<std::vector<int64_t>> param_shapes(const OpDesc& d);
// Fan-in and fan-out of the weights (for xavier/msra fillers), {1,1} when there are none.
std::pair<int64_t, int64_t> fans(const OpDesc& d);
// Multiply-adds x2 of forward and of backward (data + weights gradients; without the data
// gradient when diff_src is false, as for a net's first layer), whole batch.
double forward_flops(const OpDesc& d);
double backward_flops(const OpDesc& d, bool diff_src = true);
// A ReLU directly after an op of this kind may be fused into its dst (OpDesc::fused_relu).
bool fuses_relu(OpKind k);

class Op {
 public:
  virtual ~Op() = default;
  // Which implementation runs: "ref", "dnnl:brgconv:avx512_core", ... (logged at set-up).
  virtual std::string impl() const = 0;
  const OpDesc& desc() const { return desc_; }

  // dst <- op(src). `weights` holds one pointer per param_shapes entry. A training forward of a
  // kind with state parameters (state_params() > 0: batch norm) writes those in place through
  // the const pointers (const_cast): the caller's buffers must be writable.
  virtual void forward(const float* src, float* dst, std::span<const float* const> weights,
                       bool training) = 0;
  // After forward() on the same src/dst: diff_src <- d loss/d src (skipped when nullptr) and
  // diff_weights[i] <- d loss/d weights[i] (overwritten, not accumulated). With fused_relu,
  // diff_dst is taken w.r.t. the post-ReLU dst.
  virtual void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                        std::span<const float* const> weights,
                        std::span<float* const> diff_weights) = 0;

  // The same for every kind, with all inputs: srcs[0] is src, srcs[1..] match desc().more_src;
  // diff_srcs has one entry per input (nullptr: skipped). Net calls these. The one-input kinds
  // need not override them; the kinds of several inputs override both (and forward/backward
  // then see only the first input).
  virtual void forward_n(std::span<const float* const> srcs, float* dst,
                         std::span<const float* const> weights, bool training) {
    forward(srcs[0], dst, weights, training);
  }
  // The kinds that draw random numbers (dropout): the next training forward is draw `n` of
  // stream `stream`, the one after it n + 1. The trainer passes each group's own stream and its
  // step count before every step, so that groups draw apart and a resumed run draws what the
  // uninterrupted one did. Without a call an op draws 0, 1, ... of stream 0.
  virtual void set_draw(uint64_t /*stream*/, uint64_t /*n*/) {}

  virtual void backward_n(std::span<const float* const> srcs, const float* dst,
                          const float* diff_dst, std::span<float* const> diff_srcs,
                          std::span<const float* const> weights,
                          std::span<float* const> diff_weights) {
    backward(srcs[0], dst, diff_dst, diff_srcs[0], weights, diff_weights);
  }

 protected:
  explicit Op(const OpDesc& d) : desc_(d) {}
  OpDesc desc_;
};

// The base of an implementation of a kind of several inputs (add, concat) on any device: Base
// is Op or a device's own Op subclass. The one-input entry points abort (Net calls
// forward_n/backward_n); inputs() and src_shape(i) name the inputs of the descriptor.
template <class Base>
class MultiInputOp : public Base {
 public:
  void forward(const float*, float*, std::span<const float* const>, bool) override {
    EASEL_CHECK_MSG(false, "an op of several inputs runs through forward_n");
  }
  void backward(const float*, const float*, const float*, float*, std::span<const float* const>,
                std::span<float* const>) override {
    EASEL_CHECK_MSG(false, "an op of several inputs runs through backward_n");
  }

 protected:
  using Base::Base;
  size_t inputs() const { return 1 + this->desc_.more_src.size(); }
  const Shape4& src_shape(size_t i) const {
    return i == 0 ? this->desc_.src : this->desc_.more_src[i - 1];
  }
};

// Softmax + cross-entropy over [N, classes] logits with int32 labels in [0, classes). The
// logits and diff_logits are activations of the device's Device::activation_type() (f32, or
// bf16: widened exactly, the softmax in f32, diff_logits rounded once); prob is f32.
class LossOp {
 public:
  virtual ~LossOp() = default;
  virtual std::string impl() const = 0;
  // prob <- softmax(logits); returns the SUM over the batch of -log prob[label] (n rows used,
  // n <= batch). Writes correct[0] += number of rows whose argmax equals the label.
  virtual double forward(const float* logits, const int32_t* labels, float* prob, int64_t n,
                         int64_t* correct) = 0;
  // diff_logits <- (prob - onehot(label)) * scale, for the first n rows (scale = 1/n for the
  // mean loss); rows past n are zeroed.
  virtual void backward(const float* prob, const int32_t* labels, float* diff_logits, int64_t n,
                        float scale) = 0;
};

}  // namespace easel
