// The run directory: what `easel train --out DIR` (and a Run with `out`) writes and a resumed
// run reads back.
#include "api/run_dir.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "devices/cuda/cuda_device.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/config.hpp"
#include "engine/log.hpp"
#include "engine/topology.hpp"
#include "nets/data/stream_source.hpp"

namespace easel::run_dir {

namespace fs = std::filesystem;
using nlohmann::json;

SettingTexts default_texts() {
  SettingTexts texts;
  for (const Setting& s : train_settings())
    texts.push_back(s.default_text());
  return texts;
}

bool write_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  std::error_code ec, ignored;
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return false;  // not opened: whatever is at tmp is not ours to remove
    if (!(f << text) || !f.flush()) {
      f.close();
      fs::remove(tmp, ignored);  // our half-written file goes
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ignored);
  return !ec;
}

namespace {

json times_json(const GroupTimes& t) {
  return {{"compute_seconds", t.compute},
          {"comm_seconds", t.comm},
          {"wait_seconds", t.wait},
          {"preempted_seconds", t.preempted}};
}

// A setting's entry in config.json: a text as given, a number or a boolean as the run uses it.
json setting_json(const Setting& s, const TrainConfig& cfg, const std::string& text) {
  switch (s.field.type) {
    case SettingType::text:
      return text;
    case SettingType::boolean:
      return s.field.show(cfg) == "true";
    case SettingType::integer: {
      const std::string shown = s.field.show(cfg);
      if (shown.front() == '-') return std::stoll(shown);
      return std::stoull(shown);  // the seed may pass 2^63
    }
    case SettingType::real:
      return std::strtod(s.field.show(cfg).c_str(), nullptr);  // show reads back exactly
  }
  return nullptr;
}

// Whether a resumed run may give the setting `name` itself.
bool may_change_on_resume(const std::string& name) {
  const Setting* s = find_setting(name);
  return s && s->may_change();
}

// The text of the setting `name` among `texts`.
const std::string& text_of(const SettingTexts& texts, const char* name) {
  return texts[static_cast<size_t>(find_setting(name) - train_settings().data())];
}

// Whether the file ends with a newline (or is empty or missing).
bool ends_with_newline(const fs::path& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f || f.tellg() <= 0) return true;
  f.seekg(-1, std::ios::end);
  return f.get() == '\n';
}

// Keeps the records of metrics.jsonl up to the checkpoint's step: a run killed after an
// evaluation's line but before its checkpoint would otherwise log that step twice, and one
// killed while writing a line leaves half a line. Drops those, and says how many it dropped.
// *last_step: the largest step of a record in the file (-1: none).
Status trim_metrics(const fs::path& path, int64_t step, int64_t* last_step) {
  *last_step = -1;
  std::ifstream in(path);
  if (!in) return {};  // none yet: the resumed run starts it
  std::string kept, line;
  int dropped = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    const bool record =
        !j.is_discarded() && j.is_object() && j.contains("step") && j["step"].is_number_integer();
    if (record) *last_step = std::max(*last_step, j["step"].get<int64_t>());
    if (record && j["step"].get<int64_t>() <= step)
      kept += line + "\n";
    else
      ++dropped;
  }
  in.close();
  if (dropped == 0) return {};
  if (!write_atomic(path, kept)) return io_error("cannot rewrite " + path.string());
  log_warn("train", path.string() + ": dropped " + std::to_string(dropped) +
                        " line(s) past the checkpoint's step " + std::to_string(step) +
                        " or not a metrics record");
  return {};
}

// summary.json's group_times: each group's times, id and cpus.
json groups_json(const TrainSummary& s) {
  json groups = json::array();
  for (size_t i = 0; i < s.group_times.size(); ++i) {
    json g = times_json(s.group_times[i]);
    g["id"] = i;
    g["cpus"] = s.info.plan.groups[i].cpus;
    groups.push_back(g);
  }
  return groups;
}

// summary.json's layers: each layer's kernel, parameters and output shape.
json layers_json(const TrainSummary& s) {
  json layers = json::array();
  for (const auto& l : s.info.layers)
    layers.push_back({{"name", l.name},
                      {"kind", l.kind},
                      {"impl", l.impl},
                      {"params", l.params},
                      {"dst", l.dst.to_string()}});
  return layers;
}

