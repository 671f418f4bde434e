// Stand-in for devices/cpu/dnnl_ops.cpp when easel is built without oneDNN: every descriptor is
// refused with the reason, so the CPU device falls through to the reference kernels.
#include "devices/cpu/dnnl_ops.hpp"

namespace easel {

bool dnnl_available() {
  return false;
}

bool dnnl_bf16_available() {
  return false;
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& /*desc*/, const DnnlOptions& /*options*/) {
  return unavailable("easel was built without oneDNN");
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc) {
  return make_dnnl_op(desc, DnnlOptions{});
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc, DnnlConvBwdData conv_bwd_data) {
  DnnlOptions o;
  o.conv_bwd_data = conv_bwd_data;
  return make_dnnl_op(desc, o);
}

}  // namespace easel
