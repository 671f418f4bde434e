// The model's out-of-sample nets (tools/random_nets.py, docs/MODEL.md): every net drawn is a
// valid description that `easel train` runs, within the generator's bounds; a seed draws the same
// files byte for byte (and net i of a seed does not depend on how many are drawn); the draws
// cover every construct of the grammar. And `tools/model-check --holdout --machine FILE`
// refuses a machine file whose calibration names a net the check holds out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "model/layer_rates.hpp"
#include "nets/graph.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"
#include "tests/tools/run_easel.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

std::string source_root() {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  return root != nullptr ? root : ".";
}

fs::path temp_dir(const std::string& tag) {
  const fs::path d =
      fs::path(::testing::TempDir()) / ("random_nets_" + std::to_string(::getpid()) + "_" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// `python3 TOOL ARGS` from the source tree: exit code, standard output, standard error.
easel_test::Out run_tool(const std::string& tool, const std::string& args, const fs::path& d) {
  const std::string cmd = "python3 " + source_root() + "/tools/" + tool + " " + args + " >" +
                          (d / "stdout").string() + " 2>" + (d / "stderr").string() + " </dev/null";
  const int rc = std::system(cmd.c_str());
  easel_test::Out o;
  o.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
  o.out = easel_test::slurp(d / "stdout");
  o.err = easel_test::slurp(d / "stderr");
  return o;
}

// The files of `count` nets of `seed`, in their order.
std::vector<fs::path> draw(int64_t seed, int count, const fs::path& d) {
  const easel_test::Out o = run_tool("random_nets.py",
                                     "--seed " + std::to_string(seed) + " --count " +
                                         std::to_string(count) + " --out " + (d / "nets").string(),
                                     d);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("seed " + std::to_string(seed)), std::string::npos) << o.out;
  std::vector<fs::path> out;
  for (int i = 0; i < count; ++i)
    out.push_back(d / "nets" /
                  ("random-" + std::to_string(seed) + "-" + std::to_string(i) + ".toml"));
  return out;
}

// The net a file describes, on the input its [input] table declares.
Result<NetSpec> spec_of_file(const fs::path& p) {
  EASEL_ASSIGN_OR_RETURN(std::string text, read_net_file(p.string()));
  EASEL_ASSIGN_OR_RETURN(NetHeader h, parse_net_header(text, p.string()));
  return parse_net_description(text, p.string(), h.input);
}

constexpr int64_t kSeed = 20240611;
constexpr int kNets = 40;

TEST(RandomNets, EveryNetIsValidAndWithinTheBounds) {
  const fs::path d = temp_dir("valid");
  const std::vector<fs::path> files = draw(kSeed, kNets, d);
  for (const fs::path& f : files) {
    Result<NetSpec> spec = spec_of_file(f);
    ASSERT_TRUE(spec.ok()) << f << ": " << spec.status().message();
    Result<NetCost> cost = net_cost(*spec);
    ASSERT_TRUE(cost.ok()) << f << ": " << cost.status().message();
    // The generator's bounds (2 to 60 MFLOP of convolutions, pools and inner products forward
    // per image, 8 M parameters), with room for the ReLUs, batch norms and joins it does not
    // count.
    EXPECT_GE(cost->forward_flops, 2e6) << f;
    EXPECT_LE(cost->forward_flops, 1.2 * 60e6) << f;
    EXPECT_LE(cost->params, 8'000'000) << f;
    EXPECT_TRUE(spec->channels == 1 || spec->channels == 3) << f;
  }
  // `easel train --net FILE` runs them (two steps each, of the first few).
  for (int i = 0; i < 3; ++i) {
    Result<NetSpec> spec = spec_of_file(files[static_cast<size_t>(i)]);
    ASSERT_TRUE(spec.ok());
    const std::string shape = spec->channels == 1 ? "1x28x28" : "3x32x32";
    const easel_test::Out o = easel_test::run_easel(
        "train --net " + files[static_cast<size_t>(i)].string() + " --data synthetic:16:" + shape +
            ":10 --batch 4 --iterations 2 --eval-every 2 --lr 0.0001 --progress none "
            "--no-checkpoint --overwrite --out " +
            (d / ("run" + std::to_string(i))).string(),
        "", "random_train");
    EXPECT_EQ(o.code, 0) << files[static_cast<size_t>(i)] << ": " << o.err;
  }
}

TEST(RandomNets, ASeedDrawsTheSameNets) {
  const std::vector<fs::path> a = draw(7, 5, temp_dir("seed_a"));
  const std::vector<fs::path> b = draw(7, 2, temp_dir("seed_b"));
  const std::vector<fs::path> c = draw(8, 5, temp_dir("seed_c"));
  for (size_t i = 0; i < b.size(); ++i)  // net i of seed 7, however many are drawn
    EXPECT_EQ(easel_test::slurp(a[i]), easel_test::slurp(b[i])) << i;
  std::set<std::string> distinct;
  for (const fs::path& p : a) {
    std::string text = easel_test::slurp(p);
    EXPECT_FALSE(text.empty()) << p;
    // Net i of another seed is another net (their names aside).
    std::string other = easel_test::slurp(c[static_cast<size_t>(&p - a.data())]);
    const auto body = [](const std::string& t) { return t.substr(t.find("[input]")); };
    EXPECT_NE(body(text), body(other)) << p;
    distinct.insert(body(text));
  }
  EXPECT_EQ(distinct.size(), a.size());
  // A bad flag: one line, exit 2.
  const easel_test::Out bad = run_tool("random_nets.py", "--count 0 --out x", temp_dir("bad"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--count"), std::string::npos) << bad.err;
}

// Over kNets nets of one seed: every layer type of the grammar, both inputs, every kernel size
// and both strides of the convolutions, a 1x1 convolution, and an inner product whose weights
// stream (above the model's threshold).
TEST(RandomNets, DrawsCoverEveryConstruct) {
  const fs::path d = temp_dir("cover");
  std::set<std::string> types, seen;
  const std::regex type_line("type = \"([a-z_]+)\"");
  for (const fs::path& f : draw(kSeed, kNets, d)) {
    const std::string text = easel_test::slurp(f);
    for (std::sregex_iterator m(text.begin(), text.end(), type_line), end; m != end; ++m)
      types.insert((*m)[1]);
    Result<NetSpec> spec = spec_of_file(f);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    seen.insert("input " + std::to_string(spec->channels) + "x" + std::to_string(spec->height));
    for (const LayerSpec& l : spec->layers)
      if (l.op.kind == OpKind::conv)
        seen.insert("conv " + std::to_string(l.op.kh) + "x" + std::to_string(l.op.kw) + "/" +
                    std::to_string(l.op.stride_h));
    const std::vector<model::LayerWork> work = model::layer_work(*spec).value();
    for (const model::LayerWork& w : work)
      seen.insert(w.cls);
  }
  for (const char* t : {"conv", "batch_norm", "relu", "max_pool", "avg_pool", "global_avg_pool",
                        "lrn", "dropout", "add", "concat", "inner_product"})
    EXPECT_TRUE(types.count(t)) << t;
  for (const char* s : {"input 1x28", "input 3x32", "conv 1x1/1", "conv 3x3/1", "conv 5x5/1",
                        "conv 7x7/1", "conv 3x3/2", "conv 1x1/2", "inner_product-streamed",
                        "inner_product", "conv-stem", "conv1x1"})
    EXPECT_TRUE(seen.count(s)) << s;
}

// A machine file whose [[net]] tables name a held-out net (a drawn one, or with --validation a
// validation net) is refused before anything runs: one line naming the file and the net, exit 2.
TEST(ModelCheckHoldout, RefusesAMachineFittedToAHeldOutNet) {
  const fs::path d = temp_dir("refuse");
  auto machine = [&](const std::string& net) {
    const fs::path p = d / (net + ".toml");
    std::ofstream(p) << "[machine]\nname = \"m\"\n\n[[net]]\nname = \"lenet\"\nbatch = 16\n"
                     << "\n[[net]]\nname = \"" << net << "\"\nbatch = 16\n";
    return p.string();
  };
  struct Case {
    std::string net, args;
    int code;
  };
  for (const Case& c : std::vector<Case>{
           {"random-7-1", "--seed 7 --nets-per-seed 2", 2},
           {"random-7-1", "--seed 7 --nets-per-seed 1", 0},  // net 1 is not drawn
           {"resnet18", "--seed 7 --validation", 2},
           {"small-resnet", "--seed 7 --validation", 2},  // a file's name = "small-resnet"
           {"resnet18", "--seed 7", 0},                   // no validation table
       }) {
    const std::string file = machine(c.net);
    const easel_test::Out o =
        run_tool("model-check", "--holdout --plan --machine " + file + " " + c.args, d);
    EXPECT_EQ(o.code, c.code) << c.net << " " << c.args << ": " << o.err;
    if (c.code != 2) continue;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find(file), std::string::npos) << o.err;
    EXPECT_NE(o.err.find(c.net), std::string::npos) << o.err;
  }
  // A file that cannot be read as TOML: one line naming it.
  std::ofstream(d / "bad.toml") << "[[net]\n";
  const easel_test::Out o = run_tool(
      "model-check", "--holdout --plan --seed 7 --machine " + (d / "bad.toml").string(), d);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("bad.toml"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace easel
