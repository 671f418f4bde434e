// `easel bench`: the machine's ceilings (FMA peak, STREAM triad), training-step throughput per
// net, batch size and group layout as a fraction of the peak, the per-layer view, the
// exchange of the flat arena as a fraction of the triad, and peak RSS; printed and, with
// --json FILE, written as one JSON document. docs/PERFORMANCE.md explains every figure.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nets/models/models.hpp"
#include "tools/bench/bench.hpp"
#include "tools/cli.hpp"

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

}  // namespace

CLI::App* add_bench_flags(CLI::App& app, bench::BenchFlags& f) {
  CLI::App* b = app.add_subcommand(
      "bench", "measure the machine's ceilings and easel's training-step and exchange speed");
  auto opt = [&](const char* name, auto& field, const char* help) {
    b->add_option(name, field, help)->capture_default_str();
  };
  opt("--nets", f.nets, "nets to time, comma-separated (easel list)");
  opt("--batches", f.batches, "batch sizes per group, comma-separated");
  opt("--layouts", f.layouts, "group layouts GROUPSxTHREADS, comma-separated (e.g. 1x1,2x1)");
  opt("--warmup", f.warmup, "untimed steps before timing each configuration");
  opt("--repeats", f.repeats, "timed repeats (min/median/max are over these)");
  opt("--min-time", f.min_time, "seconds each timed repeat lasts at least");
  opt("--json", f.json, "write every figure to this JSON file");
  b->add_flag("--overwrite", f.overwrite, "replace the --json file when it exists");
  b->add_flag("--skip-ceilings", f.skip_ceilings, "do not measure the FMA peak and the triad");
  b->add_flag("--skip-layers", f.skip_layers, "do not time each layer");
  b->add_flag("--skip-exchange", f.skip_exchange, "do not time the arena exchange");
  b->add_flag("--oversubscribe", f.oversubscribe, "allow layouts with more threads than cores");
  opt("--layout", f.layout, "activation layout: nhwc or nchw");
  opt("--impl", f.impl, "kernels: fast (oneDNN, reference fallback) or ref");
  opt("--triad-mib", f.triad_mib, "MiB of each of the triad's three arrays (>> last-level cache)");
  return b;
}

