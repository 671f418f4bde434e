// `easel train --net FILE.onnx` and `easel list --net FILE.onnx` from the command line: PyTorch's
// lenet twin (tests/nets/onnx_twin.py) trains on Fashion-MNIST from its own weights; a graph
// with an op easel lacks is refused in one line, exit 2; easel bench times a file's net on its
// own input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nets/data/npy.hpp"

#include "tests/tools/run_easel.hpp"

namespace {

namespace fs = std::filesystem;
using easel_test::Out;
using easel_test::run_easel;

// The twin's export into dir; false without torch.
bool twin(const std::string& net, const fs::path& dir) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  const std::string cmd = "/usr/bin/python3 " + std::string(root ? root : ".") +
                          "/tests/nets/onnx_twin.py " + net + " " + dir.string() + " >" +
                          dir.string() + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
  EXPECT_TRUE(code == 0 || code == 77) << "onnx_twin.py " << net << ": " << dir.string() << ".log";
  return code == 0;
}

// The logits row by row of `easel predict ARGS x.npy --json`.
std::vector<std::vector<double>> predicted(const std::string& args, const fs::path& npy) {
  const Out o = run_easel("predict " + args + " " + npy.string() + " --json", "", "onnx_predict");
  EXPECT_EQ(o.code, 0) << o.err;
  if (o.code != 0) return {};
  return nlohmann::json::parse(o.out)["logits"].get<std::vector<std::vector<double>>>();
}

// `easel predict --net FILE.onnx` runs the file's own weights: the same logits as the run that
// started from them and took one step too small to move them, on the same .npy batch; a net
// description (no weights) and --weights with --net are refused in one line.
void expect_file_predicts_as_the_run(const std::string& net, const fs::path& run,
                                     const fs::path& d) {
  std::vector<float> x(3 * 28 * 28);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 37) % 256) / 256.f;
  const fs::path npy = d / "three.npy";
  std::ofstream(npy, std::ios::binary) << easel::encode_npy({3, 1, 28, 28}, x);
  const auto by_file = predicted("--net " + net, npy), by_run = predicted(run.string(), npy);
  ASSERT_EQ(by_file.size(), 3u);
  ASSERT_EQ(by_run.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    ASSERT_EQ(by_file[r].size(), 10u);
    for (size_t c = 0; c < 10; ++c)
      EXPECT_NEAR(by_file[r][c], by_run[r][c], 1e-5) << "row " << r << " class " << c;
  }
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  const std::string toml = std::string(root ? root : ".") + "/docs/nets/small-resnet.toml";
  for (const std::string& bad :
       {"--net " + toml + " x.png", "--net " + net + " --weights best x.png", "--net " + net}) {
    const Out o = run_easel("predict " + bad, "", "onnx_predict_refused");
    EXPECT_EQ(o.code, 2) << bad << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << bad << ": " << o.err;
  }
}

TEST(OnnxCli, LenetTrainsFromItsOwnWeights) {
  const fs::path d = fs::path(testing::TempDir()) / ("easel_onnx_cli_" + std::to_string(getpid()));
  fs::create_directories(d);
  if (!twin("lenet", d / "lenet") || !twin("sigmoid", d / "sigmoid"))
    GTEST_SKIP() << "python3-torch is not installed";
  const std::string net = (d / "lenet/lenet.onnx").string();
  Out o = run_easel("list --net " + net + " --json", "", "onnx_list");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("\"params\": 431080"), std::string::npos) << o.out;
  if (!fs::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  o = run_easel("train --net " + net +
                    " --data /usr/share/datasets/fashion-mnist --iterations 200 --eval-every 100"
                    " --groups 1 --threads-per-group 1 --progress none --log-level warn --out " +
                    (d / "run").string(),
                "", "onnx_train");
  ASSERT_EQ(o.code, 0) << o.err;
  // From PyTorch's initial weights (10% accuracy) to over 60% in 200 steps.
  const size_t at = o.out.find("test accuracy ");
  ASSERT_NE(at, std::string::npos) << o.out;
  EXPECT_GT(std::stod(o.out.substr(at + 14)), 0.6) << o.out;
  // The run starts from the file's weights: one step at a learning rate too small to move
  // them, exported again, holds them (4 KiB from the middle of the file: ip1's weights, which
  // the nhwc run keeps in hwc order and the export writes back in chw).
  o = run_easel("train --net " + net +
                    " --data /usr/share/datasets/fashion-mnist --iterations 1 --lr 1e-30"
                    " --groups 1 --threads-per-group 1 --progress none --log-level warn --out " +
                    (d / "run1").string(),
                "", "onnx_train1");
  ASSERT_EQ(o.code, 0) << o.err;
  o = run_easel(
      "export " + (d / "run1").string() + " --format onnx --out " + (d / "again.onnx").string(), "",
      "onnx_export");
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string file = easel_test::slurp(net), again = easel_test::slurp(d / "again.onnx");
  EXPECT_NE(again.find(file.substr(file.size() / 2, 4096)), std::string::npos);
  expect_file_predicts_as_the_run(net, d / "run1", d);
  o = run_easel("train --net " + (d / "sigmoid/sigmoid.onnx").string() +
                    " --data synthetic:64:1x28x28:10 --iterations 1 --out " + (d / "run2").string(),
                "", "onnx_refused");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("node '/1/Sigmoid' (Sigmoid): easel has no layer for this op"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_FALSE(fs::exists(d / "run2"));
  fs::remove_all(d);
}

// easel bench times an ONNX file's net on the file's own input (3x32x32 here, not LeNet's).
TEST(OnnxCli, BenchTimesAnImportedNet) {
  const fs::path d =
      fs::path(testing::TempDir()) / ("easel_onnx_bench_" + std::to_string(getpid()));
  fs::create_directories(d);
  if (!twin("cifar10-quick", d / "quick")) GTEST_SKIP() << "python3-torch is not installed";
  const std::string net = (d / "quick/cifar10-quick.onnx").string();
  const Out o = run_easel("bench --nets " + net +
                              " --batches 2 --layouts 1x1 --skip-ceilings --skip-layers "
                              "--skip-exchange --warmup 0 --repeats 1 --min-time 0",
                          "", "onnx_bench");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find(net), std::string::npos) << o.out;
  fs::remove_all(d);
}

}  // namespace