json summary_json(const TrainSummary& s, json config) {
  // --skip-bad-images: the distinct bad images a streamed set skipped.
  const bool skipping = config.value("skip-bad-images", false);
  json j = {
      {"stopped", stop_reason_name(s.stopped)},
      // A run that measured none (interrupted before its first evaluation) claims no accuracy.
      {"test_accuracy", s.evaluations > 0 ? json(s.test_accuracy) : json(nullptr)},
      {"test_loss", s.evaluations > 0 ? json(s.test_loss) : json(nullptr)},
      {"best_accuracy",
       s.evaluations > 0 || s.best_accuracy > 0 ? json(s.best_accuracy) : json(nullptr)},
      {"evaluations", s.evaluations},
      {"epochs", s.epochs},
      {"steps", s.steps},
      {"images", s.images},
      {"wall_seconds", s.wall_seconds},
      {"train_seconds", s.train_seconds},
      {"eval_seconds", s.eval_seconds},
      {"setup_seconds", s.setup_seconds},
      {"images_per_second", s.images_per_second},
      {"gflops_per_second", s.images_per_second * s.info.flops_per_image / 1e9},
      {"time_to_target_seconds",
       s.time_to_target_seconds ? json(*s.time_to_target_seconds) : json(nullptr)},
      {"target_accuracy", s.target_accuracy},
      {"algorithm", s.info.algorithm},
      {"groups", s.info.plan.groups.size()},
      {"ranks", s.info.ranks},
      {"threads_per_group", s.info.plan.groups.empty() ? 0 : s.info.plan.groups[0].cpus.size()},
      {"net", s.info.net},
      {"data", s.info.data},
      {"params", s.info.params},
      {"input", {s.info.channels, s.info.height, s.info.width}},
      {"classes", s.info.classes},
      {"flops_per_image", s.info.flops_per_image},
      {"compute_seconds", s.compute_seconds},
      {"comm_seconds", s.comm_seconds},
      {"wait_seconds", s.wait_seconds},
      {"comm_share", s.comm_share},
      {"exchanged_bytes_per_image", s.exchanged_bytes_per_image},
      {"wait_share", s.wait_share},
      {"preempted_seconds", s.preempted_seconds},
      {"preempted_share", s.preempted_share},
      {"staleness_mean", s.staleness_mean},
      {"staleness_max", s.staleness_max},
      {"checkpoints", s.checkpoints},
      {"checkpoint_seconds", s.checkpoint_seconds},
      {"checkpoint_interval_seconds",
       s.checkpoint_interval_seconds > 0 ? json(s.checkpoint_interval_seconds) : json(nullptr)},
      {"placement", s.info.placement},
      {"group_times", groups_json(s)},
      {"exchange_path", s.info.exchange_path.empty() ? json(nullptr) : json(s.info.exchange_path)},
      {"layers", layers_json(s)},
      {"config", std::move(config)},
  };
  if (skipping) j["skipped_images"] = skipped_images();
  json failures = json::array();
  for (const GroupFailure& f : s.group_failures)
    failures.push_back(
        {{"group", f.group}, {"step", f.step}, {"action", f.action}, {"why", f.why}});
  j["group_failures"] = std::move(failures);
  j["stall_deadline"] = {{"seconds", s.info.stall_seconds},
                         {"source", s.info.stall_source},
                         {"why", s.info.stall_why}};
  // --clock: the described machine whose simulated seconds train_seconds, images_per_second,
  // time_to_target_seconds and the groups' times are (wall_seconds stays the wall's).
  if (!s.info.clock.empty()) j["clock"] = s.info.clock;
  if (!s.info.clock_placement.empty()) j["clock_placement"] = s.info.clock_placement;
  return j;
}

// config.json's value of setting s as the text Config::set takes; errors name the file and
// the key.
Result<std::string> setting_text(const Setting& s, const json& v, const std::string& file) {
  const auto wrong = [&] {
    return data_error("--resume: " + file + ": key '" + s.name + "' has the wrong type");
  };
  switch (s.field.type) {
    case SettingType::boolean:
      if (!v.is_boolean()) return wrong();
      return std::string(v.get<bool>() ? "true" : "false");
    case SettingType::text:
      if (!v.is_string()) return wrong();
      return v.get<std::string>();
    case SettingType::integer:
      if (!v.is_number_integer()) return wrong();
      return v.dump();
    case SettingType::real:
      if (!v.is_number()) return wrong();
      return v.dump();
  }
  return wrong();
}

