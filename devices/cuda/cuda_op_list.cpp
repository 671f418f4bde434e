// The CUDA device's ordered list of op implementations, and make_cuda_op's walk over it: per
// kind, cuDNN or cuBLAS first where they apply, easel's own kernels after, each refusal logged
// once with its reason. There is no reference fallback here: the CPU's reference kernels cannot
// read device memory.
#include <string>

#include "devices/cuda/cuda_ops.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

struct CudaOpImpl {
  OpKind kind;
  const char* name;  // in the refusal logs and the error when nothing applies
  Result<std::unique_ptr<Op>> (*make)(CudaContext&, const OpDesc&);
};

// Per kind, in order of preference. Adding an implementation: its factory (one file, or one
// section of an op file, declared in cuda_ops.hpp) and one row here.
constexpr CudaOpImpl kOpImpls[] = {
    {OpKind::conv, "cudnn", make_cudnn_conv},
    {OpKind::conv, "cudnn-ohwi", make_cudnn_conv_ohwi},
    {OpKind::max_pool, "cudnn", make_cudnn_pool},
    {OpKind::max_pool, "own", make_own_pool},
    {OpKind::avg_pool, "cudnn", make_cudnn_pool},
    {OpKind::avg_pool, "own", make_own_pool},
    {OpKind::inner_product, "cublas", make_cublas_ip},
    {OpKind::relu, "own", make_own_relu},
    {OpKind::lrn, "cudnn", make_cudnn_lrn},
    {OpKind::lrn, "own", make_own_lrn},
    {OpKind::dropout, "own", make_own_dropout},
    {OpKind::batch_norm, "cudnn", make_cudnn_batch_norm},
    {OpKind::batch_norm, "own", make_own_batch_norm},
    {OpKind::add, "own", make_own_add},
    {OpKind::concat, "own", make_own_concat},
    {OpKind::global_avg_pool, "own", make_own_global_avg_pool},
};

// The kinds whose implementations read and write bf16 activations themselves.
bool takes_bf16(OpKind k) {
  return k == OpKind::conv || k == OpKind::inner_product || k == OpKind::relu ||
         k == OpKind::max_pool || k == OpKind::avg_pool;
}

Result<std::unique_ptr<Op>> walk(CudaContext& ctx, const OpDesc& desc) {
  std::string refusals;  // every reason, for the error when nothing applies
  Code code = Code::internal;
  for (const CudaOpImpl& impl : kOpImpls) {
    if (impl.kind != desc.kind) continue;
    Result<std::unique_ptr<Op>> op = impl.make(ctx, desc);
    if (op.ok()) {
      log_debug("cuda", describe_op(desc) + ": " + op.value()->impl());
      return op;
    }
    const Status& s = op.status();
    if (refusals.empty()) code = s.code();
    refusals += std::string(refusals.empty() ? "" : "; ") + impl.name + ": " + s.message();
    const LogLevel level = s.code() == Code::unavailable ? LogLevel::info : LogLevel::warn;
    log_once(level, "cuda", std::string(impl.name) + ":" + s.message(),
             describe_op(desc) + ": " + impl.name + " refused (" + s.to_string() +
                 "), trying the next implementation");
  }
  return Status(code, describe_op(desc) + ": no CUDA implementation applies (" +
                          (refusals.empty() ? std::string("none listed") : refusals) + ")");
}

}  // namespace

Result<std::unique_ptr<Op>> make_cuda_op(CudaContext& ctx, const OpDesc& desc) {
  if (std::string why = validate(desc); !why.empty()) return invalid_argument(why);
  const DType want = ctx.precision == Precision::bf16 ? DType::bf16 : DType::f32;
  if (desc.act != want)
    return invalid_argument(describe_op(desc) + ": the CUDA device at --precision " +
                            precision_name(ctx.precision) + " keeps " + dtype_name(want) +
                            " activations");
  if (ctx.precision == Precision::tf32)
    log_once(LogLevel::info, "cuda", "precision-ops",
             "--precision tf32: convolutions (cuDNN) and inner products (cuBLAS) on tensor cores "
             "with f32 accumulation; pooling, normalization, the loss and the update stay fp32");
  if (ctx.precision == Precision::bf16)
    log_once(LogLevel::info, "cuda", "precision-ops",
             "--precision bf16: bf16 activations and gradients between layers; convolutions "
             "(cuDNN) and inner products (cuBLAS) on tensor cores with f32 accumulation; "
             "ReLU and pooling in bf16; LRN, dropout, batch norm and joins in f32 between "
             "conversions; the loss's softmax, master weights, gradients, momentum and the "
             "exchange f32");
  if (desc.act == DType::f32 || takes_bf16(desc.kind)) return walk(ctx, desc);
  OpDesc f32 = desc;
  f32.act = DType::f32;
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, walk(ctx, f32));
  return with_bf16_boundary(ctx, std::move(op));
}

}  // namespace easel
