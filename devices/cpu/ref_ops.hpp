// Plain reference kernels for every op, written to be read: direct loops over the OpDesc,
// honouring both layouts, no blocking, no SIMD intrinsics. Every faster kernel is tested
// against these.
#pragma once

#include <memory>

#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

// Never refuses a descriptor that validate() accepts.
Result<std::unique_ptr<Op>> make_ref_op(const OpDesc& desc);
// Softmax cross-entropy, own kernel (numerically stable: max subtracted), used by every CPU net.
std::unique_ptr<LossOp> make_cpu_loss(int64_t batch, int64_t classes);

}  // namespace easel
