// easel's own fast CPU kernels for what oneDNN 2.6 does not do well (or at all): each a row of
// the CPU device's list (devices/cpu/cpu_op_list.cpp) between the oneDNN rows and the reference,
// tested against the reference in both layouts (tests/devices/test_dnnl_ops.cpp) or, where the
// result is random, for its properties (tests/devices/test_own_ops.cpp).
#pragma once

#include <memory>

#include "devices/cpu/dnnl_ops.hpp"
#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

// LRN in both regions (Caffe's ACROSS_CHANNELS and WITHIN_CHANNEL): box sums of the squares as
// shifted adds of contiguous rows, vectorised in either layout. Accepts every valid descriptor;
// it runs where oneDNN has no JIT kernel (across channels on AVX2, within channel anywhere).
Result<std::unique_ptr<Op>> make_own_lrn(const OpDesc& d, const DnnlOptions& options);

// Dropout with a counter-based mask (devices/dropout_hash.hpp) in logical (n, c, h, w) order:
// parallel, vectorised, the same mask in both layouts and for any thread count. Accepts every
// valid descriptor.
Result<std::unique_ptr<Op>> make_own_dropout(const OpDesc& d, const DnnlOptions& options);

}  // namespace easel
