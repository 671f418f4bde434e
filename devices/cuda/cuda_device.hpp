// The CUDA device: one GPU is one worker group (DESIGN.md 5). No CUDA header here: the rest of
// easel sees only these functions and the Device / Comm interfaces. Without CUDA in the build
// (cuda_absent.cpp) every function answers with the reason.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "devices/device.hpp"
#include "engine/comm/comm.hpp"
#include "engine/status.hpp"

namespace easel {

struct GpuInfo {
  int ordinal = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int multiprocessors = 0;
};

// True when easel was built with the CUDA device (nvcc, cuDNN and cuBLAS found).
bool cuda_built();
// True when NCCL is built in as well (the Comm among GPU groups).
bool nccl_built();

// The GPUs this process can use. Fails with the reason when there are none: built without
// CUDA, no driver (the CUDA runtime's own message), or no device.
Result<std::vector<GpuInfo>> list_gpus();

// Readies pinned-host memory before any device exists (the data set is loaded before the
// groups are built): installs the memory hooks when there is a usable GPU, else fails with the
// reason list_gpus() gives.
Status prepare_gpu_memory();

// The CUDA device on GPU `ordinal` (fails when there is no such GPU). It is used by one thread:
// that thread calls attach() first, which makes the GPU its current device and creates the
// device's stream and its cuDNN and cuBLAS handles. Ops, losses and arena kernels run on that
// stream, asynchronously; Device::synchronize() waits for them. attach() also installs the
// allocators of `device` and `pinned-host` memory (engine/memory.hpp).
Result<std::unique_ptr<Device>> make_cuda_device(int ordinal, Precision precision);

// The Comm among P GPU groups (rank i on devices[i], each made by make_cuda_device and already
// attached, on distinct GPUs): one NCCL communicator per GPU, every rank calling from its
// device's thread with device pointers. Collectives run on the rank's stream and return when
// they are done there (so that a group's comm time is the transfer's; NCCL cannot tell waiting
// for a late rank from moving data, so arrival skew counts as comm time, not wait). barrier()
// also waits for the rank's stream. reduce_sum_queued / broadcast_queued run on the device's
// communication stream instead and return at once (sync-easgd's overlap; the device's events
// order them). Destroy the Comm before its devices.
Result<std::unique_ptr<Comm>> make_nccl_comm(std::span<Device* const> devices);

}  // namespace easel
