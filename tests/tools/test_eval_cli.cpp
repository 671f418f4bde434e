// `easel eval`, `easel predict` and `easel list --net` end to end through the easel program:
// a tiny run trained here, then its model evaluated (the same correct answers as the run's own
// last evaluation, summary.json's), classified from a .npy batch of its test images (the same
// answers) and from PNG files of them (the same logits), and each bad input refused in one
// line with exit 2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nets/data/augment.hpp"
#include "nets/data/dataset.hpp"
#include "nets/data/image_decode.hpp"
#include "nets/data/npy.hpp"
#include "tests/tools/run_easel.hpp"

namespace {

namespace fs = std::filesystem;
using easel_test::Out;
using easel_test::slurp;
using nlohmann::json;

// 128 test images in 10 classes; three channels, so that the net's nhwc layout (the CPU's) is
// not the .npy's NCHW order.
constexpr const char* kData = "synthetic:512:3x16x16:10";

Out easel(const std::string& args) {
  return easel_test::run_easel(args, "", "eval");
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// One line on stderr, exit 2, naming `what`.
void expect_refusal(const Out& o, const std::string& what) {
  EXPECT_EQ(o.code, 2) << o.out << o.err;
  EXPECT_NE(o.err.find(what), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

class EvalCli : public ::testing::Test {
 protected:
  // One run for every test: lenet, 2 groups of sync-easgd (the centre is the evaluated model).
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("easel_eval_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const Out o = easel("train --net lenet --data " + std::string(kData) +
                        " --iterations 20 --batch 32 --groups 2 --out " + run().string());
    ASSERT_EQ(o.code, 0) << o.err;
    summary_ = json::parse(slurp(run() / "summary.json"));
    auto data = easel::load_data(kData, easel::MemKind::dram, 1);
    ASSERT_TRUE(data.ok());
    test_ = new easel::Dataset(std::move(data->test));
  }
  static void TearDownTestSuite() {
    delete test_;
    fs::remove_all(dir_);
  }
  static fs::path run() { return dir_ / "run"; }

  // Test images [first, first + n) as the run's net reads them (NCHW floats) into a .npy.
  static fs::path write_test_npy(int64_t first, int64_t n, const std::string& name) {
    const easel::Dataset& ds = *test_;
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      idx[static_cast<size_t>(i)] = first + i;
    std::vector<float> x(static_cast<size_t>(n * ds.image_bytes()));
    std::vector<int32_t> labels(static_cast<size_t>(n));
    easel::gather_batch(ds, idx.data(), n, easel::Layout::nchw, x.data(), labels.data());
    const fs::path p = dir_ / name;
    write_bytes(p, easel::encode_npy({n, ds.channels, ds.height, ds.width}, x));
    return p;
  }

  static json predict_json(const std::string& inputs) {
    const Out o = easel("predict " + run().string() + " " + inputs + " --json");
    EXPECT_EQ(o.code, 0) << o.err;
    return o.code == 0 ? json::parse(o.out) : json();
  }

  static inline fs::path dir_;
  static inline json summary_;
  static inline easel::Dataset* test_ = nullptr;
};

TEST_F(EvalCli, EvalGivesTheRunsOwnTestAccuracy) {
  const Out o = easel("eval " + run().string() + " --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j["weights"], "centre");
  EXPECT_EQ(j["step"], 20);
  ASSERT_EQ(j["images"], test_->count);
  // The same correct answers, bit for bit, as the run's last evaluation of the same model.
  const double acc = summary_["test_accuracy"].get<double>();
  EXPECT_EQ(j["correct"].get<int64_t>(), std::llround(acc * static_cast<double>(test_->count)));
  EXPECT_EQ(j["accuracy"].get<double>(), acc);
  EXPECT_NEAR(j["loss"].get<double>(), summary_["test_loss"].get<double>(), 1e-6);
  EXPECT_GT(j["top5_accuracy"].get<double>(), acc - 1e-12);
  // Each true class's row counts its images; the diagonal is argmax's hits.
  ASSERT_EQ(j["confusion"].size(), 10u);
  std::vector<int64_t> per_class(10, 0);
  for (int32_t l : test_->labels)
    ++per_class[static_cast<size_t>(l)];
  int64_t diagonal = 0;
  for (size_t t = 0; t < 10; ++t) {
    int64_t row = 0;
    for (const json& v : j["confusion"][t])
      row += v.get<int64_t>();
    EXPECT_EQ(row, per_class[t]) << "class " << t;
    diagonal += j["confusion"][t][t].get<int64_t>();
  }
  EXPECT_EQ(diagonal, j["correct"].get<int64_t>());
}

// --weights best: best.bin, the checkpoint of the evaluation of the best test accuracy (the
// first of equals), not the last one; refused in one line where the run has none.
TEST_F(EvalCli, WeightsBestIsTheBestEvaluations) {
  const fs::path best_run = dir_ / "best_run";
  ASSERT_EQ(
      easel("train --net lenet --data " + std::string(kData) +
            " --iterations 16 --eval-every 2 --batch 32 --groups 2 --out " + best_run.string())
          .code,
      0);
  std::ifstream metrics(best_run / "metrics.jsonl");
  int64_t best_step = -1, last_step = -1;
  double best = -1;
  for (std::string line; std::getline(metrics, line);) {
    const json r = json::parse(line);
    last_step = r["step"].get<int64_t>();
    if (r["test_accuracy"].get<double>() > best)
      best = r["test_accuracy"].get<double>(), best_step = last_step;
  }
  ASSERT_NE(best_step, last_step) << "its last evaluation is its best: the test needs another run";
  const Out o = easel("eval " + best_run.string() + " --weights best --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j["weights"], "best centre");
  EXPECT_EQ(j["step"], best_step);
  EXPECT_EQ(j["accuracy"].get<double>(), best);  // the run's own evaluation of that model
  const Out last = easel("eval " + best_run.string() + " --json");
  ASSERT_EQ(last.code, 0) << last.err;
  EXPECT_EQ(json::parse(last.out)["step"], last_step);
  fs::remove(best_run / "best.bin");
  expect_refusal(easel("eval " + best_run.string() + " --weights best"),
                 "--weights best: " + (best_run / "best.bin").string() + ": no such file");
  expect_refusal(easel("predict " + best_run.string() + " --weights best x.npy"),
                 "--weights best: ");
}

// The evaluated model of the other kinds: group 0's replica (msgd) and the anchor of the
// groups' last meeting (local-sgd), each giving its run's own test accuracy.
TEST_F(EvalCli, EvalTakesEachAlgorithmsEvaluatedModel) {
  for (const auto& [algo, weights] : {std::pair{"msgd", "group 0"}, {"local-sgd", "anchor"}}) {
    const fs::path d = dir_ / algo;
    ASSERT_EQ(easel("train --net lenet --data " + std::string(kData) + " --algo " + algo +
                    " --iterations 12 --batch 16 --out " + d.string())
                  .code,
              0);
    const Out o = easel("eval " + d.string() + " --json");
    ASSERT_EQ(o.code, 0) << o.err;
    const json j = json::parse(o.out), s = json::parse(slurp(d / "summary.json"));
    EXPECT_EQ(j["weights"], weights) << algo;
    EXPECT_EQ(j["accuracy"].get<double>(), s["test_accuracy"].get<double>()) << algo;
  }
}

TEST_F(EvalCli, EvalTextNamesTheWeightsAndWritesTheConfusionPicture) {
  const fs::path png = dir_ / "confusion.png";
  const Out o =
      easel("eval " + run().string() + " --data " + kData + " --confusion " + png.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("centre (the model the run evaluated)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("top-5"), std::string::npos) << o.out;
  const std::string bytes = slurp(png);
  easel::RgbImage img;
  ASSERT_TRUE(easel::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                  png.string(), 0, &img)
                  .ok());
  EXPECT_EQ(img.width, 10 * 32);
  EXPECT_EQ(img.height, 10 * 32);
}

TEST_F(EvalCli, PredictOnANpyOfTheTestSetGivesEvalsAnswers) {
  const fs::path npy = write_test_npy(0, test_->count, "test.npy");
  const json j = predict_json(npy.string());
  ASSERT_EQ(j["logits"].size(), static_cast<size_t>(test_->count));
  int64_t correct = 0;
  for (size_t i = 0; i < j["logits"].size(); ++i) {
    const std::vector<float> z = j["logits"][i].get<std::vector<float>>();
    const auto best = std::max_element(z.begin(), z.end()) - z.begin();
    correct += best == test_->labels[i] ? 1 : 0;
    EXPECT_EQ(j["top"][i][0]["class"].get<int64_t>(), best);
  }
  const double acc = summary_["test_accuracy"].get<double>();
  EXPECT_EQ(correct, std::llround(acc * static_cast<double>(test_->count)));
}

TEST_F(EvalCli, PredictOnPngsGivesTheNpysLogits) {
  const fs::path npy = write_test_npy(3, 2, "two.npy");
  std::string pngs;
  for (int64_t i = 3; i < 5; ++i) {
    easel::RgbImage img;
    img.width = test_->width, img.height = test_->height;
    const int64_t hw = img.width * img.height;
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t c = 0; c < 3; ++c)
        img.rgb.push_back(test_->image(i)[c * hw + p]);  // chw to hwc
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(easel::encode_png(img, &bytes).ok());
    const fs::path p = dir_ / ("test" + std::to_string(i) + ".png");
    write_bytes(p, std::string(bytes.begin(), bytes.end()));
    pngs += " " + p.string();
  }
  const json a = predict_json(npy.string()), b = predict_json(pngs);
  ASSERT_EQ(b["logits"].size(), 2u);
  EXPECT_EQ(a["logits"], b["logits"]);
  EXPECT_EQ(a["top"], b["top"]);
  EXPECT_EQ(b["top"][0].size(), 3u);
}

// A one-channel net: an image file's RGB becomes grey by PIL's weights (exact for a grey image).
TEST_F(EvalCli, PredictOnAGreyPngGivesTheNpysLogits) {
  const fs::path grey = dir_ / "grey";
  ASSERT_EQ(
      easel("train --net mlp --data synthetic:64 --iterations 2 --batch 8 --out " + grey.string())
          .code,
      0);
  auto data = easel::load_data("synthetic:64", easel::MemKind::dram, 1);
  ASSERT_TRUE(data.ok());
  const easel::Dataset& ds = data->test;
  const int64_t idx = 0;
  std::vector<float> x(static_cast<size_t>(ds.image_bytes()));
  int32_t label = 0;
  easel::gather_batch(ds, &idx, 1, easel::Layout::nchw, x.data(), &label);
  write_bytes(dir_ / "grey.npy", easel::encode_npy({1, 1, 28, 28}, x));
  easel::RgbImage img;
  img.width = img.height = 28;
  for (int64_t p = 0; p < 28 * 28; ++p)
    img.rgb.insert(img.rgb.end(), 3, ds.image(0)[p]);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(easel::encode_png(img, &bytes).ok());
  write_bytes(dir_ / "grey.png", std::string(bytes.begin(), bytes.end()));
  const Out a = easel("predict " + grey.string() + " " + (dir_ / "grey.npy").string() + " --json");
  const Out b = easel("predict " + grey.string() + " " + (dir_ / "grey.png").string() + " --json");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(json::parse(a.out)["logits"], json::parse(b.out)["logits"]);
}

TEST_F(EvalCli, BadNpyFilesAreRefusedNamingTheField) {
  const fs::path good = write_test_npy(0, 2, "good.npy");
  const std::string bytes = slurp(good);
  write_bytes(dir_ / "short.npy", bytes.substr(0, bytes.size() - 4));
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "short.npy").string()),
                 "short.npy: shape (2, 3, 16, 16) needs more than the 6140 bytes after its "
                 "header");
  write_bytes(dir_ / "long.npy", bytes + "tail");
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "long.npy").string()),
                 "long.npy: shape (2, 3, 16, 16) is 6144 bytes, the file holds 6148");
  std::string f8 = bytes;
  f8.replace(f8.find("<f4"), 3, "<f8");
  write_bytes(dir_ / "f8.npy", f8);
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "f8.npy").string()),
                 "f8.npy: descr '<f8'");
  write_bytes(dir_ / "shape.npy", easel::encode_npy({1, 3, 16, 15}, std::vector<float>(720)));
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "shape.npy").string()),
                 "shape.npy: shape (1, 3, 16, 15): the net takes N x 3 x 16 x 16");
  std::string huge = bytes;
  huge.replace(huge.find("(2, 3, 16, 16)"), 14, "(9999999999999)");
  write_bytes(dir_ / "huge.npy", huge);
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "huge.npy").string()),
                 "huge.npy: shape (9999999999999,)");
  write_bytes(dir_ / "magic.npy", "not numpy at all");
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "magic.npy").string()),
                 "magic.npy: not a .npy file");
}

