// Sync EASGD's co-design switches, one at a time (tools/compare codesign): with --exchange comm
// the exchange code stays the same and --reduce (serial or tree order), --pack (one message or
// one per layer) and --overlap (the centre update on the communication thread) each change one
// thing. Where the arithmetic is the same, so are the bits.
#include <gtest/gtest.h>

#include <string>

#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"

namespace easel {
namespace {

using test::small_config;
using test::small_data;

using test::run;

// The Comm path of sync-easgd with the three switches as given.
TrainConfig codesign(int groups, const char* reduce, const char* pack, const char* overlap,
                     int tau = 1) {
  TrainConfig c = small_config("sync-easgd", groups);
  c.iterations = 24;
  c.eval_every = 12;
  c.tau = tau;
  EXPECT_TRUE(set_setting(c, "exchange", "comm").ok());
  EXPECT_TRUE(set_setting(c, "collective", "tree").ok());  // the paper's tree (--reduce tree)
  EXPECT_TRUE(set_setting(c, "reduce", reduce).ok());
  EXPECT_TRUE(set_setting(c, "pack", pack).ok());
  EXPECT_TRUE(set_setting(c, "overlap", overlap).ok());
  return c;
}

void expect_same_bits(const TrainSummary& a, const TrainSummary& b, const std::string& what) {
  ASSERT_FALSE(a.final_weights.empty()) << what;
  EXPECT_EQ(a.final_weights, b.final_weights) << what;
  EXPECT_EQ(a.group0_weights, b.group0_weights) << what;
}

// With 2 and 3 groups the Comm's binomial tree adds in the serial order ((w0 + w1) + w2), so the
// order switch must change nothing else: the same bits, with and without overlap.
TEST(CoDesign, SerialAndTreeOrderGiveTheSameBitsWhereTheOrderIsTheSame) {
  for (int groups : {2, 3})
    for (const char* overlap : {"off", "on"}) {
      const std::string what = std::to_string(groups) + " groups, overlap " + overlap;
      expect_same_bits(run(codesign(groups, "serial", "per-layer", overlap)),
                       run(codesign(groups, "tree", "per-layer", overlap)), what);
    }
  // With 4 the tree adds (w0 + w1) + (w2 + w3): another rounding, the same model up to it.
  const TrainSummary s = run(codesign(4, "serial", "single", "off"));
  const TrainSummary t = run(codesign(4, "tree", "single", "off"));
  ASSERT_EQ(s.final_weights.size(), t.final_weights.size());
  for (size_t i = 0; i < s.final_weights.size(); ++i)
    ASSERT_NEAR(s.final_weights[i], t.final_weights[i], 1e-5) << i;
}

// One message over the arena or one per layer: the same sums element for element.
TEST(CoDesign, PerLayerAndSingleMessageGiveTheSameCentre) {
  for (const char* reduce : {"tree", "serial"})
    for (const char* overlap : {"off", "on"}) {
      const std::string what = std::string(reduce) + ", overlap " + overlap;
      expect_same_bits(run(codesign(3, reduce, "single", overlap)),
                       run(codesign(3, reduce, "per-layer", overlap)), what);
    }
}

// The overlap moves the reduction and the centre update to the communication thread, in the
// order --reduce says: the same bits as without it, for every order, group count and tau.
TEST(CoDesign, OverlapChangesOnlyWhenTheCentreIsUpdated) {
  for (int groups : {2, 4})
    for (const char* reduce : {"tree", "serial"})
      for (int tau : {1, 3}) {
        const std::string what =
            std::to_string(groups) + " groups, " + reduce + ", tau " + std::to_string(tau);
        expect_same_bits(run(codesign(groups, reduce, "single", "off", tau)),
                         run(codesign(groups, reduce, "single", "on", tau)), what);
      }
}

// --exchange picks the code, not the arithmetic: the fast exchanges give the Comm path's bits.
TEST(CoDesign, ExchangeSettingPicksTheCodeNotTheResult) {
  for (int groups : {2, 3}) {
    const TrainSummary comm = run(codesign(groups, "tree", "single", "off"));
    for (const char* which : {"auto", "partitioned", "mirrored"}) {
      if (groups == 3 && std::string(which) == "mirrored") continue;
      TrainConfig c = codesign(groups, "tree", "single", "off");
      ASSERT_TRUE(set_setting(c, "exchange", which).ok());
      expect_same_bits(comm, run(c), std::to_string(groups) + " groups, --exchange " + which);
    }
  }
}

// A fast exchange with a switch it does not have is refused in one line naming both flags.
TEST(CoDesign, FastExchangeWithASwitchItLacksIsRefused) {
  for (const char* which : {"partitioned", "mirrored"})
    for (const char* bad : {"overlap", "pack", "reduce"}) {
      TrainConfig c = codesign(2, "tree", "single", "off");
      ASSERT_TRUE(set_setting(c, "exchange", which).ok());
      const std::string value = std::string(bad) == "overlap" ? "on"
                                : std::string(bad) == "pack"  ? "per-layer"
                                                              : "serial";
      ASSERT_TRUE(set_setting(c, bad, value).ok());
      auto r = train(c, small_data(), nullptr);
      ASSERT_FALSE(r.ok()) << which << " with --" << bad;
      const std::string m = r.status().message();
      EXPECT_NE(m.find(std::string("--exchange ") + which), std::string::npos) << m;
      EXPECT_NE(m.find("--" + std::string(bad)), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  TrainConfig c = small_config("sync-easgd", 2);
  const Status bad = set_setting(c, "exchange", "ring");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--exchange"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace easel
