// Stand-in for devices/cpu/dnnl_ops.cpp when easel is built without oneDNN: every descriptor is
// refused with the reason, so the CPU device falls through to the reference kernels.
#include "devices/cpu/dnnl_ops.hpp"

namespace easel {

bool dnnl_available() {
  return false;
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& /*desc*/) {
  return unavailable("easel was built without oneDNN");
}

}  // namespace easel
