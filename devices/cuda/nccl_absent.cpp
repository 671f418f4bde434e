// Stand-in for the NCCL Comm when the CUDA device is built but NCCL was not found at configure
// time (or -Dnccl=disabled): GPU groups then exchange through host memory only.
#include "devices/cuda/cuda_device.hpp"

namespace easel {

bool nccl_built() {
  return false;
}

Result<std::unique_ptr<Comm>> make_nccl_comm(std::span<Device* const> /*devices*/) {
  return unavailable(
      "NCCL comm: this build of easel was built without NCCL (nccl.h and libnccl were not found "
      "at configure time); install NCCL (Debian/Ubuntu: libnccl2 and libnccl-dev from NVIDIA's "
      "CUDA repository, or the NCCL tarball unpacked into the CUDA toolkit) and reconfigure "
      "with -Dnccl=enabled");
}

}  // namespace easel
