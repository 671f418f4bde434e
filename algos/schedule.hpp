// Learning-rate schedules, Caffe's definitions (solver.cpp GetLearningRate):
//   fixed: lr = base
//   step:  lr = base * gamma ^ floor(iter / stepsize)
//   inv:   lr = base * (1 + gamma * iter) ^ (-power)
//   exp:   lr = base * gamma ^ iter
//   poly:  lr = base * (1 - iter / max_iter) ^ power
#pragma once

#include <cstdint>
#include <string>

#include "engine/status.hpp"

namespace easel {

struct LrSchedule {
  enum class Policy { fixed, step, inv, exp, poly };
  Policy policy = Policy::inv;
  double base = 0.01, gamma = 1e-4, power = 0.75;
  int64_t stepsize = 1;
  int64_t max_iter = 1;  // poly

  double at(int64_t iter) const;
  std::string to_string() const;
};

// Parses the policy name; the error lists the accepted ones (field named --lr-policy).
Result<LrSchedule::Policy> parse_lr_policy(const std::string& name);
const char* lr_policy_name(LrSchedule::Policy p);
// Checks ranges: base > 0 and finite, gamma in (0, 1] for step/exp and >= 0 for inv, power >= 0,
// stepsize > 0 for step. Errors name the flag.
Status validate(const LrSchedule& s);

}  // namespace easel