TEST_F(EvalCli, BadImagesAndRunsAreRefused) {
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "none.png").string()),
                 "none.png: cannot open");
  write_bytes(dir_ / "junk.png", "\x89PNG\r\n\x1a\n and then nothing");
  expect_refusal(easel("predict " + run().string() + " " + (dir_ / "junk.png").string()),
                 "junk.png");
  expect_refusal(easel("eval " + (dir_ / "nowhere").string()), "no config.json");
  const fs::path bare = dir_ / "bare";
  ASSERT_EQ(easel("train --net lenet --data synthetic:64 --iterations 2 --batch 32 "
                  "--no-checkpoint --out " +
                  bare.string())
                .code,
            0);
  expect_refusal(easel("eval " + bare.string()), "no weights (it ran with --no-checkpoint)");
  expect_refusal(easel("eval " + run().string() + " --weights group:7"),
                 "--weights group:7: the run has groups 0 to 1");
}

TEST_F(EvalCli, DataOfAnotherShapeOrClassCountIsRefused) {
  expect_refusal(easel("eval " + run().string() + " --data synthetic:64:1x16x16:10"),
                 "--data synthetic:64:1x16x16:10: 1x16x16 images in 10 classes");
  expect_refusal(easel("eval " + run().string() + " --data synthetic:64:3x16x16:5"),
                 "--data synthetic:64:3x16x16:5: 3x16x16 images in 5 classes");
  expect_refusal(easel("eval " + run().string() + " --confusion m.gif"), "--confusion m.gif");
}

