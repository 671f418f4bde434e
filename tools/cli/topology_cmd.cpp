// `easel topology`: the machine (each NUMA node with its kind and capacity), its GPUs, and the
// worker-group plan the flags give, as text or (--json) as one JSON object.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "devices/cuda/cuda_device.hpp"
#include "nets/graph.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"
#include "run/fit.hpp"
#include "run/run_plan.hpp"
#include "run/trainer.hpp"
#include "tools/bench/plan_exchange.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {
namespace {

using nlohmann::json;

json node_or_null(int node) {
  return node < 0 ? json(nullptr) : json(node);
}

// {"machine", "numa", "localities", "groups", "oversubscribed", "notes"}: see docs/TOPOLOGY.md.
json plan_json(const TrainConfig& cfg, const Topology& topo, const GroupPlan& plan) {
  json j;
  j["machine"] = {
      {"described_by", topo.described_by.empty() ? json(nullptr) : json(topo.described_by)},
      {"packages", topo.packages},
      {"cores", topo.core_count()},
      {"memory_bytes", topo.total_memory_bytes},
      {"hbw_node", topo.has_hbw_node()}};
  j["numa"] = json::array();
  for (const NumaNode& n : topo.numa)
    j["numa"].push_back({{"os_index", n.os_index},
                         {"kind", node_kind_name(n.kind)},
                         {"kind_source", n.kind_source},
                         {"bytes", n.memory_bytes},
                         {"cpus", n.cpus}});
  j["localities"] = json::array();
  for (const Locality& l : localities(topo))
    j["localities"].push_back({{"cores", l.cores.size()},
                               {"dram_node", node_or_null(l.dram_node)},
                               {"hbw_node", node_or_null(l.hbw_node)},
                               {"dram_bytes", l.dram_bytes},
                               {"hbw_bytes", l.hbw_bytes}});
  j["algo"] = cfg.algo;
  j["groups"] = json::array();
  for (const GroupSpec& g : plan.groups)
    j["groups"].push_back({{"id", g.id},
                           {"cpus", g.cpus},
                           {"threads", g.cpus.size()},
                           {"locality", node_or_null(g.locality)},
                           {"dram_node", node_or_null(g.dram_node)},
                           {"hbw_node", node_or_null(g.hbw_node)},
                           {"dram_bytes", g.dram_bytes},
                           {"hbw_bytes", g.hbw_bytes},
                           {"hbw_sharers", g.hbw_sharers},
                           {"gpu", node_or_null(g.gpu)}});
  j["oversubscribed"] = plan.oversubscribed;
  j["notes"] = plan.notes;
  return j;
}

// The memory fit (run/fit.hpp) as docs/TOPOLOGY.md "Fit" lists it.
json fit_json(const Fit& f) {
  json classes = json::object();
  for (int c = 0; c < kFitRows; ++c) {  // the classes, then "kernels" and "copies"
    const FitClass& fc = f.classes[c];
    classes[fit_row_name(c)] = {{"kind", mem_kind_name(fc.kind)},
                                {"arenas", fc.arenas},
                                {"per_group", fc.per_group},
                                {"total", fc.total},
                                {"spilled", fc.spilled}};
  }
  json nodes = json::array();
  for (const FitNode& n : f.nodes) {
    json by_class = json::object();
    for (int c = 0; c < kFitRows; ++c)
      by_class[fit_row_name(c)] = n.bytes[c];
    nodes.push_back({{"os_index", n.os_index},
                     {"kind", node_kind_name(n.kind)},
                     {"capacity", n.capacity},
                     {"need", n.need},
                     {"bound", n.bound},
                     {"bytes", by_class},
                     {"groups", n.groups}});
  }
  return {{"groups", f.groups},
          {"classes", classes},
          {"nodes", nodes},
          {"need", f.need},
          {"machine_bytes", f.machine_bytes},
          {"fits", f.refusal.ok()},
          {"refusal", f.refusal.ok() ? json(nullptr) : json(f.refusal.message())},
          {"spills", f.spills},
          {"notes", f.notes}};
}

// The fit of cfg's net and data (read into DRAM to know their shape and size) on the plan, and
// the line that says what it is of.
Result<Fit> fit_for(const TrainConfig& cfg, const Topology& topo, const GroupPlan& plan,
                    std::string* what) {
  EASEL_ASSIGN_OR_RETURN(const DataSplit data,
                         load_data(cfg.data, MemKind::dram, cfg.seed,
                                   DataOptions{cfg.augment.resized_crop, cfg.skip_bad_images}));
  const Dataset& d = data.train;
  *what = "memory fit of " + cfg.net + " on " + cfg.data + " (" + std::to_string(d.count) + "+" +
          std::to_string(data.test.count) + " images of " + std::to_string(d.channels) + "x" +
          std::to_string(d.height) + "x" + std::to_string(d.width) + "), batch " +
          std::to_string(cfg.batch) + ", " + std::to_string(plan.groups.size()) +
          " group(s), --algo " + cfg.algo + ", --placement " + placement_text(cfg.placement) +
          ":\n";
  return fit_of(cfg, topo, plan, data);
}

}  // namespace

