// Stand-in for the CUDA device when easel is built without it (no nvcc, cuDNN or cuBLAS
// found, or -Dcuda=disabled): every entry point answers with the reason.
#include "devices/cuda/cuda_device.hpp"

namespace easel {

namespace {

Status not_built() {
  return unavailable(
      "this build of easel has no CUDA device (nvcc, cuDNN and cuBLAS were not all found at "
      "configure time; install the CUDA toolkit with cuDNN and reconfigure with -Dcuda=enabled)");
}

}  // namespace

bool cuda_built() {
  return false;
}

bool nccl_built() {
  return false;
}

Result<std::vector<GpuInfo>> list_gpus() {
  return not_built();
}

Status prepare_gpu_memory() {
  return not_built();
}

Result<std::unique_ptr<Device>> make_cuda_device(int /*ordinal*/, Precision /*precision*/) {
  return not_built();
}

Result<std::unique_ptr<Comm>> make_nccl_comm(std::span<Device* const> /*devices*/) {
  return not_built();
}

}  // namespace easel
