// `easel export RUN_DIR --format onnx --out FILE.onnx`: a trained run's net and weights (the
// model `easel eval` tests: tools/cli/trained_run.hpp) as an ONNX model
// (tools/cli/onnx_export.hpp); --sample DIR also writes a test batch and easel's own logits of
// it as .npy files, which tools/onnx_check.py runs the model on (docs/EXPORT.md).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nets/data/augment.hpp"
#include "nets/data/npy.hpp"
#include "tools/cli/cli.hpp"
#include "tools/cli/onnx_export.hpp"
#include "tools/cli/pytorch_export.hpp"
#include "tools/cli/trained_run.hpp"

namespace easel::cli {

namespace fs = std::filesystem;

namespace {

struct ExportFlags {
  std::string dir, format, out, weights = "evaluated", sample;
  int64_t sample_count = 16;
  bool overwrite = false, softmax = false;
};

// Before anything is read: the format, and that --out may be written (its folder exists and is
// writable; an existing file only with --overwrite) and --sample is a folder or can be one.
Status check_flags(const ExportFlags& f) {
  if (f.format != "onnx" && f.format != "pytorch")
    return invalid_argument("--format: '" + f.format +
                            "' is not a format easel writes (onnx, pytorch)");
  if (f.softmax && f.format != "onnx")
    return invalid_argument("--softmax: only with --format onnx (a state_dict holds no graph)");
  const fs::path out(f.out);
  const fs::path folder = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  std::error_code ec;
  if (fs::is_directory(out, ec)) return invalid_argument("--out: " + f.out + " is a directory");
  if (!fs::is_directory(folder, ec))
    return invalid_argument("--out: " + f.out + ": no such directory " + folder.string());
  if (::access(folder.c_str(), W_OK) != 0)
    return invalid_argument("--out: " + f.out + ": the directory " + folder.string() +
                            " is not writable");
  if (fs::exists(out, ec) && !f.overwrite)
    return invalid_argument("--out: " + f.out + " exists (--overwrite replaces it)");
  if (f.sample_count <= 0 || f.sample_count > 4096)
    return invalid_argument("--sample-count: want 1 to 4096 images, got " +
                            std::to_string(f.sample_count));
  if (!f.sample.empty() && fs::exists(f.sample, ec) && !fs::is_directory(f.sample, ec))
    return invalid_argument("--sample: " + f.sample + " is not a directory");
  return {};
}

// --sample DIR: images.npy (the first test images, N x C x H x W, normalised as the run's
// evaluation does) and logits.npy (easel's forward pass over them, N x classes).
Status write_sample(TrainedNet& net, const DataSplit& data, const Augment& augment,
                    const ExportFlags& f) {
  const Dataset& ds = data.test.count > 0 ? data.test : data.train;
  const int64_t n = std::min(f.sample_count, ds.count);
  if (n == 0) return invalid_argument("--sample: the run's data set is empty");
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    idx[static_cast<size_t>(i)] = i;
  std::vector<float> nchw(static_cast<size_t>(n * ds.image_bytes()));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  gather_batch(ds, idx.data(), n, Layout::nchw, nchw.data(), labels.data(), augment, nullptr);
  std::error_code ec;
  fs::create_directories(f.sample, ec);
  const fs::path d(f.sample);
  if (ec ||
      !write_atomic(d / "images.npy", encode_npy({n, ds.channels, ds.height, ds.width}, nchw)) ||
      !write_atomic(d / "logits.npy", encode_npy({n, net.classes()}, net.logits(nchw.data(), n))))
    return io_error("--sample: cannot write " + f.sample);
  return {};
}

// The ONNX model of the run's net and weights (a build without ONNX: unavailable).
Result<std::string> onnx_bytes(const TrainedNet& t, const TrainedRun& run, const ExportFlags& f) {
  OnnxOptions opt;
  opt.softmax = f.softmax;
  opt.metadata = {{"easel.run_dir", fs::absolute(f.dir).string()},
                  {"easel.step", std::to_string(run.step)},
                  {"easel.weights", run.weights_name}};
  return onnx_model(t.spec(), t.layout(), t.params(), t.weights(), opt);
}

int run_export(const ExportFlags& f) {
  if (Status st = check_flags(f); !st.ok()) return report(st, Failure::request);
  const auto fail = [](const Status& st) { return report(st, failure_of(st)); };
  auto run = open_trained_run(f.dir, f.weights);
  if (!run.ok()) return fail(run.status());
  // The sample's logits are the reference the ONNX model (fp32) is held to.
  run->cfg.precision = Precision::fp32;
  // The data set only where summary.json does not say the input, and for --sample.
  std::optional<DataSplit> data;
  if (!run->input || !f.sample.empty()) {
    auto d = load_run_data(*run, run->cfg.data, f.dir + "/config.json: data " + run->cfg.data);
    if (!d.ok()) return fail(d.status());
    data = std::move(d).value();
  }
  ModelInput in;
  if (run->input)
    in = *run->input;
  else
    in = {data->train.channels, data->train.height, data->train.width, data->train.classes};
  auto net = TrainedNet::create(*run, in, run->input ? f.dir + "/summary.json" : run->cfg.data);
  if (!net.ok()) return fail(net.status());
  const TrainedNet& t = **net;
  std::string written;          // what the file holds, for the last line
  if (f.format == "pytorch") {  // the state_dict (tools/cli/pytorch_export.hpp)
    auto line = write_state_dict(t.spec(), t.layout(), t.params(), t.weights(), run->step, f.out);
    if (!line.ok()) return fail(line.status());
    written = *line;
  } else {
    auto bytes = onnx_bytes(t, *run, f);
    if (!bytes.ok())
      return report(bytes.status(),
                    bytes.status().code() == Code::internal ? Failure::run : Failure::request);
    if (!write_atomic(f.out, *bytes))
      return report(io_error("--out: cannot write " + f.out), Failure::run);
    written = "ONNX opset 13, " + std::to_string(t.params().trained_count()) + " parameters, " +
              std::to_string(bytes->size()) + " bytes";
  }
  if (!f.sample.empty())
    if (Status st = write_sample(**net, *data, run->cfg.augment, f); !st.ok()) return fail(st);
  std::printf("easel export: %s (%s, step %lld) -> %s: %s\n", t.spec().name.c_str(),
              run->weights_name.c_str(), static_cast<long long>(run->step), f.out.c_str(),
              written.c_str());
  return 0;
}

}  // namespace

ExportCommand add_export_command(CLI::App& app) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* e = app.add_subcommand(
      "export",
      "write a trained run's net and weights as an ONNX model or a PyTorch state_dict "
      "(docs/EXPORT.md)");
  e->add_option("RUN_DIR", f->dir, "the run directory (an easel train --out)")->required();
  e->add_option("--format", f->format,
                "the file format: onnx, pytorch (a state_dict for torch.load)")
      ->required();
  e->add_option("--out", f->out, "the file to write")->required();
  e->add_option("--weights", f->weights, kWeightsHelp)->capture_default_str();
  e->add_flag("--overwrite", f->overwrite, "replace --out when it exists");
  e->add_flag("--softmax", f->softmax, "output the class probabilities (prob), not the logits");
  e->add_option("--sample", f->sample,
                "also write DIR/images.npy (the first test images, normalised) and "
                "DIR/logits.npy (easel's logits of them) for tools/onnx_check.py");
  e->add_option("--sample-count", f->sample_count, "how many test images --sample writes")
      ->capture_default_str();
  return [e, f]() { return e->parsed() ? run_export(*f) : -1; };
}

}  // namespace easel::cli
