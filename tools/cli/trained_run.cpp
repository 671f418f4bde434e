// A run directory's trained net (tools/cli/trained_run.hpp).
#include "tools/cli/trained_run.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "algos/algorithm.hpp"
#include "api/run_dir.hpp"
#include "nets/models/description.hpp"
#include "run/checkpoint.hpp"

namespace easel::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// config.json's settings into a TrainConfig (run_dir::read_settings' errors speak of --resume).
Result<TrainConfig> read_config(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(dir) / "config.json", ec))
    return not_found(dir + ": no config.json (not a run directory: easel train --out DIR)");
  auto pairs = run_dir::read_settings(dir);
  if (!pairs.ok()) {
    std::string m = pairs.status().message();
    if (m.rfind("--resume: ", 0) == 0) m.erase(0, 10);
    return Status(pairs.status().code(), m);
  }
  TrainConfig cfg;
  for (const auto& [name, text] : *pairs)
    if (Status st = set_setting(cfg, name, text); !st.ok())
      return data_error(dir + "/config.json: " + st.message());
  return cfg;
}

// summary.json's input and classes, when it has them.
std::optional<ModelInput> summary_input(const std::string& dir) {
  std::ifstream f(fs::path(dir) / "summary.json");
  const json j = f ? json::parse(f, nullptr, false) : json();
  if (!j.is_object() || !j.contains("input") || !j["input"].is_array() || j["input"].size() != 3 ||
      !j.contains("classes") || !j["classes"].is_number_integer())
    return std::nullopt;
  ModelInput in;
  for (const json& v : j["input"])
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) return std::nullopt;
  in.channels = j["input"][0].get<int64_t>();
  in.height = j["input"][1].get<int64_t>();
  in.width = j["input"][2].get<int64_t>();
  in.classes = j["classes"].get<int64_t>();
  return in.classes > 0 ? std::optional(in) : std::nullopt;
}

// The model --weights names among the checkpoint's; errors name --weights.
Status choose_weights(Checkpoint& ck, const std::string& algo, const std::string& which,
                      TrainedRun* out) {
  auto a = make_algorithm(algo);
  const bool centre = a.ok() && (*a)->uses_centre() && !ck.centre.empty();
  const size_t n = ck.groups.empty() ? ck.centre.size() : ck.groups[0].weights.size();
  // local-sgd's, slowmo's and diloco's state starts with the anchor (algos/periodic.cpp).
  const bool anchor = !centre && n > 0 && ck.algo.buffer.size() >= n;
  std::string pick = which;
  if (which == "evaluated" || which == "best") {
    pick = centre ? "centre" : anchor ? "anchor" : "group:0";
    out->weights_note = "the model the run evaluated";
  }
  if (pick == "centre") {
    if (!centre) return invalid_argument("--weights centre: " + algo + " keeps no centre");
    out->weights = std::move(ck.centre);
    out->weights_name = "centre";
  } else if (pick == "anchor") {
    if (!anchor) return invalid_argument("--weights anchor: " + algo + " keeps no anchor");
    out->weights.assign(ck.algo.buffer.begin(), ck.algo.buffer.begin() + static_cast<long>(n));
    out->weights_name = "anchor";
  } else if (pick.rfind("group:", 0) == 0) {
    const std::string g = pick.substr(6);
    const bool digits = !g.empty() && g.size() < 6 && std::all_of(g.begin(), g.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    const size_t id = digits ? std::stoul(g) : ck.groups.size();
    if (id >= ck.groups.size())
      return invalid_argument("--weights " + which + ": the run has groups 0 to " +
                              std::to_string(static_cast<int64_t>(ck.groups.size()) - 1));
    out->weights = std::move(ck.groups[id].weights);
    out->weights_name = "group " + g;
  } else {
    return invalid_argument("--weights '" + which +
                            "': evaluated, best, centre, anchor or group:G expected");
  }
  return {};
}

}  // namespace

