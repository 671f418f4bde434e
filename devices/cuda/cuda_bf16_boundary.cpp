// bf16 activations around an f32 CUDA op: the kinds that have no bf16 kernel of their own (LRN,
// dropout, batch norm, the joins, global average pooling, and a convolution that cuDNN runs
// only in fp32) read bf16 inputs widened into f32 buffers of their own and write f32 results
// that are rounded once into the net's bf16 tensors (own conversion kernels). The arithmetic
// is the f32 op's; only the tensors between layers are bf16.
#include <string>
#include <vector>

#include "devices/cuda/cuda_ops.hpp"
#include "devices/cuda/op_kernels.hpp"

namespace easel {

namespace {

class Bf16Boundary final : public Op {
 public:
  Bf16Boundary(CudaContext& ctx, std::unique_ptr<Op> op)
      : Op(bf16_desc(op->desc())), ctx_(ctx), op_(std::move(op)) {}

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
  void set_draw(uint64_t stream, uint64_t n) override { op_->set_draw(stream, n); }

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
  static OpDesc bf16_desc(OpDesc d) {
    d.act = DType::bf16;
    return d;
  }
  static uint16_t* bits(float* p) { return reinterpret_cast<uint16_t*>(p); }
  static const uint16_t* bits(const float* p) { return reinterpret_cast<const uint16_t*>(p); }
  const Shape4& src_shape(size_t i) const { return i == 0 ? desc_.src : desc_.more_src[i - 1]; }
  int64_t dst_count() const { return dst_shape(desc_).count(); }
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
  std::unique_ptr<Op> op_;
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
