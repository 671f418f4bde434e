// A trained model read back from a run directory: config.json's settings, the data set's input,
// checkpoint.bin's weights, and easel's forward pass over them.
#include "tools/cli/run_model.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string_view>
#include <utility>

#include "api/run_dir.hpp"
#include "devices/device.hpp"
#include "engine/arena.hpp"
#include "nets/data/augment.hpp"
#include "nets/models/models.hpp"
#include "run/checkpoint.hpp"

namespace easel::cli {

namespace fs = std::filesystem;

namespace {

// run_dir::read_settings speaks for `train --resume`: its errors begin "--resume: ", which is
// not the flag here; they name the file themselves.
Status without_resume_prefix(const Status& st) {
  constexpr std::string_view kPrefix = "--resume: ";
  std::string m = st.message();
  if (std::string_view(m).starts_with(kPrefix)) m.erase(0, kPrefix.size());
  return Status(st.code(), m);
}

// config.json's settings into m.cfg; the data set (held in memory) into m.data.
Status read_config(RunModel& m) {
  const fs::path config = fs::path(m.dir) / "config.json";
  std::error_code ec;
  if (!fs::is_directory(m.dir, ec))
    return not_found("RUN_DIR: " + m.dir + ": no such directory (an easel train --out)");
  if (!fs::exists(config, ec))
    return not_found("RUN_DIR: " + config.string() + ": no such file (not an easel train --out)");
  auto settings = run_dir::read_settings(m.dir);
  if (!settings.ok()) return without_resume_prefix(settings.status());
  for (const auto& [name, text] : *settings)
    if (Status st = set_setting(m.cfg, name, text); !st.ok())
      return Status(st.code(), config.string() + ": " + name + ": " + st.message());
  m.layout = resolve_layout(m.cfg);
  DataOptions opt;
  opt.stream_side = m.cfg.augment.resized_crop;
  auto data = load_data(m.cfg.data, MemKind::dram, m.cfg.seed, opt);
  if (!data.ok())
    return Status(data.status().code(), config.string() + ": data: " + data.status().message());
  m.data = std::move(data).value();
  return {};
}

// The weights `which` names out of the checkpoint, into m.weights.
Status pick_weights(RunModel& m, Checkpoint& ck, const std::string& which) {
  const std::string file = (fs::path(m.dir) / "checkpoint.bin").string();
  if (which == "best")
    return invalid_argument(
        "--weights best: " + m.dir +
        " keeps only its latest checkpoint (checkpoint.bin), not the best evaluation's "
        "weights; --weights final is the model its last evaluation tested");
  if (which != "final" && which != "centre" && which != "replica")
    return invalid_argument("--weights: '" + which + "' is not final, centre, replica or best");
  if (which == "centre" && ck.centre.empty())
    return invalid_argument("--weights centre: " + file +
                            " holds no centre (the run's algorithm, " + m.cfg.algo +
                            ", keeps none); --weights replica is group 0's model");
  if (which != "replica" && !ck.centre.empty()) {
    m.weights = std::move(ck.centre);
    m.weights_from = "centre";
    return {};
  }
  if (ck.groups.empty() || ck.groups[0].weights.empty())
    return data_error(file + ": holds no group's weights");
  m.weights = std::move(ck.groups[0].weights);
  m.weights_from = "replica 0";
  return {};
}

}  // namespace

Result<RunModel> load_run_model(const std::string& dir, const std::string& which) {
  RunModel m;
  m.dir = dir;
  EASEL_RETURN_IF_ERROR(read_config(m));
  const Dataset& d = m.data.train;
  EASEL_ASSIGN_OR_RETURN(m.spec,
                         build_model(m.cfg.net, {d.channels, d.height, d.width, d.classes}));
  const fs::path file = fs::path(dir) / "checkpoint.bin";
  std::error_code ec;
  if (!fs::exists(file, ec))
    return not_found("RUN_DIR: " + dir +
                     " holds no weights: no checkpoint.bin (the run was trained with "
                     "--no-checkpoint or stopped before its first evaluation)");
  EASEL_ASSIGN_OR_RETURN(Checkpoint ck, read_checkpoint(file.string()));
  m.step = ck.iterations_done;
  EASEL_RETURN_IF_ERROR(pick_weights(m, ck, which));
  // The net's arena, to hold the checkpoint against: a batch of one costs next to nothing.
  std::unique_ptr<Device> device = make_cpu_device(ImplChoice::ref);
  EASEL_ASSIGN_OR_RETURN(auto net, Net::create(m.spec, 1, m.layout, *device, MemKind::dram));
  const int64_t floats = net->params().total_floats();
  if (static_cast<int64_t>(m.weights.size()) != floats)
    return data_error(file.string() + ": holds " + std::to_string(m.weights.size()) +
                      " weights, the net " + m.spec.name + " on " + m.cfg.data + " has " +
                      std::to_string(floats));
  return m;
}

std::vector<float> eval_images(const RunModel& m, int64_t n, Layout layout) {
  const Dataset& ds = m.data.test.count > 0 ? m.data.test : m.data.train;
  n = std::min(n, ds.count);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    idx[static_cast<size_t>(i)] = i;
  std::vector<float> images(static_cast<size_t>(n * ds.image_bytes()));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  gather_batch(ds, idx.data(), n, layout, images.data(), labels.data(), m.cfg.augment, nullptr);
  return images;
}

Result<std::vector<float>> forward_logits(const RunModel& m, const std::vector<float>& images,
                                          int64_t n) {
  std::unique_ptr<Device> device = make_cpu_device(ImplChoice::fast);
  EASEL_ASSIGN_OR_RETURN(auto net, Net::create(m.spec, n, m.layout, *device, MemKind::dram));
  // The arena's alignment, which the fast kernels may count on.
  EASEL_ASSIGN_OR_RETURN(Arena w, Arena::create(net->params().total_floats(), MemKind::dram));
  std::copy(m.weights.begin(), m.weights.end(), w.data());
  const std::vector<int32_t> labels(static_cast<size_t>(n), 0);  // the loss is not wanted
  net->evaluate(images.data(), labels.data(), n, w.data());
  std::vector<float> logits = net->output_values(net->layer_count() - 1);
  logits.resize(static_cast<size_t>(n * m.spec.classes));
  return logits;
}

}  // namespace easel::cli
