// Convolution with cuDNN: cross-correlation, groups, both layouts (the tensors' own format), the
// weights in the arena's oihw format (an NCHW filter) or, where cuDNN takes no NCHW filter with
// NHWC activations, transposed to ohwi each step (make_cudnn_conv_ohwi). The three algorithms
// are chosen once at creation from cuDNN's heuristics (cudnnGet*Algorithm_v7): the first one
// that cuDNN says is supported, fits kMaxWorkspaceBytes, runs once on scratch buffers of the
// op's shapes and, at fp32, computes in plain FMA arithmetic (no TF32 tensor-op math, which
// would break agreement with the reference). One workspace of the largest chosen size is
// allocated then. The precision (CudaContext::precision): fp32 CUDNN_FMA_MATH; tf32 the same
// f32 tensors with CUDNN_DEFAULT_MATH (TF32 tensor cores allowed, as PyTorch's
// allow_tf32); bf16 the net's bf16 activations as they are (src, dst, diff_dst, diff_src) and a
// bf16 copy of the weights, f32 compute (cuDNN's pseudo-bf16 configuration) on tensor cores;
// the bias and fused ReLU applied to the bf16 dst by an own kernel (f32 arithmetic, rounded
// once), the bias gradient summed in double, the weight gradient (bf16, cuDNN's data type)
// widened into the f32 arena.
#include <algorithm>
#include <string>
#include <vector>

#include "devices/cuda/cuda_ops.hpp"
#include "devices/cuda/op_kernels.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;
const float kOne = 1.f, kZero = 0.f;

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "UNKNOWN";
  }
}

const char* algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "UNKNOWN";
  }
}

const char* algo_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "FFT_TILING";
    default:
      return "UNKNOWN";
  }
}

std::string mib(size_t bytes) {
  return std::to_string((bytes + (size_t{1} << 20) - 1) >> 20) + " MiB";
}

// The chosen algorithm of one direction and its workspace size.
template <typename Algo>
struct Chosen {
  Algo algo{};
  size_t bytes = 0;
};

// Walks the heuristics' candidates in their order and returns the first usable one (see the
// file comment), deterministic algorithms first (cuDNN's atomics-based backward algorithms would
// make GPU runs differ from run to run), any other only when no deterministic one is usable.
// size(algo, &bytes) asks cuDNN for its workspace, run(algo, ws, bytes) runs it once on the scratch
// buffers; a candidate either call fails for is skipped, its status kept in the refusal reason
// (these two are the only cuDNN calls whose failure is not an error).
template <typename Perf, typename Size, typename Run>
auto pick(const char* direction, const std::vector<Perf>& perf, int count, CudaContext& ctx,
          bool tensor_ops, Size size, Run run) -> Result<Chosen<decltype(Perf{}.algo)>> {
  std::string why;
  auto reject = [&](const Perf& p, const std::string& reason) {
    why += std::string(why.empty() ? "" : "; ") + algo_name(p.algo) + ": " + reason;
  };
  for (int i = 0; i < 2 * count; ++i) {
    const bool deterministic_pass = i < count;
    const Perf& p = perf[static_cast<size_t>(i % count)];
    if ((p.determinism == CUDNN_DETERMINISTIC) != deterministic_pass) {
      if (deterministic_pass) reject(p, "not deterministic (tried after the deterministic ones)");
      continue;
    }
    if (p.status != CUDNN_STATUS_SUCCESS) {
      reject(p, cudnnGetErrorString(p.status));
      continue;
    }
    if (!tensor_ops && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                        p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) {
      reject(p, "tensor-op (TF32) math only");
      continue;
    }
    size_t bytes = 0;
    if (const cudnnStatus_t s = size(p.algo, &bytes); s != CUDNN_STATUS_SUCCESS) {
      reject(p, std::string("workspace size: ") + cudnnGetErrorString(s));
      continue;
    }
    bytes = std::max(bytes, p.memory);
    if (bytes > kMaxWorkspaceBytes) {
      reject(p, "workspace " + mib(bytes) + " over the " + mib(kMaxWorkspaceBytes) + " cap");
      continue;
    }
    Result<Buffer> ws = Buffer::allocate(bytes, MemKind::device);
    if (!ws.ok()) {
      reject(p, ws.status().message());
      continue;
    }
    if (const cudnnStatus_t s = run(p.algo, ws->data(), bytes); s != CUDNN_STATUS_SUCCESS) {
      reject(p, std::string("trial run: ") + cudnnGetErrorString(s));
      continue;
    }
    EASEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream));  // before ws is freed
    if (!why.empty())
      log_debug("cuda", std::string("cudnn ") + direction + ": skipped " + why + "; chose " +
                            algo_name(p.algo));
    if (!deterministic_pass)
      log_once(LogLevel::warn, "cuda", std::string("nondeterministic-") + direction,
               std::string("cudnn ") + direction + ": no deterministic algorithm is usable; " +
                   algo_name(p.algo) + " may sum in a different order from run to run");
    return Chosen<decltype(Perf{}.algo)>{p.algo, bytes};
  }
  return unavailable(std::string("no usable cuDNN ") + direction + " algorithm (" +
                     (why.empty() ? "the heuristics returned none" : why) + ")");
}

