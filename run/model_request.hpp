// The performance model's request (model/model.hpp) for a train configuration and the net it
// trains: one builder for `easel model` / `easel plan` (tools/cli/model_cmd.cpp) and for the
// trainer's clock (`easel train --clock`, run/sim_clock.hpp). It lives in run/ because it reads
// the TrainConfig; model/ stays below run/ and never sees the train settings.
#pragma once

#include "model/model.hpp"
#include "nets/net.hpp"
#include "run/train_config.hpp"

namespace easel {

// The request for cfg's algorithm, batch, tau, switches and placement on `spec` (its layers'
// work with channels in vectors of m.vector_floats), `groups` groups (0: cfg's --groups, which
// must then be a count) of cfg's --threads-per-group threads each (0: m's cores split evenly
// over the groups of the ranks_per_node ranks sharing m; one on a GPU machine). The precision is
// cfg's. Errors name the flag: a --groups that is not a count, a --placement other than dram or
// hbw (the model's two memory kinds).
Result<model::ModelRequest> model_request(const TrainConfig& cfg, const NetSpec& spec,
                                          const model::Machine& m, int groups = 0,
                                          int ranks_per_node = 1);

// --threads-per-group, or 0's derivation as `easel train` makes it on m: its cores split evenly
// over the groups (of the ranks sharing it); one per group on a GPU machine, whose groups are
// devices.
int model_threads_per_group(const model::Machine& m, int given, int groups, int ranks_per_node);

}  // namespace easel
