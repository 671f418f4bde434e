#include "algos/schedule.hpp"

#include <cmath>

namespace easel {

double LrSchedule::at(int64_t iter) const {
  const double it = static_cast<double>(iter);
  switch (policy) {
    case Policy::fixed:
      return base;
    case Policy::step:
      return base * std::pow(gamma, std::floor(it / static_cast<double>(stepsize)));
    case Policy::inv:
      return base * std::pow(1.0 + gamma * it, -power);
    case Policy::exp:
      return base * std::pow(gamma, it);
    case Policy::poly: {
      const double frac = std::min(1.0, it / static_cast<double>(std::max<int64_t>(1, max_iter)));
      return base * std::pow(1.0 - frac, power);
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
  }
  return "?";
}

std::string LrSchedule::to_string() const {
  std::string s = std::string(lr_policy_name(policy)) + "(base " + std::to_string(base);
  if (policy != Policy::fixed) s += ", gamma " + std::to_string(gamma);
  if (policy == Policy::inv || policy == Policy::poly) s += ", power " + std::to_string(power);
  if (policy == Policy::step) s += ", stepsize " + std::to_string(stepsize);
  return s + ")";
}

Result<LrSchedule::Policy> parse_lr_policy(const std::string& name) {
  for (auto p : {LrSchedule::Policy::fixed, LrSchedule::Policy::step, LrSchedule::Policy::inv,
                 LrSchedule::Policy::exp, LrSchedule::Policy::poly})
    if (name == lr_policy_name(p)) return p;
  return invalid_argument("--lr-policy: unknown policy '" + name +
                          "' (accepted: fixed, step, inv, exp, poly)");
}

Status validate(const LrSchedule& s) {
  if (!(s.base > 0) || !std::isfinite(s.base))
    return invalid_argument("--lr: must be a positive finite number, got " +
                            std::to_string(s.base));
  if (s.base > 10)
    return invalid_argument("--lr: " + std::to_string(s.base) + " is out of range (0, 10]");
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
  return {};
}

}  // namespace easel
