#include "run/model_request.hpp"

#include <algorithm>

#include "devices/device.hpp"
#include "nets/graph.hpp"

namespace easel {

namespace {

// The model's one memory kind for the groups' buffers: every class in dram or every one in hbw
// (hbw-preferred is priced as hbw: where it does not fit, the caller says so and prices dram).
Result<std::string> model_placement(const Placement& p) {
  const std::string text = placement_text(p);
  if (text != "dram" && text != "hbw" && text != "hbw-preferred")
    return invalid_argument("--placement: '" + text +
                            "' (the model takes dram, hbw or hbw-preferred)");
  return text == "dram" ? text : "hbw";
}

std::string sync_centre_text(SyncCentre c) {
  switch (c) {
    case SyncCentre::master:
      return "master";
    case SyncCentre::allreduce:
      return "allreduce";
    case SyncCentre::automatic:
      break;
  }
  return "auto";
}

}  // namespace

int model_threads_per_group(const model::Machine& m, int given, int groups, int ranks_per_node) {
  if (given > 0) return given;
  if (m.gpu) return 1;
  return std::max(1, m.cores / std::max(1, groups * ranks_per_node));
}

Result<model::ModelRequest> model_request(const TrainConfig& cfg, const NetSpec& spec,
                                          const model::Machine& m, int groups, int ranks_per_node) {
  if (groups == 0) {
    if (!cfg.plan.groups.is_count())
      return invalid_argument("--groups: '" + cfg.plan.groups.text() +
                              "' (the model takes a count)");
    groups = cfg.plan.groups.n;
  }
  model::ModelRequest req;
  EASEL_ASSIGN_OR_RETURN(req.placement, model_placement(cfg.placement));
  EASEL_ASSIGN_OR_RETURN(req.cost, net_cost(spec));
  EASEL_ASSIGN_OR_RETURN(req.layers, model::layer_work(spec, m.vector_floats));
  req.net = cfg.net;
  req.input_floats = spec.channels * spec.height * spec.width;
  req.param_layers = 0;
  for (const LayerSpec& l : spec.layers)
    req.param_layers += l.fillers.empty() ? 0 : 1;
  req.algo = cfg.algo;
  req.batch = cfg.batch;
  req.tau = static_cast<int>(cfg.tau);
  req.groups = groups;
  req.threads_per_group = model_threads_per_group(m, static_cast<int>(cfg.plan.threads_per_group),
                                                  groups, ranks_per_node);
  req.ranks_per_node = ranks_per_node;
  req.precision = precision_name(cfg.precision);
  req.collective = cfg.collective;
  req.sync_centre = sync_centre_text(cfg.sync_centre);
  req.reduce = cfg.reduce;
  req.pack = cfg.pack;
  req.exchange = cfg.exchange;
  req.overlap = cfg.overlap;
  req.exchange_precision = cfg.exchange_precision;
  return req;
}

}  // namespace easel
