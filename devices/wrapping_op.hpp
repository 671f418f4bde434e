// The base of the ops that wrap another op to convert its activations (bf16 around an f32 op:
// Bf16ActsOp on the CPU, Bf16Boundary on CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "devices/op.hpp"

namespace easel {

// Wraps an op of any kind (one input or several): the one-input entry points run through
// forward_n/backward_n, set_draw reaches the wrapped op. Its descriptor is the wrapped op's
// with activations of type `act`.
class WrappingOp : public Op {
 public:
  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool training) override {
    const float* srcs[] = {src};
    forward_n(srcs, dst, weights, training);
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const float* srcs[] = {src};
    float* diff_srcs[] = {diff_src};
    backward_n(srcs, dst, diff_dst, diff_srcs, weights, diff_weights);
  }
  void set_draw(uint64_t stream, uint64_t n) override { op_->set_draw(stream, n); }

 protected:
  // Requires op non-null.
  WrappingOp(std::unique_ptr<Op>&& op, DType act)
      : Op(with_act(op->desc(), act)), op_(std::move(op)) {}
  const Shape4& src_shape(size_t i) const { return i == 0 ? desc_.src : desc_.more_src[i - 1]; }
  int64_t dst_count() const { return dst_shape(desc_).count(); }

  std::unique_ptr<Op> op_;

 private:
  static OpDesc with_act(OpDesc d, DType act) {
    d.act = act;
    return d;
  }
};

}  // namespace easel
