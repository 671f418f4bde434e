#include <gtest/gtest.h>

#include <cmath>

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

TEST(LrSchedule, ParseAndValidate) {
  EXPECT_TRUE(parse_lr_policy("inv").ok());
  auto bad = parse_lr_policy("cosine");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--lr-policy"), std::string::npos);
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