class CudnnConv final : public Op {
 public:
  CudnnConv(CudaContext& ctx, const OpDesc& d, bool ohwi, Precision precision)
      : Op(d),
        ctx_(ctx),
        ohwi_(ohwi),
        o_(dst_shape(d)),
        precision_(precision),
        bf16_(precision == Precision::bf16 && d.act == DType::bf16),
        dt_(bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT) {}

  Status init() {
    const OpDesc& d = desc_;
    icg_ = d.src.c / d.group;
    w_count_ = d.oc * icg_ * d.kh * d.kw;
    if (!fits_int(w_count_) || !fits_int(d.pad_h) || !fits_int(d.pad_w) || !fits_int(d.stride_h) ||
        !fits_int(d.stride_w) || !fits_int(d.group))
      return unavailable("sizes beyond cuDNN's int arguments");
    EASEL_RETURN_IF_ERROR(make_tensor_desc(y_, o_, d.layout));
    EASEL_RETURN_IF_ERROR(make_tensor_desc(xc_, d.src, d.layout, dt_));
    EASEL_RETURN_IF_ERROR(make_tensor_desc(yc_, o_, d.layout, dt_));
    EASEL_RETURN_IF_ERROR(make_tensor_desc(bias_, {1, d.oc, 1, 1}, Layout::nchw));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(w_.out()));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(
        w_.get(), dt_, ohwi_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, static_cast<int>(d.oc),
        static_cast<int>(icg_), static_cast<int>(d.kh), static_cast<int>(d.kw)));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(conv_.out()));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
        conv_.get(), static_cast<int>(d.pad_h), static_cast<int>(d.pad_w),
        static_cast<int>(d.stride_h), static_cast<int>(d.stride_w), 1, 1, CUDNN_CROSS_CORRELATION,
        CUDNN_DATA_FLOAT));
    EASEL_CUDNN_RETURN_IF_ERROR(
        cudnnSetConvolutionGroupCount(conv_.get(), static_cast<int>(d.group)));
    const cudnnMathType_t math = precision_ == Precision::fp32   ? CUDNN_FMA_MATH
                                 : precision_ == Precision::tf32 ? CUDNN_DEFAULT_MATH
                                                                 : CUDNN_TENSOR_OP_MATH;
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv_.get(), math));
    int n = 0, c = 0, h = 0, w = 0;
    EASEL_CUDNN_RETURN_IF_ERROR(
        cudnnGetConvolution2dForwardOutputDim(conv_.get(), xc_.get(), w_.get(), &n, &c, &h, &w));
    if (Shape4{n, c, h, w} != o_)
      return internal_error("output " + Shape4{n, c, h, w}.to_string() + " differs from " +
                            o_.to_string());

    EASEL_RETURN_IF_ERROR(choose_algorithms());
    EASEL_ASSIGN_OR_RETURN(workspace_, Buffer::allocate(workspace_bytes_, MemKind::device));
    if (d.fused_relu && !bf16_) {
      EASEL_ASSIGN_OR_RETURN(masked_, device_array<float>(o_.count()));
    }
    if (ohwi_) {
      EASEL_ASSIGN_OR_RETURN(w_t_, device_array<float>(w_count_));
      EASEL_ASSIGN_OR_RETURN(dw_t_, device_array<float>(w_count_));
    }
    if (bf16_) {
      if (d.fused_relu) {
        EASEL_ASSIGN_OR_RETURN(masked_, device_array<uint16_t>(o_.count()));
      }
      EASEL_ASSIGN_OR_RETURN(w_bf_, device_array<uint16_t>(w_count_));
      EASEL_ASSIGN_OR_RETURN(dw_bf_, device_array<uint16_t>(w_count_));
      channels_ = {o_.n, o_.c, o_.h, o_.w, d.layout == Layout::nhwc};
    }
    impl_ = std::string("cudnn") + (precision_ == Precision::fp32 ? "" : "-") +
            (precision_ == Precision::fp32 ? "" : precision_name(precision_)) +
            ":fwd=" + algo_name(fwd_algo_) + ",bwd_d=" + algo_name(bwd_data_algo_) +
            ",bwd_w=" + algo_name(bwd_filter_algo_) + (ohwi_ ? ",filter=ohwi" : "") +
            ",ws=" + mib(workspace_bytes_);
    return {};
  }

  std::string impl() const override { return impl_; }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    const void* w = cudnn_weights(weights[0]);
    EASEL_CUDNN_CHECK(cudnnConvolutionForward(ctx_.cudnn, &kOne, xc_.get(), src, w_.get(), w,
                                              conv_.get(), fwd_algo_, workspace_.data(),
                                              workspace_bytes_, &kZero, yc_.get(), dst));
    if (bf16_) {
      cuda_kernels::channel_bias_relu(ctx_.stream, channels_, bits(dst),
                                      desc_.bias ? weights[1] : nullptr, desc_.fused_relu);
      return;
    }
    if (desc_.bias)
      EASEL_CUDNN_CHECK(
          cudnnAddTensor(ctx_.cudnn, &kOne, bias_.get(), weights[1], &kOne, y_.get(), dst));
    if (desc_.fused_relu) cuda_kernels::relu_forward(ctx_.stream, dst, dst, o_.count());
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const float* g = diff_dst;
    if (desc_.fused_relu) {  // the gradient reaching the pre-activation output
      if (bf16_)
        cuda_kernels::relu_backward(ctx_.stream, bits(dst), bits(diff_dst), masked_.as<uint16_t>(),
                                    o_.count());
      else
        cuda_kernels::relu_backward(ctx_.stream, dst, diff_dst, masked_.as<float>(), o_.count());
      g = masked_.as<float>();
    }
    if (desc_.bias) {
      if (bf16_)
        cuda_kernels::channel_sums(ctx_.stream, channels_, bits(g), diff_weights[1]);
      else
        EASEL_CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx_.cudnn, &kOne, y_.get(), g, &kZero,
                                                       bias_.get(), diff_weights[1]));
    }
    float* dw = ohwi_ ? dw_t_.as<float>() : diff_weights[0];
    void* dwc = bf16_ ? dw_bf_.data() : static_cast<void*>(dw);
    EASEL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        ctx_.cudnn, &kOne, xc_.get(), src, yc_.get(), g, conv_.get(), bwd_filter_algo_,
        workspace_.data(), workspace_bytes_, &kZero, w_.get(), dwc));
    if (bf16_) cuda_kernels::from_bf16(ctx_.stream, dw_bf_.as<uint16_t>(), dw, w_count_);
    if (ohwi_)
      cuda_kernels::transpose_filter(ctx_.stream, dw, diff_weights[0], desc_.oc, icg_, desc_.kh,
                                     desc_.kw, /*to_ohwi=*/false);
    if (diff_src == nullptr) return;
    const void* w = cudnn_weights(weights[0]);
    EASEL_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx_.cudnn, &kOne, w_.get(), w, yc_.get(), g,
                                                   conv_.get(), bwd_data_algo_, workspace_.data(),
                                                   workspace_bytes_, &kZero, xc_.get(), diff_src));
  }

 private:
  static uint16_t* bits(float* p) { return reinterpret_cast<uint16_t*>(p); }
  static const uint16_t* bits(const float* p) { return reinterpret_cast<const uint16_t*>(p); }

  // The weights as the filter descriptor describes them: the arena's, or an ohwi copy; in
  // bf16, that rounded into w_bf_.
  const void* cudnn_weights(const float* w) {
    if (ohwi_) {
      cuda_kernels::transpose_filter(ctx_.stream, w, w_t_.as<float>(), desc_.oc, icg_, desc_.kh,
                                     desc_.kw, /*to_ohwi=*/true);
      w = w_t_.as<float>();
    }
    if (!bf16_) return w;
    cuda_kernels::to_bf16(ctx_.stream, w, w_bf_.as<uint16_t>(), w_count_);
    return w_bf_.data();
  }

  // The three algorithms, each tried once on zeroed scratch tensors of the op's shapes.
  Status choose_algorithms() {
    cudnnHandle_t h = ctx_.cudnn;
    EASEL_ASSIGN_OR_RETURN(Buffer x, device_array<float>(desc_.src.count()));
    EASEL_ASSIGN_OR_RETURN(Buffer y, device_array<float>(o_.count()));
    EASEL_ASSIGN_OR_RETURN(Buffer wt, device_array<float>(w_count_));
    EASEL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x.data(), 0, x.bytes(), ctx_.stream));
    EASEL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y.data(), 0, y.bytes(), ctx_.stream));
    EASEL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(wt.data(), 0, wt.bytes(), ctx_.stream));
    int max_count = 0, count = 0;

    EASEL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<size_t>(std::max(max_count, 1)));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(
        h, xc_.get(), w_.get(), conv_.get(), yc_.get(), max_count, &count, fwd.data()));
    EASEL_ASSIGN_OR_RETURN(
        auto f, pick(
                    "forward", fwd, count, ctx_, precision_ != Precision::fp32,
                    [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
                      return cudnnGetConvolutionForwardWorkspaceSize(
                          h, xc_.get(), w_.get(), conv_.get(), yc_.get(), a, bytes);
                    },
                    [&](cudnnConvolutionFwdAlgo_t a, void* ws, size_t bytes) {
                      return cudnnConvolutionForward(h, &kOne, xc_.get(), x.data(), w_.get(),
                                                     wt.data(), conv_.get(), a, ws, bytes, &kZero,
                                                     yc_.get(), y.data());
                    }));

    EASEL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_d(
        static_cast<size_t>(std::max(max_count, 1)));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, w_.get(), yc_.get(), conv_.get(), xc_.get(), max_count, &count, bwd_d.data()));
    EASEL_ASSIGN_OR_RETURN(
        auto bd, pick(
                     "backward-data", bwd_d, count, ctx_, precision_ != Precision::fp32,
                     [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
                       return cudnnGetConvolutionBackwardDataWorkspaceSize(
                           h, w_.get(), yc_.get(), conv_.get(), xc_.get(), a, bytes);
                     },
                     [&](cudnnConvolutionBwdDataAlgo_t a, void* ws, size_t bytes) {
                       return cudnnConvolutionBackwardData(h, &kOne, w_.get(), wt.data(), yc_.get(),
                                                           y.data(), conv_.get(), a, ws, bytes,
                                                           &kZero, xc_.get(), x.data());
                     }));

    EASEL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_w(
        static_cast<size_t>(std::max(max_count, 1)));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, xc_.get(), yc_.get(), conv_.get(), w_.get(), max_count, &count, bwd_w.data()));
    EASEL_ASSIGN_OR_RETURN(auto bw,
                           pick(
                               "backward-filter", bwd_w, count, ctx_, precision_ != Precision::fp32,
                               [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
                                 return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                     h, xc_.get(), yc_.get(), conv_.get(), w_.get(), a, bytes);
                               },
                               [&](cudnnConvolutionBwdFilterAlgo_t a, void* ws, size_t bytes) {
                                 return cudnnConvolutionBackwardFilter(
                                     h, &kOne, xc_.get(), x.data(), yc_.get(), y.data(),
                                     conv_.get(), a, ws, bytes, &kZero, w_.get(), wt.data());
                               }));

    fwd_algo_ = f.algo;
    bwd_data_algo_ = bd.algo;
    bwd_filter_algo_ = bw.algo;
    workspace_bytes_ = std::max({f.bytes, bd.bytes, bw.bytes});
    return {};
  }

  CudaContext& ctx_;
  const bool ohwi_;            // the filter descriptor is NHWC (ohwi): weights transposed each step
  const Shape4 o_;             // dst shape
  const Precision precision_;  // the context's, or fp32 where cuDNN had nothing at it
  const bool bf16_;            // bf16 activations and a bf16 copy of the weights
  const cudnnDataType_t dt_;   // what they read and write: bf16 or float
  int64_t icg_ = 0, w_count_ = 0;
  TensorDesc y_, bias_;  // dst (and diff_dst) and bias {1, oc, 1, 1} in f32: bias add, gradient
  TensorDesc xc_, yc_;   // src (diff_src) and dst (diff_dst) as the convolutions see them (dt_)
  FilterDesc w_;
  ConvDesc conv_;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  Buffer workspace_;  // the largest of the three chosen algorithms' workspaces
  size_t workspace_bytes_ = 0;
  // fused ReLU: diff_dst where dst > 0, else 0 (dst's shape and layout, the activations' type)
  Buffer masked_;
  Buffer w_t_, dw_t_;    // ohwi: the weights and their gradient in the filter's layout
  Buffer w_bf_, dw_bf_;  // bf16: the weights (in the filter's layout) and their gradient
  cuda_kernels::ChannelShape channels_;  // bf16: dst's, for the bias and its gradient
  std::string impl_;
};