Result<TrainedRun> open_trained_run(const std::string& dir, const std::string& weights) {
  TrainedRun r;
  r.dir = dir;
  EASEL_ASSIGN_OR_RETURN(r.cfg, read_config(dir));
  const bool best = weights == "best";
  const fs::path ck_path = fs::path(dir) / (best ? "best.bin" : "checkpoint.bin");
  std::error_code ec;
  if (best && !fs::is_regular_file(ck_path, ec))
    return invalid_argument(
        "--weights best: " + ck_path.string() +
        ": no such file: the run kept no best evaluation's weights (it made no evaluation, ran "
        "with --no-checkpoint, or was trained before easel kept best.bin)");
  if (!fs::is_regular_file(ck_path, ec))
    return not_found(ck_path.string() + ": no such file: the run holds no weights" +
                     (r.cfg.checkpoint ? std::string(" (it made no evaluation)")
                                       : " (it ran with --no-checkpoint)"));
  EASEL_ASSIGN_OR_RETURN(Checkpoint ck, read_checkpoint(ck_path.string()));
  r.file = ck_path.filename().string();
  r.step = ck.iterations_done;
  EASEL_RETURN_IF_ERROR(choose_weights(ck, r.cfg.algo, weights, &r));
  if (best) {
    char acc[32];
    std::snprintf(acc, sizeof acc, "%.4f", ck.best_accuracy);
    r.weights_name = "best " + r.weights_name;
    r.weights_note = "the best evaluation's: test accuracy " + std::string(acc);
  }
  r.input = summary_input(dir);
  return r;
}

Result<TrainedRun> open_net_file(const std::string& path) {
  if (!path.ends_with(".onnx"))
    return invalid_argument("--net " + path +
                            ": a net description carries no trained weights; give an ONNX file "
                            "(which does) or a run directory");
  TrainedRun r;
  r.cfg.net = path;
  r.file = path;
  r.weights_name = "the file's";
  EASEL_ASSIGN_OR_RETURN(const NetHeader header, read_net_header(path));
  r.input = header.input;
  EASEL_ASSIGN_OR_RETURN(const NetSpec spec, build_model(path, header.input));
  const std::unique_ptr<Device> cpu = make_cpu_device(r.cfg.impl, r.cfg.precision);
  EASEL_ASSIGN_OR_RETURN(const std::unique_ptr<Net> net,
                         Net::create(spec, 1, resolve_layout(r.cfg), *cpu, MemKind::dram));
  r.weights.assign(static_cast<size_t>(net->params().total_floats()), 0.f);
  EASEL_RETURN_IF_ERROR(initial_weights(path, *net, r.weights.data()));
  return r;
}

Result<DataSplit> load_run_data(const TrainedRun& run, const std::string& spec,
                                const std::string& what) {
  auto data = load_data(spec, MemKind::dram, run.cfg.seed,
                        DataOptions{run.cfg.augment.resized_crop, run.cfg.skip_bad_images});
  if (!data.ok()) return Status(data.status().code(), what + ": " + data.status().message());
  return data;
}

