// The out-of-sample model's parts (model/layer_rates.hpp, model/probes.hpp,
// docs/MODEL.md): the per-class fit recovers the rates that made synthetic timings; a net's
// layers count its FLOPs as net_cost does; a machine's [step] rates price a net that was never
// calibrated (a net file) by hand-checkable sums; the probes span every layer class the holdout
// check's generator draws and copy no checked net's layers; `easel model --input` and
// `tools/model-check --holdout`'s split.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "model/layer_rates.hpp"
#include "model/machine.hpp"
#include "model/model.hpp"
#include "model/probes.hpp"
#include "nets/graph.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"
#include "tests/tools/machine_refusal.hpp"
#include "tests/tools/run_easel.hpp"

namespace easel::model {
namespace {

std::string source_root() {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  return root != nullptr ? root : ".";
}

NetSpec spec_of(const std::string& net, ModelInput in) {
  auto spec = build_model(net, in);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.value();
}

TEST(LayerRates, FitRecoversTheRatesThatMadeTheTimings) {
  // conv: 50 GFLOP/s and 8 GB/s; relu: bytes only at 20 GB/s; layers of varied shapes.
  std::vector<LayerSample> s;
  for (int i = 1; i <= 6; ++i) {
    const double flops = 1e8 * i * i, bytes = 4e6 * (7 - i);
    s.push_back({"conv", false, flops, bytes, flops / 50e9 + bytes / 8e9});
    s.push_back({"conv", true, 2 * flops, bytes, 2 * flops / 25e9 + bytes / 8e9});
    s.push_back({"relu", false, 1e5 * i, 8e6 * i, 8e6 * i / 20e9});
  }
  s.push_back({"relu", false, 1, 1, 0});  // not timed: dropped
  const std::vector<LayerRate> r = fit_layer_rates(s);
  ASSERT_EQ(r.size(), 3u);
  auto find = [&](const std::string& c, bool b) -> const LayerRate& {
    for (const LayerRate& x : r)
      if (x.cls == c && x.backward == b) return x;
    ADD_FAILURE() << c;
    return r[0];
  };
  EXPECT_NEAR(find("conv", false).gflops, 50, 0.01);
  EXPECT_NEAR(find("conv", false).gbs, 8, 0.01);
  EXPECT_NEAR(find("conv", true).gflops, 25, 0.01);
  EXPECT_EQ(find("conv", true).samples, 6);
  // relu's time follows its bytes alone (its flops are not proportional): no flop term, or
  // one too fast to matter.
  const LayerRate& relu = find("relu", false);
  EXPECT_NEAR(relu.seconds(5e5, 4e7), 4e7 / 20e9, 1e-3 * 4e7 / 20e9);
}

// A kernel's cost per pixel, whatever the channels: a term of its own, which the fit recovers
// from layers whose channels and maps vary apart (bytes grow with both, pixels with the map).
TEST(LayerRates, FitRecoversAPerPixelCost) {
  std::vector<LayerSample> s;
  for (const double c : {8.0, 16.0, 64.0, 256.0})
    for (const double side : {4.0, 16.0, 32.0}) {
      const double pixels = 16 * side * side, bytes = 8 * c * pixels;
      s.push_back(
          {"lrn", false, 12 * c * pixels, bytes, bytes / 20e9 + pixels / 0.05e9, 0, pixels});
    }
  const std::vector<LayerRate> r = fit_layer_rates(s);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NEAR(r[0].gpixels, 0.05, 1e-6);
  // 32 channels over 1e5 pixels (flops and bytes grow alike: either term may price them).
  EXPECT_NEAR(r[0].seconds(12 * 32 * 1e5, 8 * 32 * 1e5, 0, 1e5), 8 * 32 * 1e5 / 20e9 + 1e5 / 0.05e9,
              1e-9);
  // A pass's pixels: the larger of its input's and output's maps; none for an inner product.
  const std::vector<LayerWork> w = layer_work(spec_of("lenet", {1, 28, 28, 10})).value();
  EXPECT_EQ(w[0].forward.pixels_per_image, 28 * 28);   // conv1: 28x28 -> 24x24
  EXPECT_EQ(w[1].backward.pixels_per_image, 24 * 24);  // pool1: 24x24 -> 12x12
  EXPECT_EQ(w.back().forward.pixels_per_image, 0);     // ip2
}

// A GEMM class (convolutions, inner products) fits three terms, the flops, the activations'
// bytes and the weights' bytes apart, its flop rate at most the FMA peak it is given.
TEST(LayerRates, GemmClassesPriceTheirWeightsApartAndFlopsAtMostThePeak) {
  EXPECT_TRUE(gemm_class("conv"));
  EXPECT_TRUE(gemm_class("inner_product-streamed"));
  EXPECT_FALSE(gemm_class("batch_norm"));
  // conv: 100 GFLOP/s, activations at 10 GB/s, weights at 2 GB/s; shapes whose three terms
  // vary apart (a large map with few weights, a small map with many).
  std::vector<LayerSample> s;
  for (int i = 1; i <= 6; ++i) {
    const double flops = 1e8 * i, act = 4e6 * (7 - i) * (7 - i), w = 1e5 * i * i * i;
    s.push_back({"conv", false, flops, act + w, flops / 100e9 + act / 10e9 + w / 2e9, w});
  }
  const std::vector<LayerRate> free = fit_layer_rates(s, 200);
  ASSERT_EQ(free.size(), 1u);
  EXPECT_NEAR(free[0].gflops, 100, 0.01);
  EXPECT_NEAR(free[0].gbs, 10, 1e-4);
  ASSERT_TRUE(free[0].weight_gbs.has_value());
  EXPECT_NEAR(*free[0].weight_gbs, 2, 1e-5);
  EXPECT_NEAR(free[0].seconds(1e8, 4e6 + 1e5, 1e5), 1e8 / 100e9 + 4e6 / 10e9 + 1e5 / 2e9, 1e-12);
  // A peak below the rate the timings imply: the flop rate stops at it (the bytes take the rest).
  const std::vector<LayerRate> capped = fit_layer_rates(s, 50);
  ASSERT_EQ(capped.size(), 1u);
  EXPECT_NEAR(capped[0].gflops, 50, 1e-6);
  // Not a GEMM class: no weights' rate of its own, the flop rate not bounded.
  for (LayerSample& x : s)
    x.cls = "lrn";
  const std::vector<LayerRate> other = fit_layer_rates(s, 50);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_FALSE(other[0].weight_gbs.has_value());
}

TEST(LayerRates, LayerWorkCountsWhatNetCostCounts) {
  for (const std::string net : {"lenet", "cifar10-quick", "resnet18", "alexnet-cifar"}) {
    const NetSpec spec =
        spec_of(net, net == "lenet" ? ModelInput{1, 28, 28, 10} : ModelInput{3, 32, 32, 10});
    const NetCost cost = net_cost(spec).value();
    const std::vector<LayerWork> w = layer_work(spec).value();
    double fwd = 0, train = 0;
    for (const LayerWork& l : w) {
      fwd += l.forward.flops_per_image;
      train += l.forward.flops_per_image + l.backward.flops_per_image;
      EXPECT_GT(l.forward.bytes(1), 0) << net << " " << l.name;
    }
    EXPECT_NEAR(fwd, cost.forward_flops, 1e-6 * cost.forward_flops) << net;
    EXPECT_NEAR(train, cost.train_flops, 1e-6 * cost.train_flops) << net;
    EXPECT_EQ(w.front().cls, "conv-stem") << net;
    EXPECT_EQ(w.back().cls, "inner_product") << net;
  }
  // A 1x1 convolution is its own class; ReLUs fuse as the trainer fuses them.
  const std::vector<LayerWork> r = layer_work(spec_of("resnet18", {3, 32, 32, 10})).value();
  std::set<std::string> classes;
  for (const LayerWork& l : r)
    classes.insert(l.cls);
  EXPECT_TRUE(classes.count("conv1x1")) << "resnet18's downsample";
  EXPECT_EQ(r.front().name, "conv1");
}

// A convolution's backward pass streams the column matrix of its data gradient (the GEMM
// writes it, col2im gathers it): 8 bytes per entry, dst.h x dst.w x kh x kw x src.c per image;
// in vectors of `lanes` floats its output channels (flops) and the matrix's input channels
// count rounded up to whole vectors.
// LeNet's conv2 (20 -> 50 channels, 5x5, 12x12 -> 8x8) streams 8 x 64 x 25 x 20 bytes beyond
// its activations; conv1, on the images, computes no data gradient.
TEST(LayerRates, ConvolutionsBackwardStreamsItsColumnMatrix) {
  const std::vector<LayerWork> w = layer_work(spec_of("lenet", {1, 28, 28, 10})).value();
  ASSERT_GE(w.size(), 3u);
  EXPECT_EQ(w[0].name, "conv1");
  EXPECT_EQ(w[0].backward.bytes_per_image, 4.0 * (20 * 24 * 24 + 1 * 28 * 28));
  EXPECT_EQ(w[2].name, "conv2");
  const double acts = 4.0 * (20 * 12 * 12 + 50 * 8 * 8 + 20 * 12 * 12);
  EXPECT_EQ(w[2].backward.bytes_per_image, acts + 8.0 * 8 * 8 * 25 * 20);
  EXPECT_EQ(w[2].forward.bytes_per_image, 4.0 * (20 * 12 * 12 + 50 * 8 * 8));
  // In vectors of 16 floats (AVX-512's): the output channels count as 32 and 64, the column
  // matrix's input channels as 32; the activations' bytes are what they are.
  const std::vector<LayerWork> v = layer_work(spec_of("lenet", {1, 28, 28, 10}), 16).value();
  EXPECT_DOUBLE_EQ(v[0].forward.flops_per_image, w[0].forward.flops_per_image * 32 / 20);
  EXPECT_DOUBLE_EQ(v[2].backward.flops_per_image, w[2].backward.flops_per_image * 64 / 50);
  EXPECT_EQ(v[2].backward.bytes_per_image, acts + 8.0 * 8 * 8 * 25 * 32);
  EXPECT_EQ(v[2].forward.bytes_per_image, w[2].forward.bytes_per_image);
  EXPECT_EQ(v[4].forward.flops_per_image, w[4].forward.flops_per_image);  // ip1: no rounding
}

std::vector<NetSpec> all_probes() {
  std::vector<NetSpec> probes = model::probe_nets();
  for (NetSpec& p : model::layer_probe_nets())
    probes.push_back(std::move(p));
  return probes;
}

// Every layer class the out-of-sample check's generator (tools/random_nets.py) draws has probe
// layers to fit it from: none of its nets is priced by the fallback. The generator's classes
// are those of 60 nets of one seed, which must hold every class it can draw.
TEST(LayerRates, ProbesSpanEveryClassTheGeneratorDraws) {
  std::set<std::string> probed;
  for (const NetSpec& p : all_probes()) {
    const std::vector<LayerWork> w = layer_work(p).value();
    for (const LayerWork& l : w)
      probed.insert(l.cls);
  }
  const std::string dir = ::testing::TempDir() + "probes_span_" + std::to_string(::getpid());
  const std::string cmd = "python3 " + source_root() +
                          "/tools/random_nets.py --seed 99 --count 60 " + "--out " + dir +
                          " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::set<std::string> drawn;
  for (int i = 0; i < 60; ++i) {
    const std::string file = dir + "/random-99-" + std::to_string(i) + ".toml";
    const NetHeader h = parse_net_header(read_net_file(file).value(), file).value();
    const std::vector<LayerWork> w = layer_work(spec_of(file, h.input)).value();
    for (const LayerWork& l : w) {
      drawn.insert(l.cls);
      EXPECT_TRUE(probed.count(l.cls)) << file << " " << l.name << ": " << l.cls;
    }
  }
  const std::set<std::string> grammar = {
      "conv-stem",  "conv",    "conv1x1",  "inner_product", "inner_product-streamed",
      "batch_norm", "relu",    "max_pool", "avg_pool",      "global_avg_pool",
      "lrn",        "dropout", "add",      "concat"};
  EXPECT_EQ(drawn, grammar);
}

// The probes are designed from the classes' shapes in general: no convolution or inner product
// of theirs has the shape (input, output, kernel, stride) of one in a net the model is checked
// against (the calibrated ones, the validation ones, GoogLeNet) at the check's input.
TEST(LayerRates, ProbesCopyNoCheckedNetsLayers) {
  auto gemm_shapes = [](const NetSpec& spec) {
    NetGraph g = resolve_graph(spec).value();
    const std::vector<Shape4> out =
        infer_shapes(g, spec, {1, spec.channels, spec.height, spec.width}, Layout::nchw).value();
    std::map<std::string, std::string> shapes;  // shape -> layer
    for (size_t i = 0; i < g.layers.size(); ++i) {
      const OpDesc& d = g.layers[i].op;
      if (d.kind != OpKind::conv && d.kind != OpKind::inner_product) continue;
      char key[160];
      std::snprintf(key, sizeof key, "%s %lldx%lldx%lld -> %lldx%lldx%lld k%lld s%lld",
                    op_kind_name(d.kind), static_cast<long long>(d.src.c),
                    static_cast<long long>(d.src.h), static_cast<long long>(d.src.w),
                    static_cast<long long>(out[i].c), static_cast<long long>(out[i].h),
                    static_cast<long long>(out[i].w), static_cast<long long>(d.kh),
                    static_cast<long long>(d.stride_h));
      shapes[key] = spec.name + " " + g.layers[i].name;
    }
    return shapes;
  };
  std::map<std::string, std::string> checked;
  for (const auto& [net, in] : std::vector<std::pair<std::string, ModelInput>>{
           {"lenet", {1, 28, 28, 10}},
           {"cifar10-quick", {3, 32, 32, 10}},
           {"alexnet-cifar", {3, 32, 32, 10}},
           {"resnet18", {3, 32, 32, 10}},
           {"googlenet", {3, 64, 64, 10}},
           {source_root() + "/docs/nets/small-resnet.toml", {3, 32, 32, 10}}})
    checked.merge(gemm_shapes(spec_of(net, in)));
  ASSERT_GT(checked.size(), 20u);
  for (const NetSpec& p : all_probes())
    for (const auto& [shape, layer] : gemm_shapes(p))
      EXPECT_FALSE(checked.count(shape)) << layer << " is " << checked[shape] << ": " << shape;
}

// Two cores; every class forward and backward at 1 GFLOP/s (no byte term), the update at 2 GB/s,
// 1 ms per image besides: a step is train FLOPs x batch / 1e9 + 20 n / 2e9 + batch x 1e-3.
const char* kRated = R"(
[machine]
name = "two cores"
kind = "cpu"
cores = 2
source = "test"
[compute]
peak_gflops = 100
efficiency = 0.3
contention = 1.2
oversubscription_overhead = 0.1
source = "test"
[memory]
source = "test"
[memory.dram]
bandwidth_gbs = 20
capacity_gb = 16
source = "test"
[transport]
source = "test"
[transport.shared_memory]
latency_us = 2
bandwidth_gbs = 10
source = "test"
[step]
update_gbs = 2
other_seconds_per_image = 0.001
source = "test"
)";

std::string rated_text(const std::set<std::string>& classes) {
  std::string s = kRated;
  for (const std::string& c : classes)
    for (const char* pass : {"forward", "backward"})
      s += "[[step.rate]]\nclass = \"" + c + "\"\npass = \"" + pass + "\"\ngflops = 1\n";
  return s;
}

TEST(LayerRates, AnUncalibratedNetFileIsPricedFromItsLayers) {
  const std::string file = source_root() + "/docs/nets/small-resnet.toml";
  const NetSpec spec = spec_of(file, {3, 32, 32, 10});
  ModelRequest req;
  req.net = file;
  req.cost = net_cost(spec).value();
  req.layers = layer_work(spec).value();
  req.algo = "sync-easgd";
  req.batch = 16;
  std::set<std::string> classes;
  for (const LayerWork& l : req.layers)
    classes.insert(l.cls);
  auto m = parse_machine(rated_text(classes), "rated.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->calibration(file), nullptr);  // never calibrated
  const double n = static_cast<double>(req.cost.arena_floats);
  const double step = req.cost.train_flops * 16 / 1e9 + 20 * n / 2e9 + 16 * 1e-3;
  auto p = predict(*m, req);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->compute_source, "layer rates");
  EXPECT_NEAR(p->step_seconds, step, 1e-9 * step);
  // Both cores busy: the contention; 4 groups on 2 cores: twice as long plus the overhead.
  req.groups = 2;
  EXPECT_NEAR(predict(*m, req)->step_seconds, step * 1.2, 1e-9 * step);
  req.groups = 4;
  EXPECT_NEAR(predict(*m, req)->step_seconds, step * 1.2 * 2 * 1.1, 1e-9 * step);
  // A class without a rate is priced by the fallback and says so.
  classes.erase("batch_norm");
  auto m2 = parse_machine(rated_text(classes), "rated.toml");
  ASSERT_TRUE(m2.ok());
  req.groups = 1;
  auto p2 = predict(*m2, req);
  ASSERT_TRUE(p2.ok());
  bool noted = false;
  for (const std::string& note : p2->notes)
    noted = noted || note.find("'batch_norm'") != std::string::npos;
  EXPECT_TRUE(noted);
}

// The momentum update timed by size ([[step.update]]) prices it at the arena's bytes (log-log
// between the points, proportional beyond), in place of update_gbs.
TEST(LayerRates, UpdateTimedBySizeReplacesItsBandwidth) {
  EXPECT_NEAR(log_log_interpolate({{1e6, 1e-4}, {1e8, 1e-1}}, 1e7), 1e-4 * std::pow(10.0, 1.5),
              1e-12);
  EXPECT_NEAR(log_log_interpolate({{1e8, 1e-1}, {1e6, 1e-4}}, 2e8), 2e-1, 1e-12);
  EXPECT_EQ(log_log_interpolate({}, 1e7), -1);
  const std::string file = source_root() + "/docs/nets/small-resnet.toml";
  const NetSpec spec = spec_of(file, {3, 32, 32, 10});
  const std::vector<LayerWork> work = layer_work(spec).value();
  std::set<std::string> classes;
  for (const LayerWork& l : work)
    classes.insert(l.cls);
  std::string text = rated_text(classes);
  auto plain = parse_machine(text, "rated.toml");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  text.replace(text.find("source = \"test\"\n[[step.rate]]"), 15,
               "source = \"test\"\n[[step.update]]\nbytes = 1e3\nseconds = 1e-6\n"
               "[[step.update]]\nbytes = 1e9\nseconds = 1.0\n");
  auto timed = parse_machine(text, "rated.toml");
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  ASSERT_EQ(timed->step.update_by_size.size(), 2u);
  const double n = static_cast<double>(net_cost(spec).value().arena_floats);
  const StepEstimate a = estimate_step(plain->step, work, n, 16);
  const StepEstimate b = estimate_step(timed->step, work, n, 16);
  EXPECT_NEAR(a.update_seconds, 20 * n / 2e9, 1e-12);
  EXPECT_NEAR(b.update_seconds, 4 * n * 1e-9, 1e-12);  // 1 ns a byte between the points
  EXPECT_NEAR(b.layer_seconds, a.layer_seconds, 1e-12);
  text.replace(text.find("seconds = 1e-6"), 14, "seconds = 0");
  expect_refused(text, "step.update[0].seconds", "rated.toml");
}

// An inner product whose weights exceed kStreamedWeightBytes is a class of its own (they stream
// from memory); a machine file's weight_gbs is read and priced, a bad one named.
TEST(LayerRates, StreamedInnerProductsAreAClassOfTheirOwn) {
  const std::vector<LayerWork> w = layer_work(spec_of("alexnet-cifar", {3, 32, 32, 10})).value();
  std::map<std::string, std::string> cls;
  for (const LayerWork& l : w)
    cls[l.name] = l.cls;
  EXPECT_EQ(cls["fc6+relu6"], "inner_product-streamed");  // 37.7 M weights
  EXPECT_EQ(cls["fc8"], "inner_product");                 // 41 k
  std::string text = kRated;
  text +=
      "[[step.rate]]\nclass = \"conv\"\npass = \"forward\"\ngflops = 1\ngbs = 4\n"
      "weight_gbs = 2\n";
  auto m = parse_machine(text, "rated.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->step.rates.size(), 1u);
  const LayerRate& r = m->step.rates[0];
  EXPECT_NEAR(r.seconds(1e9, 6e9, 2e9), 1 + 1 + 1, 1e-12);  // 4 GB of activations, 2 of weights
  std::string bad = text;
  bad.replace(bad.find("weight_gbs = 2"), 14, "weight_gbs = -2");
  expect_refused(bad, "step.rate[0].weight_gbs", "rated.toml");
  // gpixels: read, and a negative one named.
  std::string pix = text;
  pix.replace(pix.find("weight_gbs = 2"), 14, "weight_gbs = 2\ngpixels = 0.5");
  auto mp = parse_machine(pix, "rated.toml");
  ASSERT_TRUE(mp.ok()) << mp.status().message();
  EXPECT_EQ(mp->step.rates[0].gpixels, 0.5);
  pix.replace(pix.find("gpixels = 0.5"), 13, "gpixels = -1");
  expect_refused(pix, "step.rate[0].gpixels", "rated.toml");
}

// Cold timings (cold_seconds, after the last-level cache was evicted) and the elastic momentum
// step ([[step.elastic_update]]) are read beside the warm ones, each checked by name.
TEST(LayerRates, ColdAndElasticPassesAreRead) {
  std::string text = rated_text({"conv"});
  text.replace(text.find("source = \"test\"\n[[step.rate]]"), 15,
               "source = \"test\"\n[[step.update]]\nbytes = 1e6\nseconds = 1e-4\n"
               "cold_seconds = 2e-4\n[[step.elastic_update]]\nbytes = 1e6\nseconds = 3e-4\n"
               "cold_seconds = 4e-4\n");
  auto m = parse_machine(text, "rated.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->update_passes.size(), 1u);
  ASSERT_EQ(m->elastic_passes.size(), 1u);
  EXPECT_EQ(m->update_passes[0].cold_seconds, 2e-4);
  EXPECT_EQ(m->elastic_passes[0].seconds, 3e-4);
  EXPECT_EQ(m->elastic_passes[0].cold_seconds, 4e-4);
  ASSERT_EQ(m->step.update_by_size.size(), 1u);
  EXPECT_EQ(m->step.update_by_size[0].second, 1e-4);  // warm by default
  for (const auto& [from, to, key] :
       {std::tuple{"cold_seconds = 4e-4", "cold_seconds = -1",
                   "step.elastic_update[0].cold_seconds"},
        std::tuple{"cold_seconds = 4e-4", "colder = 1", "step.elastic_update[0].colder"}}) {
    std::string t = text;
    t.replace(t.find(from), std::string(from).size(), to);
    expect_refused(t, key, "rated.toml");
  }
}

TEST(LayerRates, BadStepTablesNameTheKey) {
  const std::string base = kRated;
  struct Case {
    std::string text, key;
  };
  for (const Case& c : std::vector<Case>{
           {base + "[[step.rate]]\nclass = \"conv\"\npass = \"sideways\"\ngflops = 1\n",
            "step.rate[0].pass"},
           {base + "[[step.rate]]\nclass = \"conv\"\npass = \"forward\"\n", "step.rate[0]"},
           {base + "[[step.rate]]\nclass = \"conv\"\npass = \"forward\"\ngflops = 1\nspeed = 2\n",
            "step.rate[0].speed"},
           {std::string(kRated).replace(std::string(kRated).find("update_gbs = 2\n"), 15, ""),
            "step.update_gbs"},
       }) {
    expect_refused(c.text, c.key);
  }
}

// A machine's vector_floats (the calibration's oneDNN ISA) is read, 1 when absent, and checked.
TEST(LayerRates, VectorFloatsIsRead) {
  std::string t = rated_text({"conv"});
  auto m = parse_machine(t, "rated.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->vector_floats, 1);
  t.replace(t.find("efficiency = 0.3\n"), 17, "efficiency = 0.3\nvector_floats = 16\n");
  auto m16 = parse_machine(t, "rated.toml");
  ASSERT_TRUE(m16.ok()) << m16.status().message();
  EXPECT_EQ(m16->vector_floats, 16);
  t.replace(t.find("vector_floats = 16"), 18, "vector_floats = 0");
  expect_refused(t, "compute.vector_floats", "rated.toml");
}

TEST(LayerRatesCmd, InputShapeIsCheckedInOneLine) {
  for (const std::string bad : {"3x32", "0x32x32", "3x32x32x1", "axbxc"}) {
    const easel_test::Out o = easel_test::run_easel(
        "model --machine knl-7250 --net resnet18 --input " + bad, "", "rates_input");
    EXPECT_EQ(o.code, 2) << bad << ": " << o.err;
    EXPECT_NE(o.err.find("--input"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << o.err;
  }
  const easel_test::Out ok = easel_test::run_easel(
      "model --machine knl-7250 --net resnet18 --input 3x32x32 --json", "", "rates_input");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// tools/model-check --holdout --plan: the calibration's --nets hold the calibrated nets only,
// never a validation one; a net in both lists is refused (exit 2).
TEST(ModelCheckHoldout, SplitKeepsHeldOutNetsOutOfTheFit) {
  const std::string tool = source_root() + "/tools/model-check";
  auto run = [&](const std::string& args) {
    const std::string cmd = "python3 " + tool + " --holdout --plan --machine '' " + args + " 2>&1";
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[512];
    while (p != nullptr && fgets(buf, sizeof buf, p) != nullptr)
      out += buf;
    const int rc = p != nullptr ? pclose(p) : -1;
    return std::make_pair(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out);
  };
  const auto [rc, out] = run("");
  ASSERT_EQ(rc, 0) << out;
  const size_t at = out.find("--nets ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string nets = out.substr(at + 7, out.find(' ', at + 7) - at - 7);
  EXPECT_EQ(nets, "lenet,cifar10-quick") << out;
  for (const char* held : {"alexnet-cifar", "resnet18", "small-resnet"}) {
    EXPECT_EQ(nets.find(held), std::string::npos) << held;
    EXPECT_NE(out.find(std::string("held out: ")), std::string::npos);
  }
  EXPECT_NE(out.find("validation: none"), std::string::npos) << out;
  const auto [rc2, out2] =
      run("--calibrate-nets lenet,resnet18 --validation --validation-nets resnet18");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("resnet18"), std::string::npos) << out2;
}

}  // namespace
}  // namespace easel::model
