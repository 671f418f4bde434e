// Learning-rate schedules: Caffe's policies (solver.cpp GetLearningRate), cosine annealing and a
// linear warmup in front of any of them. iter counts from 0 at the run's start; max_iter is the
// run's length in iterations.
//   fixed:  lr = base
//   step:   lr = base * gamma ^ floor(iter / stepsize)
//   inv:    lr = base * (1 + gamma * iter) ^ (-power)
//   exp:    lr = base * gamma ^ iter
//   poly:   lr = base * (1 - iter / max_iter) ^ power
//   cosine: lr = base * (1 + cos(pi * t)) / 2, t = (iter - warmup) / (max_iter - warmup) held to
//           [0, 1] (Loshchilov and Hutter's SGDR without restarts, down to 0 at the run's end,
//           after the warmup)
// warmup W > 0 (--lr-warmup): for iter < W the policy's rate times (iter + 1) / W, a linear ramp
// from base / W up to the policy's rate (Goyal et al., "Accurate, Large Minibatch SGD").
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "engine/status.hpp"

namespace easel {

struct LrSchedule {
  enum class Policy { fixed, step, inv, exp, poly, cosine };
  Policy policy = Policy::inv;
  double base = 0.01, gamma = 1e-4, power = 0.75;
  int64_t stepsize = 1;
  int64_t max_iter = 1;  // poly, cosine
  int64_t warmup = 0;    // iterations of the linear ramp (0: none)

  double at(int64_t iter) const;
  std::string to_string() const;
};

// Every policy, in --help's order.
inline constexpr std::array kLrPolicies = {LrSchedule::Policy::fixed, LrSchedule::Policy::step,
                                           LrSchedule::Policy::inv,   LrSchedule::Policy::exp,
                                           LrSchedule::Policy::poly,  LrSchedule::Policy::cosine};
// Whether the policy's rate depends on the run's length (a resumed run cannot change it).
inline bool depends_on_length(LrSchedule::Policy p) {
  return p == LrSchedule::Policy::poly || p == LrSchedule::Policy::cosine;
}
// Parses the policy name; the error lists the accepted ones (field named --lr-policy).
Result<LrSchedule::Policy> parse_lr_policy(const std::string& name);
const char* lr_policy_name(LrSchedule::Policy p);
// Checks ranges: base > 0 and finite, gamma in (0, 1] for step/exp and >= 0 for inv, power >= 0,
// stepsize > 0 for step, warmup in [0, 1e9]. Errors name the flag.
Status validate(const LrSchedule& s);

}  // namespace easel
