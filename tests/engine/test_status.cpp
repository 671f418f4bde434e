#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/status.hpp"

namespace easel {
namespace {

TEST(Status, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::ok);
  EXPECT_EQ(s.to_string(), "ok");
  EXPECT_TRUE(Status::ok_status().ok());
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = data_error("train-images-idx3-ubyte: wrong magic");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::data_error);
  EXPECT_EQ(s.message(), "train-images-idx3-ubyte: wrong magic");
  EXPECT_EQ(s.to_string(), "data error: train-images-idx3-ubyte: wrong magic");
  EXPECT_EQ(invalid_argument("x").code(), Code::invalid_argument);
  EXPECT_EQ(not_found("x").code(), Code::not_found);
  EXPECT_EQ(unavailable("x").code(), Code::unavailable);
  EXPECT_EQ(io_error("x").code(), Code::io_error);
  EXPECT_EQ(internal_error("x").code(), Code::internal);
  EXPECT_STREQ(code_name(Code::unavailable), "unavailable");
}

TEST(Result, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(3);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 3);
}

Status fails_when(bool fail) {
  return fail ? io_error("disk full") : Status();
}
Result<int> half(int x) {
  if (x % 2 != 0) return invalid_argument("odd: " + std::to_string(x));
  return x / 2;
}

Status chain(bool fail, int x, int* out) {
  EASEL_RETURN_IF_ERROR(fails_when(fail));
  EASEL_ASSIGN_OR_RETURN(int h, half(x));
  EASEL_ASSIGN_OR_RETURN(*out, half(h));
  return {};
}

TEST(Result, HoldsValueOrStatus) {
  Result<int> r = half(14);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
  EXPECT_TRUE(r.status().ok());
  Result<int> e = half(3);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::invalid_argument);
}

TEST(StatusMacros, PropagateErrorsAndAssignValues) {
  int out = 0;
  EXPECT_TRUE(chain(false, 8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = chain(true, 8, &out);
  EXPECT_EQ(s.code(), Code::io_error);
  s = chain(false, 3, &out);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(s.message(), "odd: 3");
  s = chain(false, 6, &out);  // 6 -> 3 -> odd
  EXPECT_EQ(s.message(), "odd: 3");
}

TEST(StatusDeathTest, CheckAbortsWithExpressionAndLocation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int two = 2;
  EXPECT_DEATH(EASEL_CHECK(two == 3), "check failed: two == 3 at .*test_status.cpp");
  EXPECT_DEATH(EASEL_CHECK_MSG(two < 0, "two is not negative"), "two is not negative");
  EASEL_CHECK(two == 2);  // passes silently
}

}  // namespace
}  // namespace easel
