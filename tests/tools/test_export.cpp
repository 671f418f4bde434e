// `easel export --format onnx` through the program: trained runs of lenet (both layouts),
// cifar10-quick, alexnet-cifar (LRN), small-resnet (batch norm, residual add, concat, global
// average pool), cifar10-full (LRN within channel) and export_corners.toml exported and run by
// consumers that are not easel (tools/onnx_check.py: the ONNX checker and OpenCV's DNN module,
// which must give easel's logits within 1e-4); a local-sgd run's export is the model easel
// predict takes (the anchor); `--format pytorch` of lenet (both layouts), cifar10-quick,
// alexnet-cifar, cifar10-full and resnet18 (batch norm) loaded strictly by PyTorch
// (tools/pytorch/check_state_dict.py, easel's logits within 1e-4); bad input refused in one
// line, exit 2, an existing file kept.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "tests/tools/run_easel.hpp"

namespace {

namespace fs = std::filesystem;
using easel_test::Out;
using easel_test::slurp;

fs::path tmp_dir(const std::string& name) {
  return easel_test::tmp_dir("export", name);
}

std::string source(const std::string& rel) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/" + rel;
}

// A short run of `net` on `data` into dir/run (two evaluations: the checkpoint holds trained
// weights and moved batch norm statistics); one group unless `extra`, which adds flags, says.
fs::path train(const fs::path& dir, const std::string& net, const std::string& data,
               const std::string& extra = "") {
  const fs::path run = dir / "run";
  const Out o = easel_test::run_easel(
      "train --net " + net + " --data " + data + " --iterations 8 --eval-every 4 --batch 16" +
          (extra.find("--groups") == std::string::npos ? " --groups 1" : "") +
          " --threads-per-group 1 --progress none --log-level warn --out " + run.string() + " " +
          extra,
      "", "train");
  EXPECT_EQ(o.code, 0) << o.err;
  return run;
}