int run_bench(const bench::BenchFlags& flags) {
  auto cfgr = validate_flags(flags);
  if (!cfgr.ok()) {
    std::fprintf(stderr, "easel: %s\n", cfgr.status().message().c_str());
    return 2;
  }
  const BenchConfig& cfg = cfgr.value();
  auto topo = detect_topology();
  if (!topo.ok()) {
    std::fprintf(stderr, "easel: %s\n", topo.status().message().c_str());
    return 1;
  }
  // Every layout must be plannable before anything is measured.
  for (const GroupLayout& gl : cfg.layouts) {
    PlanRequest req;
    req.groups = std::to_string(gl.groups);
    req.threads_per_group = gl.threads;
    req.oversubscribe = cfg.oversubscribe;
    auto plan = make_plan(topo.value(), req);
    if (!plan.ok()) {
      std::fprintf(stderr, "easel: --layouts %s: %s\n", gl.to_string().c_str(),
                   plan.status().message().c_str());
      return 2;
    }
  }
  const int cores = topo->core_count();
  json doc = {{"version", 1},
              {"date", utc_now()},
              {"machine", {{"cores", cores}, {"cpu", cpu_model()}}},
              {"flags",
               {{"nets", flags.nets},
                {"batches", flags.batches},
                {"layouts", flags.layouts},
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

  // ---- ceilings (first: the triad's child is forked before any thread starts) ----
  double peak_core = 0, peak_all = 0, triad_all = 0;
  if (!cfg.skip_ceilings) {
    auto c = measure_ceilings(topo.value(), cfg);
    if (!c.ok()) {
      std::fprintf(stderr, "easel: %s\n", c.status().message().c_str());
      return 1;
    }
    // Ceilings are best-of-repeats (STREAM's convention): the machine can do at least that.
    peak_core = c->fma_core_gflops.max;
    peak_all = c->fma_all_gflops.max;
    triad_all = c->triad_all_gbs.max;
    std::printf("\n== ceilings (the fractions below are of the best repeat, the max)\n");
    std::printf(
        "FP32 FMA peak (%s, %d accumulators x %d lanes): one core %s GFLOP/s, all %d "
        "cores %s GFLOP/s\n",
        c->isa.c_str(), c->accumulators, c->lanes, fmt3(c->fma_core_gflops, "%.1f").c_str(), cores,
        fmt3(c->fma_all_gflops, "%.1f").c_str());
    std::printf(
        "triad a = b + s*c, 3 x %lld MiB, bytes = 12 n (STREAM's count)%s: one core %s "
        "GB/s, all %d cores %s GB/s\n",
        static_cast<long long>(cfg.triad_mib), c->triad_in_child ? " [child process]" : "",
        fmt3(c->triad_core_gbs, "%.1f").c_str(), cores, fmt3(c->triad_all_gbs, "%.1f").c_str());
    doc["ceilings"] = {{"isa", c->isa},
                       {"accumulators", c->accumulators},
                       {"lanes", c->lanes},
                       {"fma_core_gflops", summary_json(c->fma_core_gflops)},
                       {"fma_all_gflops", summary_json(c->fma_all_gflops)},
                       {"triad_floats_per_array", c->triad_floats},
                       {"triad_in_child_process", c->triad_in_child},
                       {"triad_core_gbs", summary_json(c->triad_core_gbs)},
                       {"triad_all_gbs", summary_json(c->triad_all_gbs)}};
  }

  // ---- training steps ----
  std::printf(
      "\n== training steps (forward + loss + backward + momentum_step; synthetic "
      "inputs; every group on its own pinned thread, all at once; with G > 1 groups each step "
      "ends with sync-easgd's exchange, tau 1, as the trainer runs it (mirrored for 2 groups, "
      "partitioned for more), ordered by barriers)\n");
  std::printf("%-14s %5s %6s %-8s %6s %9s %21s %21s %8s %7s %7s\n", "net", "batch", "layout",
              "cpus", "steps", "step ms", "group 0 img/s", "aggregate img/s", "GFLOP/s", "%peak1",
              "%peakN");
  json steps = json::array();
  // (net, batch) -> one group's median img/s with the 1x1 layout, for weak scaling.
  std::vector<std::pair<std::string, double>> single;
  for (const std::string& name : cfg.nets) {
    const NetSpec spec = net_spec(name);
    for (int64_t batch : cfg.batches) {
      for (const GroupLayout& gl : cfg.layouts) {
        auto r = time_steps(topo.value(), cfg, spec, batch, gl);
        if (!r.ok()) {
          std::fprintf(stderr, "easel: %s b%lld %s: %s\n", name.c_str(),
                       static_cast<long long>(batch), gl.to_string().c_str(),
                       r.status().message().c_str());
          return 1;
        }
        const StepResult& s = r.value();
        const double g0 = s.group_ips[0].median, agg = s.aggregate_ips.median;
        const double gflops0 = g0 * s.flops_per_image / 1e9;
        const double gflops = agg * s.flops_per_image / 1e9;
        const int used = std::min(gl.groups * gl.threads, cores);
        const double group_peak = peak_core * gl.threads;
        const double node_peak = peak_all * used / std::max(cores, 1);
        std::printf("%-14s %5lld %6s %-8s %6lld %9.3f %21s %21s %8.1f %7s %7s\n", name.c_str(),
                    static_cast<long long>(batch), gl.to_string().c_str(),
                    cpus_text(s.cpus).c_str(), static_cast<long long>(s.steps_per_repeat),
                    s.step_ms.median, fmt3(s.group_ips[0], "%.0f").c_str(),
                    fmt3(s.aggregate_ips, "%.0f").c_str(), gflops, pct(gflops0, group_peak).c_str(),
                    pct(gflops, node_peak).c_str());
        const std::string key = name + "/" + std::to_string(batch);
        if (gl.groups == 1 && gl.threads == 1) single.emplace_back(key, g0);
        json groups = json::array();
        for (const Summary& g : s.group_ips)
          groups.push_back(summary_json(g));
        json j = {{"net", name},
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
  doc["steps"] = steps;

  // ---- weak scaling, interleaved ----
  // The table above times each layout in turn, so a load that comes and goes on one core lands
  // in one layout's figure and not the other's. Here every round times one group alone on each
  // of the G cores, then G groups at once, back to back, and the ratios are taken round by
  // round (their median is quoted): against one group alone on the first core (DESIGN.md §6's
  // definition), against the sum of the G cores' own solo rates in that round (what the G
  // cores could do at that moment, each alone), and against G times the slowest core's solo
  // rate (what G groups in lockstep can reach at best when the cores' speeds differ).
  int weak_g = 0;
  for (const GroupLayout& gl : cfg.layouts)
    if (gl.threads == 1 && gl.groups > 1 && gl.groups <= cores)
      weak_g = std::max(weak_g, gl.groups);
  const bool has_1x1 =
      std::find(cfg.layouts.begin(), cfg.layouts.end(), GroupLayout{1, 1}) != cfg.layouts.end();
  if (weak_g > 1 && has_1x1) {
    std::printf(
        "\n== weak scaling, interleaved (%d rounds; each: one group alone on each core, then %d "
        "groups at once; ratios per round, median [min, max])\n",
        cfg.repeats, weak_g);
    json weak = json::array();
    BenchConfig one = cfg;
    one.repeats = 1;
    for (const std::string& name : cfg.nets) {
      const NetSpec spec = net_spec(name);
      const int64_t batch = cfg.batches[0];
      std::vector<std::vector<double>> solo(static_cast<size_t>(weak_g));
      std::vector<double> together, vs_first, vs_sum, vs_min;
      for (int r = 0; r < cfg.repeats; ++r) {
        double sum = 0, slowest = 0;
        for (int c = 0; c < weak_g; ++c) {
          Topology alone = topo.value();
          alone.cores = {topo->cores[static_cast<size_t>(c)]};
          auto a = time_steps(alone, one, spec, batch, GroupLayout{1, 1});
          if (!a.ok()) {
            std::fprintf(stderr, "easel: weak scaling: %s\n", a.status().message().c_str());
            return 1;
          }
          const double ips = a->group_ips[0].median;
          solo[static_cast<size_t>(c)].push_back(ips);
          sum += ips;
          slowest = c == 0 ? ips : std::min(slowest, ips);
        }
        auto t = time_steps(topo.value(), one, spec, batch, GroupLayout{weak_g, 1});
        if (!t.ok()) {
          std::fprintf(stderr, "easel: weak scaling: %s\n", t.status().message().c_str());
          return 1;
        }
        const double agg = t->aggregate_ips.median;
        together.push_back(agg);
        vs_first.push_back(agg / (weak_g * solo[0].back()));
        vs_sum.push_back(agg / sum);
        vs_min.push_back(agg / (weak_g * slowest));
      }
      json solos = json::array();
      std::string solo_text;
      for (int c = 0; c < weak_g; ++c) {
        const Summary sc = summarize(solo[static_cast<size_t>(c)]);
        solos.push_back(summary_json(sc));
        solo_text += (c ? ", core " : "core ") + std::to_string(c) + " " + fmt3(sc, "%.0f");
      }
      const Summary e1 = summarize(vs_first), es = summarize(vs_sum), em = summarize(vs_min);
      std::printf("%-14s b%lld alone: %s img/s\n", name.c_str(), static_cast<long long>(batch),
                  solo_text.c_str());
      std::printf(
          "%-14s %dx1 at once: %s img/s; efficiency vs %d x core 0 alone %.1f%% [%.1f, %.1f], "
          "vs the sum of the cores alone %.1f%% [%.1f, %.1f], vs %d x the slowest core alone "
          "%.1f%% [%.1f, %.1f]\n",
          "", weak_g, fmt3(summarize(together), "%.0f").c_str(), weak_g, 100 * e1.median,
          100 * e1.min, 100 * e1.max, 100 * es.median, 100 * es.min, 100 * es.max, weak_g,
          100 * em.median, 100 * em.min, 100 * em.max);
      weak.push_back({{"net", name},
                      {"batch", batch},
                      {"groups", weak_g},
                      {"solo_images_per_second", solos},
                      {"together_images_per_second", summary_json(summarize(together))},
                      {"efficiency_vs_core0", summary_json(e1)},
                      {"efficiency_vs_sum_of_solos", summary_json(es)},
                      {"efficiency_vs_slowest_solo", summary_json(em)}});
    }
    doc["weak_scaling_interleaved"] = weak;
  }

  // ---- layer view ----
  if (!cfg.skip_layers) {
    json views = json::array();
    for (const std::string& name : cfg.nets) {
      const int64_t batch = cfg.batches[0];
      auto r = time_layers(topo.value(), cfg, net_spec(name), batch);
      if (!r.ok()) {
        std::fprintf(stderr, "easel: %s: %s\n", name.c_str(), r.status().message().c_str());
        return 1;
      }
      const LayerView& v = r.value();
      const double total = v.step_ms.median + v.update_ms.median;
      std::printf(
          "\n== layers of %s, batch %lld, one group on cpu %d (medians; share of "
          "train_step + momentum_step = %.3f ms)\n",
          name.c_str(), static_cast<long long>(batch), topo->cores[0][0], total);
      std::printf("%-10s %-19s %9s %9s %7s %9s %9s  %s\n", "layer", "kind", "fwd ms", "bwd ms",
                  "share", "fwd GF/s", "bwd GF/s", "impl");
      json layers = json::array();
      for (const LayerTime& l : v.layers) {
        const double f = l.forward_ms.median, b = l.backward_ms.median;
        std::printf("%-10s %-19s %9.3f %9.3f %7s %9.1f %9.1f  %s\n", l.info.name.c_str(),
                    l.info.kind.c_str(), f, b, pct(f + b, total).c_str(),
                    f > 0 ? l.info.forward_flops / (f * 1e6) : 0.0,
                    b > 0 ? l.info.backward_flops / (b * 1e6) : 0.0, l.info.impl.c_str());
        layers.push_back({{"name", l.info.name},
                          {"kind", l.info.kind},
                          {"impl", l.info.impl},
                          {"dst", l.info.dst.to_string()},
                          {"params", l.info.params},
                          {"forward_flops", l.info.forward_flops},
                          {"backward_flops", l.info.backward_flops},
                          {"forward_ms", summary_json(l.forward_ms)},
                          {"backward_ms", summary_json(l.backward_ms)},
                          {"share", (f + b) / total}});
      }
      std::printf("%-10s %-19s %9.3f %9s %7s\n", "loss+rest", "step - sum of layers", v.other_ms,
                  "", pct(v.other_ms, total).c_str());
      std::printf("%-10s %-19s %9.3f %9s %7s\n", "update", "momentum_step", v.update_ms.median, "",
                  pct(v.update_ms.median, total).c_str());
      std::printf("step %s ms -> %.0f img/s, %.1f GFLOP/s (%s of one core's peak)\n",
                  fmt3(v.step_ms, "%.3f").c_str(), batch / (total * 1e-3),
                  batch * v.flops_per_image / (total * 1e-3) / 1e9,
                  pct(batch * v.flops_per_image / (total * 1e-3) / 1e9, peak_core).c_str());
      views.push_back({{"net", name},
                       {"batch", batch},
                       {"layers", layers},
                       {"step_ms", summary_json(v.step_ms)},
                       {"update_ms", summary_json(v.update_ms)},
                       {"other_ms", v.other_ms}});
    }
    doc["layers"] = views;
  }

  // ---- exchange over LeNet's arena ----
  if (!cfg.skip_exchange) {
    int groups = 1;
    for (const GroupLayout& gl : cfg.layouts)
      groups = std::max(groups, gl.groups);
    if (groups == 1) groups = cores;
    auto r = time_exchange(topo.value(), cfg, net_spec("lenet"), groups);
    if (!r.ok()) {
      std::fprintf(stderr, "easel: exchange: %s\n", r.status().message().c_str());
      return 1;
    }
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
                  pct(o.gbs, triad_all).c_str(), pct(o.gbs, arena_triad).c_str());
      ops.push_back({{"operation", traffic_name(o.traffic)},
                     {"bytes_model", traffic_formula(o.traffic)},
                     {"bytes", o.bytes},
                     {"us", summary_json(o.us)},
                     {"gbs", o.gbs},
                     {"fraction_of_triad", frac(o.gbs, triad_all)},
                     {"fraction_of_arena_triad", frac(o.gbs, arena_triad)}});
    }
    std::printf(
        "%%triad: of the all-core DRAM triad above; %%arena: of the triad over three "
        "arena-sized arrays per group, all groups at once (%s GB/s: cache-resident)\n",
        fmt3(e.arena_triad_gbs, "%.1f").c_str());
    doc["exchange"] = {{"net", "lenet"},    {"groups", e.groups},
                       {"cpus", e.cpus},    {"arena_floats", e.arena_floats},
                       {"operations", ops}, {"arena_triad_gbs", summary_json(e.arena_triad_gbs)}};
  }

  const long rss = peak_rss_kib();
  std::printf("\npeak resident memory (ru_maxrss) of this process: %.1f MB\n", rss / 1024.0);
  doc["peak_rss_kib"] = rss;
  if (!cfg.json.empty()) {
    if (!write_atomic(cfg.json, doc.dump(2) + "\n")) {
      std::fprintf(stderr, "easel: --json: cannot write %s\n", cfg.json.c_str());
      return 1;
    }
    std::printf("figures written to %s\n", cfg.json.c_str());
  }
  return 0;
}

}  // namespace easel::cli
