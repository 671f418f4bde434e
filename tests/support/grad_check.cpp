#include "tests/support/grad_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "engine/rng.hpp"

namespace easel::test {

namespace {

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

// "n=1 c=2 h=3 w=0" for offset i of shape s in layout l.
std::string coords(const Shape4& s, Layout l, int64_t i) {
  int64_t n, c, h, w;
  if (l == Layout::nchw) {
    w = i % s.w, h = i / s.w % s.h, c = i / (s.w * s.h) % s.c, n = i / s.per_image();
  } else {
    c = i % s.c, w = i / s.c % s.w, h = i / (s.c * s.w) % s.h, n = i / s.per_image();
  }
  return "n=" + std::to_string(n) + " c=" + std::to_string(c) + " h=" + std::to_string(h) +
         " w=" + std::to_string(w);
}

// Which elements of a tensor of n elements to check: all, or a seeded sample of max_checks.
std::vector<int64_t> sample(int64_t n, int64_t max_checks, uint64_t seed) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  if (n <= max_checks) return idx;
  Rng rng(seed);
  for (int64_t i = 0; i < max_checks; ++i)  // partial Fisher-Yates
    std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(i + rng.below(n - i))]);
  idx.resize(static_cast<size_t>(max_checks));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// The worst element seen while comparing one tensor.
struct Worst {
  double ratio = -1;  // |err| / tol
  int64_t index = -1;
  double analytic = 0, numeric = 0, err = 0, tol = 0;
  int64_t checked = 0, skipped = 0;
};

// Compares analytic[i] with central differences of `loss` for the sampled i, perturbing x[i].
template <typename Loss>
Worst compare(float* x, int64_t n, const float* analytic, double f0, const Loss& loss,
              const GradCheckOptions& opt, uint64_t seed) {
  Worst worst;
  for (int64_t i : sample(n, opt.max_checks, seed)) {
    const float v = x[i];
    const float vp = v + opt.step, vm = v - opt.step;
    x[i] = vp;
    const double fp = loss();
    x[i] = vm;
    const double fm = loss();
    x[i] = v;
    const double hp = static_cast<double>(vp) - v, hm = static_cast<double>(v) - vm;
    const double dp = (fp - f0) / hp, dm = (f0 - fm) / hm;
    const double numeric = (fp - fm) / (hp + hm);
    ++worst.checked;
    // A kink inside [v-h, v+h]: the one-sided slopes disagree by more than the tolerance.
    if (std::abs(dp - dm) > opt.atol + opt.rtol * std::max(std::abs(dp), std::abs(dm))) {
      ++worst.skipped;
      continue;
    }
    const double a = analytic[i];
    const double err = std::abs(a - numeric);
    const double tol = opt.atol + opt.rtol * std::max(std::abs(a), std::abs(numeric));
    const double ratio = std::isfinite(a) ? err / tol : INFINITY;
    if (ratio > worst.ratio) worst = {ratio, i, a, numeric, err, tol, worst.checked, worst.skipped};
  }
  return worst;
}

::testing::AssertionResult verdict(const Worst& w, const std::string& what,
                                   const GradCheckOptions& opt) {
  const std::string where = what + "[" + std::to_string(w.index) + "]";
  const std::string counts =
      std::to_string(w.checked) + " checked, " + std::to_string(w.skipped) + " skipped at kinks";
  if (w.checked > 0 && static_cast<float>(w.skipped) > opt.max_skip_fraction * w.checked)
    return ::testing::AssertionFailure() << what << ": too many elements at kinks (" << counts
                                         << "); lower step or move the inputs";
  if (w.ratio > 1.0)
    return ::testing::AssertionFailure()
           << where << ": analytic " << fmt("%.6g", w.analytic) << " vs numeric "
           << fmt("%.6g", w.numeric) << ", |err| " << fmt("%.3g", w.err) << " > tol "
           << fmt("%.3g", w.tol) << " (worst element; " << counts << ")";
  return ::testing::AssertionSuccess();
}

