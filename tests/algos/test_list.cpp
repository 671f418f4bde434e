// The list of the algorithms (algos/list.cpp): every row holds every fact that the rest of easel
// looks up by an algorithm's name (its default learning rate, its trace phases, its extra arenas
// for the memory fit, its pricing in the model), so a new algorithm is its file plus one row and
// a row that forgets a fact fails here instead of falling back to a default.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "algos/list.hpp"
#include "run/train_config.hpp"

namespace easel {
namespace {

TEST(AlgoList, EveryRowHasEveryFact) {
  std::set<std::string> names;
  for (const AlgoEntry& a : algo_list()) {
    ASSERT_NE(a.name, nullptr);
    const std::string name = a.name;
    EXPECT_TRUE(names.insert(name).second) << name << " listed twice";
    ASSERT_NE(a.summary, nullptr) << name;
    EXPECT_FALSE(std::string(a.summary).empty()) << name;
    ASSERT_NE(a.make, nullptr) << name;
    EXPECT_EQ(a.make()->name(), name) << "the row's factory makes another algorithm";
    EXPECT_GT(a.default_lr, 0) << name << ": no default learning rate";
    EXPECT_GE(a.default_tau, 1) << name << ": no default period";
    ASSERT_NE(a.phases, nullptr) << name << ": no trace phase names";
    const PhaseNames phases = a.phases(AlgoParams{});
    EXPECT_NE(phases.exchange, nullptr) << name;
    ASSERT_NE(a.extra_arenas, nullptr) << name << ": no extra arenas for the memory fit";
    EXPECT_NE(a.model.kind, ExchangeKind::unset) << name << ": no exchange kind for the model";
    EXPECT_GE(a.model.arenas_per_group, 3) << name << ": the model's arenas per group";
    // The facts that follow from the object agree with the row.
    EXPECT_EQ(a.model.kind == ExchangeKind::none, a.make()->max_groups() == 1) << name;
  }
  EXPECT_NE(find_algo(kDefaultAlgo), nullptr);
  EXPECT_NE(find_algo(kOneGroupAlgo), nullptr);
  EXPECT_EQ(find_algo("no-such-algorithm"), nullptr);
}

// --lr auto takes the row's rate; --help lists every row's.
TEST(AlgoList, DefaultLrComesFromTheRow) {
  for (const AlgoEntry& a : algo_list()) {
    TrainConfig c;
    ASSERT_TRUE(set_setting(c, "algo", a.name).ok());
    EXPECT_EQ(c.lr, a.default_lr) << a.name;
  }
  const Setting* lr = find_setting("lr");
  ASSERT_NE(lr, nullptr);
  for (const AlgoEntry& a : algo_list())
    EXPECT_NE(std::string(lr->help).find(std::string(a.name) + " "), std::string::npos) << a.name;
}

}  // namespace
}  // namespace easel
