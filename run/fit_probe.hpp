// What a net's kernels allocate for themselves, for the memory fit (run/fit.hpp): oneDNN's
// reordered weights and scratchpads, im2col columns, LRN's and dropout's per-element buffers,
// batch norm's workspaces. They are not the net's activations or the arenas, and a count from
// the net's shapes would have to know every kernel's choice, so they are measured: the net is
// built once on the host, as a group builds it, and the C++ heap's growth (glibc's count of the
// bytes handed out, less the Buffers counted elsewhere) is what its ops hold. Measured once a
// run, on the calling thread, with no other thread allocating (the plan, before any group is
// built); the probe's pages are given back before the groups are built.
#pragma once

#include <cstdint>

#include "devices/device.hpp"
#include "engine/status.hpp"
#include "nets/net.hpp"

namespace easel {

// The bytes one host replica's ops allocate beside its activations, at `batch` in `layout`.
// Errors are Net::create's (a layer the device cannot run).
Result<uint64_t> kernel_bytes(const NetSpec& spec, int64_t batch, Layout layout, ImplChoice impl,
                              Precision precision);

}  // namespace easel
