// `easel model` (one configuration's predicted time per iteration and its split) and `easel plan`
// (every partition of a machine ranked by predicted time to an iteration budget, with the fit of
// P replicas in its fast memory). The model itself is model/model.hpp; docs/MODEL.md.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/model.hpp"
#include "nets/graph.hpp"
#include "nets/models/models.hpp"
#include "run/model_request.hpp"
#include "tools/bench/bench_model.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

namespace {

using model::Machine;
using model::ModelRequest;
using model::Prediction;
using nlohmann::json;

// The flags both commands share beyond the train settings' (--net, --algo, --batch, --tau and,
// for `easel model`, --groups, --threads-per-group, --placement, --reduce, --pack, --overlap,
// --exchange, --collective, --sync-centre: the
// rows of train_settings() marked kModelCommand / kPlanCommand, parsed and validated as `easel
// train` does).
struct NetFlags {
  SettingValues settings = default_setting_values();
  std::string machine;
  int64_t classes = 0;
  std::string input;  // CxHxW; empty: the net's own
  std::string precision = "fp32";
  bool json = false;
};

struct ModelFlags : NetFlags {
  std::string resident = "on";
  int ranks = 1;
  int ranks_per_node = 1;
};

struct PlanFlags : NetFlags {
  int64_t iterations = 1000;
};

// The model's defaults where a train setting's differs: one group (of all the cores, as train
// derives them: threads_per_group).
void model_defaults(SettingValues& values) {
  const auto settings = train_settings();
  for (size_t i = 0; i < settings.size(); ++i)
    if (std::string_view(settings[i].name) == "groups") values[i].text = "1";
}

void add_net_flags(CLI::App* c, NetFlags& f, unsigned command) {
  add_setting_flags(*c, command, f.settings);
  c->add_option("--machine", f.machine,
                "machine description: a TOML file, a described machine's name (tools/machines: "
                "knl-7250, xeon-max-9480, gpu8-pcie, gpu8-a100-pcie, gpu8-nvlink) or 'this' "
                "(written by easel bench --calibrate)")
      ->required();
  c->add_option("--classes", f.classes,
                "classes of the net's output layer (0: the net's own; the paper's AlexNet-CIFAR "
                "has 1000)")
      ->capture_default_str();
  c->add_option("--input", f.input,
                "one image's shape CxHxW (e.g. 3x32x32: what synthetic data of that shape "
                "feeds; default: the input the net declares)");
  c->add_option("--precision", f.precision,
                "arithmetic: fp32, tf32 or bf16 (the machine's [compute] rate for it); plan: "
                "also all (every precision the machine has, ranked together)")
      ->capture_default_str();
  c->add_flag("--json", f.json, "print one JSON object");
}

int fail(const Status& s) {
  return report(s, Failure::request);
}

// The settings as `easel train` reads them, the net built for its input (--input, --classes),
// then the request as the trainer's clock builds it (run/model_request.hpp) for `groups` groups
// (0: --groups); errors name the flag.
Result<ModelRequest> net_request(NetFlags& f, unsigned command, TrainConfig* cfg, const Machine& m,
                                 int groups, int ranks_per_node) {
  EASEL_ASSIGN_OR_RETURN(*cfg, parse_settings(f.settings, command, {}, ""));
  if (f.classes < 0 || f.classes > 1000000)
    return invalid_argument("--classes: " + std::to_string(f.classes) +
                            " is out of range [0, 1000000]");
  bench::BenchInput in = bench::bench_input(cfg->net);
  if (!f.input.empty()) {
    int64_t c = 0, h = 0, w = 0;
    char rest = 0;
    if (std::sscanf(f.input.c_str(), "%" SCNd64 "x%" SCNd64 "x%" SCNd64 "%c", &c, &h, &w, &rest) !=
            3 ||
        c < 1 || h < 1 || w < 1 || c > 65536 || h > 65536 || w > 65536)
      return invalid_argument("--input: '" + f.input +
                              "' (channels x height x width, e.g. 3x32x32, each in [1, 65536])");
    in.channels = c;
    in.height = h;
    in.width = w;
  }
  auto spec = build_model(
      cfg->net, {in.channels, in.height, in.width, f.classes > 0 ? f.classes : in.classes});
  if (!spec.ok()) return spec.status();
  EASEL_ASSIGN_OR_RETURN(ModelRequest req, model_request(*cfg, *spec, m, groups, ranks_per_node));
  req.precision = f.precision;
  return req;
}

Result<Machine> machine_of(const std::string& spec) {
  EASEL_ASSIGN_OR_RETURN(const std::string path, model::resolve_machine_path(spec));
  return model::load_machine(path);
}

Result<bool> on_off(const std::string& flag, const std::string& v) {
  if (v == "on") return true;
  if (v == "off") return false;
  return invalid_argument(flag + ": '" + v + "' (on or off)");
}

json prediction_json(const Prediction& p) {
  json layers = json::array();
  for (const Prediction::LayerPart& l : p.layers)
    layers.push_back({{"name", l.name},
                      {"class", l.cls},
                      {"forward_seconds", l.forward},
                      {"backward_seconds", l.backward}});
  return {{"seconds_per_iteration", p.seconds_per_iteration},
          {"compute_share", p.compute_share},
          {"comm_share", p.comm_share},
          {"wait_share", p.wait_share},
          {"images_per_second", p.images_per_second},
          {"compute_seconds", p.compute_seconds},
          {"comm_seconds", p.comm_seconds},
          {"wait_seconds", p.wait_seconds},
          {"step_seconds", p.step_seconds},
          {"exchange_seconds", p.exchange_seconds},
          {"exchange_bytes", p.exchange_bytes},
          {"exchange_messages", p.exchange_messages},
          {"exchanges_per_step", p.exchanges_per_step},
          {"group_exchange_bytes", p.group_exchange_bytes},
          {"transport", p.transport},
          {"exchange_path", p.exchange_path.empty() ? json(nullptr) : json(p.exchange_path)},
          {"compute_source", p.compute_source},
          {"oversubscribed", p.oversubscribed},
          {"notes", p.notes},
          {"layers", layers}};
}

int run_model(ModelFlags& f) {
  TrainConfig cfg;
  auto m = machine_of(f.machine);
  if (!m.ok()) return fail(m.status());
  auto req = net_request(f, kModelCommand, &cfg, *m, 0, f.ranks_per_node);
  if (!req.ok()) return fail(req.status());
  req->ranks = f.ranks;
  auto resident = on_off("--resident", f.resident);
  if (!resident.ok()) return fail(resident.status());
  req->resident = *resident;
  auto p = model::predict(*m, *req);
  if (!p.ok()) return fail(p.status());
  if (f.json) {
    json j = prediction_json(*p);
    j["machine"] = m->name;
    j["machine_file"] = m->file;
    j["net"] = req->net;
    j["algo"] = req->algo;
    j["groups"] = req->groups;
    j["threads_per_group"] = req->threads_per_group;
    j["tau"] = req->tau;
    j["precision"] = req->precision;
    j["batch"] = req->batch;
    j["weight_bytes"] = 4.0 * static_cast<double>(req->cost.params);
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("easel model: %s on %s, %d group(s) x %d thread(s), batch %lld, tau %d; %s (%s)\n",
              req->algo.c_str(), req->net.c_str(), req->groups, req->threads_per_group,
              static_cast<long long>(req->batch), req->tau, m->name.c_str(), m->file.c_str());
  std::printf("seconds_per_iteration %.6g\n", p->seconds_per_iteration);
  std::printf("compute/comm/wait     %.1f%% / %.1f%% / %.1f%%\n", 100 * p->compute_share,
              100 * p->comm_share, 100 * p->wait_share);
  std::printf("images_per_second     %.1f\n", p->images_per_second);
  std::printf("step %.4g s (%s); exchange %.4g s over %s, %d message(s), %.3g MB on its path\n",
              p->step_seconds, p->compute_source.c_str(), p->exchange_seconds,
              p->transport.empty() ? "-" : p->transport.c_str(), p->exchange_messages,
              p->exchange_bytes / 1e6);
  if (!p->exchange_path.empty())
    std::printf("exchange path         %s (as the trainer chooses it)\n", p->exchange_path.c_str());
  for (const std::string& n : p->notes)
    std::printf("note: %s\n", n.c_str());
  return 0;
}

int run_plan(PlanFlags& f) {
  TrainConfig cfg;
  auto m = machine_of(f.machine);
  if (!m.ok()) return fail(m.status());
  // Each partition sets its groups, threads and placement (plan_partitions).
  auto req = net_request(f, kPlanCommand, &cfg, *m, 1, 1);
  if (!req.ok()) return fail(req.status());
  if (f.iterations < 1 || f.iterations > 1000000000)
    return fail(invalid_argument("--iterations: " + std::to_string(f.iterations) +
                                 " is out of range [1, 1e9]"));
  auto rows = model::plan_partitions(*m, *req, f.iterations);
  if (!rows.ok()) return fail(rows.status());
  const std::string budget =
      std::to_string(f.iterations) + " iterations of " + std::to_string(req->batch) + " images";
  if (f.json) {
    json out = {{"machine", m->name},         {"machine_file", m->file}, {"net", req->net},
                {"algo", req->algo},          {"batch", req->batch},     {"budget", budget},
                {"partitions", json::array()}};
    for (const model::PlanRow& r : *rows) {
      json j = prediction_json(r.p);
      j["mode"] = r.mode;
      j["precision"] = r.precision;
      j["localities"] = r.localities;
      j["groups"] = r.groups;
      j["threads_per_group"] = r.threads;
      j["batch_per_group"] = r.batch;
      j["seconds"] = r.seconds;
      j["group_bytes"] = r.group_bytes;
      j["fast_bytes_per_group"] = r.hbw_bytes_per_group;
      j["fits_fast_memory"] = r.fits_fast;
      j["fit"] = r.fit_note;
      out["partitions"].push_back(j);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("easel plan: %s on %s, %s (split over the groups); %s (%s); fastest first\n",
              req->algo.c_str(), req->net.c_str(), budget.c_str(), m->name.c_str(),
              m->file.c_str());
  std::printf("%-4s %-14s %-5s %6s %7s %5s %12s %10s %6s %6s %6s %9s %9s  %s\n", "rank", "mode",
              "prec", "groups", "threads", "batch", "s/iteration", "seconds", "comp%", "comm%",
              "wait%", "group MB", "fast MB", "fit");
  int rank = 1;
  for (const model::PlanRow& r : *rows)
    std::printf("%-4d %-14s %-5s %6d %7d %5lld %12.5g %10.4g %6.1f %6.1f %6.1f %9.1f %9.1f  %s\n",
                rank++, r.mode.c_str(), r.precision.c_str(), r.groups, r.threads,
                static_cast<long long>(r.batch), r.p.seconds_per_iteration, r.seconds,
                100 * r.p.compute_share, 100 * r.p.comm_share, 100 * r.p.wait_share,
                r.group_bytes / 1e6, r.hbw_bytes_per_group / 1e6, r.fit_note.c_str());
  return 0;
}

}  // namespace

ModelCommands add_model_commands(CLI::App& app) {
  auto mf = std::make_shared<ModelFlags>();
  auto pf = std::make_shared<PlanFlags>();
  CLI::App* m = app.add_subcommand(
      "model", "predict the time per iteration and its compute/comm/wait split (docs/MODEL.md)");
  model_defaults(mf->settings);
  add_net_flags(m, *mf, kModelCommand);
  m->add_option("--resident", mf->resident,
                "GPU machine: weights stay on the devices (on) or cross the host link every "
                "step (off: the original EASGD and Sync EASGD1)")
      ->capture_default_str();
  m->add_option("--ranks", mf->ranks, "MPI ranks of --groups groups each (sync algorithms)")
      ->capture_default_str();
  m->add_option("--ranks-per-node", mf->ranks_per_node,
                "ranks sharing one machine's cores and memory bandwidth (1: a machine each)")
      ->capture_default_str();
  CLI::App* p = app.add_subcommand(
      "plan", "rank a machine's partitions by predicted time, with the fit in fast memory");
  add_net_flags(p, *pf, kPlanCommand);
  // The plan splits the batch over each partition's groups (its batch column), as the budget
  // says: not train's per-group batch.
  p->get_option("--batch")->description(
      "mini-batch of the whole run, split evenly over each partition's groups (the batch "
      "column: per group)");
  p->add_option("--iterations", pf->iterations,
                "the budget: iterations of --batch images (split evenly over the groups)")
      ->capture_default_str();
  return [m, p, mf, pf]() -> int {
    if (m->parsed()) return run_model(*mf);
    if (p->parsed()) return run_plan(*pf);
    return -1;
  };
}

}  // namespace easel::cli
