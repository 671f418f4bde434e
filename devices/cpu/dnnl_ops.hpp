// oneDNN (2.x API) implementations of the ops: primitives and memory descriptors created once
// per op at set-up, parameters read from the flat arena in user format (reordered inside when
// the primitive prefers a blocked format), workspaces owned by the op. Only dnnl_*.cpp include
// dnnl.hpp. make_dnnl_op refuses (Code::unavailable, with the reason) any descriptor it does not
// handle or for which oneDNN would pick a reference (`ref:`) kernel on the hot path.
#pragma once

#include <memory>

#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

bool dnnl_available();  // built with oneDNN
Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc);

}  // namespace easel