// tools/onnx_check.py on dir's export; its exit code (77: python3-onnx or -opencv missing).
int onnx_check(const fs::path& dir, std::string* line) {
  const std::string cmd = "/usr/bin/python3 " + source("tools/onnx_check.py") + " " +
                          (dir / "net.onnx").string() + " " + (dir / "sample").string() + " >" +
                          (dir / "check.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  *line = slurp(dir / "check.txt");
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

struct NetCase {
  const char* name;
  std::string net, data, extra;
};

void PrintTo(const NetCase& c, std::ostream* os) {
  *os << c.name;
}

class ExportOnnx : public ::testing::TestWithParam<NetCase> {};

TEST_P(ExportOnnx, OpenCvGivesEaselsLogits) {
  const NetCase& c = GetParam();
  const fs::path dir = tmp_dir(c.name);
  const fs::path run = train(dir, c.net, c.data, c.extra);
  const Out o = easel_test::run_easel("export " + run.string() + " --format onnx --out " +
                                          (dir / "net.onnx").string() + " --sample " +
                                          (dir / "sample").string() + " --sample-count 8",
                                      "", "export");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("ONNX opset 13"), std::string::npos) << o.out;
  std::string line;
  const int rc = onnx_check(dir, &line);
  if (rc == 77) GTEST_SKIP() << line;
  EXPECT_EQ(rc, 0) << line;
  std::printf("%s: %s", c.name, line.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Nets, ExportOnnx,
    ::testing::Values(NetCase{"lenet", "lenet", "synthetic:256:1x28x28:10", ""},
                      NetCase{"lenet_nchw", "lenet", "synthetic:256:1x28x28:10", "--layout nchw"},
                      NetCase{"cifar10_quick", "cifar10-quick", "synthetic:256:3x32x32:10", ""},
                      NetCase{"alexnet_cifar", "alexnet-cifar", "synthetic:256:3x32x32:10", ""},
                      NetCase{"small_resnet", source("docs/nets/small-resnet.toml"),
                              "synthetic:256:3x32x32:10", ""},
                      NetCase{"cifar10_full", "cifar10-full", "synthetic:256:3x32x32:10", ""},
                      NetCase{"corners", source("tests/tools/export_corners.toml"),
                              "synthetic:256:3x15x15:10", "--lr 0.001"}),
    [](const ::testing::TestParamInfo<NetCase>& i) { return std::string(i.param.name); });

// A .npy file's float32 values (easel's own: format 1.0, little-endian).
std::vector<float> npy_values(const fs::path& p) {
  const std::string b = slurp(p);
  const size_t at = 10 + static_cast<uint8_t>(b[8]) + 256 * static_cast<size_t>(b[9]);
  std::vector<float> v((b.size() - at) / sizeof(float));
  std::memcpy(v.data(), b.data() + at, v.size() * sizeof(float));
  return v;
}

// The model exported by default is the one easel eval and easel predict take: for local-sgd
// the anchor of the groups' last meeting (step 6 of 8), not group 0's replica (2 steps on). Its
// sample logits are predict's of the same images, bit for bit, and OpenCV's run of the ONNX model
// gives them.
TEST(ExportWeights, ALocalSgdRunsAnchorAsPredictTakesIt) {
  const fs::path dir = tmp_dir("local_sgd");
  const fs::path run =
      train(dir, "lenet", "synthetic:256:1x28x28:10", "--algo local-sgd --groups 2 --tau 3");
  const Out o = easel_test::run_easel("export " + run.string() + " --format onnx --out " +
                                          (dir / "net.onnx").string() + " --sample " +
                                          (dir / "sample").string() + " --sample-count 8",
                                      "", "export");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("(anchor, step 8)"), std::string::npos) << o.out;
  const Out p = easel_test::run_easel(
      "predict " + run.string() + " " + (dir / "sample" / "images.npy").string() + " --json", "",
      "predict");
  ASSERT_EQ(p.code, 0) << p.err;
  const nlohmann::json j = nlohmann::json::parse(p.out);
  std::vector<float> want;
  for (const auto& row : j["logits"])
    for (const auto& z : row)
      want.push_back(z.get<float>());
  EXPECT_EQ(npy_values(dir / "sample" / "logits.npy"), want);
  std::string line;
  const int rc = onnx_check(dir, &line);
  if (rc == 77) GTEST_SKIP() << line;
  EXPECT_EQ(rc, 0) << line;
}

// tools/pytorch/check_state_dict.py on dir's net.pt (net `net` on C,H,W `input`, 10 classes);
// its exit code (77: python3-torch missing).
int state_dict_check(const fs::path& dir, const std::string& net, const std::string& input,
                     std::string* line) {
  const std::string cmd = "/usr/bin/python3 " + source("tools/pytorch/check_state_dict.py") + " " +
                          (dir / "net.pt").string() + " " + (dir / "sample").string() + " --net " +
                          net + " --input " + input + " --classes 10 >" +
                          (dir / "check.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  *line = slurp(dir / "check.txt");
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

struct TorchCase {
  const char* name;
  std::string net, input, extra;  // input: C,H,W
};

void PrintTo(const TorchCase& c, std::ostream* os) {
  *os << c.name;
}

class ExportPytorch : public ::testing::TestWithParam<TorchCase> {};

// The state_dict loads strictly into torchvision's model or the twin, which gives easel's
// logits within 1e-4 of their scale in eval mode (batch norm on its running statistics).
TEST_P(ExportPytorch, PyTorchGivesEaselsLogits) {
  const TorchCase& c = GetParam();
  const fs::path dir = tmp_dir(std::string("pt_") + c.name);
  std::string dims = c.input;
  std::replace(dims.begin(), dims.end(), ',', 'x');
  const fs::path run = train(dir, c.net, "synthetic:256:" + dims + ":10", c.extra);
  const Out o = easel_test::run_easel("export " + run.string() + " --format pytorch --out " +
                                          (dir / "net.pt").string() + " --sample " +
                                          (dir / "sample").string() + " --sample-count 8",
                                      "", "export");
  std::string line;
  if (o.code == 2 && o.err.find("needs PyTorch") != std::string::npos) GTEST_SKIP() << o.err;
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("state_dict"), std::string::npos) << o.out;
  const int rc = state_dict_check(dir, c.net, c.input, &line);
  if (rc == 77) GTEST_SKIP() << line;
  EXPECT_EQ(rc, 0) << line;
  std::printf("%s: %s", c.name, line.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Nets, ExportPytorch,
    ::testing::Values(TorchCase{"lenet", "lenet", "1,28,28", ""},
                      TorchCase{"lenet_nchw", "lenet", "1,28,28", "--layout nchw"},
                      TorchCase{"cifar10_quick", "cifar10-quick", "3,32,32", ""},
                      TorchCase{"alexnet_cifar", "alexnet-cifar", "3,32,32", ""},
                      TorchCase{"cifar10_full", "cifar10-full", "3,32,32", ""},
                      TorchCase{"resnet18", "resnet18", "3,32,32", ""}),
    [](const ::testing::TestParamInfo<TorchCase>& i) { return std::string(i.param.name); });

// One trained mlp run shared by the refusals.
class ExportRefusal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(tmp_dir("refusals"));
    run_ = new fs::path(train(*dir_, "mlp", "synthetic:128:1x8x8:4", "--algo sgd"));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete run_;
  }
  static Out refused(const std::string& args) {
    Out o = easel_test::run_easel("export " + args, "", "refusal");
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    return o;
  }
  static fs::path* dir_;
  static fs::path* run_;
};
fs::path* ExportRefusal::dir_ = nullptr;
fs::path* ExportRefusal::run_ = nullptr;

TEST_F(ExportRefusal, ARunWithoutWeights) {
  const fs::path run =
      train(tmp_dir("noweights"), "mlp", "synthetic:128:1x8x8:4", "--no-checkpoint");
  const Out o = refused(run.string() + " --format onnx --out " + (*dir_ / "a.onnx").string());
  EXPECT_NE(o.err.find("checkpoint.bin: no such file"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(*dir_ / "a.onnx"));
  EXPECT_NE(
      refused((*dir_ / "none").string() + " --format onnx --out " + (*dir_ / "a.onnx").string())
          .err.find("no config.json"),
      std::string::npos);
}

TEST_F(ExportRefusal, ALayerOnnxCannotExpress) {
  // A padded average pool whose ceil-rounded last window runs past the padding (8 -> 5).
  const fs::path dir = tmp_dir("overhang");
  std::ofstream(dir / "net.toml") << "name = \"overhang\"\n"
                                     "[[layer]]\nname = \"pool1\"\ntype = \"avg_pool\"\n"
                                     "kernel = 3\nstride = 2\npad = 1\n"
                                     "[[layer]]\nname = \"ip1\"\ntype = \"inner_product\"\n"
                                     "outputs = \"classes\"\n";
  const fs::path run = train(dir, (dir / "net.toml").string(), "synthetic:128:1x8x8:4");
  const Out o = refused(run.string() + " --format onnx --out " + (dir / "a.onnx").string());
  EXPECT_NE(o.err.find("layer pool1 (avg_pool)"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(dir / "a.onnx"));
}

TEST_F(ExportRefusal, AnUnknownFormatOrWeights) {
  const std::string out = " --out " + (*dir_ / "a.onnx").string();
  EXPECT_NE(refused(run_->string() + " --format tflite" + out).err.find("--format: 'tflite'"),
            std::string::npos);
  EXPECT_NE(refused(run_->string() + " --format onnx --weights final" + out)
                .err.find("evaluated, best, centre, anchor or group:G"),
            std::string::npos);
  EXPECT_NE(refused(run_->string() + " --format onnx --weights centre" + out).err.find("no centre"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(*dir_ / "a.onnx"));
}

TEST_F(ExportRefusal, ANetWithoutAPyTorchTwin) {
  const Out o = refused(run_->string() + " --format pytorch --out " + (*dir_ / "a.pt").string());
  if (o.err.find("needs PyTorch") != std::string::npos) GTEST_SKIP() << o.err;
  EXPECT_NE(o.err.find("net 'mlp' has no PyTorch twin"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(*dir_ / "a.pt"));
  EXPECT_NE(
      refused(run_->string() + " --format pytorch --softmax --out " + (*dir_ / "a.pt").string())
          .err.find("--softmax"),
      std::string::npos);
}

TEST_F(ExportRefusal, AnUnwritableOut) {
  std::ofstream(*dir_ / "file") << "x";
  EXPECT_NE(
      refused(run_->string() + " --format onnx --out " + (*dir_ / "nodir" / "a.onnx").string())
          .err.find("--out"),
      std::string::npos);
  EXPECT_NE(refused(run_->string() + " --format onnx --out " + (*dir_ / "file" / "a.onnx").string())
                .err.find("--out"),
            std::string::npos);
  EXPECT_NE(
      refused(run_->string() + " --format onnx --out " + dir_->string()).err.find("directory"),
      std::string::npos);
}

TEST_F(ExportRefusal, AnExistingOutIsKeptUnlessOverwrite) {
  const fs::path out = *dir_ / "kept.onnx";
  std::ofstream(out) << "mine";
  const Out o = refused(run_->string() + " --format onnx --out " + out.string());
  EXPECT_NE(o.err.find("--overwrite"), std::string::npos) << o.err;
  EXPECT_EQ(slurp(out), "mine");
  const Out w = easel_test::run_easel(
      "export " + run_->string() + " --format onnx --overwrite --out " + out.string(), "", "ow");
  EXPECT_EQ(w.code, 0) << w.err;
  EXPECT_NE(slurp(out), "mine");
  const fs::path pt = *dir_ / "kept.pt";
  std::ofstream(pt) << "mine";
  EXPECT_NE(
      refused(run_->string() + " --format pytorch --out " + pt.string()).err.find("--overwrite"),
      std::string::npos);
  EXPECT_EQ(slurp(pt), "mine");
}

}  // namespace
