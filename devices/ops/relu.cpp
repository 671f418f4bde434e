// ReLU (negative slope 0): dst = max(src, 0), element-wise; no parameters.
#include "devices/ops/op_def.hpp"

namespace easel {

const OpDef kReluDef{
    .kind = OpKind::relu,
    .name = "relu",
    .forward_flops = dst_count_flops,
};

}  // namespace easel
