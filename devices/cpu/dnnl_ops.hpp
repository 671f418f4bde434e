// oneDNN (2.x API) implementations of the ops: primitives and memory descriptors created once
// per op at set-up, parameters read from the flat arena in user format (reordered inside when
// the primitive prefers a blocked format), workspaces owned by the op. Only dnnl_*.cpp include
// dnnl.hpp. make_dnnl_op refuses (Code::unavailable, with the reason) any descriptor it does not
// handle or for which oneDNN would pick a reference (`ref:`) kernel on the hot path.
#pragma once

#include <memory>
#include <string>

#include "devices/device.hpp"
#include "devices/op.hpp"
#include "easel_config.h"
#include "engine/status.hpp"

namespace easel {

// How a convolution computes its data gradient. automatic: gemm (below) in nhwc with one
// group, else oneDNN's backward-data kernel on the net's layout unless it is a reference one, then
// a forward convolution of diff_dst with the transposed, flipped weights (stride 1 only), then
// blocked layouts with reorders. Tests and benchmarks may force one; a forced strategy is refused
// where it does not apply or would run a reference kernel. gemm (nhwc, one group): a matmul of
// diff_dst with the weights into columns, then col2im. Ignored by other ops.
enum class DnnlConvBwdData { automatic, native, forward_flip, blocked, gemm };

// Choices of the oneDNN ops; the defaults are what the CPU device uses.
struct DnnlOptions {
  Precision precision = Precision::fp32;
  DnnlConvBwdData conv_bwd_data = DnnlConvBwdData::automatic;
  // bf16: each convolution and inner product is timed at bf16 and fp32 when built and keeps the
  // faster (the CPU device's default; off here, for tests that want the bf16 kernels).
  bool bf16_per_layer = false;
};

bool dnnl_available();       // built with oneDNN
bool dnnl_bf16_available();  // built with oneDNN and the CPU computes bf16 natively
bool dnnl_amx_available();   // ... with AMX tiles (oneDNN's avx512_core_amx)
// Built with oneDNN and its kernels may use AVX-512 (avx512_core or above): below it (AVX2)
// oneDNN 2.6 has no JIT kernel for LRN across channels, and easel's own one runs.
bool dnnl_avx512_available();
// "2.6.3, its kernels for avx512_core_bf16 on this CPU" (the ISA oneDNN dispatches to here), or
// why there is none.
std::string dnnl_version_line();
// The floats of one vector of the ISA oneDNN runs its kernels at (ONEDNN_MAX_CPU_ISA included):
// 16 for AVX-512, 8 for AVX and AVX2, 4 for SSE4.1; 1 without oneDNN.
int dnnl_vector_floats();
// The oneDNN rows of the CPU device's list (devices/cpu/cpu_op_list.cpp) for desc.kind, in
// order: the first that accepts desc, else the last refusal (unavailable: "easel was built
// without oneDNN" or "<kind>: no oneDNN primitive" when no row applies).
Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc);
Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc, DnnlConvBwdData conv_bwd_data);

// The oneDNN implementations, one per kind (only in builds with oneDNN; listed in
// devices/cpu/cpu_op_list.cpp). Each takes a valid descriptor of its kind.
Result<std::unique_ptr<Op>> make_dnnl_conv(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_pool(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_inner_product(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_relu(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_lrn(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_batch_norm(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_add(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_concat(const OpDesc& d, const DnnlOptions& options);
Result<std::unique_ptr<Op>> make_dnnl_global_avg_pool(const OpDesc& d, const DnnlOptions& options);
// Refuses, saying why oneDNN has nothing for dropout.
Result<std::unique_ptr<Op>> refuse_dnnl_dropout(const OpDesc& d, const DnnlOptions& options);

// The CPU device with explicit oneDNN options (benchmarks and tests; make_cpu_device(choice,
// precision) is this with the default strategies).
std::unique_ptr<Device> make_cpu_device(ImplChoice choice, const DnnlOptions& options);

}  // namespace easel
