#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "algos/schedule.hpp"

namespace easel {
namespace {

TEST(LrSchedule, CaffePolicies) {
  LrSchedule s;
  s.base = 0.01;
  s.policy = LrSchedule::Policy::inv;
  s.gamma = 1e-4;
  s.power = 0.75;
  EXPECT_DOUBLE_EQ(s.at(0), 0.01);
  EXPECT_NEAR(s.at(10000), 0.01 * std::pow(2.0, -0.75), 1e-12);
  s.policy = LrSchedule::Policy::step;
  s.gamma = 0.1;
  s.stepsize = 100;
  EXPECT_DOUBLE_EQ(s.at(99), 0.01);
  EXPECT_NEAR(s.at(100), 0.001, 1e-15);
  s.policy = LrSchedule::Policy::fixed;
  EXPECT_DOUBLE_EQ(s.at(123456), 0.01);
  s.policy = LrSchedule::Policy::poly;
  s.max_iter = 100;
  s.power = 1;
  EXPECT_NEAR(s.at(50), 0.005, 1e-15);
}

// Cosine annealing against its formula, base (1 + cos(pi t)) / 2, t = (iter - W) / (max - W):
// base at the start, half at the middle, 0 at the end; held at 0 past the end.
TEST(LrSchedule, CosineFollowsItsFormula) {
  LrSchedule s;
  s.base = 0.1;
  s.policy = LrSchedule::Policy::cosine;
  s.max_iter = 1000;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_NEAR(s.at(500), 0.05, 1e-15);
  EXPECT_NEAR(s.at(250), 0.1 * (1 + std::cos(std::numbers::pi / 4)) / 2, 1e-15);
  EXPECT_NEAR(s.at(1000), 0, 1e-15);
  EXPECT_NEAR(s.at(2000), 0, 1e-15);
  for (int64_t i = 1; i <= 1000; ++i)
    EXPECT_LE(s.at(i), s.at(i - 1)) << i;  // never rises
}

// Warmup: iteration i < W takes the policy's rate times (i + 1) / W, then the policy's own;
// cosine's t starts after the warmup.
TEST(LrSchedule, WarmupRampsLinearlyIntoAnyPolicy) {
  LrSchedule s;
  s.base = 0.2;
  s.policy = LrSchedule::Policy::fixed;
  s.warmup = 10;
  EXPECT_NEAR(s.at(0), 0.02, 1e-15);
  EXPECT_NEAR(s.at(4), 0.1, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(9), 0.2);
  EXPECT_DOUBLE_EQ(s.at(10), 0.2);
  s.policy = LrSchedule::Policy::step;
  s.gamma = 0.5;
  s.stepsize = 4;
  EXPECT_NEAR(s.at(5), 0.2 * 0.5 * 6 / 10, 1e-15);  // the step policy's rate, ramped
  s.policy = LrSchedule::Policy::cosine;
  s.max_iter = 110;
  EXPECT_NEAR(s.at(4), 0.1, 1e-15);   // ramping to base (t = 0 during the warmup)
  EXPECT_DOUBLE_EQ(s.at(10), 0.2);    // t = 0
  EXPECT_NEAR(s.at(60), 0.1, 1e-15);  // t = 1/2
  EXPECT_NEAR(s.at(110), 0, 1e-15);   // t = 1
  s.warmup = -1;
  EXPECT_FALSE(validate(s).ok());
}

TEST(LrSchedule, ParseAndValidate) {
  EXPECT_TRUE(parse_lr_policy("inv").ok());
  EXPECT_TRUE(parse_lr_policy("cosine").ok());
  auto bad = parse_lr_policy("sgdr");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--lr-policy"), std::string::npos);
  EXPECT_NE(bad.status().message().find("poly, cosine)"), std::string::npos);
  LrSchedule s;
  s.base = 0;
  EXPECT_FALSE(validate(s).ok());
  s.base = NAN;
  EXPECT_FALSE(validate(s).ok());
  s.base = 0.1;
  s.policy = LrSchedule::Policy::step;
  s.stepsize = 0;
  EXPECT_FALSE(validate(s).ok());
}

}  // namespace
}  // namespace easel
