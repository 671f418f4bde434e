// The `train` settings: TrainConfig, the typed configuration the trainer receives, and the one
// table that declares every setting (train_settings()). A setting's entry gives its name (the
// flag `--NAME`, the config file's key NAME and its key in a run's config.json), the type of its
// value, the subcommands that take it, what a resumed run may do with it and its help; the
// field's initializer below is its default. The front end (tools/) builds the flags, reads the
// config file and config.json, and applies the resume rule from the table alone.
// Adding a setting: its field here, one line in the table (train_config.cpp), its use.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algos/algorithm.hpp"
#include "algos/list.hpp"
#include "algos/schedule.hpp"
#include "algos/sync_easgd.hpp"
#include "devices/list.hpp"
#include "engine/comm/comm.hpp"
#include "engine/log.hpp"
#include "engine/memory.hpp"
#include "engine/tensor.hpp"
#include "engine/topology.hpp"
#include "nets/data/augment.hpp"

namespace easel {

enum class MomentumForm { nesterov, heavy_ball };
enum class Progress { automatic, bar, lines, none };  // automatic: a bar on a terminal

// The learning rate each algorithm runs with when --lr is auto (its default): its list row's
// (AlgoEntry::default_lr); 0 for a name that is not an algorithm (validate_config refuses it).
double default_lr(std::string_view algo);
// --tau auto's period: the row's default_tau; 1 for a name that is not an algorithm.
int64_t default_tau(std::string_view algo);
// Every algorithm's default rate, in the list's order.
struct AlgoLr {
  std::string_view algo;
  double lr;
};
extern const std::vector<AlgoLr> kAlgoDefaultLr;

// Defaults are those of Caffe's LeNet solver with the paper's default algorithm on all cores,
// but the learning rate, which is each algorithm's own (default_lr).
struct TrainConfig {
  std::string net = "lenet";
  std::string data = "fashion-mnist";
  Augment augment;  // none: the bytes scaled by kPixelScale, as before augmentation existed
  std::string algo = kDefaultAlgo;
  double epochs = 10;      // used when iterations == 0
  int64_t iterations = 0;  // iterations of the run (each group steps once per iteration)
  int64_t batch = 64;      // per group
  double lr = default_lr(kDefaultAlgo);
  bool lr_auto = true;  // --lr auto: lr follows --algo (default_lr), set with either
  LrSchedule::Policy lr_policy = LrSchedule::Policy::inv;
  double lr_gamma = 1e-4, lr_power = 0.75;
  int64_t lr_stepsize = 1000;
  int64_t lr_warmup = 0;  // iterations of a linear ramp up to the policy's rate (0: none)
  double momentum = 0.9;
  double weight_decay = 5e-4;
  uint64_t seed = 1;
  PlanRequest plan;            // --groups, --threads-per-group, --threads, --cpus, --oversubscribe
  Placement placement;         // everything in dram; on --clock the described machine's
  double target_accuracy = 0;  // 0: none; stop when the test accuracy reaches it
  int64_t eval_every = 0;      // iterations between evaluations; 0: once per epoch
  int64_t eval_images = 0;     // test images per evaluation, spread over the set; 0: all
  std::string out;             // output directory; empty: runs/<date>-<time>-<algo>
  bool overwrite = false;      // allow an --out that already holds results
  std::optional<Layout> layout;  // nullopt: auto (nhwc on the CPU, nchw on GPUs)
  ImplChoice impl = ImplChoice::fast;
  Precision precision = Precision::fp32;  // arithmetic of the fast kernels
  DeviceRequest device;                   // the CPU
  // EASGD and friends (DESIGN.md 4)
  // The elastic moving rate: alpha = lr * rho when rho >= 0 is given, a fixed alpha when
  // alpha >= 0 is given, else the EASGD paper's choice beta = P * alpha = 0.9.
  double rho = -1;
  double alpha = -1;
  int64_t tau = 1;
  bool tau_auto = true;  // --tau auto: tau follows --algo (its row's default_tau)
  MomentumForm momentum_form = MomentumForm::nesterov;
  ReduceMode reduce = ReduceMode::tree;
  PackMode pack = PackMode::single;
  bool overlap = false;
  CollectiveAlgo collective = CollectiveAlgo::automatic;
  SyncExchange exchange = SyncExchange::automatic;  // sync-easgd's exchange code (--exchange)
  SyncCentre sync_centre = SyncCentre::automatic;   // sync-easgd's centre (--sync-centre)
  // What a group's failure does (--on-failure; algos/algorithm.hpp OnFailure): auto resolves per
  // algorithm in the run's build (drop where it survives a lost group, else stop).
  OnFailure on_failure = OnFailure::automatic;
  // local-sgd, slowmo, diloco (algos/periodic.hpp)
  Optimizer optimizer = Optimizer::msgd;  // the groups' own steps
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  double outer_lr = -1, outer_momentum = -1;  // -1: the algorithm's own (its list row)
  ExchangePrecision exchange_precision = ExchangePrecision::fp32;
  Progress progress = Progress::automatic;
  bool prefetch = true;
  bool skip_bad_images = false;  // a bad image of a streamed set is skipped, not fatal
  // Threads preparing each group's batches (with prefetch): oneTBB's pipeline where easel has
  // it, else one helper thread. 0: one per group. They run on the cores no group uses, else
  // on their group's own.
  int data_threads = 0;
  // Tar shards (--data shards:...): each group reads its own shards through a shuffle buffer
  // of this many samples (BatchStream); 0: the members at random, as an image folder's; -1:
  // kDefaultShuffleBuffer. Refused for any other set.
  int64_t shuffle_buffer = -1;
  bool checkpoint = true;  // write --out/checkpoint.bin after every evaluation
  // Evaluations between checkpoints (1: every one); 0: auto, Young/Daly's interval
  // sqrt(2 C M) from the measured blocking cost C of a checkpoint and mtbf_seconds M.
  int64_t checkpoint_every = 1;
  double mtbf_seconds = 0;  // > 0 with checkpoint_every auto only
  // --stall-timeout: the deadline (seconds) of a group's step and of every bounded wait; 0: from
  // the performance model (run_plan.cpp, stall_deadline), else EASEL_STALL_TIMEOUT, else 300.
  double stall_timeout = 0;
  std::string resume;                 // a run's --out to continue from
  std::optional<LogLevel> log_level;  // nullopt: EASEL_LOG or info
  // A Chrome trace-event timeline of the run (engine/trace.hpp, docs/TRACE.md); empty: none.
  // Each group's track keeps its first trace_steps steps whole, then every trace_every-th step
  // (at most kTraceSampledSteps of them: past that the period doubles).
  std::string trace;
  // `--clock FILE`: a machine description (tools/machines; a name or a file) whose clock the run
  // keeps (run/sim_clock.hpp): each step and exchange costs what the model prices for it, the
  // async algorithms' groups act in the order of their simulated times, and the records carry
  // simulated seconds. Empty: the run's own wall clock.
  std::string clock;
  int64_t trace_steps = 20;
  int64_t trace_every = 100;
  // Every other setting that fixes the run, as its front end writes them (easel train: the
  // config.json keys a resumed run may not change, as JSON); part of a checkpoint's identity.
  std::string settings;
};

// The type of a setting's value in a config file and in config.json.
enum class SettingType { text, integer, real, boolean };

// The subcommands that take a setting (bits).
// easel model and easel plan take the settings that the performance model prices
// (tools/cli/model_cmd.cpp).
enum SettingCommand : unsigned {
  kTrainCommand = 1,
  kTopologyCommand = 2,
  kModelCommand = 4,
  kPlanCommand = 8
};

// What `easel train --resume DIR` does with a setting.
enum class OnResume {
  fixed,       // kept in config.json; the run takes it from there and refuses the flag
  changeable,  // kept in config.json; the run takes it from there unless the flag is given
  per_run,     // not kept; every run, a resumed one too, gives its own
  fresh_only,  // not kept; refused with --resume (only a fresh run takes it)
};

struct Setting;

// How a setting's text becomes its field and back.
struct SettingField {
  SettingType type;
  // Sets the field from text; errors name the flag (s.name) and the value.
  Status (*parse)(const Setting& s, std::string_view text, TrainConfig& cfg);
  // The field as text that parse reads back to the same value (--help's default).
  std::string (*show)(const TrainConfig& cfg);
  // The values it takes when they are a fixed list of names (shell completion); else nullptr.
  std::vector<std::string> (*names)() = nullptr;
};

struct Setting {
  const char* name;  // without dashes: the flag, the config file's key, config.json's key
  SettingField field;
  unsigned commands;  // SettingCommand bits
  OnResume on_resume;
  const char* help;
  const char* negation = nullptr;  // a boolean's second flag, which sets it false
  // The default as the flag shows and takes it, when it is not the field's value (--lr's auto);
  // nullptr: show(TrainConfig{}).
  const char* shown_default = nullptr;