double project(const std::vector<float>& dst, const std::vector<float>& r) {
  double l = 0;
  for (size_t i = 0; i < dst.size(); ++i)
    l += static_cast<double>(dst[i]) * r[i];
  return l;
}

// The shape of input i of `d` (0: src, then more_src).
const Shape4& input_shape(const OpDesc& d, size_t i) {
  return i == 0 ? d.src : d.more_src[i - 1];
}

// `op_for_forward()` yields the op each perturbed forward runs on; `first` is the one whose
// forward + backward gives the analytic gradients. Every input (forward_n/backward_n) and every
// trained parameter is checked numerically; the state parameters' diff_weights must be 0.
template <typename NextOp>
::testing::AssertionResult run_check(Op& first, const NextOp& op_for_forward,
                                     const GradCheckOptions& opt) {
  const OpDesc& d = first.desc();
  const Shape4 so = dst_shape(d);
  const size_t inputs = 1 + d.more_src.size();
  std::vector<std::vector<float>> srcs, diff_srcs;
  for (size_t i = 0; i < inputs; ++i) {
    const int64_t count = input_shape(d, i).count();
    // input 0 seeded as before the kinds of several inputs; the others apart from every seed
    srcs.push_back(
        random_vector(count, i == 0 ? opt.seed : opt.seed + 1000 + i, opt.src_lo, opt.src_hi));
    diff_srcs.emplace_back(static_cast<size_t>(count), NAN);
  }
  std::vector<std::vector<float>> w = random_params(d, opt.seed + 1, opt.weight_lo, opt.weight_hi);
  const std::vector<float> r = random_vector(so.count(), opt.seed + 2);
  std::vector<float> dst(static_cast<size_t>(so.count()));
  std::vector<std::vector<float>> dw = w;
  for (auto& v : dw)
    std::fill(v.begin(), v.end(), NAN);  // backward must overwrite

  const std::vector<const float*> wp = const_ptrs(w);
  const std::vector<const float*> sp = const_ptrs(srcs);
  first.forward_n(sp, dst.data(), wp, opt.training);
  first.backward_n(sp, dst.data(), r.data(), mut_ptrs(diff_srcs), wp, mut_ptrs(dw));

  std::vector<float> scratch(dst.size());
  auto loss = [&] {
    op_for_forward().forward_n(sp, scratch.data(), wp, opt.training);
    return project(scratch, r);
  };
  const double f0 = loss();
  const std::string name = describe_op(d) + " (" + first.impl() + ")";

  if (opt.check_src) {
    for (size_t i = 0; i < inputs; ++i) {
      const Shape4& s = input_shape(d, i);
      Worst worst =
          compare(srcs[i].data(), s.count(), diff_srcs[i].data(), f0, loss, opt, opt.seed + 3 + i);
      const std::string what = inputs == 1 ? "diff_src" : "diff_src" + std::to_string(i);
      auto res = verdict(worst, what, opt);
      if (!res && worst.ratio > 1.0) res << " at " << coords(s, d.layout, worst.index);
      if (!res) return res << "; op " << name;
    }
  }
  if (opt.check_weights) {
    const size_t trained = w.size() - static_cast<size_t>(state_params(d));
    for (size_t p = 0; p < w.size(); ++p) {
      const std::string what = "diff_weights[" + std::to_string(p) + "]";
      if (p >= trained) {
        for (size_t i = 0; i < dw[p].size(); ++i)
          if (dw[p][i] != 0.f)
            return ::testing::AssertionFailure()
                   << what << "[" << i << "] = " << dw[p][i]
                   << ", a state parameter's (" + param_name(d, p) + ") gradient must be 0; op "
                   << name;
        continue;
      }
      Worst worst = compare(w[p].data(), static_cast<int64_t>(w[p].size()), dw[p].data(), f0, loss,
                            opt, opt.seed + 4 + p);
      auto res = verdict(worst, what, opt);
      if (!res) return res << "; op " << name;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

::testing::AssertionResult check_gradients(Op& op, const GradCheckOptions& opt) {
  return run_check(
      op, [&]() -> Op& { return op; }, opt);
}

::testing::AssertionResult check_gradients(const OpFactory& make, const GradCheckOptions& opt) {
  std::unique_ptr<Op> first = make();
  std::unique_ptr<Op> current;
  return run_check(
      *first,
      [&]() -> Op& {
        current = make();
        return *current;
      },
      opt);
}

::testing::AssertionResult check_loss_gradients(LossOp& loss, int64_t batch, int64_t classes,
                                                int64_t n, const GradCheckOptions& opt) {
  std::vector<float> logits = random_vector(batch * classes, opt.seed, -3.f, 3.f);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  Rng rng(opt.seed + 1);
  for (auto& l : labels)
    l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
  std::vector<float> prob(logits.size()), scratch(logits.size());
  std::vector<float> diff(logits.size(), NAN);
  int64_t correct = 0;
  const double f0 = loss.forward(logits.data(), labels.data(), prob.data(), n, &correct);
  loss.backward(prob.data(), labels.data(), diff.data(), n, 1.f);
  for (int64_t i = n * classes; i < batch * classes; ++i)
    if (diff[i] != 0.f)
      return ::testing::AssertionFailure() << "diff_logits[" << i << "] = " << diff[i]
                                           << " past the n = " << n << " rows used, not zeroed";
  auto f = [&] {
    int64_t c = 0;
    return loss.forward(logits.data(), labels.data(), scratch.data(), n, &c);
  };
  Worst worst = compare(logits.data(), batch * classes, diff.data(), f0, f, opt, opt.seed + 2);
  auto res = verdict(worst, "diff_logits", opt);
  if (!res && worst.ratio > 1.0)
    res << " (row " << worst.index / classes << ", class " << worst.index % classes << ")";
  if (!res) res << "; loss " << loss.impl();
  return res;
}

std::vector<float> random_vector(int64_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v)
    x = rng.uniform(lo, hi);
  return v;
}

::testing::AssertionResult near_scaled(const std::vector<float>& got,
                                       const std::vector<float>& want, float rtol, float atol_scale,
                                       const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " vs " << want.size();
  float m = 0.f;
  for (float x : want)
    m = std::max(m, std::abs(x));
  return near_all(got.data(), want.data(), static_cast<int64_t>(want.size()), rtol,
                  atol_scale * std::max(1.f, m), what.c_str());
}

::testing::AssertionResult near_all(const float* a, const float* b, int64_t n, float rtol,
                                    float atol, const char* what) {
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::abs(static_cast<double>(a[i]) - b[i]);
    const double tol = atol + rtol * std::max(std::abs(a[i]), std::abs(b[i]));
    const double ratio = std::isnan(err) ? INFINITY : err / tol;
    if (ratio > 1.0) ++bad;
    if (ratio > worst_ratio || worst < 0) worst_ratio = ratio, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << n << " elements differ; worst [" << worst << "] "
         << fmt("%.7g", a[worst]) << " vs " << fmt("%.7g", b[worst]) << " (rtol " << rtol
         << ", atol " << atol << ")";
}

std::vector<float> relayout(const float* src, const Shape4& s, Layout from, Layout to) {
  std::vector<float> dst(static_cast<size_t>(s.count()));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t h = 0; h < s.h; ++h)
        for (int64_t w = 0; w < s.w; ++w)
          dst[offset4(s, to, n, c, h, w)] = src[offset4(s, from, n, c, h, w)];
  return dst;
}

std::vector<std::vector<float>> random_params(const OpDesc& d, uint64_t seed, float lo, float hi) {
  std::vector<std::vector<float>> params;
  for (const auto& shape : param_shapes(d)) {
    int64_t count = 1;
    for (int64_t x : shape)
      count *= x;
    params.push_back(random_vector(count, seed++, lo, hi));
  }
  return params;
}

std::vector<const float*> const_ptrs(const std::vector<std::vector<float>>& v) {
  std::vector<const float*> p;
  for (const auto& x : v)
    p.push_back(x.data());
  return p;
}

std::vector<float*> mut_ptrs(std::vector<std::vector<float>>& v) {
  std::vector<float*> p;
  for (auto& x : v)
    p.push_back(x.data());
  return p;
}

}  // namespace easel::test
