#include "model/layer_rates.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "nets/graph.hpp"

namespace easel::model {

namespace {

double param_count(const OpDesc& d) {
  double params = 0;
  for (const std::vector<int64_t>& p : param_shapes(d)) {
    double n = 1;
    for (int64_t x : p)
      n *= static_cast<double>(x);
    params += n;
  }
  return params;
}

// n rounded up to a whole number of vectors of `lanes`.
double padded(int64_t n, int lanes) {
  return static_cast<double>((n + lanes - 1) / lanes * lanes);
}

}  // namespace

double col_bytes(const OpDesc& d, const Shape4& dst, int lanes) {
  if (d.kind != OpKind::conv || d.group != 1) return 0;
  return 8.0 * static_cast<double>(dst.h * dst.w * d.kh * d.kw) * padded(d.src.c, lanes);
}

std::string layer_class(const OpDesc& d) {
  if (d.kind == OpKind::inner_product)
    return 4 * param_count(d) > kStreamedWeightBytes ? "inner_product-streamed" : "inner_product";
  if (d.kind != OpKind::conv) return op_kind_name(d.kind);
  if (d.src.c <= 4) return "conv-stem";
  if (d.kh == 1 && d.kw == 1) return "conv1x1";
  return "conv";
}

bool gemm_class(const std::string& cls) {
  return cls == "conv" || cls == "conv-stem" || cls == "conv1x1" || cls == "inner_product" ||
         cls == "inner_product-streamed";
}

Result<std::vector<LayerWork>> layer_work(const NetSpec& spec, int lanes) {
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
    const double params = param_count(d);
    const bool diff_src = std::any_of(g.in[i].begin(), g.in[i].end(), [](int t) { return t >= 0; });
    LayerWork w;
    w.name = g.layers[i].name;
    w.cls = layer_class(d);
    // Forward: the inputs read, the output written, the weights read. The pixels: the larger
    // of the input's and the output's maps (an inner product's GEMM loops over no map).
    const double pixels =
        d.kind == OpKind::inner_product
            ? 0
            : static_cast<double>(std::max(d.src.h * d.src.w, shapes[i].h * shapes[i].w));
    // A convolution's kernels compute its output channels in vectors of `lanes`: its flops
    // count them rounded up to a whole vector.
    const double oc_pad =
        d.kind == OpKind::conv ? padded(d.oc, lanes) / static_cast<double>(d.oc) : 1;
    w.forward = {oc_pad * forward_flops(d), 4 * (src + dst), 4 * params, pixels};
    // Backward: the inputs (for the weights' gradient) and the output's gradient read, the
    // inputs' gradient written (not for a layer on the images); weights read, gradient written.
    w.backward = {oc_pad * backward_flops(d, diff_src), 4 * (src + dst + (diff_src ? src : 0)),
                  8 * params, pixels};
    if (diff_src) w.backward.bytes_per_image += col_bytes(d, shapes[i], lanes);
    out.push_back(std::move(w));
  }
  return out;
}

double LayerRate::seconds(double flops, double bytes, double weight_bytes, double pixels) const {
  double t = gflops > 0 ? flops / (gflops * 1e9) : 0;
  if (gpixels > 0) t += pixels / (gpixels * 1e9);
  if (weight_gbs) {
    bytes -= weight_bytes;
    if (*weight_gbs > 0) t += weight_bytes / (*weight_gbs * 1e9);
  }
  return t + (gbs > 0 ? bytes / (gbs * 1e9) : 0);
}