  // In config.json (and, unless it may change, in a checkpoint's identity).
  bool kept() const { return on_resume == OnResume::fixed || on_resume == OnResume::changeable; }
  // Its flag may be given with --resume.
  bool may_change() const {
    return on_resume != OnResume::fixed && on_resume != OnResume::fresh_only;
  }
  bool takes(unsigned command) const { return (commands & command) != 0; }
  std::string default_text() const {
    return shown_default ? shown_default : field.show(TrainConfig{});
  }
};

// Every setting, in --help order.
std::span<const Setting> train_settings();
// The setting named `name` (or whose negation it is); nullptr when there is none.
const Setting* find_setting(std::string_view name);
// Sets one setting of cfg from its text (as a flag would); errors name the flag.
Status set_setting(TrainConfig& cfg, std::string_view name, std::string_view text);

// Checks the ranges and the rules between fields, without touching the machine or the data
// (train() expects a config that passed it). Errors name the flag.
Status validate_config(const TrainConfig& cfg);

// Where this process puts its buffers: --placement, but on --clock, whose --placement is the
// described machine's (the clock prices it), DRAM: this machine's memory is not what is timed.
Placement host_placement(const TrainConfig& cfg);

// The algorithms' parameters for a run of `total_iterations` on `groups` groups (P).
// Requires a validated cfg.
AlgoParams make_params(const TrainConfig& cfg, int64_t total_iterations, int groups);
// sync_switches(cfg, ranks, on_devices) (algos/sync_easgd.hpp): the switches sync-easgd's
// exchange path depends on, as cfg sets them.

// The layout of the activations: --layout, or auto's choice (nhwc on the CPU for oneDNN's
// brgemm convolutions, nchw on GPUs for cuDNN's native fp32 layout).
Layout resolve_layout(const TrainConfig& cfg);

}  // namespace easel
