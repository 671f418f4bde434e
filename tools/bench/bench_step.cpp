// bench_step: a micro-benchmark of one group's training step (forward, softmax cross-entropy,
// backward, momentum update over the flat arena) on synthetic data, for comparing variants of
// the CPU device's kernels side by side in ONE run on a noisy machine: the variants' steps are
// interleaved in short blocks and each variant's median step time is reported, with its ratio
// to the first variant. --layers adds the median time of every layer's forward and backward,
// the loss and the update.
//
//   bench_step [--net lenet] [--batch 64] [--steps 300] [--block 10] [--cpu 0] [--layers]
//              [--layout nhwc] [--input CxHxW] VARIANT...
// --input: the images' shape (default 3x32x32 for the cifar nets, else 1x28x28).
// VARIANT: fp32 | bf16 | ref, optionally followed by ",bwd=native|flip|blocked|gemm" (conv data
// gradient strategy). Default: fp32.
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "devices/cpu/dnnl_ops.hpp"
#include "engine/arena.hpp"
#include "engine/rng.hpp"
#include "engine/span_ops.hpp"
#include "nets/models/models.hpp"

namespace easel {
namespace {

constexpr float kLr = 0.01f, kMomentum = 0.9f, kDecay = 5e-4f;

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Variant {
  std::string name;
  ImplChoice impl = ImplChoice::fast;
  DnnlOptions opts;
  std::unique_ptr<Device> device;
  std::unique_ptr<Net> net;
  std::unique_ptr<LossOp> loss;
  Arena w, dw, v;
  std::vector<double> step_times;
};

bool parse_variant(const std::string& s, Variant& v) {
  v.name = s;
  size_t start = 0;
  bool first = true;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string tok = s.substr(start, comma == std::string::npos ? comma : comma - start);
    if (first) {
      if (tok == "fp32") {
        v.opts.precision = Precision::fp32;
      } else if (tok == "bf16") {
        v.opts.precision = Precision::bf16;
      } else if (tok == "ref") {
        v.impl = ImplChoice::ref;
      } else {
        return false;
      }
      first = false;
    } else if (tok == "bwd=native") {
      v.opts.conv_bwd_data = DnnlConvBwdData::native;
    } else if (tok == "bwd=flip") {
      v.opts.conv_bwd_data = DnnlConvBwdData::forward_flip;
    } else if (tok == "bwd=gemm") {
      v.opts.conv_bwd_data = DnnlConvBwdData::gemm;
    } else if (tok == "bwd=blocked") {
      v.opts.conv_bwd_data = DnnlConvBwdData::blocked;
    } else {
      return false;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

// The command line, parsed.
struct Options {
  std::string net_name = "lenet", layout_name = "nhwc", input;
  int64_t batch = 64, steps = 300, block = 10;
  int cpu = 0;  // pinned to it when >= 0
  bool layers = false;
  std::vector<Variant> variants;  // fp32 when none is given
};

// Fills `o` from argv; on a flag without its value or an unknown variant prints the one-line
// error and returns false.
bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool valued = a == "--net" || a == "--batch" || a == "--steps" || a == "--block" ||
                        a == "--cpu" || a == "--layout" || a == "--input";
    if (valued && i + 1 >= argc) {
      std::fprintf(stderr, "bench_step: %s needs a value\n", a.c_str());
      return false;
    }
    if (a == "--net") {
      o.net_name = argv[++i];
    } else if (a == "--batch") {
      o.batch = std::atoll(argv[++i]);
    } else if (a == "--steps") {
      o.steps = std::atoll(argv[++i]);
    } else if (a == "--block") {
      o.block = std::atoll(argv[++i]);
    } else if (a == "--cpu") {
      o.cpu = std::atoi(argv[++i]);
    } else if (a == "--layout") {
      o.layout_name = argv[++i];
    } else if (a == "--input") {
      o.input = argv[++i];
    } else if (a == "--layers") {
      o.layers = true;
    } else {
      Variant v;
      if (!parse_variant(a, v)) {
        std::fprintf(stderr, "bench_step: unknown variant '%s'\n", a.c_str());
        return false;
      }
      o.variants.push_back(std::move(v));
    }
  }
  if (o.variants.empty()) {
    Variant v;
    parse_variant("fp32", v);
    o.variants.push_back(std::move(v));
  }
  return true;
}

// This thread on `cpu` (when >= 0; a failure is reported and ignored), one OpenMP thread.
void pin_to(int cpu) {
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) std::perror("sched_setaffinity");
  }
  omp_set_num_threads(1);
}

