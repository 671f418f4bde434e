// bf16 activations around an f32 CUDA op: the kinds that have no bf16 kernel of their own (LRN,
// dropout, batch norm, the joins, global average pooling, and a convolution that cuDNN runs
// only in fp32) read bf16 inputs widened into f32 buffers of their own and write f32 results
// that are rounded once into the net's bf16 tensors (own conversion kernels). The arithmetic
// is the f32 op's; only the tensors between layers are bf16.
#include <string>
#include <vector>

#include "devices/cuda/cuda_ops.hpp"
#include "devices/cuda/op_kernels.hpp"
#include "devices/wrapping_op.hpp"

namespace easel {

namespace {

class Bf16Boundary final : public WrappingOp {
 public:
  Bf16Boundary(CudaContext& ctx, std::unique_ptr<Op> op)
      : WrappingOp(std::move(op), DType::bf16), ctx_(ctx) {}

  Status init() {
    const size_t inputs = 1 + desc_.more_src.size();
    for (size_t i = 0; i < inputs; ++i) {
      EASEL_ASSIGN_OR_RETURN(Buffer s, device_array<float>(src_shape(i).count()));
      EASEL_ASSIGN_OR_RETURN(Buffer ds, device_array<float>(src_shape(i).count()));
      srcs_.push_back(std::move(s));
      diff_srcs_.push_back(std::move(ds));
    }
    EASEL_ASSIGN_OR_RETURN(dst_, device_array<float>(dst_count()));
    EASEL_ASSIGN_OR_RETURN(diff_dst_, device_array<float>(dst_count()));
    return {};
  }
  std::string impl() const override { return op_->impl() + "+bf16-boundary"; }

  void forward_n(std::span<const float* const> srcs, float* dst,
                 std::span<const float* const> weights, bool training) override {
    const std::vector<const float*> s = widen_srcs(srcs);
    op_->forward_n(s, dst_.as<float>(), weights, training);
    cuda_kernels::to_bf16(ctx_.stream, dst_.as<float>(), bits(dst), dst_count());
  }

  void backward_n(std::span<const float* const> srcs, const float* dst, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const> weights,
                  std::span<float* const> diff_weights) override {
    const std::vector<const float*> s = widen_srcs(srcs);
    cuda_kernels::from_bf16(ctx_.stream, bits(dst), dst_.as<float>(), dst_count());
    cuda_kernels::from_bf16(ctx_.stream, bits(diff_dst), diff_dst_.as<float>(), dst_count());
    std::vector<float*> ds(diff_srcs.size(), nullptr);
    for (size_t i = 0; i < ds.size(); ++i)
      if (diff_srcs[i] != nullptr) ds[i] = diff_srcs_[i].as<float>();
    op_->backward_n(s, dst_.as<float>(), diff_dst_.as<float>(), ds, weights, diff_weights);
    for (size_t i = 0; i < ds.size(); ++i)
      if (ds[i] != nullptr)
        cuda_kernels::to_bf16(ctx_.stream, ds[i], bits(diff_srcs[i]), src_shape(i).count());
  }

 private:
  static uint16_t* bits(float* p) { return reinterpret_cast<uint16_t*>(p); }
  static const uint16_t* bits(const float* p) { return reinterpret_cast<const uint16_t*>(p); }
  std::vector<const float*> widen_srcs(std::span<const float* const> srcs) {
    std::vector<const float*> out(srcs.size());
    for (size_t i = 0; i < srcs.size(); ++i) {
      cuda_kernels::from_bf16(ctx_.stream, bits(srcs[i]), srcs_[i].as<float>(),
                              src_shape(i).count());
      out[i] = srcs_[i].as<float>();
    }
    return out;
  }

  CudaContext& ctx_;
  std::vector<Buffer> srcs_, diff_srcs_;  // f32 [per input]: the widened src, diff_src written
  Buffer dst_, diff_dst_;                 // f32: dst (written, then widened again), diff_dst
};

}  // namespace

Result<std::unique_ptr<Op>> with_bf16_boundary(CudaContext& ctx, std::unique_ptr<Op> op) {
  auto b = std::make_unique<Bf16Boundary>(ctx, std::move(op));
  EASEL_RETURN_IF_ERROR(b->init());
  return std::unique_ptr<Op>(std::move(b));
}

}  // namespace easel