// A run without summary.json's input (killed, or older) is checked by its net alone: a net
// whose last layer fixes 10 outputs would take 12-class data with the same weights; refused.
TEST_F(EvalCli, DataWithMoreClassesThanTheNetScoresIsRefused) {
  const char* src = std::getenv("EASEL_SOURCE_ROOT");
  std::string text = slurp(std::string(src ? src : ".") + "/nets/models/mlp.toml");
  text.replace(text.find("outputs = \"classes\""), 19, "outputs = 10");
  const fs::path net = dir_ / "fixed.toml", d = dir_ / "fixed";
  write_bytes(net, text);
  ASSERT_EQ(easel("train --net " + net.string() +
                  " --data synthetic:64 --iterations 2 --batch 8 --out " + d.string())
                .code,
            0);
  json s = json::parse(slurp(d / "summary.json"));
  s.erase("input");
  write_bytes(d / "summary.json", s.dump());
  expect_refusal(easel("eval " + d.string() + " --data synthetic:64:1x28x28:12"),
                 "--data synthetic:64:1x28x28:12: " + net.string() +
                     ": net 'mlp', layer ip2: has 10 outputs per image but the data has 12 "
                     "classes");
}

TEST(ListNet, PrintsOneNetsLine) {
  const Out all = easel("list --json");
  const Out one = easel("list --net lenet --json");
  ASSERT_EQ(one.code, 0) << one.err;
  const json a = json::parse(all.out), o = json::parse(one.out);
  EXPECT_EQ(o, a["nets"][0]);  // lenet is first
  const char* src = std::getenv("EASEL_SOURCE_ROOT");
  const std::string file = std::string(src ? src : ".") + "/nets/models/mlp.toml";
  const Out f = easel("list --net " + file);
  ASSERT_EQ(f.code, 0) << f.err;
  EXPECT_NE(f.out.find("GFLOP/img"), std::string::npos);
  expect_refusal(easel("list --net nosuchnet"), "--net");
}

}  // namespace
