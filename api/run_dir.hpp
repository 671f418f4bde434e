// The run directory of a Run with an `out` setting (include/easel/run.hpp describes its files):
// the checks before a run (the directory, a resumed run's checkpoint and settings) and the
// writer of config.json, metrics.jsonl, checkpoint.bin, best.bin and summary.json. Internal to api/
// (never installed); under MPI only rank 0 writes.
#pragma once

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nets/data/dataset.hpp"
#include "run/checkpoint.hpp"
#include "run/train_config.hpp"
#include "run/trainer.hpp"

namespace easel::run_dir {

// The settings' texts as given (Config::set), one per entry of train_settings(): config.json
// keeps a text setting as given, not as the run reads it back.
using SettingTexts = std::vector<std::string>;
SettingTexts default_texts();

// Writes text to path atomically: a temporary file beside it, then a rename; on failure the
// file is as it was and no temporary is left. False on failure.
bool write_atomic(const std::filesystem::path& path, const std::string& text);

// config.json: every setting a resumed run takes from it, keyed by its name.
nlohmann::json config_json(const TrainConfig& cfg, const SettingTexts& texts);

// The settings a resumed run may not change, as JSON text (TrainConfig::settings: part of a
// checkpoint's identity).
std::string fixed_settings(const TrainConfig& cfg, const SettingTexts& texts);

// `resume`: reads the checkpoint after checking that the run may go on from it here; cfg.out
// becomes the run's directory. Errors name the setting and the file.
Status read_resume(TrainConfig& cfg, const SettingTexts& texts, std::optional<Checkpoint>* ck);

// Whether `out` may take this run's results (never an earlier run's, unless overwrite).
Status check_out(const TrainConfig& cfg, bool resumed);

// The data set of cfg's `data`, placed as `placement` says (GPU groups: in pinned host memory
// unless placement is given, so that each batch is copied to the GPU asynchronously).
Result<DataSplit> load_train_data(const TrainConfig& cfg, const SettingTexts& texts);

// config.json as (name, text) pairs of Config::set; errors name the file and key.
Result<std::vector<std::pair<std::string, std::string>>> read_settings(const std::string& dir);

// The files of one run, written by the process that writes (rank 0).
class Writer {
 public:
  // prepare(): creates `out` and its files for this run, once the trainer has accepted it
  // (TrainObserver::on_start: a refused run, or a refused resume, leaves `out` as it was): a
  // fresh run's metrics.jsonl and config.json (the earlier run's checkpoint and summary go, so
  // that a run that fails leaves no results of another beside its own); a resumed run's
  // config.json is rewritten and its metrics.jsonl appended to at the first evaluation.
  Status prepare(const TrainConfig& cfg, nlohmann::json config, const Checkpoint* resume);
  // One metrics.jsonl record (a resumed run's first trims the file to the checkpoint's step).
  void record(const EvalRecord& r);
  bool wants_checkpoints() const { return !checkpoint_path_.empty(); }
  // Hands ck to a thread of its own that writes it (write_checkpoint: a temporary file, fsync,
  // rename over checkpoint.bin) while training goes on, once the write before it has ended: one
  // write in flight (the trainer waits for it, finish_checkpoint, before its next snapshot: one
  // checkpoint in memory). The next record() waits for it (a
  // checkpoint lands before any later step is logged). The checkpoint of an evaluation whose
  // test accuracy beats every earlier one's (the record() just before it, at its step) is kept
  // as best.bin too, after checkpoint.bin is whole (keep_as_best: a second name of its file).
  // Returns the earlier write's error, if it failed (the checkpoint before it is still whole).
  Status checkpoint(Checkpoint ck);
  // Waits for the write in flight, if any; its error, if it failed.
  Status finish_checkpoint();
  // After finish_checkpoint (a failed last write is logged): summary.json, with the writes'
  // time beside the run's.
  Status write_summary(const TrainSummary& s);

 private:
  std::filesystem::path out_;
  nlohmann::json config_;
  std::string clock_;  // --clock: each record says its seconds are that machine's (simulated)
  std::ofstream metrics_;
  std::string checkpoint_path_;  // empty: none
  int64_t resume_step_ = -1;     // >= 0: resumed from that step, metrics.jsonl not yet opened
  int64_t skip_through_ = -1;    // records up to this step are in metrics.jsonl already
  double checkpoint_write_seconds_ = 0;  // the finished writes' time (off training's path)
  int64_t last_step_ = -1;               // the latest record()'s step and test accuracy
  double last_accuracy_ = 0;
  double best_accuracy_ = -1;  // best.bin's evaluation's; -1: none yet
  // Declared last, destroyed first: its destructor waits for the write in flight.
  std::future<Status> pending_;
};

}  // namespace easel::run_dir
