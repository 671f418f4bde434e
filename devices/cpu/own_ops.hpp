// easel's own fast CPU kernels for what oneDNN 2.6 does not do well (or at all): each a row of
// the CPU device's list (devices/cpu/cpu_op_list.cpp) between the oneDNN rows and the reference,
// tested against the reference in both layouts (tests/devices/test_dnnl_ops.cpp).
#pragma once

#include <memory>

#include "devices/cpu/dnnl_ops.hpp"
#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

// LRN within channel (Caffe's WITHIN_CHANNEL): separable box sums of the squares, vectorised
// along the contiguous axis of either layout. Refuses the across-channel region (oneDNN's).
Result<std::unique_ptr<Op>> make_own_lrn(const OpDesc& d, const DnnlOptions& options);

}  // namespace easel