Result<std::unique_ptr<TrainedNet>> TrainedNet::create(const TrainedRun& run, const ModelInput& in,
                                                       const std::string& what) {
  const auto text = [](const ModelInput& m) {
    return std::to_string(m.channels) + "x" + std::to_string(m.height) + "x" +
           std::to_string(m.width) + " images in " + std::to_string(m.classes) + " classes";
  };
  if (run.input && (run.input->channels != in.channels || run.input->height != in.height ||
                    run.input->width != in.width || run.input->classes != in.classes))
    return invalid_argument(what + ": " + text(in) + ", but the run's net " + run.cfg.net +
                            " was trained on " + text(*run.input));
  // build_model refuses data that a net's fixed layer sizes cannot take (more classes than
  // its last layer scores): said of `what`.
  Result<NetSpec> built = build_model(run.cfg.net, in);
  if (!built.ok()) return Status(built.status().code(), what + ": " + built.status().message());
  NetSpec spec = std::move(built).value();
  std::unique_ptr<TrainedNet> t(new TrainedNet());
  // The CPU whatever device trained it: the arena's layout is the same on every device.
  t->device_ = make_cpu_device(run.cfg.impl, run.cfg.precision);
  EASEL_ASSIGN_OR_RETURN(t->net_, Net::create(spec, run.cfg.batch, resolve_layout(run.cfg),
                                              *t->device_, MemKind::dram));
  const int64_t n = t->net_->params().total_floats();
  if (n != static_cast<int64_t>(run.weights.size()))
    return invalid_argument(what + ": the net " + run.cfg.net + " on " + text(in) + " has " +
                            std::to_string(n) + " weights (with padding), the run's checkpoint " +
                            std::to_string(run.weights.size()) +
                            ": not the shape or classes it was trained on");
  EASEL_ASSIGN_OR_RETURN(t->weights_, Arena::create(n, MemKind::dram));
  std::copy(run.weights.begin(), run.weights.end(), t->weights_.data());
  t->no_labels_.assign(static_cast<size_t>(run.cfg.batch), 0);
  return t;
}

EvalStats TrainedNet::forward(const float* images, const int32_t* labels, int64_t n,
                              std::vector<float>* logits) {
  const EvalStats s =
      net_->evaluate(images, labels ? labels : no_labels_.data(), n, weights_.data());
  const std::vector<float> out = net_->output_values(net_->layer_count());
  const size_t k = static_cast<size_t>(classes());
  logits->insert(logits->end(), out.begin(), out.begin() + static_cast<long>(k * n));
  return s;
}

std::vector<float> TrainedNet::logits(const float* nchw, int64_t n) {
  const Shape4 in = input_shape();
  const int64_t per = in.per_image();
  std::vector<float> batch(static_cast<size_t>(in.count())), out;
  for (int64_t b = 0; b < n; b += in.n) {
    const int64_t m = std::min(in.n, n - b);
    nchw_to_layout(nchw + b * per, {m, in.c, in.h, in.w}, layout(), batch.data());
    forward(batch.data(), nullptr, m, &out);
  }
  return out;
}

std::string json_with_rows(const json& head,
                           const std::vector<std::pair<std::string, json>>& tables) {
  std::string s = head.dump(2);
  s.resize(s.size() - 2);  // "\n}"
  for (const auto& [name, rows] : tables) {
    s += ",\n  " + json(name).dump() + ": [";
    for (size_t i = 0; i < rows.size(); ++i)
      s += std::string(i ? "," : "") + "\n    " + rows[i].dump();
    s += rows.empty() ? "]" : "\n  ]";
  }
  return s + "\n}";
}

void nchw_to_layout(const float* src, const Shape4& shape, Layout layout, float* dst) {
  if (layout == Layout::nchw) {
    std::copy(src, src + shape.count(), dst);
    return;
  }
  const int64_t hw = shape.h * shape.w;
  for (int64_t i = 0; i < shape.n; ++i)
    for (int64_t c = 0; c < shape.c; ++c)
      for (int64_t p = 0; p < hw; ++p)
        dst[(i * hw + p) * shape.c + c] = src[(i * shape.c + c) * hw + p];
}

std::vector<float> chw_inner_product(const OpDesc& d, const float* src) {
  const int64_t c = d.src.c, hw = d.src.h * d.src.w, k = c * hw;
  std::vector<float> out(static_cast<size_t>(d.oc * k));
  for (int64_t o = 0; o < d.oc; ++o)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t p = 0; p < hw; ++p)
        out[static_cast<size_t>(o * k + ci * hw + p)] = src[o * k + p * c + ci];
  return out;
}

}  // namespace easel::cli
