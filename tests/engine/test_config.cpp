// config_file_args: what the TOML reader returns, and that every refusal is one line naming the
// file, whatever the key holds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/config.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::path(::testing::TempDir()) / (std::string("easel_config_") + info->name() + "_" +
                                               std::to_string(::getpid()) + ".toml"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }
  Result<std::vector<std::string>> read(const std::string& text) {
    std::ofstream(path_) << text;
    return config_file_args(path_, {"lr", "algo", "overwrite"}, {"overwrite"});
  }
  void expect_error(const std::string& text, const std::string& part) {
    auto r = read(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), Code::data_error);
    const std::string& m = r.status().message();
    EXPECT_NE(m.find(path_), std::string::npos) << m;
    EXPECT_NE(m.find(part), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  std::string path_;
};

TEST_F(ConfigFile, FlagsInFileOrder) {
  auto r = read("algo = \"sgd\"\nlr = 0.5\noverwrite = true\n");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), (std::vector<std::string>{"--algo=sgd", "--lr=0.5", "--overwrite=true"}));
}

TEST_F(ConfigFile, RefusalsNameTheFileLineAndKey) {
  expect_error("lr = 1\nbatch = 3\n", ":2: unknown key 'batch' (keys are the flag names");
  expect_error("overwrite = 1\n", ":1: key 'overwrite' must be true or false");
  expect_error("algo = \"\"\n", "key 'algo' is empty");
  expect_error("lr = true\n", "key 'lr' takes a value, not true/false");
  expect_error("lr = [1]\n", "key 'lr' must be a string or a number");
  expect_error("lr = = 1\n", ":1: ");
}

// A quoted key may hold any character: a newline in it is shown escaped, not as a second line
// (found writing the one-line check of the fuzz target tests/fuzz/fuzz_config.cpp).
TEST_F(ConfigFile, KeyWithControlCharactersStaysOneLine) {
  expect_error("\"a\\nb\" = 1\n", "unknown key 'a\\x0ab'");
  expect_error("\"tab\\there\\\\\" = 1\n", "unknown key 'tab\\x09here\\x5c'");
}

}  // namespace
}  // namespace easel
