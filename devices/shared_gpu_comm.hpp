// The Comm among worker groups that share GPUs (--device cuda:0,0: two groups on GPU 0, each
// with its own Device, streams and replica). NCCL refuses two ranks on one device, so the
// exchange is a transport of its own under the collective algorithms of engine/comm/collectives/
// (tree, ring, halving-doubling, hierarchical; --collective picks, as for host groups): the
// shared-memory transport's rendezvous (engine/comm/transport.hpp), whose receiving rank copies
// or adds the sender's span with its device's kernels (copy, axpy with 1: own + in exactly
// rounded, as the host adds), reading the peer's memory in place when both are on one GPU (one
// address space) and through an engine copy (copy_bytes) into its own device scratch when the
// peer is on another GPU. The host never touches device memory. The algorithms' scratch is device
// memory of each rank's GPU (Transport::scratch_on_device). So a run on shared GPUs sums in the
// order of the CPU run with the same algorithm and equals it bit for bit.
//
// Every collective first waits for the rank's stream and each transfer waits for its kernels, so
// the collectives return when their data is there (the queued variants run their kernels on the
// communication stream the same way: correct, not overlapped). Devices are the same GPU when
// their name() is.
#pragma once

#include <memory>
#include <span>

#include "devices/device.hpp"
#include "engine/comm/comm.hpp"

namespace easel {

// True when two of `devices` are the same GPU (by name()).
bool devices_share_a_unit(std::span<Device* const> devices);

// The Comm among GPU groups: `distinct` (NCCL, which picks its own algorithm) when every group
// has a GPU of its own, the shared-GPU Comm below running `algo` (and `inter` for hierarchical)
// when two share one.
using DistinctGpuComm = Result<std::unique_ptr<Comm>> (*)(std::span<Device* const> devices);
Result<std::unique_ptr<Comm>> make_gpu_groups_comm(std::span<Device* const> devices,
                                                   CollectiveAlgo algo, CollectiveAlgo inter,
                                                   DistinctGpuComm distinct);

// Rank i on devices[i] (attached, each used by its own thread; the Comm's scratch is allocated
// on the calling rank's thread, so on its GPU). algo: tree, ring, halving_doubling or
// hierarchical (not automatic or mpi, which the caller resolves). Destroy the Comm before its
// devices.
std::unique_ptr<Comm> make_shared_gpu_comm(std::span<Device* const> devices, CollectiveAlgo algo,
                                           CollectiveAlgo inter = CollectiveAlgo::ring);

}  // namespace easel