namespace {

// Least squares of sum_i (sum_k c_k x_ik / t_i - 1)^2 over c_k >= lower_k (seconds per flop,
// per byte, ...): every choice of the terms left free (the others at their bound) solved by its
// normal equations, the best feasible one kept; empty when only the bounds remain and they are
// all 0.
std::vector<double> fit_bounded(const std::vector<std::vector<double>>& x,
                                const std::vector<double>& t, const std::vector<double>& lower) {
  const size_t k = lower.size();
  auto residual = [&](const std::vector<double>& c) {
    double r = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double e = -1;
      for (size_t j = 0; j < k; ++j)
        e += c[j] * x[i][j] / t[i];
      r += e * e;
    }
    return r;
  };
  std::vector<double> best;
  double best_r = 1e300;
  for (unsigned mask = 0; mask < (1u << k); ++mask) {
    std::vector<size_t> free;
    for (size_t j = 0; j < k; ++j)
      if (mask & (1u << j)) free.push_back(j);
    const size_t f = free.size();
    // The normal equations of the free terms against what the bounded ones leave.
    std::vector<std::vector<double>> a(f, std::vector<double>(f + 1, 0));
    for (size_t i = 0; i < x.size(); ++i) {
      double rest = 1;
      for (size_t j = 0; j < k; ++j)
        if (!(mask & (1u << j))) rest -= lower[j] * x[i][j] / t[i];
      for (size_t p = 0; p < f; ++p) {
        const double xp = x[i][free[p]] / t[i];
        for (size_t q = 0; q < f; ++q)
          a[p][q] += xp * x[i][free[q]] / t[i];
        a[p][f] += xp * rest;
      }
    }
    bool solved = true;  // Gauss-Jordan with partial pivoting
    for (size_t p = 0; p < f && solved; ++p) {
      size_t piv = p;
      for (size_t q = p + 1; q < f; ++q)
        if (std::abs(a[q][p]) > std::abs(a[piv][p])) piv = q;
      std::swap(a[p], a[piv]);
      if (!(std::abs(a[p][p]) > 1e-12 * std::max(1.0, std::abs(a[0][0])))) solved = false;
      for (size_t q = 0; q < f && solved; ++q) {
        if (q == p) continue;
        const double m = a[q][p] / a[p][p];
        for (size_t r = p; r <= f; ++r)
          a[q][r] -= m * a[p][r];
      }
    }
    if (!solved) continue;
    std::vector<double> c = lower;
    bool feasible = true;
    for (size_t p = 0; p < f; ++p) {
      c[free[p]] = a[p][f] / a[p][p];
      feasible = feasible && std::isfinite(c[free[p]]) && c[free[p]] >= lower[free[p]];
    }
    if (!feasible || std::all_of(c.begin(), c.end(), [](double v) { return v <= 0; })) continue;
    const double r = residual(c);
    if (r < best_r) {
      best_r = r;
      best = c;
    }
  }
  return best;
}

double per_second(double seconds_per_unit) {
  return seconds_per_unit > 0 ? 1 / (seconds_per_unit * 1e9) : 0;
}

LayerRate fit_one(const std::vector<const LayerSample*>& s, bool gemm, double peak_gflops) {
  std::vector<std::vector<double>> x;
  std::vector<double> t;
  for (const LayerSample* p : s) {
    if (gemm)
      x.push_back({p->flops, p->bytes - p->weight_bytes, p->weight_bytes});
    else
      x.push_back({p->flops, p->bytes, p->pixels});
    t.push_back(p->seconds);
  }
  std::vector<double> lower(3, 0.0);
  if (gemm && peak_gflops > 0) lower[0] = 1 / (peak_gflops * 1e9);
  const std::vector<double> c = fit_bounded(x, t, lower);
  LayerRate r;
  r.samples = static_cast<int>(s.size());
  if (c.empty()) return r;
  r.gflops = per_second(c[0]);
  r.gbs = per_second(c[1]);
  if (gemm)
    r.weight_gbs = per_second(c[2]);
  else
    r.gpixels = per_second(c[2]);
  return r;
}

}  // namespace

std::vector<LayerRate> fit_layer_rates(const std::vector<LayerSample>& samples,
                                       double peak_gflops) {
  std::map<std::pair<std::string, bool>, std::vector<const LayerSample*>> by;
  for (const LayerSample& s : samples)
    if (s.seconds > 0 && std::isfinite(s.seconds) && (s.flops > 0 || s.bytes > 0))
      by[{s.cls, s.backward}].push_back(&s);
  std::vector<LayerRate> out;
  for (const auto& [key, group] : by) {
    LayerRate r = fit_one(group, gemm_class(key.first), peak_gflops);
    r.cls = key.first;
    r.backward = key.second;
    if (r.gflops > 0 || r.gbs > 0 || r.weight_gbs.value_or(0) > 0 || r.gpixels > 0)
      out.push_back(std::move(r));
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
    e.forward.push_back(rate_of(l.cls, false)
                            .seconds(l.forward.flops(batch), l.forward.bytes(batch),
                                     l.forward.bytes_per_batch, l.forward.pixels(batch)));
    e.backward.push_back(rate_of(l.cls, true)
                             .seconds(l.backward.flops(batch), l.backward.bytes(batch),
                                      l.backward.bytes_per_batch, l.backward.pixels(batch)));
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