// At the context's precision; where cuDNN has no usable algorithm at tf32/bf16 for the shape
// (bf16 wants channel counts its tensor-core kernels take), the last row of the list for the
// layout (the ohwi filter for nhwc, the oihw one for nchw) computes fp32 and says so once.
Result<std::unique_ptr<Op>> make(CudaContext& ctx, const OpDesc& d, bool ohwi) {
  const bool last_row = ohwi || d.layout == Layout::nchw;
  auto op = std::make_unique<CudnnConv>(ctx, d, ohwi, ctx.precision);
  Status s = op->init();
  if (s.ok()) return std::unique_ptr<Op>(std::move(op));
  if (ctx.precision == Precision::fp32 || !last_row || s.code() != Code::unavailable) return s;
  log_once(LogLevel::info, "cuda", "precision-fallback:" + describe_op(d),
           std::string("--precision ") + precision_name(ctx.precision) + ": " + describe_op(d) +
               " stays fp32 (" + s.message() + ")");
  OpDesc f32 = d;
  f32.act = DType::f32;  // bf16 activations: converted at the op's boundary
  op = std::make_unique<CudnnConv>(ctx, f32, ohwi, Precision::fp32);
  EASEL_RETURN_IF_ERROR(op->init());
  if (d.act == DType::f32) return std::unique_ptr<Op>(std::move(op));
  return with_bf16_boundary(ctx, std::move(op));
}

}  // namespace

Result<std::unique_ptr<Op>> make_cudnn_conv(CudaContext& ctx, const OpDesc& d) {
  return make(ctx, d, /*ohwi=*/false);
}

Result<std::unique_ptr<Op>> make_cudnn_conv_ohwi(CudaContext& ctx, const OpDesc& d) {
  if (d.layout != Layout::nhwc)
    return unavailable("only for nhwc activations (nchw takes the oihw filter as is)");
  return make(ctx, d, /*ohwi=*/true);
}

}  // namespace easel
