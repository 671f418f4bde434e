// The Comm among worker groups that share GPUs (--device cuda:0,0: two groups on GPU 0, each
// with its own Device, streams and replica). NCCL refuses two ranks on one device, so the
// exchange is done by the devices' own arena kernels: a rank's kernel reads a peer's buffer
// directly when both are on one GPU (one address space), and through an engine copy
// (copy_bytes) into its own scratch when the peer is on another GPU. The summation order is the
// binomial tree of the shared-memory Comm (engine/comm/shm_comm.cpp), so a run on shared GPUs
// equals the CPU run and the NCCL run bit for bit where those do.
//
// Ranks meet at a host barrier; every rank waits for its stream before it publishes a buffer and
// after each kernel, so the collectives return when their data is there (the queued variants
// run on the communication stream and its kernels in the same way: they return when done,
// which keeps them correct, not overlapped). Devices are the same GPU when their name() is.
#pragma once

#include <memory>
#include <span>

#include "devices/device.hpp"
#include "engine/comm/comm.hpp"

namespace easel {

// True when two of `devices` are the same GPU (by name()).
bool devices_share_a_unit(std::span<Device* const> devices);

// The Comm among GPU groups: `distinct` (NCCL) when every group has a GPU of its own, the
// shared-GPU Comm below when two share one.
using DistinctGpuComm = Result<std::unique_ptr<Comm>> (*)(std::span<Device* const> devices);
Result<std::unique_ptr<Comm>> make_gpu_groups_comm(std::span<Device* const> devices,
                                                   DistinctGpuComm distinct);

// Rank i on devices[i] (attached, each used by its own thread; the Comm's scratch is allocated
// on the calling rank's thread, so on its GPU). Destroy the Comm before its devices.
std::unique_ptr<Comm> make_shared_gpu_comm(std::span<Device* const> devices);

}  // namespace easel
