// net_dump: one training step of a net on the CPU, written out whole so that another framework
// can repeat it (tools/pytorch/net_equivalence.py, driven by tools/net-equivalence): the weights
// before the step, the batch, the logits, the loss, every gradient and the state (batch norm's
// running statistics) after the step.
//
//   net_dump --net NAME|FILE --out DIR [--input C,H,W] [--classes K] [--batch N] [--seed S]
//            [--impl fast|ref]
//
// The net is built in nchw on the description's input (or --input/--classes), its weights
// filled by Net::init_params(seed); the images are uniform in [-1, 1) and the labels uniform in
// [0, K), both drawn from seed's stream 1000. Every dropout layer's ratio is set to 0 before
// the net is built: a dropout mask is a draw of easel's generator that no other framework can
// repeat, and with ratio 0 dropout is the identity (the comparison covers everything else).
//
// DIR/meta.json describes the run and lists every array: {name, role, dims, dtype, offset,
// count}, offset in bytes into DIR/data.bin, which holds the arrays as raw little-endian
// float32 (labels int32, masks uint8), each starting on a 64-byte boundary. Roles: "images",
// "labels", "logits", "weights" (one per arena segment, before the step; "state": true for state
// segments), "grad" (one per segment), "state_after" (one per state segment, after the step) and
// "relu_mask" (one per layer that ends in a ReLU, fused or not, in the net's order: 1 where its
// output is > 0) and "maxpool_argmax" (one per max pool layer, int32 [n, c, oh, ow]: the index
// h * W + w in its input plane of the first element of the window equal to the output, the one
// the gradient goes to). They let the other side take easel's decisions where a ReLU input lies
// within round-off of 0 or two pooled values within round-off of each other: there a float32
// gradient is not defined to better than one element's share.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/arena.hpp"
#include "engine/rng.hpp"
#include "nets/models/models.hpp"

namespace easel {
namespace {

struct Options {
  std::string net = "lenet", out, impl = "fast";
  int64_t channels = 0, height = 0, width = 0, classes = 0;  // 0: the description's
  int64_t batch = 4;
  uint64_t seed = 1;
};

int usage(const char* why) {
  std::fprintf(stderr,
               "net_dump: %s\n"
               "usage: net_dump --net NAME|FILE --out DIR [--input C,H,W] [--classes K] "
               "[--batch N] [--seed S] [--impl fast|ref]\n",
               why);
  return 2;
}

// Fills `o` from argv; returns an empty string or what is wrong.
std::string parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return a + ": needs a value";
    const std::string v = argv[++i];
    if (a == "--net") {
      o.net = v;
    } else if (a == "--out") {
      o.out = v;
    } else if (a == "--impl") {
      o.impl = v;
    } else if (a == "--input") {
      long long c = 0, h = 0, w = 0;
      if (std::sscanf(v.c_str(), "%lld,%lld,%lld", &c, &h, &w) != 3 || c <= 0 || h <= 0 || w <= 0)
        return "--input: want C,H,W (positive), got '" + v + "'";
      o.channels = c;
      o.height = h;
      o.width = w;
    } else if (a == "--classes") {
      o.classes = std::atoll(v.c_str());
      if (o.classes <= 0) return "--classes: want a positive count, got '" + v + "'";
    } else if (a == "--batch") {
      o.batch = std::atoll(v.c_str());
      if (o.batch <= 0) return "--batch: want a positive count, got '" + v + "'";
    } else if (a == "--seed") {
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else {
      return "unknown flag '" + a + "'";
    }
  }
  if (o.out.empty()) return "--out DIR is required";
  return {};
}

// The input the net is built on: the description's unless the flags give one.
Result<ModelInput> model_input(const Options& o) {
  ModelInput in;
  bool found = false;
  for (const ModelEntry& e : model_list())
    if (e.name == o.net) {
      in = e.input;
      found = true;
    }
  if (!found && o.channels == 0 && !is_net_file(o.net))
    return invalid_argument("--net: no built-in net '" + o.net + "'");
  if (o.channels > 0) {
    in.channels = o.channels;
    in.height = o.height;
    in.width = o.width;
  }
  if (o.classes > 0) in.classes = o.classes;
  return in;
}

// Appends arrays to data.bin (each on a 64-byte boundary) and their entries to the meta list.
class Dump {
 public:
  explicit Dump(const std::string& path) : bin_(path, std::ios::binary) {}
  bool ok() const { return static_cast<bool>(bin_); }