// Gives every variant its device, net, initialised weights, zeroed arenas and loss; on a net
// that cannot be built prints the variant and why, and returns false.
bool build_variants(std::vector<Variant>& variants, const NetSpec& spec, const ModelInput& in,
                    int64_t batch, Layout layout) {
  for (Variant& v : variants) {
    v.device = make_cpu_device(v.impl, v.opts);
    auto net = Net::create(spec, batch, layout, *v.device, MemKind::dram);
    if (!net.ok()) {
      std::fprintf(stderr, "bench_step: %s: %s\n", v.name.c_str(),
                   net.status().to_string().c_str());
      return false;
    }
    v.net = std::move(net).value();
    const int64_t n = v.net->params().total_floats();
    v.w = Arena::create(n, MemKind::dram).value();
    v.dw = Arena::create(n, MemKind::dram).value();
    v.v = Arena::create(n, MemKind::dram).value();
    v.net->init_params(v.w.data(), 1);
    v.loss = v.device->make_loss(batch, in.classes).value();
  }
  return true;
}

// One synthetic batch every variant trains on: uniform [0, 1) images, then uniform labels,
// from one fixed stream.
struct Batch {
  std::vector<float> images;    // the net's input shape
  std::vector<int32_t> labels;  // [batch]
};
Batch synthetic_batch(const Shape4& input, int64_t batch, int64_t classes) {
  Batch b{std::vector<float>(static_cast<size_t>(input.count())),
          std::vector<int32_t>(static_cast<size_t>(batch))};
  Rng rng = Rng::stream(7, 0);
  for (float& x : b.images)
    x = rng.uniform(0.f, 1.f);
  for (int32_t& l : b.labels)
    l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
  return b;
}

// One training step of `v`: train_step then momentum_step over the arena.
void train_once(Variant& v, const Batch& b) {
  v.net->train_step(b.images.data(), b.labels.data(), v.w.data(), v.dw.data());
  momentum_step(v.net->params().segments(), v.w.data(), v.dw.data(), v.v.data(), kLr, kMomentum,
                kDecay);
}

// 20 untimed steps per variant, then `steps` timed steps each, the variants taking turns in
// blocks of `block`; each step's seconds go to its variant's step_times.
void time_variants(std::vector<Variant>& variants, const Batch& b, int64_t steps, int64_t block) {
  for (Variant& v : variants)  // warm-up
    for (int k = 0; k < 20; ++k)
      train_once(v, b);
  for (int64_t done = 0; done < steps; done += block)
    for (Variant& v : variants)
      for (int64_t k = 0; k < block; ++k) {
        const double t0 = now();
        train_once(v, b);
        v.step_times.push_back(now() - t0);
      }
}

// Each variant's median step time, images/s, GFLOP/s and ratio to the first variant.
void print_steps(const std::vector<Variant>& variants, int64_t batch, double flops) {
  const double base = median(variants[0].step_times);
  std::printf("\n%-28s %10s %10s %8s %8s\n", "variant", "step ms", "img/s", "GFLOP/s", "ratio");
  for (const Variant& v : variants) {
    const double t = median(v.step_times);
    std::printf("%-28s %10.3f %10.0f %8.1f %8.3f\n", v.name.c_str(), t * 1e3,
                static_cast<double>(batch) / t, flops * static_cast<double>(batch) / t / 1e9,
                base / t);
  }
}

// One variant's seconds per repeat: each layer's forward and backward, the loss, the update.
struct LayerTimes {
  std::vector<std::vector<double>> fwd, bwd;  // [layer][repeat]
  std::vector<double> loss, update;           // [repeat]
};

// One repeat for `v`: a whole step (to set the layers' inputs), then each layer's forward in
// order and backward in reverse, the loss on the last layer's output shape (a copy of its
// cost) and the update, each timed alone.
void time_layers_once(Variant& v, const Batch& b, int64_t batch, std::vector<float>& prob,
                      std::vector<float>& dlog, LayerTimes& t) {
  v.net->train_step(b.images.data(), b.labels.data(), v.w.data(), v.dw.data());
  for (size_t i = 0; i < v.net->layer_count(); ++i) {
    const double t0 = now();
    v.net->forward_layer(i, v.w.data(), true);
    t.fwd[i].push_back(now() - t0);
  }
  for (size_t i = v.net->layer_count(); i-- > 0;) {
    const double t0 = now();
    v.net->backward_layer(i, v.w.data(), v.dw.data());
    t.bwd[i].push_back(now() - t0);
  }
  std::vector<float> logits(prob.size(), 0.5f);
  double t0 = now();
  int64_t correct = 0;
  v.loss->forward(logits.data(), b.labels.data(), prob.data(), batch, &correct);
  v.loss->backward(prob.data(), b.labels.data(), dlog.data(), batch,
                   1.f / static_cast<float>(batch));
  t.loss.push_back(now() - t0);
  t0 = now();
  momentum_step(v.net->params().segments(), v.w.data(), v.dw.data(), v.v.data(), kLr, kMomentum,
                kDecay);
  t.update.push_back(now() - t0);
}

