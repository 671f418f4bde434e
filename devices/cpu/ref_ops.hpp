// Plain reference kernels for every op, written to be read: direct loops over the OpDesc,
// honouring both layouts, no blocking, no SIMD intrinsics. Every faster kernel is tested
// against these.
#pragma once

#include <memory>

#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

// The reference row of the CPU device's list for desc.kind (devices/cpu/cpu_op_list.cpp).
// Never refuses a descriptor that validate() accepts.
Result<std::unique_ptr<Op>> make_ref_op(const OpDesc& desc);

// The reference kernels, one per kind; each takes a valid descriptor of its kind.
Result<std::unique_ptr<Op>> make_ref_conv(const OpDesc& d);
Result<std::unique_ptr<Op>> make_ref_max_pool(const OpDesc& d);
Result<std::unique_ptr<Op>> make_ref_avg_pool(const OpDesc& d);
Result<std::unique_ptr<Op>> make_ref_inner_product(const OpDesc& d);
Result<std::unique_ptr<Op>> make_ref_relu(const OpDesc& d);
Result<std::unique_ptr<Op>> make_ref_lrn(const OpDesc& d);
Result<std::unique_ptr<Op>> make_ref_dropout(const OpDesc& d);
Result<std::unique_ptr<Op>> make_ref_batch_norm(const OpDesc& d);  // ref_batch_norm.cpp
Result<std::unique_ptr<Op>> make_ref_add(const OpDesc& d);         // ref_join.cpp
Result<std::unique_ptr<Op>> make_ref_concat(const OpDesc& d);      // ref_join.cpp
Result<std::unique_ptr<Op>> make_ref_global_avg_pool(const OpDesc& d);
// Softmax cross-entropy, own kernel (numerically stable: max subtracted), used by every CPU net.
std::unique_ptr<LossOp> make_cpu_loss(int64_t batch, int64_t classes);

}  // namespace easel