// A resumed run's settings against its checkpoint's: the first key that differs, named with
// the run's config.json (an edit there would otherwise go on silently with other settings).
Status check_settings(const Checkpoint& ck, const TrainConfig& cfg, const SettingTexts& texts) {
  const size_t at = ck.identity.find(kSettingsMark);
  if (at == std::string::npos) return {};  // not written by easel train: the identity decides
  const json had = json::parse(ck.identity.substr(at + std::strlen(kSettingsMark)), nullptr, false);
  if (had.is_discarded() || !had.is_object()) return {};
  const json now = json::parse(fixed_settings(cfg, texts));
  std::string changeable;  // the config.json keys a resumed run may change
  for (const Setting& s : train_settings())
    if (s.kept() && s.may_change())
      changeable += (changeable.empty() ? "--" : ", --") + std::string(s.name);
  const std::string file = (fs::path(cfg.resume) / "config.json").string();
  for (const auto& [key, v] : now.items()) {
    // A setting added after the checkpoint was written: its run had the default.
    if (const Setting* s = find_setting(key);
        !had.contains(key) && s && v == setting_json(*s, TrainConfig{}, s->default_text()))
      continue;
    if (!had.contains(key) || had[key] != v)
      return invalid_argument("--resume: " + file + ": '" + key + "' is " + v.dump() +
                              ", but the checkpoint's run had " +
                              (had.contains(key) ? had[key].dump() : std::string("no such key")) +
                              " (only " + changeable + " may change)");
  }
  return {};
}

// Removes the checkpoint temporaries (checkpoint.bin.tmp.PID.RANDOM) that a killed run left in
// `out`: those of processes that are gone.
void remove_stale_temporaries(const fs::path& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    size_t tail = 0;
    for (const char* prefix : {"checkpoint.bin.tmp.", "best.bin.tmp."})
      if (name.rfind(prefix, 0) == 0) tail = std::strlen(prefix);
    if (tail == 0) continue;
    const long pid = std::strtol(name.c_str() + tail, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove(e.path(), ignored);
    }
  }
}

// A checkpoint write that failed: the run goes on, the last good checkpoint kept.
void log_unwritten(const Status& st) {
  log_error("train", "checkpoint not written: " + st.message() +
                         " (the previous one, if any, is still whole)");
}

}  // namespace

json config_json(const TrainConfig& cfg, const SettingTexts& texts) {
  json j = json::object();
  const auto settings = train_settings();
  for (size_t i = 0; i < settings.size(); ++i)
    if (settings[i].kept()) j[settings[i].name] = setting_json(settings[i], cfg, texts[i]);
  return j;
}

std::string fixed_settings(const TrainConfig& cfg, const SettingTexts& texts) {
  json j = config_json(cfg, texts);
  for (auto it = j.begin(); it != j.end();)
    it = may_change_on_resume(it.key()) ? j.erase(it) : std::next(it);
  return j.dump();
}

Result<std::vector<std::pair<std::string, std::string>>> read_settings(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  std::error_code ec;
  if (!fs::exists(path, ec))
    return not_found("--resume: " + path.string() + ": no such file (not a run's --out?)");
  if (!fs::is_regular_file(path, ec))
    return data_error("--resume: " + path.string() + ": not a regular file");
  std::ifstream f(path);
  if (!f) return io_error("--resume: " + path.string() + ": cannot be read");
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return data_error("--resume: " + path.string() + ": not a JSON object");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, v] : j.items()) {
    const Setting* s = find_setting(key);
    if (!s || key != s->name || !s->takes(kTrainCommand))
      return data_error("--resume: " + path.string() + ": unknown key '" + printable(key) + "'");
    EASEL_ASSIGN_OR_RETURN(std::string value, setting_text(*s, v, path.string()));
    if (s->field.type == SettingType::text && value.empty()) continue;  // an unset list (cpus)
    out.emplace_back(key, std::move(value));
  }
  return out;
}

Status read_resume(TrainConfig& cfg, const SettingTexts& texts, std::optional<Checkpoint>* ck) {
  if (!cfg.out.empty() && fs::path(cfg.out) != fs::path(cfg.resume))
    return invalid_argument("--out: a resumed run goes on in its own directory (" + cfg.resume +
                            ")");
  cfg.out = cfg.resume;
  auto read = read_checkpoint((fs::path(cfg.resume) / "checkpoint.bin").string());
  if (!read.ok()) return Status(read.status().code(), "--resume: " + read.status().message());
  *ck = std::move(read).value();
  EASEL_RETURN_IF_ERROR(check_settings(**ck, cfg, texts));
  // Under mpirun every rank reads it (the run directory on a file system they share) and
  // restores its own groups; --groups is per rank.
  return check_resume_groups(**ck, cfg.algo, cfg.plan.groups, process_count());
}