  void add(const std::string& name, const std::string& role, const std::vector<int64_t>& dims,
           const void* data, int64_t count, const char* dtype, bool state = false) {
    const int64_t pad = (64 - offset_ % 64) % 64;
    static const char zeros[64] = {};
    bin_.write(zeros, pad);
    offset_ += pad;
    nlohmann::json e = {{"name", name},   {"role", role},      {"dims", dims},
                        {"dtype", dtype}, {"offset", offset_}, {"count", count}};
    if (role == "weights") e["state"] = state;
    arrays_.push_back(std::move(e));
    const int64_t bytes = count * (std::strcmp(dtype, "uint8") == 0 ? 1 : 4);
    bin_.write(static_cast<const char*>(data), bytes);
    offset_ += bytes;
  }
  nlohmann::json& arrays() { return arrays_; }

 private:
  std::ofstream bin_;
  int64_t offset_ = 0;
  nlohmann::json arrays_ = nlohmann::json::array();
};

// For each output of a max pool (d: its descriptor, nchw), the index h * W + w in its input
// plane of the first element of its window (clipped to the input) equal to the output.
std::vector<int32_t> pool_argmax(const OpDesc& d, const float* src, const float* dst) {
  const Shape4& s = d.src;
  const Shape4 o = dst_shape(d);
  std::vector<int32_t> at(static_cast<size_t>(o.count()), -1);
  for (int64_t n = 0; n < o.n; ++n)
    for (int64_t c = 0; c < o.c; ++c) {
      const float* plane = src + (n * s.c + c) * s.h * s.w;
      for (int64_t oh = 0; oh < o.h; ++oh)
        for (int64_t ow = 0; ow < o.w; ++ow) {
          const int64_t i = ((n * o.c + c) * o.h + oh) * o.w + ow;
          const int64_t h0 = std::max<int64_t>(oh * d.stride_h - d.pad_h, 0);
          const int64_t h1 = std::min(oh * d.stride_h - d.pad_h + d.kh, s.h);
          const int64_t w0 = std::max<int64_t>(ow * d.stride_w - d.pad_w, 0);
          const int64_t w1 = std::min(ow * d.stride_w - d.pad_w + d.kw, s.w);
          for (int64_t h = h0; h < h1 && at[static_cast<size_t>(i)] < 0; ++h)
            for (int64_t w = w0; w < w1; ++w)
              if (plane[h * s.w + w] == dst[i]) {
                at[static_cast<size_t>(i)] = static_cast<int32_t>(h * s.w + w);
                break;
              }
        }
    }
  return at;
}

// Sets every dropout layer's ratio to 0 (the identity: its mask is a draw of easel's generator
// that no other framework can repeat); returns their names.
std::vector<std::string> zero_dropout(NetSpec& spec) {
  std::vector<std::string> zeroed;
  for (LayerSpec& l : spec.layers)
    if (l.op.kind == OpKind::dropout) {
      l.op.ratio = 0.f;
      zeroed.push_back(l.name);
    }
  return zeroed;
}

// The batch: images uniform in [-1, 1) then labels uniform in [0, classes), from seed's stream
// 1000.
void fill_batch(uint64_t seed, int64_t classes, std::vector<float>& images,
                std::vector<int32_t>& labels) {
  Rng rng = Rng::stream(seed, 1000);
  for (float& v : images)
    v = rng.uniform(-1.f, 1.f);
  for (int32_t& l : labels)
    l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
}

// Every segment's weights before the step, then every gradient, then the state segments after it.
void dump_segments(Dump& dump, const std::vector<Segment>& segs, const float* before,
                   const float* grad, const float* after) {
  for (const Segment& s : segs)
    dump.add(s.name, "weights", s.dims, before + s.offset, s.count, "float32", s.state);
  for (const Segment& s : segs)
    dump.add(s.name, "grad", s.dims, grad + s.offset, s.count, "float32");
  for (const Segment& s : segs)
    if (s.state) dump.add(s.name, "state_after", s.dims, after + s.offset, s.count, "float32");
}

// Layer i's maxpool_argmax: the pool's descriptor with its input's shape and output, from the
// layer that feeds it (or the images, x).
void dump_pool_argmax(Dump& dump, const Net& net, const NetSpec& spec,
                      const std::vector<LayerInfo>& layers, size_t i, const float* images,
                      const Shape4& x) {
  const LayerInfo& l = layers[i];
  const auto spec_layer = std::find_if(spec.layers.begin(), spec.layers.end(),
                                       [&](const LayerSpec& ls) { return ls.name == l.name; });
  EASEL_CHECK(spec_layer != spec.layers.end() && l.inputs.size() == 1);
  OpDesc d = spec_layer->op;
  const float* src = images;
  for (size_t j = 0; j < i; ++j)
    if (layers[j].name == l.inputs[0]) {
      src = net.output(j);
      d.src = layers[j].dst;
    }
  if (l.inputs[0] == "data") d.src = x;
  const std::vector<int32_t> at = pool_argmax(d, src, net.output(i));
  dump.add(l.name, "maxpool_argmax", {l.dst.n, l.dst.c, l.dst.h, l.dst.w}, at.data(), l.dst.count(),
           "int32");
}

// Each max pool's argmax and each ReLU-ending layer's relu_mask, in the net's order; returns
// every layer's "name: kind impl" line.
std::vector<std::string> dump_layer_arrays(Dump& dump, const Net& net, const NetSpec& spec,
                                           const float* images, const Shape4& x) {
  std::vector<std::string> impls;
  const std::vector<LayerInfo> layers = net.describe();
  std::vector<uint8_t> mask;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerInfo& l = layers[i];
    impls.push_back(l.name + ": " + l.kind + " " + l.impl);
    if (l.kind == "max_pool") dump_pool_argmax(dump, net, spec, layers, i, images, x);
    if (l.kind != "relu" && !l.kind.ends_with("+relu")) continue;
    const float* y = net.output(i);
    mask.resize(static_cast<size_t>(l.dst.count()));
    for (size_t j = 0; j < mask.size(); ++j)
      mask[j] = y[j] > 0.f ? 1 : 0;
    dump.add(l.name, "relu_mask", {l.dst.n, l.dst.c, l.dst.h, l.dst.w}, mask.data(), l.dst.count(),
             "uint8");
  }
  return impls;
}