int run_topology(const TrainConfig& cfg, bool as_json, bool fit) {
  auto topo = detect_topology();
  if (!topo.ok()) return report(topo.status(), failure_of(topo.status()));
  auto algo = make_algorithm(cfg.algo);
  if (!algo.ok()) return report(algo.status(), failure_of(algo.status()));
  if (as_json) {
    auto plan = plan_groups(**algo, cfg, topo.value());
    if (!plan.ok()) return report(plan.status(), failure_of(plan.status()));
    json j = plan_json(cfg, *topo, *plan);
    if (fit) {
      std::string what;
      auto f = fit_for(cfg, *topo, *plan, &what);
      if (!f.ok()) return report(f.status(), failure_of(f.status()));
      j["fit"] = fit_json(*f);
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s", topo->to_string().c_str());
  std::printf("high-bandwidth memory (memkind, this machine): %s\n",
              hbw_available() ? "yes" : "no");
  if (auto gpus = list_gpus(); gpus.ok()) {
    std::printf("GPUs: %zu (CUDA%s)\n", gpus->size(), nccl_built() ? ", NCCL" : ", no NCCL");
    for (const GpuInfo& g : *gpus)
      std::printf("  cuda:%d  %s, %.1f GiB, compute capability %d.%d, %d SMs\n", g.ordinal,
                  g.name.c_str(), static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024),
                  g.cc_major, g.cc_minor, g.multiprocessors);
  } else {
    std::printf("GPUs: none (%s)\n", gpus.status().message().c_str());
  }
  auto plan = plan_groups(**algo, cfg, topo.value());
  if (!plan.ok()) return report(plan.status(), failure_of(plan.status()));
  std::printf("plan for --algo %s:\n%s", cfg.algo.c_str(), plan->to_string().c_str());
  if (topo->has_hbw_node())
    std::printf(
        "each group's hbw and hbw-preferred buffers go to its hbw node, its dram buffers to its "
        "dram node (capacity / groups sharing the node)\n");
  if (fit) {
    std::string what;
    auto f = fit_for(cfg, *topo, *plan, &what);
    if (!f.ok()) return report(f.status(), failure_of(f.status()));
    std::printf("%s%s", what.c_str(), f->to_string().c_str());
  }
  return 0;
}

namespace {

// The plan's exchange path and collective in words (empty where it has none).
struct PlanWords {
  std::string path, path_why, collective, collective_why;
};
PlanWords words_of(const RunPlan& r) {
  return {r.exchange ? sync_exchange_path_name(r.exchange->path) : "",
          r.exchange ? r.exchange->why : "", collective_algo_name(r.collective.algo),
          r.collective.why};
}

json explain_json(const TrainConfig& cfg, const RunPlan* r) {
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  const auto [path, path_why, collective, collective_why] = words_of(*r);
  json j = {{"algorithm", r->algorithm},
            {"net",
             {{"name", r->net},
              {"params", r->params},
              {"arena_floats", r->arena_floats},
              {"running_statistics", r->net_state}}},
            {"data",
             {{"name", r->data},
              {"train_images", r->train_images},
              {"test_images", r->test_images},
              {"shape", {r->channels, r->height, r->width}}}},
            {"ranks", r->ranks},
            {"groups_per_rank", r->groups_per_rank},
            {"groups", r->groups},
            {"plan", plan_json(cfg, Topology{}, r->plan)["groups"]},
            {"plan_notes", r->plan.notes},
            {"batch", r->batch},
            {"iterations", r->iterations},
            {"iterations_per_epoch", r->iterations_per_epoch},
            {"eval_every", r->eval_every},
            {"device", r->device},
            {"resident", r->resident},
            {"exchange_path", or_null(path)},
            {"exchange_why", or_null(path_why)},
            {"comm", r->comm->name},
            {"collective", r->uses_collectives ? json(collective) : json(nullptr)},
            {"collective_why", r->uses_collectives ? or_null(collective_why) : json(nullptr)},
            {"placement", r->placement},
            {"fit", fit_json(r->fit)},
            {"stall_seconds", r->stall_seconds},
            {"stall_source", r->stall_source},
            {"stall_why", r->stall_why}};
  if (r->clock) {
    const ClockPrices& c = *r->clock;
    j["clock"] = {{"file", c.file},
                  {"machine", c.machine},
                  {"step_seconds", c.step_seconds},
                  {"exchange_seconds", c.exchange_seconds},
                  {"seconds_per_iteration", c.seconds_per_iteration},
                  {"steps_per_exchange", c.steps_per_exchange},
                  {"scheduled", c.scheduled},
                  {"compute_source", c.compute_source},
                  {"placement", c.placement}};
  }
  return j;
}

void print_explain(const RunPlan* r) {
  const auto [path, path_why, collective, collective_why] = words_of(*r);
  std::printf("easel train --explain: what this run will do (nothing is trained or written)\n");
  std::printf("algorithm   %s: %s\n", r->algorithm.c_str(), r->algorithm_summary.c_str());
  std::printf("net         %s: %lld parameters (arena %lld floats)%s\n", r->net.c_str(),
              static_cast<long long>(r->params), static_cast<long long>(r->arena_floats),
              r->net_state ? ", with running statistics" : "");
  std::printf("data        %s: %lld training + %lld test images of %lldx%lldx%lld\n",
              r->data.c_str(), static_cast<long long>(r->train_images),
              static_cast<long long>(r->test_images), static_cast<long long>(r->channels),
              static_cast<long long>(r->height), static_cast<long long>(r->width));
  std::printf(
      "length      %lld iterations of %lld images a group, %lld an epoch, evaluated "
      "every %lld\n",
      static_cast<long long>(r->iterations), static_cast<long long>(r->batch),
      static_cast<long long>(r->iterations_per_epoch), static_cast<long long>(r->eval_every));
  std::printf("groups      %d (%d rank(s) x %d) on %s%s:\n%s", r->groups, r->ranks,
              r->groups_per_rank, r->device.c_str(),
              r->resident ? ", weights resident on the devices" : "", r->plan.to_string().c_str());
  if (r->exchange) std::printf("exchange    %s (%s)\n", path.c_str(), path_why.c_str());
  std::string comm = r->comm->name;
  if (r->uses_collectives)
    comm +=
        ", collective " + collective + (collective_why.empty() ? "" : " (" + collective_why + ")");
  std::printf("comm        %s\n", comm.c_str());
  std::printf("placement   %s\n", r->placement.c_str());
  std::printf("memory fit:\n%s", r->fit.to_string().c_str());
  std::printf("deadline    a group without a step, or waiting, %.4g s is stalled (%s%s%s)\n",
              r->stall_seconds, r->stall_source.c_str(), r->stall_why.empty() ? "" : ": ",
              r->stall_why.c_str());
  if (const auto& c = r->clock)
    std::printf(
        "clock       %s (%s): a step %.4g s (%s), an exchange %.4g s, every %lld step(s); "
        "%.4g s an iteration as `easel model` predicts; its buffers priced in %s; %s\n",
        c->file.c_str(), c->machine.c_str(), c->step_seconds, c->compute_source.c_str(),
        c->exchange_seconds, static_cast<long long>(c->steps_per_exchange),
        c->seconds_per_iteration, c->placement.c_str(),
        c->scheduled ? "the groups take turns by simulated time"
                     : "the groups run as without it, each round priced");
}

// The plan's exchange timed (tools/bench/plan_exchange.hpp), on a fresh copy of the data.
Result<bench::PlanExchangeTime> time_exchange(const TrainConfig& cfg, int rounds) {
  EASEL_ASSIGN_OR_RETURN(DataSplit data,
                         load_data(cfg.data, MemKind::dram, cfg.seed,
                                   DataOptions{cfg.augment.resized_crop, cfg.skip_bad_images}));
  return bench::time_plan_exchange(cfg, data, DeviceRegistry{}, rounds);
}

json timing_json(const bench::PlanExchangeTime& x) {
  return {{"rounds", x.rounds},
          {"iterations_per_round", x.iterations},
          {"groups", x.groups},
          {"round_ms", x.round_ms},
          {"comm_ms_per_group", x.comm_ms},
          {"wait_ms_per_group", x.wait_ms}};
}

void print_timing(const bench::PlanExchangeTime& x) {
  std::vector<double> ms = x.round_ms;
  std::sort(ms.begin(), ms.end());
  std::printf(
      "timed       %d round(s) of %lld step(s) on %d group(s), the gradient left out: median "
      "%.3f ms a round (%.3f..%.3f), a group's comm %.3f ms and wait %.3f ms a round\n",
      x.rounds, static_cast<long long>(x.iterations), x.groups, ms[ms.size() / 2], ms.front(),
      ms.back(), x.comm_ms, x.wait_ms);
}

}  // namespace

int run_explain(const TrainConfig& cfg, const ExplainFlags& flags) {
  auto data = load_data(cfg.data, MemKind::dram, cfg.seed,
                        DataOptions{cfg.augment.resized_crop, cfg.skip_bad_images});
  if (!data.ok()) return report(data.status(), failure_of(data.status()));
  auto r = explain_run(cfg, *data, DeviceRegistry{});
  if (!r.ok()) return report(r.status(), failure_of(r.status()));
  std::optional<bench::PlanExchangeTime> timed;
  if (flags.time_exchange != 0) {
    auto x = time_exchange(cfg, flags.time_exchange);
    if (!x.ok()) return report(x.status(), failure_of(x.status()));
    timed = std::move(x).value();
  }
  if (process_rank() != 0) return 0;  // under mpirun rank 0 says it
  if (flags.json) {
    json j = explain_json(cfg, &*r);
    if (timed) j["exchange_timing"] = timing_json(*timed);
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  print_explain(&*r);
  if (timed) print_timing(*timed);
  return 0;
}

namespace {

// One net's row of `easel list` on `in`; errors name the net, its file and layer.
Result<json> net_row(const std::string& name, const std::string& description,
                     const ModelInput& in) {
  EASEL_ASSIGN_OR_RETURN(const NetSpec spec, build_model(name, in));
  EASEL_ASSIGN_OR_RETURN(const NetCost cost, net_cost(spec));
  return json{{"name", name},
              {"description", description},
              {"params", cost.params},
              {"weight_bytes", (cost.params + cost.state_floats) * 4},
              {"flops_per_image", cost.forward_flops},
              {"train_flops_per_image", cost.train_flops},
              {"input", {in.channels, in.height, in.width}},
              {"classes", in.classes}};
}

void print_nets(const json& nets) {
  std::printf("  %-14s %12s %10s %11s  %-15s %s\n", "name", "params", "weights", "GFLOP/img",
              "input", "description");
  for (const json& n : nets) {
    const std::string input = std::to_string(n["input"][0].get<int64_t>()) + "x" +
                              std::to_string(n["input"][1].get<int64_t>()) + "x" +
                              std::to_string(n["input"][2].get<int64_t>()) + "/" +
                              std::to_string(n["classes"].get<int64_t>());
    std::printf("  %-14s %12lld %7.1f MB %11.3f  %-15s %s\n", n["name"].get<std::string>().c_str(),
                static_cast<long long>(n["params"].get<int64_t>()),
                static_cast<double>(n["weight_bytes"].get<int64_t>()) / 1e6,
                n["flops_per_image"].get<double>() / 1e9, input.c_str(),
                n["description"].get<std::string>().c_str());
  }
}

// `easel list --net NET`: a built-in net, a description file or an ONNX file, on the input it
// declares.
int list_one_net(const std::string& net, bool as_json) {
  ModelInput in;
  std::string description;
  if (is_net_file(net)) {
    auto header = read_net_header(net);
    if (!header.ok()) return report(header.status(), Failure::request);
    in = header->input, description = header->description;
  } else {
    const auto list = model_list();
    const auto it =
        std::find_if(list.begin(), list.end(), [&](const ModelEntry& m) { return m.name == net; });
    if (it != list.end()) in = it->input, description = it->description;
  }
  auto row = net_row(net, description, in);
  if (!row.ok())
    return report(Status(row.status().code(), "--net: " + row.status().message()),
                  Failure::request);
  if (as_json) {
    std::printf("%s\n", row->dump(2).c_str());
    return 0;
  }
  print_nets(json::array({*row}));
  return 0;
}

}  // namespace

int run_list(bool as_json, const std::string& net) {
  if (!net.empty()) return list_one_net(net, as_json);
  // Each built-in net on the input its description declares (the data's shape changes it).
  json nets = json::array();
  for (const auto& m : model_list()) {
    Result<json> row = net_row(m.name, m.description, m.input);
    if (!row.ok()) return report(row.status(), Failure::run);
    nets.push_back(*std::move(row));
  }
  json algos = json::array();
  for (const auto& a : algo_list())
    algos.push_back({{"name", a.name}, {"summary", a.summary}});
  if (as_json) {
    std::printf("%s\n", json{{"nets", nets}, {"algorithms", algos}}.dump(2).c_str());
    return 0;
  }
  std::printf(
      "nets (on the input each declares; the data's shape and classes change the counts):\n");
  print_nets(nets);
  std::printf("  (or --net FILE: a net description, docs/NETS.md)\n");
  std::printf("algorithms:\n");
  for (const auto& a : algo_list())
    std::printf("  %-16s %s\n", a.name, a.summary);
  return 0;
}

}  // namespace easel::cli
