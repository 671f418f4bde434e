// Net descriptions and graphs: every built-in net's parameter count against its published figure,
// the description language's errors (each names the file, the layer and the field), the wiring
// checks, and a whole graph net (fan-out, add, concat) gradient-checked end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "devices/device.hpp"
#include "nets/graph.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"
#include "nets/net.hpp"

namespace easel {
namespace {

int64_t params_of(const std::string& model, ModelInput in) {
  auto spec = build_model(model, in);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  if (!spec.ok()) return -1;
  auto cost = net_cost(spec.value());
  EXPECT_TRUE(cost.ok()) << cost.status().to_string();
  return cost.ok() ? cost->params : -1;
}

// The published counts: torchvision's (resnet18/50, vgg19, googlenet without aux heads),
// Krizhevsky's one-tower AlexNet, Caffe's examples.
TEST(BuiltinNets, ParameterCountsMatchThePublishedFigures) {
  const ModelInput imagenet{3, 224, 224, 1000};
  EXPECT_EQ(params_of("resnet18", imagenet), 11'689'512);
  EXPECT_EQ(params_of("resnet50", imagenet), 25'557'032);
  EXPECT_EQ(params_of("vgg19", imagenet), 143'667'240);
  EXPECT_EQ(params_of("googlenet", imagenet), 6'624'904);
  EXPECT_EQ(params_of("alexnet-cifar", {3, 32, 32, 1000}), 62'378'344);
  EXPECT_EQ(params_of("alexnet-cifar", {3, 32, 32, 10}), 58'322'314);
  EXPECT_EQ(params_of("cifar10-full", {3, 32, 32, 10}), 89'578);
  EXPECT_EQ(params_of("cifar10-quick", {3, 32, 32, 10}), 145'578);
  EXPECT_EQ(params_of("lenet", {1, 28, 28, 10}), 431'080);
}

TEST(BuiltinNets, EachParsesOnItsDeclaredInputAndHasADescription) {
  ASSERT_GE(model_list().size(), 9u);
  for (const ModelEntry& m : model_list()) {
    EXPECT_FALSE(m.description.empty()) << m.name;
    auto spec = build_model(m.name, m.input);
    ASSERT_TRUE(spec.ok()) << m.name << ": " << spec.status().to_string();
    EXPECT_TRUE(check_model(m.name).ok()) << m.name;
  }
  // Batch norm's running statistics are state beside the parameters: 2 per channel.
  auto spec = build_model("resnet18", {3, 224, 224, 1000});
  ASSERT_TRUE(spec.ok());
  auto cost = net_cost(spec.value());
  ASSERT_TRUE(cost.ok());
  EXPECT_EQ(cost->state_floats, 2 * 4'800);          // 4,800 normalised channels
  EXPECT_NEAR(cost->forward_flops / 1e9, 3.6, 0.2);  // 1.8 G multiply-adds
}

// A description: the header, then the given layers.
std::string net_text(const std::string& layers) {
  return "name = \"t\"\n[input]\nchannels = 2\nheight = 8\nwidth = 8\nclasses = 3\n" + layers;
}

std::string error_of(const std::string& text, const std::string& origin = "t.toml") {
  auto spec = parse_net_description(text, origin, {2, 8, 8, 3});
  EXPECT_FALSE(spec.ok()) << text;
  if (spec.ok()) return {};
  EXPECT_EQ(spec.status().code(), Code::invalid_argument);
  const std::string m = spec.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  return m;
}

const char* kConv = "[[layer]]\nname = \"c1\"\ntype = \"conv\"\noutputs = 4\nkernel = 3\n";
const char* kFc = "[[layer]]\nname = \"fc\"\ntype = \"inner_product\"\noutputs = \"classes\"\n";

TEST(NetDescription, AValidOneParsesAndFollowsTheDataClasses) {
  auto spec = parse_net_description(net_text(std::string(kConv) + kFc), "t.toml", {2, 8, 8, 7});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  ASSERT_EQ(spec->layers.size(), 2u);
  EXPECT_EQ(spec->layers[1].op.oc, 7);
  EXPECT_EQ(spec->classes, 7);
}

TEST(NetDescription, ErrorsNameTheFileTheLayerAndTheField) {
  using std::string;
  string m = error_of(net_text("[[layer]]\nname = \"x\"\ntype = \"convolution\"\n"));
  EXPECT_NE(m.find("t.toml:"), string::npos) << m;
  EXPECT_NE(m.find("layer x: type: unknown layer type 'convolution' (known: conv,"), string::npos)
      << m;
  m = error_of(net_text(string(kConv) + "strides = 2\n" + kFc));
  EXPECT_NE(m.find("layer c1: strides: unknown key for a conv layer"), string::npos) << m;
  m = error_of(net_text(string(kConv) + "pad = \"same\"\n" + kFc));
  EXPECT_NE(m.find("layer c1: pad: must be an integer, not a string"), string::npos) << m;
  m = error_of(net_text("[[layer]]\nname = \"c1\"\ntype = \"conv\"\nkernel = 3\n" + string(kFc)));
  EXPECT_NE(m.find("layer c1: outputs: missing"), string::npos) << m;
  m = error_of(net_text(string(kConv) + "weight_filler = \"gauss:1\"\n" + kFc));
  EXPECT_NE(m.find("layer c1: weight_filler: 'gauss:1' is not a filler"), string::npos) << m;
  m = error_of(net_text(string(kConv) + "outputs = 0\n"));  // a key given twice: TOML's error
  EXPECT_NE(m.find("t.toml:"), string::npos) << m;
  m = error_of(net_text(string(kConv) + "kernel = 9\n" + kFc)
                   .replace(net_text("").size() + string(kConv).find("kernel = 3\n"), 11, ""));
  EXPECT_NE(m.find("layer c1: conv: kernel 9x9 larger than padded input 8x8"), string::npos) << m;
  m = error_of(net_text(string(kConv) + kFc + "inputs = [\"c2\"]\n"));
  EXPECT_NE(m.find("layer fc: input 'c2' names no layer"), string::npos) << m;
  m =
      error_of(net_text("[[layer]]\nname = \"a\"\ntype = \"relu\"\ninputs = [\"b\"]\n"
                        "[[layer]]\nname = \"b\"\ntype = \"relu\"\ninputs = [\"a\"]\n"
                        "[[layer]]\nname = \"c\"\ntype = \"add\"\ninputs = [\"a\", \"b\"]\n"));
  EXPECT_NE(m.find("layers a, b, c read each other in a cycle"), string::npos) << m;
  m = error_of(net_text(string(kConv) + kFc + "[[layer]]\nname = \"c1\"\ntype = \"relu\"\n"));
  EXPECT_NE(m.find("layer c1: the name is used by another layer too"), string::npos) << m;
  m = error_of(net_text(string(kConv) +
                        "[[layer]]\nname = \"p\"\ntype = \"max_pool\"\n"
                        "kernel = 2\ninputs = [\"data\"]\n" +
                        kFc));
  EXPECT_NE(m.find("layer c1: its output is read by no layer"), string::npos) << m;
  m = error_of(net_text(string(kConv) + "[[layer]]\nname = \"j\"\ntype = \"add\"\n" + kFc));
  EXPECT_NE(m.find("layer j: inputs: add takes 2 to"), string::npos) << m;
  m = error_of(net_text(string(kConv) +
                        "[[layer]]\nname = \"j\"\ntype = \"add\"\n"
                        "inputs = [\"c1\", \"data\"]\n" +
                        kFc));
  EXPECT_NE(m.find("layer j: add:"), string::npos) << m;  // 4x6x6 + 2x8x8
  m = error_of(net_text(string(kConv)));
  EXPECT_NE(m.find("layer c1: has 144 outputs per image but the data has 3 classes"), string::npos)
      << m;
  m = error_of("name = \"t\"\nlayers = 3\n");
  EXPECT_NE(m.find("t.toml: layers: unknown key"), string::npos) << m;
  m = error_of("name = \"t\"\n");
  EXPECT_NE(m.find("t.toml: no layers"), string::npos) << m;
  m = error_of("name = \"t\"\n[[layer]\n");
  EXPECT_NE(m.find("t.toml:2:"), string::npos) << m;
}

TEST(NetDescription, AFileIsReadByPathAndCheckedBeforeTheData) {
  const auto dir = std::filesystem::temp_directory_path() / "easel_test_description";
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.toml").string(), bad = (dir / "bad.toml").string();
  std::ofstream(good) << net_text(std::string(kConv) + kFc);
  std::ofstream(bad) << net_text(std::string(kConv) + "[[layer]]\nname = \"fc\"\ntype = \"ip\"\n");
  EXPECT_TRUE(is_net_file(good));
  EXPECT_FALSE(is_net_file("lenet"));
  EXPECT_TRUE(check_model(good).ok());
  auto spec = build_model(good, {2, 8, 8, 3});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  const Status s = check_model(bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(bad + ":"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("layer fc: type: unknown layer type 'ip'"), std::string::npos);
  const Status missing = check_model((dir / "none.toml").string());
  EXPECT_NE(missing.message().find("none.toml: no such file"), std::string::npos);
  EXPECT_NE(check_model("resnet-9000").message().find("unknown model 'resnet-9000'"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// docs/RESULTS.md's larger net for Fashion-MNIST (docs/nets/fashion-mlp.toml) has the
// parameter count its file and the study state.
TEST(NetDescription, TheStudysPerceptronHasItsStatedSize) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  const auto path = std::filesystem::path(root) / "docs/nets/fashion-mlp.toml";
  const std::string text = read_text(path);
  ASSERT_FALSE(text.empty()) << path;
  auto spec = parse_net_description(text, "fashion-mlp.toml", {1, 28, 28, 10});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto cost = net_cost(spec.value());
  ASSERT_TRUE(cost.ok());
  EXPECT_EQ(cost->params, 1'863'690);
  EXPECT_NE(text.find("1,863,690"), std::string::npos);
}

// The example users copy (docs/nets/small-resnet.toml) parses, builds on CIFAR-sized data, and
// typical edits of it are refused with the layer and the field.
TEST(NetDescription, TheDocsExampleParsesAndItsBrokenEditsAreNamed) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  const auto path = std::filesystem::path(root) / "docs/nets/small-resnet.toml";
  const std::string text = read_text(path);
  ASSERT_FALSE(text.empty()) << path;
  auto spec = parse_net_description(text, "small-resnet.toml", {3, 32, 32, 10});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto cost = net_cost(spec.value());
  ASSERT_TRUE(cost.ok());
  EXPECT_GT(cost->params, 50'000);
  auto dev = make_cpu_device(ImplChoice::fast);
  EXPECT_TRUE(Net::create(spec.value(), 2, Layout::nhwc, *dev, MemKind::dram).ok());
  const auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  using std::string;
  string m = error_of(
      edit("inputs = [\"block1_bn2\", \"relu1\"]", "inputs = [\"block1_bn2\", \"relu2\"]"));
  EXPECT_NE(m.find("layer block1_add: input 'relu2' names no layer"), string::npos) << m;
  m = error_of(edit("type = \"global_avg_pool\"", "type = \"global_average_pool\""));
  EXPECT_NE(m.find("layer pool: type: unknown layer type 'global_average_pool'"), string::npos)
      << m;
  m = error_of(edit("inputs = [\"block2_bn2\", \"block2_shortcut_bn\"]",
                    "inputs = [\"block2_bn2\", \"block2_shortcut_bn\", \"block1_relu\"]"));
  EXPECT_NE(m.find("layer block2_add: add:"), string::npos) << m;  // 64x16x16 + 32x32x32
  m = error_of(edit("name = \"block2_conv1\"\ntype = \"conv\"\n",
                    "name = \"block2_conv1\"\ntype = \"conv\"\ninputs = [\"block2_relu\"]\n"));
  EXPECT_NE(m.find("read each other in a cycle"), string::npos) << m;
}

// A graph: the input read by two branches (a convolution and a pool), joined by add and concat,
// a fan-out whose gradients add up, and a ReLU fused only where it is the sole reader.
const char* kGraph = R"(name = "g"
[[layer]]
name = "c1"
type = "conv"
outputs = 4
kernel = 3
pad = 1
[[layer]]
name = "r1"
type = "relu"
[[layer]]
name = "c2"
type = "conv"
outputs = 4
kernel = 3
pad = 1
inputs = ["r1"]
[[layer]]
name = "c3"
type = "conv"
outputs = 4
kernel = 1
inputs = ["r1"]
[[layer]]
name = "sum"
type = "add"
inputs = ["c2", "c3", "r1"]
[[layer]]
name = "p"
type = "avg_pool"
kernel = 3
pad = 1
inputs = ["data"]
[[layer]]
name = "cat"
type = "concat"
inputs = ["sum", "p"]
[[layer]]
name = "gap"
type = "global_avg_pool"
[[layer]]
name = "fc"
type = "inner_product"
outputs = "classes"
)";

TEST(NetGraph, SortsFusesAndNamesInputs) {
  auto spec = parse_net_description(kGraph, "g.toml", {2, 6, 6, 3});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto dev = make_cpu_device(ImplChoice::ref);
  auto net = Net::create(spec.value(), 2, Layout::nchw, *dev, MemKind::dram);
  ASSERT_TRUE(net.ok()) << net.status().to_string();
  const auto layers = net.value()->describe();
  // r1 is c1's only reader, so it runs as c1's post-op; its readers read the fused layer.
  ASSERT_EQ(layers.size(), 8u);
  EXPECT_EQ(layers[0].name, "c1+r1");
  EXPECT_EQ(layers[3].name, "sum");
  EXPECT_EQ(layers[3].inputs, (std::vector<std::string>{"c2", "c3", "c1+r1"}));
  EXPECT_EQ(layers[4].inputs, (std::vector<std::string>{"data"}));
  EXPECT_EQ(layers[5].dst.c, 6);  // 4 + 2
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// d mean-loss / d weights against central differences, through the graph.
void check_graph_gradient(Layout layout, ImplChoice impl) {
  const auto path = std::filesystem::temp_directory_path() / "easel_test_graph.toml";
  write_file(path, kGraph);
  const ModelInput in{2, 6, 6, 3};
  auto spec = build_model(path.string(), in);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto dev = make_cpu_device(impl);
  const int64_t batch = 3;
  auto created = Net::create(spec.value(), batch, layout, *dev, MemKind::dram);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Net& net = *created.value();
  const int64_t n = net.params().total_floats();
  std::vector<float> w(static_cast<size_t>(n)), diff(static_cast<size_t>(n));
  net.init_params(w.data(), 3);
  Rng rng(5);
  for (const auto& s : net.params().segments())
    if (s.dims.size() == 1)
      for (int64_t i = 0; i < s.count; ++i)
        w[static_cast<size_t>(s.offset + i)] = rng.uniform(0.05f, 0.1f);
  std::vector<float> images(static_cast<size_t>(net.input_shape().count()));
  for (auto& x : images)
    x = rng.uniform(-1.f, 1.f);
  std::vector<int32_t> labels = {0, 2, 1};
  net.train_step(images.data(), labels.data(), w.data(), diff.data());
  auto loss_at = [&](std::vector<float>& ww) {
    return net.evaluate(images.data(), labels.data(), batch, ww.data()).loss_sum / batch;
  };
  int bad = 0;
  for (const auto& s : net.params().segments()) {
    for (int64_t k = 0; k < std::min<int64_t>(s.count, 8); ++k) {
      const size_t i = static_cast<size_t>(s.offset + k);
      const float h = 1e-3f, w0 = w[i];
      w[i] = w0 + h;
      const double lp = loss_at(w);
      w[i] = w0 - h;
      const double lm = loss_at(w);
      w[i] = w0;
      const double num = (lp - lm) / (2 * h);
      if (std::abs(num - diff[i]) > 1e-3 + 2e-2 * std::abs(num)) {
        ++bad;
        ADD_FAILURE() << s.name << "[" << k << "]: analytic " << diff[i] << " numeric " << num;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  std::filesystem::remove(path);
}

TEST(NetGraph, GradientThroughFanOutAddAndConcatRef) {
  check_graph_gradient(Layout::nchw, ImplChoice::ref);
}
TEST(NetGraph, GradientThroughFanOutAddAndConcatFastNhwc) {
  check_graph_gradient(Layout::nhwc, ImplChoice::fast);
}

}  // namespace
}  // namespace easel
