// The CPU device's implementations of the ops, in one explicit, ordered list (oneDNN's
// *_list.cpp idea): for each kind its rows in order of preference, oneDNN first, the reference
// last (it never refuses a valid descriptor). A row's factory returns the op, or why it does not
// apply (Code::unavailable with the reason); make_cpu_op logs every refusal once and tries the
// next row of the kind.
#pragma once

#include <memory>
#include <span>

#include "devices/cpu/dnnl_ops.hpp"
#include "devices/device.hpp"
#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

struct CpuOpImpl {
  OpKind kind;
  const char* name;  // the implementation family, "dnnl" or "ref" (in the refusal logs)
  bool fast_only;    // skipped under ImplChoice::ref
  Result<std::unique_ptr<Op>> (*make)(const OpDesc& d, const DnnlOptions& options);
};

std::span<const CpuOpImpl> cpu_op_list();

// The first row of desc.kind that builds an op (fast_only rows skipped under ImplChoice::ref),
// after validate(). A refused row is logged once (info when unavailable, else warn) with its
// reason; a kind with no fast row under ImplChoice::fast is logged as oneDNN refusing it, so the
// reference never runs silently. Returns the last refusal when every row refuses.
Result<std::unique_ptr<Op>> make_cpu_op(const OpDesc& desc, ImplChoice choice,
                                        const DnnlOptions& options);

}  // namespace easel
