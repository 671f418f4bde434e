// Data::borrow_train/borrow_test (include/easel/data.hpp) seen from inside: the data set reads
// the caller's pixels where they are (its pointer is theirs), holds their owner as long as it
// holds them, and trains as the same images copied in as floats; a placement the caller's
// memory cannot take is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/convert.hpp"
#include "easel/easel.hpp"

namespace {

using easel::api::Code;
using easel::api::Config;
using easel::api::Data;
using easel::api::ImageArrays;
using easel::api::ImageBytes;

// count images of 1 x 8 x 8 in 4 classes: class k is bright in row k, noise elsewhere.
struct Set {
  std::shared_ptr<std::vector<uint8_t>> pixels = std::make_shared<std::vector<uint8_t>>();
  std::vector<float> floats;  // pixel / 256, exactly
  std::vector<int32_t> labels;
  int64_t count = 0;
  ImageBytes bytes() const { return {count, 1, 8, 8, 4, *pixels, labels, pixels}; }
  ImageArrays arrays() const { return {count, 1, 8, 8, 4, floats, labels}; }
};
Set make_set(int64_t count) {
  Set s;
  s.count = count;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t label = static_cast<int32_t>((i * 7 + 3) % 4);
    s.labels.push_back(label);
    for (int64_t p = 0; p < 64; ++p) {
      const auto v = static_cast<uint8_t>(p / 8 == label ? 230 : (i * 31 + p * 17) % 64);
      s.pixels->push_back(v);
      s.floats.push_back(static_cast<float>(v) / 256.f);
    }
  }
  return s;
}

Config small_config(const char* placement = "dram") {
  Config cfg;
  for (auto [k, v] : {std::pair{"net", "mlp"},
                      {"groups", "2"},
                      {"threads-per-group", "1"},
                      {"batch", "16"},
                      {"iterations", "10"},
                      {"eval-every", "5"},
                      {"placement", placement}})
    EXPECT_TRUE(cfg.set(k, v).ok()) << k;
  return cfg;
}

TEST(ApiBorrow, TheDataSetReadsTheCallersPixelsAndHoldsTheirOwner) {
  const Set train = make_set(64), test = make_set(16);
  {
    Data d;
    ASSERT_TRUE(d.borrow_train(train.bytes()).ok());
    ASSERT_TRUE(d.borrow_test(test.bytes()).ok());
    const easel::Dataset& ds = d.impl().split.train;
    EXPECT_EQ(ds.pixels.as<uint8_t>(), train.pixels->data());  // not copied
    EXPECT_EQ(d.impl().split.test.pixels.as<uint8_t>(), test.pixels->data());
    EXPECT_TRUE(ds.pixels.borrowed());
    EXPECT_EQ(train.pixels.use_count(), 2);  // the Data holds the owner
    EXPECT_EQ(d.train_count(), 64);
  }
  EXPECT_EQ(train.pixels.use_count(), 1);  // and lets it go with itself
}

TEST(ApiBorrow, TrainsAsTheSameImagesCopiedIn) {
  const Set train = make_set(256), test = make_set(64);
  Data borrowed, copied;
  ASSERT_TRUE(borrowed.borrow_train(train.bytes()).ok());
  ASSERT_TRUE(borrowed.borrow_test(test.bytes()).ok());
  ASSERT_TRUE(copied.set_train(train.arrays()).ok());
  ASSERT_TRUE(copied.set_test(test.arrays()).ok());
  easel::api::Run a, b;
  ASSERT_TRUE(a.train(small_config(), borrowed).ok());
  ASSERT_TRUE(b.train(small_config(), copied).ok());
  EXPECT_EQ(a.weights(), b.weights());
  EXPECT_EQ(a.summary().test_loss, b.summary().test_loss);
}

TEST(ApiBorrow, WrongSizesAreNamedAndAPlacementElsewhereIsRefused) {
  Set train = make_set(16);
  ImageBytes short_by_one = train.bytes();
  short_by_one.pixels = short_by_one.pixels.first(short_by_one.pixels.size() - 1);
  Data d;
  EXPECT_EQ(d.borrow_train(short_by_one).message(),
            "train set: pixels holds 1023 values, the shape 16 x 1 x 8 x 8 needs 1024");
  ASSERT_TRUE(d.borrow_train(train.bytes()).ok());
  ASSERT_TRUE(d.borrow_test(train.bytes()).ok());
  easel::api::Run r;
  const easel::api::Status st = r.train(small_config("dataset=hbw-preferred"), d);
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_EQ(st.message().rfind("--placement: dataset=hbw-preferred cannot be honoured", 0), 0u)
      << st.message();
}

}  // namespace