int run(const Options& o) {
  auto impl = parse_impl_choice(o.impl);
  if (!impl.ok()) return usage(impl.status().to_string().c_str());
  auto in = model_input(o);
  if (!in.ok()) return usage(in.status().to_string().c_str());
  auto built = build_model(o.net, in.value());
  if (!built.ok()) {
    std::fprintf(stderr, "net_dump: %s\n", built.status().to_string().c_str());
    return 2;
  }
  NetSpec spec = std::move(built).value();
  const std::vector<std::string> zeroed = zero_dropout(spec);

  std::unique_ptr<Device> device = make_cpu_device(impl.value());
  auto created = Net::create(spec, o.batch, Layout::nchw, *device, MemKind::dram);
  if (!created.ok()) {
    std::fprintf(stderr, "net_dump: %s\n", created.status().to_string().c_str());
    return 2;
  }
  Net& net = *created.value();
  const ArenaLayout& layout = net.params();
  const int64_t floats = layout.total_floats();
  Arena w = Arena::create(floats, MemKind::dram).value();
  Arena dw = Arena::create(floats, MemKind::dram).value();
  net.init_params(w.data(), o.seed);
  const std::vector<float> before(w.data(), w.data() + floats);

  const Shape4 x = net.input_shape();
  std::vector<float> images(static_cast<size_t>(x.count()));
  std::vector<int32_t> labels(static_cast<size_t>(o.batch));
  fill_batch(o.seed, spec.classes, images, labels);

  const StepStats st = net.train_step(images.data(), labels.data(), w.data(), dw.data());

  const std::string cmd = "mkdir -p '" + o.out + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "net_dump: cannot create %s\n", o.out.c_str());
    return 1;
  }
  Dump dump(o.out + "/data.bin");
  if (!dump.ok()) {
    std::fprintf(stderr, "net_dump: cannot write %s/data.bin\n", o.out.c_str());
    return 1;
  }
  dump.add("images", "images", {x.n, x.c, x.h, x.w}, images.data(), x.count(), "float32");
  dump.add("labels", "labels", {o.batch}, labels.data(), o.batch, "int32");
  dump.add("logits", "logits", {o.batch, spec.classes}, net.output(), o.batch * spec.classes,
           "float32");
  const auto& segs = layout.segments();
  dump_segments(dump, segs, before.data(), dw.data(), w.data());
  const std::vector<std::string> impls = dump_layer_arrays(dump, net, spec, images.data(), x);
  const nlohmann::json meta = {
      {"net", spec.name},         {"input", {x.c, x.h, x.w}}, {"classes", spec.classes},
      {"batch", o.batch},         {"seed", o.seed},           {"impl", o.impl},
      {"layout", "nchw"},         {"loss", st.loss},          {"params", layout.param_count()},
      {"dropout_zeroed", zeroed}, {"layers", impls},          {"arrays", dump.arrays()}};
  std::ofstream(o.out + "/meta.json") << meta.dump(1) << "\n";
  std::printf("net_dump: %s batch %lld on %lldx%lldx%lld: loss %.6f, %zu segments -> %s\n",
              spec.name.c_str(), static_cast<long long>(o.batch), static_cast<long long>(x.c),
              static_cast<long long>(x.h), static_cast<long long>(x.w), st.loss, segs.size(),
              o.out.c_str());
  return 0;
}

}  // namespace
}  // namespace easel

int main(int argc, char** argv) {
  easel::Options o;
  const std::string why = easel::parse_args(argc, argv, o);
  if (!why.empty()) return easel::usage(why.c_str());
  return easel::run(o);
}