// `reps` interleaved repeats of time_layers_once over the variants; one LayerTimes each.
std::vector<LayerTimes> time_layers(std::vector<Variant>& variants, const Batch& b, int64_t batch,
                                    int64_t classes, int reps) {
  std::vector<LayerTimes> times(variants.size());
  std::vector<float> prob(static_cast<size_t>(batch * classes));
  std::vector<float> dlog(prob.size());
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    times[vi].fwd.resize(variants[vi].net->layer_count());
    times[vi].bwd.resize(variants[vi].net->layer_count());
  }
  for (int r = 0; r < reps; ++r)
    for (size_t vi = 0; vi < variants.size(); ++vi)
      time_layers_once(variants[vi], b, batch, prob, dlog, times[vi]);
  return times;
}

// The per-layer table: a column per variant, median ms of forward / backward, loss, update.
void print_layers(const std::vector<Variant>& variants, const std::vector<LayerTimes>& times) {
  std::printf("\nper layer, median ms (forward / backward)\n%-14s", "layer");
  for (const Variant& v : variants)
    std::printf(" %22s", v.name.c_str());
  std::printf("\n");
  const auto info = variants[0].net->describe();
  for (size_t i = 0; i < info.size(); ++i) {
    std::printf("%-14s", info[i].name.c_str());
    for (size_t vi = 0; vi < variants.size(); ++vi)
      std::printf("       %7.3f / %7.3f", median(times[vi].fwd[i]) * 1e3,
                  median(times[vi].bwd[i]) * 1e3);
    std::printf("\n");
  }
  std::printf("%-14s", "loss");
  for (size_t vi = 0; vi < variants.size(); ++vi)
    std::printf(" %22.3f", median(times[vi].loss) * 1e3);
  std::printf("\n%-14s", "momentum");
  for (size_t vi = 0; vi < variants.size(); ++vi)
    std::printf(" %22.3f", median(times[vi].update) * 1e3);
  std::printf("\n");
}

int run(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) return 2;
  pin_to(o.cpu);
  const Layout layout = o.layout_name == "nchw" ? Layout::nchw : Layout::nhwc;
  ModelInput in;
  if (o.net_name.rfind("cifar", 0) == 0) in = {3, 32, 32, 10};
  if (!o.input.empty()) {
    long long c = 0, h = 0, w = 0;
    if (std::sscanf(o.input.c_str(), "%lldx%lldx%lld", &c, &h, &w) != 3 || c <= 0 || h <= 0 ||
        w <= 0) {
      std::fprintf(stderr, "bench_step: --input '%s' is not CxHxW\n", o.input.c_str());
      return 2;
    }
    in.channels = c;
    in.height = h;
    in.width = w;
  }
  auto spec = build_model(o.net_name, in);
  if (!spec.ok()) {
    std::fprintf(stderr, "bench_step: %s\n", spec.status().to_string().c_str());
    return 2;
  }
  std::vector<Variant>& variants = o.variants;
  if (!build_variants(variants, spec.value(), in, o.batch, layout)) return 1;
  const Batch b = synthetic_batch(variants[0].net->input_shape(), o.batch, in.classes);

  const double flops = variants[0].net->flops_per_image_train();
  std::printf("net %s batch %lld %s, %.2f MFLOP/image, %lld steps per variant (blocks of %lld)\n",
              o.net_name.c_str(), static_cast<long long>(o.batch), layout_name(layout), flops / 1e6,
              static_cast<long long>(o.steps), static_cast<long long>(o.block));
  for (const Variant& v : variants) {
    std::printf("  %s:\n", v.name.c_str());
    for (const LayerInfo& l : v.net->describe())
      std::printf("    %-14s %s\n", l.name.c_str(), l.impl.c_str());
  }
  time_variants(variants, b, o.steps, o.block);
  print_steps(variants, o.batch, flops);
  if (!o.layers) return 0;
  const int reps = static_cast<int>(std::max<int64_t>(o.steps / 2, 20));
  print_layers(variants, time_layers(variants, b, o.batch, in.classes, reps));
  return 0;
}

}  // namespace
}  // namespace easel

int main(int argc, char** argv) {
  return easel::run(argc, argv);
}
