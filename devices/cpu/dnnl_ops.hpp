// oneDNN (2.x API) implementations of the ops: primitives and memory descriptors created once
// per op at set-up, parameters read from the flat arena in user format (reordered inside when
// the primitive prefers a blocked format), workspaces owned by the op. Only dnnl_*.cpp include
// dnnl.hpp. make_dnnl_op refuses (Code::unavailable, with the reason) any descriptor it does not
// handle or for which oneDNN would pick a reference (`ref:`) kernel on the hot path.
#pragma once

#include <memory>

#include "devices/op.hpp"
#include "easel_config.h"
#include "engine/status.hpp"

namespace easel {

bool dnnl_available();  // built with oneDNN
Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc);

#if EASEL_HAVE_DNNL
// How a convolution computes its data gradient. automatic (what make_dnnl_op(desc) does):
// oneDNN's backward-data kernel on the net's layout unless it is a reference one, then a
// forward convolution of diff_dst with the transposed, flipped weights (stride 1 only), then
// blocked layouts with reorders. Tests and benchmarks may force one; a forced strategy is
// refused where it does not apply or would run a reference kernel. Ignored by other ops.
enum class DnnlConvBwdData { automatic, native, forward_flip, blocked };
Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc, DnnlConvBwdData conv_bwd_data);
#endif

}  // namespace easel
