#include "algos/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

namespace easel {

namespace {

// A rate as a user wrote it (%g: 0.01, 1e+03), not std::to_string's 0.010000.
std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

double LrSchedule::at(int64_t iter) const {
  const double it = static_cast<double>(iter);
  const double ramp = iter < warmup ? (it + 1) / static_cast<double>(warmup) : 1.0;
  switch (policy) {
    case Policy::fixed:
      return ramp * base;
    case Policy::step:
      return ramp * base * std::pow(gamma, std::floor(it / static_cast<double>(stepsize)));
    case Policy::inv:
      return ramp * base * std::pow(1.0 + gamma * it, -power);
    case Policy::exp:
      return ramp * base * std::pow(gamma, it);
    case Policy::poly: {
      const double frac = std::min(1.0, it / static_cast<double>(std::max<int64_t>(1, max_iter)));
      return ramp * base * std::pow(1.0 - frac, power);
    }
    case Policy::cosine: {
      const double span = static_cast<double>(std::max<int64_t>(1, max_iter - warmup));
      const double t = std::clamp((it - static_cast<double>(warmup)) / span, 0.0, 1.0);
      return ramp * base * (1 + std::cos(std::numbers::pi * t)) / 2;
    }
  }
  return base;
}

const char* lr_policy_name(LrSchedule::Policy p) {
  switch (p) {
    case LrSchedule::Policy::fixed:
      return "fixed";
    case LrSchedule::Policy::step:
      return "step";
    case LrSchedule::Policy::inv:
      return "inv";
    case LrSchedule::Policy::exp:
      return "exp";
    case LrSchedule::Policy::poly:
      return "poly";
    case LrSchedule::Policy::cosine:
      return "cosine";
  }
  return "?";
}

std::string LrSchedule::to_string() const {
  std::string s = std::string(lr_policy_name(policy)) + "(base " + std::to_string(base);
  if (policy != Policy::fixed) s += ", gamma " + std::to_string(gamma);
  if (policy == Policy::inv || policy == Policy::poly) s += ", power " + std::to_string(power);
  if (policy == Policy::step) s += ", stepsize " + std::to_string(stepsize);
  if (warmup > 0) s += ", warmup " + std::to_string(warmup);
  return s + ")";
}

Result<LrSchedule::Policy> parse_lr_policy(const std::string& name) {
  std::string accepted;
  for (auto p : kLrPolicies) {
    if (name == lr_policy_name(p)) return p;
    accepted += (accepted.empty() ? "" : ", ") + std::string(lr_policy_name(p));
  }
  return invalid_argument("--lr-policy: unknown policy '" + name + "' (accepted: " + accepted +
                          ")");
}

Status validate(const LrSchedule& s) {
  if (!(s.base > 0) || !std::isfinite(s.base))
    return invalid_argument("--lr: must be a positive finite number, got " + shown(s.base));
  if (s.base > 10) return invalid_argument("--lr: " + shown(s.base) + " is out of range (0, 10]");
  using P = LrSchedule::Policy;
  if ((s.policy == P::step || s.policy == P::exp) && !(s.gamma > 0 && s.gamma <= 1))
    return invalid_argument("--lr-gamma: must be in (0, 1] for policy " +
                            std::string(lr_policy_name(s.policy)));
  if (s.policy == P::inv && !(s.gamma >= 0 && std::isfinite(s.gamma)))
    return invalid_argument("--lr-gamma: must be >= 0 for policy inv");
  if (!(s.power >= 0) || !std::isfinite(s.power))
    return invalid_argument("--lr-power: must be >= 0");
  if (s.policy == P::step && s.stepsize <= 0)
    return invalid_argument("--lr-stepsize: must be positive for policy step");
  if (s.warmup < 0 || s.warmup > 1000000000)
    return invalid_argument("--lr-warmup: " + std::to_string(s.warmup) +
                            " is out of range [0, 1e9] (iterations; 0: none)");
  return {};
}

}  // namespace easel
