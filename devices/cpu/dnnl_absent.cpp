// Stand-in for devices/cpu/dnnl_ops.cpp when easel is built without oneDNN: the CPU device's
// list (devices/cpu/cpu_op_list.cpp) then has no oneDNN rows, and every descriptor falls through,
// with the reason logged, to the reference kernels.
#include "devices/cpu/dnnl_ops.hpp"

namespace easel {

bool dnnl_available() {
  return false;
}

bool dnnl_bf16_available() {
  return false;
}

bool dnnl_amx_available() {
  return false;
}

bool dnnl_avx512_available() {
  return false;
}

std::string dnnl_version_line() {
  return "not in this build (every layer runs easel's own or reference kernels)";
}

int dnnl_vector_floats() {
  return 1;
}

}  // namespace easel