Status check_out(const TrainConfig& cfg, bool resumed) {
  const fs::path out(cfg.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    return invalid_argument("--out: " + cfg.out + " exists and is not a directory");
  if (!resumed && !cfg.overwrite &&
      (fs::exists(out / "summary.json", ec) || fs::exists(out / "metrics.jsonl", ec)))
    return invalid_argument("--out: " + cfg.out +
                            " already holds the results of a run (pass --overwrite to replace "
                            "them, or choose another --out)");
  return {};
}

Result<DataSplit> load_train_data(const TrainConfig& cfg, const SettingTexts& texts) {
  // hbw asked of a machine without it: refused naming --placement before the data set's
  // allocation would fail in memkind's words (the plan checks it again for `easel topology`).
  const Placement placement = host_placement(cfg);
  if (std::any_of(std::begin(placement.kind), std::end(placement.kind),
                  [](MemKind k) { return k == MemKind::hbw; })) {
    EASEL_ASSIGN_OR_RETURN(const Topology topo, detect_topology());
    EASEL_RETURN_IF_ERROR(check_hbw_placement(topo, placement));
  }
  MemKind dataset_kind = placement[BufferClass::dataset];
  if (cfg.device.gpu) {
    if (Status s = prepare_gpu_memory(); !s.ok())
      return Status(s.code(), "--device " + device_text(cfg.device) + ": " + s.message());
    if (text_of(texts, "placement") == find_setting("placement")->default_text())
      dataset_kind = MemKind::pinned_host;
  }
  DataOptions opt;
  opt.stream_side = cfg.augment.resized_crop;  // an image folder streams for random-resized-crop
  opt.skip_bad = cfg.skip_bad_images;
  return load_data(cfg.data, dataset_kind, cfg.seed, opt);
}

Status Writer::prepare(const TrainConfig& cfg, json config, const Checkpoint* resume) {
  clock_ = cfg.clock;
  out_ = cfg.out;
  config_ = std::move(config);
  if (cfg.checkpoint) checkpoint_path_ = (out_ / "checkpoint.bin").string();
  std::error_code ec;
  fs::create_directories(out_, ec);
  if (ec) return io_error("--out: cannot create " + cfg.out + ": " + ec.message());
  remove_stale_temporaries(out_);
  if (resume) {
    resume_step_ = resume->iterations_done;
    // best.bin holds the best of the evaluations before it (ck.best_accuracy), when it is there.
    if (fs::exists(out_ / "best.bin", ec)) best_accuracy_ = resume->best_accuracy;
    if (fs::exists(out_ / "metrics.jsonl", ec) &&
        !std::ofstream(out_ / "metrics.jsonl", std::ios::app))
      return io_error("--resume: cannot append to " + (out_ / "metrics.jsonl").string());
    if (!cfg.checkpoint)
      log_warn("train", "--no-checkpoint: " + (out_ / "checkpoint.bin").string() +
                            " stays at step " + std::to_string(resume->iterations_done) +
                            "; a later --resume goes on from there");
    if (!write_atomic(out_ / "config.json", config_.dump(2) + "\n"))
      log_error("train", "cannot rewrite " + (out_ / "config.json").string());
    return {};
  }
  fs::remove(out_ / "checkpoint.bin", ec);
  fs::remove(out_ / "best.bin", ec);
  fs::remove(out_ / "summary.json", ec);
  metrics_.open(out_ / "metrics.jsonl", std::ios::trunc);
  if (!metrics_) return io_error("--out: cannot write " + (out_ / "metrics.jsonl").string());
  if (!write_atomic(out_ / "config.json", config_.dump(2) + "\n"))
    return io_error("--out: cannot write " + (out_ / "config.json").string());
  return {};
}

void Writer::record(const EvalRecord& r) {
  // The last checkpoint's write has had a round: it lands before the round is logged, so that
  // the run's files never log a step past a checkpoint still being written when it stops.
  if (Status st = finish_checkpoint(); !st.ok()) log_unwritten(st);
  if (resume_step_ >= 0) {
    const fs::path path = out_ / "metrics.jsonl";
    int64_t last = -1;
    if (Status st = trim_metrics(path, resume_step_, &last); !st.ok()) {
      // Its records past the checkpoint stay: the resumed run's records up to the last of
      // them are not appended, so that no step is logged twice.
      skip_through_ = last;
      log_error("train",
                st.message() + (last < 0 ? std::string(" (appending after it)")
                                         : ": its records up to step " + std::to_string(last) +
                                               " stay as they are, and this run "
                                               "appends only later ones"));
    }
    const bool cut = !ends_with_newline(path);  // a half line a failed trim kept
    metrics_.open(path, std::ios::app);
    if (!metrics_) log_error("train", "cannot append to " + path.string());
    if (cut) metrics_ << "\n";  // it stays alone
    resume_step_ = -1;
  }
  GroupTimes tot;
  json groups = json::array();
  for (size_t i = 0; i < r.group_times.size(); ++i) {
    const GroupTimes& t = r.group_times[i];
    tot.compute += t.compute;
    tot.comm += t.comm;
    tot.wait += t.wait;
    tot.preempted += t.preempted;
    json g = times_json(t);
    g["id"] = i;
    g["steps"] = r.group_steps[i];
    groups.push_back(g);
  }
  json j = {{"wall_seconds", r.wall_seconds},
            {"train_seconds", r.train_seconds},
            {"eval_seconds", r.eval_seconds},
            {"epoch", r.epoch},
            {"step", r.step},
            {"images", r.images},
            {"train_loss", r.train_loss},
            {"test_loss", r.test_loss},
            {"test_accuracy", r.test_accuracy},
            {"test_images", r.test_images},
            {"images_per_second", r.images_per_second},
            {"compute_seconds", tot.compute},
            {"comm_seconds", tot.comm},
            {"wait_seconds", tot.wait},
            {"preempted_seconds", tot.preempted},
            {"staleness_mean", r.staleness_mean},
            {"staleness_max", r.staleness_max},
            {"groups", groups}};
  if (!clock_.empty()) j["clock"] = clock_;  // train_seconds and the groups' times: simulated
  last_step_ = r.step;
  last_accuracy_ = r.test_accuracy;
  if (r.step > skip_through_) {
    metrics_ << j.dump() << "\n";
    metrics_.flush();
  }
}

namespace {

// best.bin as the checkpoint just written: a second name of its file (a hard link, no bytes
// copied; a copy where the file system has none), put in place by a rename.
Status keep_as_best(const fs::path& checkpoint, const fs::path& best) {
  const fs::path tmp = best.string() + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(checkpoint, tmp, ec);
  if (ec) fs::copy_file(checkpoint, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, best, ec);
  if (!ec) return {};
  fs::remove(tmp, ec);
  return io_error("cannot write " + best.string() + " (the best evaluation's weights)");
}

}  // namespace

Status Writer::checkpoint(Checkpoint ck) {
  Status earlier = finish_checkpoint();
  // The checkpoint of an evaluation better than every one before: also best.bin.
  const bool best =
      !ck.mid_round && ck.iterations_done == last_step_ && last_accuracy_ > best_accuracy_;
  if (best) best_accuracy_ = last_accuracy_;
  pending_ =
      std::async(std::launch::async, [this, path = checkpoint_path_, ck = std::move(ck), best] {
        const auto t = std::chrono::steady_clock::now();
        Status st = write_checkpoint(path, ck);
        if (st.ok() && best) st = keep_as_best(path, out_ / "best.bin");
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
        checkpoint_write_seconds_ += s;  // read after the future is waited for
        log_debug("train", "checkpoint at step " + std::to_string(ck.iterations_done) +
                               " written in " + std::to_string(s * 1e3) + " ms");
        return st;
      });
  return earlier;
}

Status Writer::finish_checkpoint() {
  if (!pending_.valid()) return {};
  return pending_.get();
}

Status Writer::write_summary(const TrainSummary& s) {
  if (Status st = finish_checkpoint(); !st.ok()) log_unwritten(st);
  json j = summary_json(s, config_);
  j["checkpoint_write_seconds"] = checkpoint_write_seconds_;
  if (!write_atomic(out_ / "summary.json", j.dump(2) + "\n"))
    return io_error("cannot write " + (out_ / "summary.json").string());
  return {};
}

}  // namespace easel::run_dir
