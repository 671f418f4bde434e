#include "tools/bench/bench_model.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "devices/device.hpp"
#include "engine/memory.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"

namespace easel::bench {

namespace {

// Parses a whole decimal integer in [lo, hi]; false otherwise.
bool parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  const int64_t v = std::strtoll(s.c_str(), nullptr, 10);
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

std::string GroupLayout::to_string() const {
  return std::to_string(groups) + "x" + std::to_string(threads);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Result<std::vector<GroupLayout>> parse_layouts(const std::string& text) {
  std::vector<GroupLayout> out;
  for (const std::string& tok : split_list(text)) {
    const size_t x = tok.find('x');
    int64_t g = 0, t = 0;
    if (x == std::string::npos || !parse_int(tok.substr(0, x), 1, 4096, &g) ||
        !parse_int(tok.substr(x + 1), 1, 4096, &t)) {
      return invalid_argument("--layouts: '" + tok +
                              "' is not GROUPSxTHREADS (e.g. 1x1,2x1: groups x threads per "
                              "group, each in [1, 4096])");
    }
    out.push_back({static_cast<int>(g), static_cast<int>(t)});
  }
  if (out.empty()) return invalid_argument("--layouts: empty (e.g. --layouts 1x1,2x1)");
  return out;
}

Result<std::vector<int64_t>> parse_batches(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& tok : split_list(text)) {
    int64_t b = 0;
    if (!parse_int(tok, 1, 65536, &b))
      return invalid_argument("--batches: '" + tok + "' is not a batch size in [1, 65536]");
    out.push_back(b);
  }
  if (out.empty()) return invalid_argument("--batches: empty (e.g. --batches 64,128)");
  return out;
}

BenchInput bench_input(const std::string& net) {
  // The input the net's description declares (a file's own [input], else LeNet's).
  for (const ModelEntry& m : model_list())
    if (m.name == net) return {m.input.channels, m.input.height, m.input.width, m.input.classes};
  if (is_net_file(net))  // a description or an ONNX file
    if (Result<NetHeader> h = read_net_header(net); h.ok())
      return {h->input.channels, h->input.height, h->input.width, h->input.classes};
  return {1, 28, 28, 10};
}

std::vector<GroupLayout> default_layouts(int cores) {
  std::vector<GroupLayout> out;
  for (const GroupLayout gl : {GroupLayout{1, 1}, GroupLayout{1, 2}, GroupLayout{2, 1}})
    if (gl.groups * gl.threads <= std::max(cores, 1)) out.push_back(gl);
  return out;
}

Result<BenchConfig> validate_flags(const BenchFlags& f, int cores) {
  BenchConfig c;
  c.nets = split_list(f.nets);
  if (c.nets.empty()) return invalid_argument("--nets: empty (e.g. --nets lenet,cifar10-quick)");
  for (const std::string& n : c.nets) {
    const BenchInput in = bench_input(n);
    auto spec = build_model(n, {in.channels, in.height, in.width, in.classes});
    if (!spec.ok()) {
      std::string m = spec.status().message();
      if (m.rfind("--net:", 0) == 0) m = "--nets:" + m.substr(6);
      return invalid_argument(m);
    }
  }
  EASEL_ASSIGN_OR_RETURN(c.batches, parse_batches(f.batches));
  if (f.layouts.empty()) {
    c.layouts = default_layouts(cores);
  } else {
    EASEL_ASSIGN_OR_RETURN(c.layouts, parse_layouts(f.layouts));
  }
  if (f.warmup < 0 || f.warmup > 100000)
    return invalid_argument("--warmup: " + std::to_string(f.warmup) +
                            " is out of range [0, 100000]");
  if (f.repeats < 1 || f.repeats > 1000)
    return invalid_argument("--repeats: " + std::to_string(f.repeats) +
                            " is out of range [1, 1000]");
  if (!std::isfinite(f.min_time) || f.min_time < 0 || f.min_time > 60) {
    char v[32];
    std::snprintf(v, sizeof v, "%g", f.min_time);
    return invalid_argument(std::string("--min-time: ") + v + " is out of range [0, 60] seconds");
  }
  if (f.layout != "nhwc" && f.layout != "nchw")
    return invalid_argument("--layout: unknown layout '" + f.layout + "' (accepted: nhwc, nchw)");
  if (!parse_impl_choice(f.impl).ok())
    return invalid_argument("--impl: unknown implementation '" + f.impl +
                            "' (accepted: fast, ref)");
  if (f.triad_mib < 1 || f.triad_mib > 65536)
    return invalid_argument("--triad-mib: " + std::to_string(f.triad_mib) +
                            " is out of range [1, 65536]");
  if (!f.json.empty()) {
    namespace fs = std::filesystem;
    const fs::path parent = fs::path(f.json).parent_path();
    std::error_code ec;
    if (!parent.empty() && fs::exists(parent, ec) && !fs::is_directory(parent, ec))
      return invalid_argument("--json: '" + parent.string() + "' is not a directory");
    if (!parent.empty() && !fs::is_directory(parent, ec))
      return invalid_argument("--json: directory '" + parent.string() + "' does not exist");
    if (fs::is_directory(f.json, ec))
      return invalid_argument("--json: " + f.json + " is a directory");
    if (fs::exists(f.json, ec) && !f.overwrite)
      return invalid_argument("--json: " + f.json +
                              " exists (give --overwrite to replace it; it is kept otherwise)");
  }
  // The triad's three arrays are touched page by page: they must fit well within the memory.
  const double memory = physical_memory_bytes();
  if (!f.skip_ceilings && memory > 0 &&
      3.0 * static_cast<double>(f.triad_mib) * 1048576.0 > memory / 2)
    return invalid_argument("--triad-mib: " + std::to_string(f.triad_mib) + ": 3 x " +
                            std::to_string(f.triad_mib) +
                            " MiB is more than half of this machine's " +
                            std::to_string(static_cast<long long>(memory / 1048576.0)) +
                            " MiB (lower it, or --skip-ceilings)");
  c.warmup = f.warmup;
  c.repeats = f.repeats;
  c.min_time = f.min_time;
  c.json = f.json;
  c.skip_ceilings = f.skip_ceilings;
  c.skip_layers = f.skip_layers;
  c.skip_exchange = f.skip_exchange;
  c.oversubscribe = f.oversubscribe;
  c.layout = f.layout;
  c.impl = f.impl;
  c.triad_mib = f.triad_mib;
  return c;
}

double fma_loop_flops(int64_t iterations, int accumulators, int lanes) {
  return 2.0 * static_cast<double>(iterations) * accumulators * lanes;
}

const char* traffic_name(Traffic t) {
  switch (t) {
    case Traffic::triad:
      return "triad";
    case Traffic::tree_reduce:
      return "reduce_sum (tree)";
    case Traffic::tree_broadcast:
      return "broadcast (tree)";
    case Traffic::ring_reduce:
      return "reduce_sum (ring)";
    case Traffic::ring_broadcast:
      return "broadcast (ring)";
    case Traffic::elastic_sgd_step:
      return "elastic_sgd_step (every group)";
    case Traffic::elastic_centre_sum:
      return "elastic_centre_sum (root)";
    case Traffic::momentum_step:
      return "momentum_step (every group)";
    case Traffic::sync_exchange:
      return "sync-easgd exchange (tree)";
    case Traffic::sync_exchange_partitioned:
      return "sync-easgd exchange (partitioned)";
    case Traffic::sync_exchange_mirrored:
      return "sync-easgd exchange (mirrored)";
  }
  return "unknown";
}

const char* traffic_formula(Traffic t) {
  switch (t) {
    case Traffic::triad:
      return "12 n";
    case Traffic::tree_reduce:
      return "12 n (P-1)";
    case Traffic::tree_broadcast:
      return "8 n (P-1)";
    case Traffic::ring_reduce:
      return "12 n (P-1) + 8 n";
    case Traffic::ring_broadcast:
      return "8 n (P-1)";
    case Traffic::elastic_sgd_step:
      return "16 n P";
    case Traffic::elastic_centre_sum:
      return "12 n";
    case Traffic::momentum_step:
      return "20 n P";
    case Traffic::sync_exchange:
      return "12 n (P-1) + 16 n P + 12 n";
    case Traffic::sync_exchange_partitioned:
      return "4 n P + 8 n + 16 n P";
    case Traffic::sync_exchange_mirrored:
      return "4 n P^2 + 20 n P";
  }
  return "";
}

double traffic_bytes(Traffic t, int64_t n_floats, int p) {
  const double n = static_cast<double>(n_floats);
  const double pm1 = static_cast<double>(std::max(p, 1) - 1);
  const double pp = static_cast<double>(std::max(p, 1));
  switch (t) {
    case Traffic::triad:
      return 12 * n;
    case Traffic::tree_reduce:
      return 12 * n * pm1;
    case Traffic::tree_broadcast:
    case Traffic::ring_broadcast:
      return 8 * n * pm1;
    case Traffic::ring_reduce:
      return p > 1 ? 12 * n * pm1 + 8 * n : 0;
    case Traffic::elastic_sgd_step:
      return 16 * n * pp;
    case Traffic::elastic_centre_sum:
      return 12 * n;
    case Traffic::momentum_step:
      return 20 * n * pp;
    case Traffic::sync_exchange:
      return 12 * n * pm1 + 16 * n * pp + 12 * n;
    case Traffic::sync_exchange_partitioned:
      return 4 * n * pp + 8 * n + 16 * n * pp;
    case Traffic::sync_exchange_mirrored:
      return 4 * n * pp * pp + 20 * n * pp;
  }
  return 0;
}

Summary summarize(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t k = v.size();
  const double med = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
  return {v.front(), med, v.back()};
}

}  // namespace easel::bench
