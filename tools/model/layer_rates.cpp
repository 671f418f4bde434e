#include "tools/model/layer_rates.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "nets/graph.hpp"

namespace easel::model {

std::string layer_class(const OpDesc& d) {
  if (d.kind != OpKind::conv) return op_kind_name(d.kind);
  if (d.src.c <= 4) return "conv-stem";
  if (d.kh == 1 && d.kw == 1) return "conv1x1";
  return "conv";
}

Result<std::vector<LayerWork>> layer_work(const NetSpec& spec) {
  EASEL_ASSIGN_OR_RETURN(NetGraph g, resolve_graph(spec));
  EASEL_ASSIGN_OR_RETURN(
      std::vector<Shape4> shapes,
      infer_shapes(g, spec, {1, spec.channels, spec.height, spec.width}, Layout::nchw));
  std::vector<LayerWork> out;
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const OpDesc& d = g.layers[i].op;
    double src = static_cast<double>(d.src.count());
    for (const Shape4& s : d.more_src)
      src += static_cast<double>(s.count());
    const double dst = static_cast<double>(shapes[i].count());
    double params = 0;
    for (const std::vector<int64_t>& p : param_shapes(d)) {
      double n = 1;
      for (int64_t x : p)
        n *= static_cast<double>(x);
      params += n;
    }
    const bool diff_src = std::any_of(g.in[i].begin(), g.in[i].end(), [](int t) { return t >= 0; });
    LayerWork w;
    w.name = g.layers[i].name;
    w.cls = layer_class(d);
    // Forward: the inputs read, the output written, the weights read.
    w.forward = {forward_flops(d), 4 * (src + dst), 4 * params};
    // Backward: the inputs (for the weights' gradient) and the output's gradient read, the
    // inputs' gradient written (not for a layer on the images); weights read, gradient written.
    w.backward = {backward_flops(d, diff_src), 4 * (src + dst + (diff_src ? src : 0)), 8 * params};
    out.push_back(std::move(w));
  }
  return out;
}

double LayerRate::seconds(double flops, double bytes) const {
  return (gflops > 0 ? flops / (gflops * 1e9) : 0) + (gbs > 0 ? bytes / (gbs * 1e9) : 0);
}

namespace {

// Least squares of sum ((a f_i + b y_i) / t_i - 1)^2 over a >= 0, b >= 0 (seconds per flop
// and per byte): the unconstrained 2x2 solution when both are positive, else the better of the
// one-term fits.
LayerRate fit_one(const std::vector<const LayerSample*>& s) {
  double ff = 0, fy = 0, yy = 0, f1 = 0, y1 = 0;
  for (const LayerSample* x : s) {
    const double f = x->flops / x->seconds, y = x->bytes / x->seconds;
    ff += f * f;
    fy += f * y;
    yy += y * y;
    f1 += f;
    y1 += y;
  }
  auto residual = [&](double a, double b) {
    double r = 0;
    for (const LayerSample* x : s) {
      const double e = (a * x->flops + b * x->bytes) / x->seconds - 1;
      r += e * e;
    }
    return r;
  };
  struct Candidate {
    double a, b;
  };
  std::vector<Candidate> cands;
  const double det = ff * yy - fy * fy;
  if (det > 1e-12 * ff * yy) {
    const double a = (f1 * yy - y1 * fy) / det, b = (y1 * ff - f1 * fy) / det;
    if (a > 0 && b > 0) cands.push_back({a, b});
  }
  if (ff > 0) cands.push_back({f1 / ff, 0});
  if (yy > 0) cands.push_back({0, y1 / yy});
  LayerRate r;
  r.samples = static_cast<int>(s.size());
  double best = 1e300;
  for (const Candidate& c : cands) {
    const double e = residual(c.a, c.b);
    if (e < best) {
      best = e;
      r.gflops = c.a > 0 ? 1 / (c.a * 1e9) : 0;
      r.gbs = c.b > 0 ? 1 / (c.b * 1e9) : 0;
    }
  }
  return r;
}

}  // namespace

std::vector<LayerRate> fit_layer_rates(const std::vector<LayerSample>& samples) {
  std::map<std::pair<std::string, bool>, std::vector<const LayerSample*>> by;
  for (const LayerSample& s : samples)
    if (s.seconds > 0 && std::isfinite(s.seconds) && (s.flops > 0 || s.bytes > 0))
      by[{s.cls, s.backward}].push_back(&s);
  std::vector<LayerRate> out;
  for (const auto& [key, group] : by) {
    LayerRate r = fit_one(group);
    r.cls = key.first;
    r.backward = key.second;
    if (r.gflops > 0 || r.gbs > 0) out.push_back(std::move(r));
  }
  return out;
}

double log_log_interpolate(std::vector<std::pair<double, double>> at, double x) {
  if (at.empty() || x <= 0) return -1;
  std::sort(at.begin(), at.end());
  if (x <= at.front().first) return at.front().second * x / at.front().first;
  if (x >= at.back().first) return at.back().second * x / at.back().first;
  size_t i = 1;
  while (at[i].first < x)
    ++i;
  const auto &a = at[i - 1], &b = at[i];
  const double f = std::log(x / a.first) / std::log(b.first / a.first);
  return std::exp(std::log(a.second) + f * std::log(b.second / a.second));
}

StepEstimate estimate_step(const StepRates& r, const std::vector<LayerWork>& layers,
                           double arena_floats, int64_t batch) {
  StepEstimate e;
  LayerRate fallback;
  fallback.gflops = r.fallback_gflops;
  fallback.gbs = r.fallback_gbs;
  auto rate_of = [&](const std::string& cls, bool backward) -> const LayerRate& {
    for (const LayerRate& x : r.rates)
      if (x.cls == cls && x.backward == backward) return x;
    if (std::find(e.fallback.begin(), e.fallback.end(), cls) == e.fallback.end())
      e.fallback.push_back(cls);
    return fallback;
  };
  for (const LayerWork& l : layers) {
    e.forward.push_back(
        rate_of(l.cls, false).seconds(l.forward.flops(batch), l.forward.bytes(batch)));
    e.backward.push_back(
        rate_of(l.cls, true).seconds(l.backward.flops(batch), l.backward.bytes(batch)));
    e.layer_seconds += e.forward.back() + e.backward.back();
  }
  if (!r.update_by_size.empty())
    e.update_seconds = log_log_interpolate(r.update_by_size, 4 * arena_floats);
  else if (r.update_gbs > 0)
    e.update_seconds = 20 * arena_floats / (r.update_gbs * 1e9);
  e.other_seconds = r.other_per_image * static_cast<double>(batch);
  e.seconds = e.layer_seconds + e.update_seconds + e.other_seconds;
  return e;
}

}  // namespace easel::model
