// `easel export RUN_DIR --format onnx --out FILE.onnx`: a trained run's net and weights as an
// ONNX model (tools/cli/onnx_export.hpp); --sample DIR also writes a test batch and easel's own
// logits of it as .npy files, which tools/onnx_check.py runs the model on (docs/EXPORT.md).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "devices/device.hpp"
#include "tools/cli/cli.hpp"
#include "tools/cli/onnx_export.hpp"
#include "tools/cli/pytorch_export.hpp"
#include "tools/cli/run_model.hpp"

namespace easel::cli {

namespace fs = std::filesystem;

namespace {

struct ExportFlags {
  std::string dir, format, out, weights = "final", sample;
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

// A NumPy .npy file (format 1.0) of little-endian float32 values of shape `dims`.
std::string npy(const std::vector<int64_t>& dims, const std::vector<float>& v) {
  std::string shape;
  for (int64_t d : dims)
    shape += std::to_string(d) + ", ";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // magic, version, length: 10 bytes
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return out;
}

// --sample DIR: images.npy (the first test images, N x C x H x W, normalised as the run's
// evaluation does) and logits.npy (easel's forward pass over them, N x classes).
Status write_sample(const RunModel& m, const ExportFlags& f) {
  const std::vector<float> nchw = eval_images(m, f.sample_count, Layout::nchw);
  const int64_t n =
      static_cast<int64_t>(nchw.size()) / m.spec.channels / m.spec.height / m.spec.width;
  if (n == 0) return invalid_argument("--sample: the run's data set " + m.cfg.data + " is empty");
  EASEL_ASSIGN_OR_RETURN(std::vector<float> logits,
                         forward_logits(m, eval_images(m, n, m.layout), n));
  std::error_code ec;
  fs::create_directories(f.sample, ec);
  const fs::path d(f.sample);
  if (ec ||
      !write_atomic(d / "images.npy",
                    npy({n, m.spec.channels, m.spec.height, m.spec.width}, nchw)) ||
      !write_atomic(d / "logits.npy", npy({n, m.spec.classes}, logits)))
    return io_error("--sample: cannot write " + f.sample);
  return {};
}

// --format pytorch: the state_dict (tools/cli/pytorch_export.hpp), then --sample.
int export_pytorch(const RunModel& m, const ArenaLayout& params, const ExportFlags& f) {
  auto line = write_state_dict(m.spec, m.layout, params, m.weights.data(), m.step, f.out);
  if (!line.ok()) return report(line.status(), failure_of(line.status()));
  if (!f.sample.empty())
    if (Status st = write_sample(m, f); !st.ok()) return report(st, failure_of(st));
  std::printf("easel export: %s (%s, step %lld) -> %s: %s\n", m.spec.name.c_str(),
              m.weights_from.c_str(), static_cast<long long>(m.step), f.out.c_str(), line->c_str());
  return 0;
}

int run_export(const ExportFlags& f) {
  if (Status st = check_flags(f); !st.ok()) return report(st, Failure::request);
  auto loaded = load_run_model(f.dir, f.weights);
  if (!loaded.ok()) return report(loaded.status(), failure_of(loaded.status()));
  const RunModel& m = *loaded;
  std::unique_ptr<Device> device = make_cpu_device(ImplChoice::ref);
  auto net = Net::create(m.spec, 1, m.layout, *device, MemKind::dram);
  if (!net.ok()) return report(net.status(), failure_of(net.status()));
  if (f.format == "pytorch") return export_pytorch(m, (*net)->params(), f);
  OnnxOptions opt;
  opt.softmax = f.softmax;
  opt.metadata = {{"easel.run_dir", fs::absolute(f.dir).string()},
                  {"easel.step", std::to_string(m.step)},
                  {"easel.weights", m.weights_from}};
  auto bytes = onnx_model(m.spec, m.layout, (*net)->params(), m.weights.data(), opt);
  // A build without ONNX (unavailable) refuses the request; the checker's refusal is a bug.
  if (!bytes.ok())
    return report(bytes.status(),
                  bytes.status().code() == Code::internal ? Failure::run : Failure::request);
  if (!f.sample.empty())
    if (Status st = write_sample(m, f); !st.ok()) return report(st, failure_of(st));
  if (!write_atomic(f.out, *bytes))
    return report(io_error("--out: cannot write " + f.out), Failure::run);
  std::printf("easel export: %s (%s, step %lld) -> %s: ONNX opset 13, %lld parameters, %zu bytes\n",
              m.spec.name.c_str(), m.weights_from.c_str(), static_cast<long long>(m.step),
              f.out.c_str(), static_cast<long long>((*net)->params().trained_count()),
              bytes->size());
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
  e->add_option("--weights", f->weights,
                "final (the model the run's last evaluation tested), centre, replica (group 0's)")
      ->capture_default_str();
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
