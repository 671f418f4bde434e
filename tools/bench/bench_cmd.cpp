// `easel bench`: the machine's ceilings (FMA peak, STREAM triad), training-step throughput per
// net, batch size and group layout as a fraction of the peak, the per-layer view, the
// exchange of the flat arena as a fraction of the triad, and peak RSS; printed and, with
// --json FILE, written as one JSON document. docs/PERFORMANCE.md explains every figure.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/comm/mpi_comm.hpp"
#include "model/layer_rates.hpp"
#include "model/machine.hpp"
#include "nets/models/models.hpp"
#include "tools/bench/bench.hpp"
#include "tools/bench/bench_data.hpp"
#include "tools/bench/calibrate.hpp"
#include "tools/bench/collectives.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

using nlohmann::json;
using namespace easel::bench;

namespace {

json summary_json(const Summary& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

std::string fmt3(const Summary& s, const char* f) {
  char buf[96];
  const std::string spec = std::string(f) + "/" + f + "/" + f;
  std::snprintf(buf, sizeof buf, spec.c_str(), s.min, s.median, s.max);
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  }
  return "unknown";
}

std::string cpus_text(const std::vector<std::vector<int>>& groups) {
  std::string s;
  for (const auto& g : groups) {
    if (!s.empty()) s += ";";
    for (size_t i = 0; i < g.size(); ++i)
      s += (i ? "," : "") + std::to_string(g[i]);
  }
  return s;
}

// Fraction as "42.1%", or "-" when the ceiling is unknown.
std::string pct(double num, double den) {
  if (den <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * num / den);
  return buf;
}

json frac(double num, double den) {
  return den > 0 ? json(num / den) : json(nullptr);
}

NetSpec net_spec(const std::string& name) {
  const BenchInput in = bench_input(name);
  return build_model(name, {in.channels, in.height, in.width, in.classes}).value();
}

// What the sections of one `easel bench` run share: the validated flags, the machine, the
// ceilings the fractions are taken of (zero when --skip-ceilings: every fraction is then "-"),
// and the JSON document each section adds its figures to.
struct BenchRun {
  const BenchConfig& cfg;
  const Topology& topo;
  int cores = 0;
  double peak_core = 0, peak_all = 0, triad_core = 0, triad_all = 0;  // GFLOP/s; GB/s
  json doc;
};

// `s` with its message prefixed by `context` (the code kept).
Status in_context(const std::string& context, const Status& s) {
  return {s.code(), context + s.message()};
}

// Every layout must be plannable before anything is measured; the error names the layout.
Status check_layouts(const BenchRun& run) {
  for (const GroupLayout& gl : run.cfg.layouts) {
    PlanRequest req;
    req.groups = GroupCount::of(gl.groups);
    req.threads_per_group = gl.threads;
    req.oversubscribe = run.cfg.oversubscribe;
    auto plan = make_plan(run.topo, req);
    if (!plan.ok()) return in_context("--layouts " + gl.to_string() + ": ", plan.status());
  }
  return Status::ok_status();
}

// "1x1,2x1": the layouts as --layouts takes them.
std::string layouts_text(const std::vector<GroupLayout>& layouts) {
  std::string s;
  for (const GroupLayout& gl : layouts)
    s += (s.empty() ? "" : ",") + gl.to_string();
  return s;
}

// The document's version, date, machine and flags (the layouts as timed); prints the run's
// first line.
json header(const bench::BenchFlags& flags, const BenchConfig& cfg, int cores) {
  json doc = {{"version", 1},
              {"date", utc_now()},
              {"machine", {{"cores", cores}, {"cpu", cpu_model()}}},
              {"flags",
               {{"nets", flags.nets},
                {"batches", flags.batches},
                {"layouts", layouts_text(cfg.layouts)},
                {"warmup", cfg.warmup},
                {"repeats", cfg.repeats},
                {"min-time", cfg.min_time},
                {"layout", cfg.layout},
                {"impl", cfg.impl},
                {"oversubscribe", cfg.oversubscribe},
                {"triad-mib", cfg.triad_mib}}}};
  std::printf(
      "easel bench %s: %d cores (%s), activations %s, impl %s, %d warm-up steps, %d "
      "repeats of >= %.2f s; figures are min/median/max over the repeats\n",
      doc["date"].get<std::string>().c_str(), cores, cpu_model().c_str(), cfg.layout.c_str(),
      cfg.impl.c_str(), cfg.warmup, cfg.repeats, cfg.min_time);
  return doc;
}

// ---- ceilings (first: the triad's child is forked before any thread starts) ----
// Sets run's ceilings to the best repeat of each (STREAM's convention: the machine can do at
// least that), prints them and adds "ceilings".
Status ceilings_section(BenchRun& run) {
  auto c = measure_ceilings(run.topo, run.cfg);
  if (!c.ok()) return c.status();
  run.peak_core = c->fma_core_gflops.max;
  run.peak_all = c->fma_all_gflops.max;
  run.triad_core = c->triad_core_gbs.max;
  run.triad_all = c->triad_all_gbs.max;
  std::printf("\n== ceilings (the fractions below are of the best repeat, the max)\n");
  std::printf(
      "FP32 FMA peak (%s, %d accumulators x %d lanes): one core %s GFLOP/s, all %d "
      "cores %s GFLOP/s\n",
      c->isa.c_str(), c->accumulators, c->lanes, fmt3(c->fma_core_gflops, "%.1f").c_str(),
      run.cores, fmt3(c->fma_all_gflops, "%.1f").c_str());
  std::printf(
      "triad a = b + s*c, 3 x %lld MiB, bytes = 12 n (STREAM's count)%s: one core %s "
      "GB/s, all %d cores %s GB/s\n",
      static_cast<long long>(run.cfg.triad_mib), c->triad_in_child ? " [child process]" : "",
      fmt3(c->triad_core_gbs, "%.1f").c_str(), run.cores, fmt3(c->triad_all_gbs, "%.1f").c_str());
  run.doc["ceilings"] = {{"isa", c->isa},
                         {"accumulators", c->accumulators},
                         {"lanes", c->lanes},
                         {"fma_core_gflops", summary_json(c->fma_core_gflops)},
                         {"fma_all_gflops", summary_json(c->fma_all_gflops)},
                         {"triad_floats_per_array", c->triad_floats},
                         {"triad_in_child_process", c->triad_in_child},
                         {"triad_core_gbs", summary_json(c->triad_core_gbs)},
                         {"triad_all_gbs", summary_json(c->triad_all_gbs)}};
  return Status::ok_status();
}

// ---- training steps ----
// One row of the steps table for `s` (net `name`, `batch`, layout `gl`): printed, and returned
// as its JSON entry (without the weak-scaling figure).
json step_row(const BenchRun& run, const std::string& name, int64_t batch, const GroupLayout& gl,
              const StepResult& s) {
  const double g0 = s.group_ips[0].median, agg = s.aggregate_ips.median;
  const double gflops0 = g0 * s.flops_per_image / 1e9;
  const double gflops = agg * s.flops_per_image / 1e9;
  const int used = std::min(gl.groups * gl.threads, run.cores);
  const double group_peak = run.peak_core * gl.threads;
  const double node_peak = run.peak_all * used / std::max(run.cores, 1);
  std::printf("%-14s %5lld %6s %-8s %6lld %9.3f %21s %21s %8.1f %7s %7s\n", name.c_str(),
              static_cast<long long>(batch), gl.to_string().c_str(), cpus_text(s.cpus).c_str(),
              static_cast<long long>(s.steps_per_repeat), s.step_ms.median,
              fmt3(s.group_ips[0], "%.0f").c_str(), fmt3(s.aggregate_ips, "%.0f").c_str(), gflops,
              pct(gflops0, group_peak).c_str(), pct(gflops, node_peak).c_str());
  json groups = json::array();
  for (const Summary& g : s.group_ips)
    groups.push_back(summary_json(g));
  return {{"net", name},
          {"batch", batch},
          {"layout", gl.to_string()},
          {"groups", gl.groups},
          {"threads_per_group", gl.threads},
          {"cpus", s.cpus},
          {"steps_per_repeat", s.steps_per_repeat},
          {"flops_per_image", s.flops_per_image},
          {"step_ms_group0", summary_json(s.step_ms)},
          {"group_images_per_second", groups},
          {"aggregate_images_per_second", summary_json(s.aggregate_ips)},
          {"aggregate_gflops", gflops},
          {"group0_gflops", gflops0},
          {"group0_fraction_of_peak", frac(gflops0, group_peak)},
          {"aggregate_fraction_of_peak", frac(gflops, node_peak)},
          {"peak_rss_kib_after", s.rss_kib},
          {"impls", s.impls}};
}

// Times every net x batch x layout, prints the table (with a weak-scaling line for a Gx1
// layout after 1x1) and adds "steps".
Status steps_section(BenchRun& run) {
  std::printf(
      "\n== training steps (forward + loss + backward + momentum_step; synthetic "
      "inputs; every group on its own pinned thread, all at once; with G > 1 groups each step "
      "ends with sync-easgd's exchange, tau 1: the algorithm's own round, as the trainer runs "
      "it (mirrored for 2 groups, partitioned for more))\n");
  std::printf("%-14s %5s %6s %-8s %6s %9s %21s %21s %8s %7s %7s\n", "net", "batch", "layout",
              "cpus", "steps", "step ms", "group 0 img/s", "aggregate img/s", "GFLOP/s", "%peak1",
              "%peakN");
  json steps = json::array();
  // (net, batch) -> one group's median img/s with the 1x1 layout, for weak scaling.
  std::vector<std::pair<std::string, double>> single;
  for (const std::string& name : run.cfg.nets) {
    const NetSpec spec = net_spec(name);
    for (int64_t batch : run.cfg.batches) {
      for (const GroupLayout& gl : run.cfg.layouts) {
        auto r = time_steps(run.topo, run.cfg, spec, batch, gl);
        if (!r.ok()) {
          return in_context(name + " b" + std::to_string(batch) + " " + gl.to_string() + ": ",
                            r.status());
        }
        json j = step_row(run, name, batch, gl, r.value());
        const double g0 = r->group_ips[0].median, agg = r->aggregate_ips.median;
        const std::string key = name + "/" + std::to_string(batch);
        if (gl.groups == 1 && gl.threads == 1) single.emplace_back(key, g0);
        for (const auto& [k, v] : single) {
          if (k == key && gl.groups > 1 && gl.threads == 1) {
            const double eff = agg / (gl.groups * v);
            std::printf("%-14s   weak scaling %s vs 1x1: %.2fx of one group = %.1f%% efficiency\n",
                        "", gl.to_string().c_str(), agg / v, 100 * eff);
            j["weak_scaling_efficiency"] = eff;
          }
        }
        steps.push_back(j);
      }
    }
  }
  run.doc["steps"] = steps;
  return Status::ok_status();
}

// ---- weak scaling, interleaved ----
// The table above times each layout in turn, so a load that comes and goes on one core lands
// in one layout's figure and not the other's. Here every round times one group alone on each
// of the G cores, then G groups at once, back to back, and the ratios are taken round by
// round (their median is quoted): against one group alone on the first core (DESIGN.md §6's
// definition), against the sum of the G cores' own solo rates in that round (what the G
// cores could do at that moment, each alone), and against G times the slowest core's solo
// rate (what G groups in lockstep can reach at best when the cores' speeds differ).

// G: the most groups of a Gx1 layout (G > 1, at most one per core) when 1x1 is timed too;
// 0 when the section does not run.
int weak_scaling_groups(const BenchConfig& cfg, int cores) {
  int weak_g = 0;
  for (const GroupLayout& gl : cfg.layouts)
    if (gl.threads == 1 && gl.groups > 1 && gl.groups <= cores)
      weak_g = std::max(weak_g, gl.groups);
  const bool has_1x1 =
      std::find(cfg.layouts.begin(), cfg.layouts.end(), GroupLayout{1, 1}) != cfg.layouts.end();
  return weak_g > 1 && has_1x1 ? weak_g : 0;
}

// One net's rounds: images/s of each core's solo group and of the G groups together, and the
// three ratios, one value per round each.
struct WeakRounds {
  std::vector<std::vector<double>> solo;  // [core][round]
  std::vector<double> together, vs_first, vs_sum, vs_min;
};

// cfg.repeats rounds of G solo runs (one repeat each, group on core c alone) then one GxG run.
Result<WeakRounds> time_weak_rounds(const BenchRun& run, const NetSpec& spec, int64_t batch,
                                    int weak_g) {
  BenchConfig one = run.cfg;
  one.repeats = 1;
  WeakRounds w;
  w.solo.resize(static_cast<size_t>(weak_g));
  for (int r = 0; r < run.cfg.repeats; ++r) {
    double sum = 0, slowest = 0;
    for (int c = 0; c < weak_g; ++c) {
      Topology alone = run.topo;
      alone.cores = {run.topo.cores[static_cast<size_t>(c)]};
      auto a = time_steps(alone, one, spec, batch, GroupLayout{1, 1});
      if (!a.ok()) return a.status();
      const double ips = a->group_ips[0].median;
      w.solo[static_cast<size_t>(c)].push_back(ips);
      sum += ips;
      slowest = c == 0 ? ips : std::min(slowest, ips);
    }
    auto t = time_steps(run.topo, one, spec, batch, GroupLayout{weak_g, 1});
    if (!t.ok()) return t.status();
    const double agg = t->aggregate_ips.median;
    w.together.push_back(agg);
    w.vs_first.push_back(agg / (weak_g * w.solo[0].back()));
    w.vs_sum.push_back(agg / sum);
    w.vs_min.push_back(agg / (weak_g * slowest));
  }
  return w;
}

// Prints one net's two weak-scaling lines and returns its JSON entry.
json weak_report(const std::string& name, int64_t batch, int weak_g, const WeakRounds& w) {
  json solos = json::array();
  std::string solo_text;
  for (int c = 0; c < weak_g; ++c) {
    const Summary sc = summarize(w.solo[static_cast<size_t>(c)]);
    solos.push_back(summary_json(sc));
    solo_text += (c ? ", core " : "core ") + std::to_string(c) + " " + fmt3(sc, "%.0f");
  }
  const Summary e1 = summarize(w.vs_first), es = summarize(w.vs_sum), em = summarize(w.vs_min);
  std::printf("%-14s b%lld alone: %s img/s\n", name.c_str(), static_cast<long long>(batch),
              solo_text.c_str());
  std::printf(
      "%-14s %dx1 at once: %s img/s; efficiency vs %d x core 0 alone %.1f%% [%.1f, %.1f], "
      "vs the sum of the cores alone %.1f%% [%.1f, %.1f], vs %d x the slowest core alone "
      "%.1f%% [%.1f, %.1f]\n",
      "", weak_g, fmt3(summarize(w.together), "%.0f").c_str(), weak_g, 100 * e1.median,
      100 * e1.min, 100 * e1.max, 100 * es.median, 100 * es.min, 100 * es.max, weak_g,
      100 * em.median, 100 * em.min, 100 * em.max);
  return {{"net", name},
          {"batch", batch},
          {"groups", weak_g},
          {"solo_images_per_second", solos},
          {"together_images_per_second", summary_json(summarize(w.together))},
          {"efficiency_vs_core0", summary_json(e1)},
          {"efficiency_vs_sum_of_solos", summary_json(es)},
          {"efficiency_vs_slowest_solo", summary_json(em)}};
}

// Every net at the first batch size with G groups; adds "weak_scaling_interleaved".
Status weak_scaling_section(BenchRun& run, int weak_g) {
  std::printf(
      "\n== weak scaling, interleaved (%d rounds; each: one group alone on each core, then %d "
      "groups at once; ratios per round, median [min, max])\n",
      run.cfg.repeats, weak_g);
  json weak = json::array();
  for (const std::string& name : run.cfg.nets) {
    const int64_t batch = run.cfg.batches[0];
    auto w = time_weak_rounds(run, net_spec(name), batch, weak_g);
    if (!w.ok()) return in_context("weak scaling: ", w.status());
    weak.push_back(weak_report(name, batch, weak_g, w.value()));
  }
  run.doc["weak_scaling_interleaved"] = weak;
  return Status::ok_status();
}

// ---- layer view ----
// A pass's roofline on one core: the time its FLOPs need at the FMA peak and its bytes
// (model::layer_work's, activations and weights) at the triad, the longer of the two as a
// fraction of the time measured, and which roof that is ("fma" or "mem"). The bandwidth-bound
// layers (pools, batch norm, joins) are judged against the triad, not the peak.
struct Roofline {
  double fraction = 0;  // 0 when a ceiling or the layer's work is unknown
  const char* bound = "-";
  std::string text() const {  // "87% fma", or "-"
    if (fraction <= 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f%% %s", 100 * fraction, bound);
    return buf;
  }
  json to_json() const {
    return fraction > 0 ? json{{"fraction", fraction}, {"bound", bound}} : json(nullptr);
  }
};
Roofline roofline(const BenchRun& run, double flops, double bytes, double ms) {
  if (run.peak_core <= 0 || run.triad_core <= 0 || bytes <= 0 || ms <= 0) return {};
  const double at_peak = flops / (run.peak_core * 1e9), at_triad = bytes / (run.triad_core * 1e9);
  return {std::max(at_peak, at_triad) / (ms * 1e-3), at_peak >= at_triad ? "fma" : "mem"};
}

// Each layer's work by name ("conv1+relu1" as the net fuses it); empty when the model cannot
// price the net (the table then shows "-" for its bytes).
std::map<std::string, model::LayerWork> work_by_name(const std::string& net) {
  std::map<std::string, model::LayerWork> out;
  auto work = model::layer_work(net_spec(net));
  if (work.ok())
    for (model::LayerWork& w : work.value())
      out.emplace(w.name, std::move(w));
  return out;
}

std::string gbs_text(double bytes, double ms) {
  if (bytes <= 0 || ms <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / (ms * 1e6));
  return buf;
}

// Prints one net's per-layer table and returns its JSON entry.
json layer_report(const BenchRun& run, const std::string& name, int64_t batch, const LayerView& v) {
  const double total = v.step_ms.median + v.update_ms.median;
  std::printf(
      "\n== layers of %s, batch %lld, one group on cpu %d (medians; share of "
      "train_step + momentum_step = %.3f ms; roof: the pass's time at the FMA peak or the triad, "
      "whichever bounds it, over its time; over 100%%: faster than the ceiling measured, its bytes "
      "from cache or the peak timed low)\n",
      name.c_str(), static_cast<long long>(batch), run.topo.cores[0][0], total);
  std::printf("%-10s %-19s %9s %9s %7s %9s %9s %9s %9s %9s %9s  %s\n", "layer", "kind", "fwd ms",
              "bwd ms", "share", "fwd GF/s", "bwd GF/s", "fwd GB/s", "bwd GB/s", "fwd roof",
              "bwd roof", "impl");
  const std::map<std::string, model::LayerWork> work = work_by_name(name);
  json layers = json::array();
  for (const LayerTime& l : v.layers) {
    const double f = l.forward_ms.median, b = l.backward_ms.median;
    const auto w = work.find(l.info.name);
    const double fwd_bytes = w == work.end() ? 0 : w->second.forward.bytes(batch);
    const double bwd_bytes = w == work.end() ? 0 : w->second.backward.bytes(batch);
    const Roofline fwd_roof = roofline(run, l.info.forward_flops, fwd_bytes, f);
    const Roofline bwd_roof = roofline(run, l.info.backward_flops, bwd_bytes, b);
    std::printf("%-10s %-19s %9.3f %9.3f %7s %9.1f %9.1f %9s %9s %9s %9s  %s\n",
                l.info.name.c_str(), l.info.kind.c_str(), f, b, pct(f + b, total).c_str(),
                f > 0 ? l.info.forward_flops / (f * 1e6) : 0.0,
                b > 0 ? l.info.backward_flops / (b * 1e6) : 0.0, gbs_text(fwd_bytes, f).c_str(),
                gbs_text(bwd_bytes, b).c_str(), fwd_roof.text().c_str(), bwd_roof.text().c_str(),
                l.info.impl.c_str());
    layers.push_back({{"name", l.info.name},
                      {"kind", l.info.kind},
                      {"impl", l.info.impl},
                      {"dst", l.info.dst.to_string()},
                      {"params", l.info.params},
                      {"forward_flops", l.info.forward_flops},
                      {"backward_flops", l.info.backward_flops},
                      {"forward_bytes", fwd_bytes},
                      {"backward_bytes", bwd_bytes},
                      {"forward_ms", summary_json(l.forward_ms)},
                      {"backward_ms", summary_json(l.backward_ms)},
                      {"share", (f + b) / total},
                      {"forward_roofline", fwd_roof.to_json()},
                      {"backward_roofline", bwd_roof.to_json()}});
  }
  std::printf("%-10s %-19s %9.3f %9s %7s\n", "loss+rest", "step - sum of layers", v.other_ms, "",
              pct(v.other_ms, total).c_str());
  std::printf("%-10s %-19s %9.3f %9s %7s\n", "update", "momentum_step", v.update_ms.median, "",
              pct(v.update_ms.median, total).c_str());
  std::printf("step %s ms -> %.0f img/s, %.1f GFLOP/s (%s of one core's peak)\n",
              fmt3(v.step_ms, "%.3f").c_str(), batch / (total * 1e-3),
              batch * v.flops_per_image / (total * 1e-3) / 1e9,
              pct(batch * v.flops_per_image / (total * 1e-3) / 1e9, run.peak_core).c_str());
  return {{"net", name},
          {"batch", batch},
          {"layers", layers},
          {"step_ms", summary_json(v.step_ms)},
          {"update_ms", summary_json(v.update_ms)},
          {"other_ms", v.other_ms}};
}

// Every net at the first batch size, one group on the first core; adds "layers".
Status layers_section(BenchRun& run) {
  json views = json::array();
  for (const std::string& name : run.cfg.nets) {
    const int64_t batch = run.cfg.batches[0];
    auto r = time_layers(run.topo, run.cfg, net_spec(name), batch);
    if (!r.ok()) return in_context(name + ": ", r.status());
    views.push_back(layer_report(run, name, batch, r.value()));
  }
  run.doc["layers"] = views;
  return Status::ok_status();
}

// ---- exchange over LeNet's arena ----
// Among as many groups as the largest layout has (all cores when that is one), printed against
// the triad; adds "exchange".
Status exchange_section(BenchRun& run) {
  int groups = 1;
  for (const GroupLayout& gl : run.cfg.layouts)
    groups = std::max(groups, gl.groups);
  if (groups == 1) groups = run.cores;
  auto r = time_exchange(run.topo, run.cfg, net_spec("lenet"), groups);
  if (!r.ok()) return in_context("exchange: ", r.status());
  const ExchangeResult& e = r.value();
  const double arena_triad = e.arena_triad_gbs.median;
  std::printf(
      "\n== exchange of LeNet's arena (n = %lld floats, %.2f MB) among %d groups "
      "(cpus %s); bytes = loads + stores of the loops, STREAM's count\n",
      static_cast<long long>(e.arena_floats), e.arena_floats * 4 / 1e6, e.groups,
      cpus_text(e.cpus).c_str());
  std::printf("%-32s %-28s %23s %9s %9s %9s\n", "operation", "bytes model", "us per call", "GB/s",
              "%triad", "%arena");
  json ops = json::array();
  for (const ExchangeTime& o : e.ops) {
    std::printf("%-32s %-28s %23s %9.1f %9s %9s\n", traffic_name(o.traffic),
                traffic_formula(o.traffic), fmt3(o.us, "%.1f").c_str(), o.gbs,
                pct(o.gbs, run.triad_all).c_str(), pct(o.gbs, arena_triad).c_str());
    ops.push_back({{"operation", traffic_name(o.traffic)},
                   {"bytes_model", traffic_formula(o.traffic)},
                   {"bytes", o.bytes},
                   {"us", summary_json(o.us)},
                   {"gbs", o.gbs},
                   {"fraction_of_triad", frac(o.gbs, run.triad_all)},
                   {"fraction_of_arena_triad", frac(o.gbs, arena_triad)}});
  }
  std::printf(
      "%%triad: of the all-core DRAM triad above; %%arena: of the triad over three "
      "arena-sized arrays per group, all groups at once (%s GB/s: cache-resident)\n",
      fmt3(e.arena_triad_gbs, "%.1f").c_str());
  run.doc["exchange"] = {{"net", "lenet"},    {"groups", e.groups},
                         {"cpus", e.cpus},    {"arena_floats", e.arena_floats},
                         {"operations", ops}, {"arena_triad_gbs", summary_json(e.arena_triad_gbs)}};
  return Status::ok_status();
}

// ---- memory and the JSON file ----
// Prints and adds the peak RSS, then writes the document to --json when given.
Status finish(BenchRun& run) {
  const long rss = peak_rss_kib();
  std::printf("\npeak resident memory (ru_maxrss) of this process: %.1f MB\n", rss / 1024.0);
  run.doc["peak_rss_kib"] = rss;
  if (run.cfg.json.empty()) return Status::ok_status();
  if (!write_atomic(run.cfg.json, run.doc.dump(2) + "\n")) {
    return io_error("--json: cannot write " + run.cfg.json);
  }
  std::printf("figures written to %s\n", run.cfg.json.c_str());
  return Status::ok_status();
}

// Prints "easel: MESSAGE" and returns `code`.
int fail(const Status& s, int code) {
  std::fprintf(stderr, "easel: %s\n", s.message().c_str());
  return code;
}

}  // namespace

CLI::App* add_bench_flags(CLI::App& app, bench::BenchFlags& f) {
  CLI::App* b = app.add_subcommand(
      "bench", "measure the machine's ceilings and easel's training-step and exchange speed");
  auto opt = [&](const char* name, auto& field, const char* help) {
    b->add_option(name, field, help)->capture_default_str();
  };
  opt("--nets", f.nets, "nets to time, comma-separated (easel list)");
  opt("--batches", f.batches, "batch sizes per group, comma-separated");
  opt("--layouts", f.layouts,
      "group layouts GROUPSxTHREADS, comma-separated (e.g. 1x1,2x1); default: those of 1x1, "
      "1x2, 2x1 that fit the cores this process may use (with --data-only only their group "
      "counts matter: one unpinned stream per group)");
  opt("--warmup", f.warmup, "untimed steps before timing each configuration");
  opt("--repeats", f.repeats, "timed repeats (min/median/max are over these)");
  opt("--min-time", f.min_time, "seconds each timed repeat lasts at least");
  opt("--json", f.json, "write every figure to this JSON file");
  b->add_flag("--overwrite", f.overwrite, "replace the --json file when it exists");
  b->add_flag("--skip-ceilings", f.skip_ceilings, "do not measure the FMA peak and the triad");
  b->add_flag(
      "--skip-layers", f.skip_layers,
      "do not time each layer (its table: per pass ms, GFLOP/s, GB/s and roof: the time its "
      "FLOPs need at the FMA peak or its bytes at the triad, the longer, over its time, "
      "named fma or mem; over 100%: faster than the ceiling measured, its bytes from cache or "
      "the peak timed low)");
  b->add_flag("--skip-exchange", f.skip_exchange, "do not time the arena exchange");
  b->add_flag("--oversubscribe", f.oversubscribe, "allow layouts with more threads than cores");
  opt("--layout", f.layout, "activation layout: nhwc or nchw");
  opt("--impl", f.impl, "kernels: fast (oneDNN, reference fallback) or ref");
  opt("--triad-mib", f.triad_mib, "MiB of each of the triad's three arrays (>> last-level cache)");
  opt("--data", f.data,
      "also time the data pipeline over this data set (as train --data: an image folder "
      "DIR[:SIDE], CIFAR, ...) against the steps' consumption");
  opt("--augment", f.augment, "the data pipeline's augmentation (as train --augment)");
  opt("--data-threads", f.data_threads, "threads of each stream's data pipeline (0: one)");
  b->add_flag("--data-only", f.data_only,
              "time the data pipeline alone (needs --data): no ceilings, steps, layers or "
              "exchange; --json gets data.images_per_second and "
              "data.images_per_second_per_thread");
  b->add_flag("--calibrate", f.calibrate,
              "measure what the performance model needs (easel model, easel plan) and write "
              "this machine's description (docs/MODEL.md); takes --nets, the first of --batches, "
              "--warmup, --repeats, --min-time");
  b->add_flag("--collectives", f.collectives,
              "only the collectives: each algorithm's allreduce time, algbw and busbw from 4 KB "
              "to the largest net's arena (nccl-tests' table), MPI_Allreduce beside them under "
              "mpirun; takes --ranks, --max-mb, --repeats, --json");
  opt("--ranks", f.ranks, "with --collectives in one process: the ranks (threads)");
  opt("--max-mb", f.max_mb,
      "with --collectives: the largest message in MB (0: the largest built-in net's arena)");
  opt("--out", f.out,
      "with --calibrate: the description's file (default: EASEL_MACHINE, else "
      "~/.config/easel/machine.toml)");
  return b;
}

int run_bench(const bench::BenchFlags& flags) {
  if (flags.collectives) {
    if (flags.calibrate || !flags.data.empty())
      return fail(invalid_argument("--collectives: runs alone (drop --calibrate and --data)"), 2);
    if (flags.max_mb < 0) return fail(invalid_argument("--max-mb: must be >= 0"), 2);
    if (!flags.json.empty() && !flags.overwrite && std::filesystem::exists(flags.json))
      return fail(invalid_argument("--json: " + flags.json + " exists (--overwrite replaces it)"),
                  2);
    bench::CollectivesFlags c;
    c.ranks = flags.ranks;
    c.max_mb = flags.max_mb;
    c.repeats = flags.repeats;
    nlohmann::json doc;
    if (Status s = bench::run_collectives_bench(c, &doc); !s.ok())
      return fail(s, s.code() == Code::invalid_argument ? 2 : 1);
    if (!flags.json.empty() && process_rank() == 0 && !write_atomic(flags.json, doc.dump(2) + "\n"))
      return fail(io_error("--json: cannot write " + flags.json), 1);
    return 0;
  }
  auto topo = detect_topology();  // the cores this process may use: the default layouts'
  if (!topo.ok()) return fail(topo.status(), 1);
  auto cfg = validate_flags(flags, topo->core_count());
  if (!cfg.ok()) return fail(cfg.status(), 2);
  auto data = validate_data_flags(flags);
  if (!data.ok()) return fail(data.status(), 2);
  if (!flags.out.empty() && !flags.calibrate)
    return fail(invalid_argument("--out: only with --calibrate (the figures go to --json)"), 2);
  if (flags.calibrate &&
      (flags.skip_ceilings || flags.skip_layers || flags.skip_exchange || !flags.data.empty()))
    return fail(invalid_argument("--calibrate: measures the ceilings, layers and exchange itself "
                                 "(drop --skip-* and --data)"),
                2);
  if (flags.calibrate) {
    const std::string out = flags.out.empty() ? model::default_calibration_path() : flags.out;
    if (std::filesystem::is_directory(out))
      return fail(invalid_argument("--out: " + out + " is a directory"), 2);
    if (Status s = run_calibration(cfg.value(), topo.value(), out); !s.ok()) return fail(s, 1);
    return 0;
  }
  BenchRun run{cfg.value(), topo.value(), topo->core_count(), 0, 0, 0, {}};
  // The layouts are planned only where they run: --data-only takes their group counts alone
  // (unpinned streams).
  if (!flags.data_only)
    if (Status s = check_layouts(run); !s.ok()) return fail(s, 2);
  run.doc = header(flags, run.cfg, run.cores);
  if (!run.cfg.skip_ceilings && !flags.data_only) {
    if (Status s = ceilings_section(run); !s.ok()) return fail(s, 1);
  }
  if (flags.data_only) {
    if (flags.data.empty())
      return fail(invalid_argument("--data-only: give --data (the data set to time)"), 2);
    if (Status s = data_section(run.cfg, data.value(), run.doc); !s.ok()) return fail(s, 1);
    if (Status s = finish(run); !s.ok()) return fail(s, 1);
    return 0;
  }
  if (Status s = steps_section(run); !s.ok()) return fail(s, 1);
  if (!data->data.empty()) {
    if (Status s = data_section(run.cfg, data.value(), run.doc); !s.ok()) return fail(s, 1);
  }
  if (const int weak_g = weak_scaling_groups(run.cfg, run.cores); weak_g > 0) {
    if (Status s = weak_scaling_section(run, weak_g); !s.ok()) return fail(s, 1);
  }
  if (!run.cfg.skip_layers) {
    if (Status s = layers_section(run); !s.ok()) return fail(s, 1);
  }
  if (!run.cfg.skip_exchange) {
    if (Status s = exchange_section(run); !s.ok()) return fail(s, 1);
  }
  if (Status s = finish(run); !s.ok()) return fail(s, 1);
  return 0;
}

}  // namespace easel::cli
