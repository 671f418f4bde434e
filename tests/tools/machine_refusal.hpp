// A machine description that parse_machine must refuse: in one line, starting with the file's
// name, naming the key at fault (docs/MODEL.md: "one line naming the file, line and key").
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "model/machine.hpp"

namespace easel::model {

inline void expect_refused(const std::string& text, const std::string& key,
                           const std::string& file = "bad.toml") {
  auto m = parse_machine(text, file);
  ASSERT_FALSE(m.ok()) << key;
  const std::string msg = m.status().message();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind(file, 0), 0u) << msg;
  EXPECT_NE(msg.find(key), std::string::npos) << msg;
}

}  // namespace easel::model
