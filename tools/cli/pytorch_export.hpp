// A trained net's weights as a PyTorch state_dict (`easel export --format pytorch`): easel
// writes its arena in tools/bench/net_dump's format to a temporary folder and
// tools/pytorch/export_state_dict.py -- PyTorch itself -- builds the twin (torchvision's
// definitions, or the Caffe nets written in tools/pytorch/net_equivalence.py), loads the
// weights in order, every shape checked, and torch.save()s model.state_dict() (docs/EXPORT.md).
#pragma once

#include <string>
#include <vector>

#include "engine/arena.hpp"
#include "engine/status.hpp"
#include "nets/net.hpp"

namespace easel::cli {

// Writes `out` (a state_dict of spec's PyTorch twin, its keys torchvision's or the twin's) from
// `weights`, laid out as `params` in `layout`; `step` becomes batch norm's num_batches_tracked.
// Returns the tool's one-line summary. invalid_argument (exit 2): no PyTorch twin of the net,
// no export_state_dict.py found, or no python3 with torch; io_error: the tool failed or `out`
// cannot be written. `out` is replaced atomically (never half written).
Result<std::string> write_state_dict(const NetSpec& spec, Layout layout, const ArenaLayout& params,
                                     const float* weights, int64_t step, const std::string& out);

}  // namespace easel::cli
