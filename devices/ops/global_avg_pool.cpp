// Global average pooling: the mean over H x W of every channel, dst {n, c, 1, 1} (ResNet's and
// GoogLeNet's head). No parameters, no window fields.
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

Shape4 global_avg_pool_dst(const OpDesc& d) {
  return {d.src.n, d.src.c, 1, 1};
}

// One add per src element.
double global_avg_pool_flops(const OpDesc& d) {
  return static_cast<double>(d.src.count());
}

}  // namespace

const OpDef kGlobalAvgPoolDef{
    .kind = OpKind::global_avg_pool,
    .name = "global_avg_pool",
    .dst_shape = global_avg_pool_dst,
    .forward_flops = global_avg_pool_flops,
};

}  // namespace easel
