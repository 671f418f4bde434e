#include "run/train_config.hpp"
#include "algos/sync_easgd.hpp"
#include "devices/cpu/cpu_precision.hpp"
#include "run/train_run.hpp"

#include "engine/comm/collectives/list.hpp"
#include "engine/trace.hpp"
#include "nets/data/batch_stream.hpp"
#include "nets/models/models.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace easel {

namespace {

// ---- how a text becomes a field ----------------------------------------------------------

// The field at the end of a member path: (cfg.*P1).*P2 ...
template <auto... P>
decltype(auto) at(TrainConfig& c) {
  return (c.*....*P);
}
template <auto... P>
decltype(auto) at(const TrainConfig& c) {
  return (c.*....*P);
}

Status bad_value(const Setting& s, std::string_view text, const char* what) {
  return invalid_argument("--" + std::string(s.name) + ": '" + std::string(text) + "' is not " +
                          what);
}

// A number, the whole text, read as the flag parser read it before (strtold, then rounded).
Status read_real(const Setting& s, std::string_view text, double* v) {
  const std::string t(text);
  char* end = nullptr;
  *v = t.empty() ? 0 : static_cast<double>(std::strtold(t.c_str(), &end));
  if (t.empty() || end != t.c_str() + t.size()) return bad_value(s, text, "a number");
  return {};
}

// A whole number that fits in T, the whole text, read as the flag parser read it before
// (strtoll with base 0: 0x1f and 017 too).
template <typename T>
Status read_integer(const Setting& s, std::string_view text, T* v) {
  const std::string t(text);
  char* end = nullptr;
  errno = 0;
  const long long x = t.empty() ? 0 : std::strtoll(t.c_str(), &end, 0);
  if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE ||
      x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
    return bad_value(s, text, "a whole number in range");
  *v = static_cast<T>(x);
  return {};
}

// Shortest of %g (what --help showed before) and %.17g that reads back to v.
std::string show_real(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

template <auto... P>
constexpr SettingField text() {
  return {SettingType::text,
          [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
            at<P...>(c) = std::string(t);
            return {};
          },
          [](const TrainConfig& c) -> std::string { return at<P...>(c); }};
}

template <auto... P>
constexpr SettingField integer() {
  return {SettingType::integer,
          [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
            return read_integer(s, t, &at<P...>(c));
          },
          [](const TrainConfig& c) -> std::string { return std::to_string(at<P...>(c)); }};
}

template <auto... P>
constexpr SettingField real() {
  return {SettingType::real,
          [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
            return read_real(s, t, &at<P...>(c));
          },
          [](const TrainConfig& c) -> std::string { return show_real(at<P...>(c)); }};
}

// true or false (what a flag, a config file's boolean and config.json's give).
template <auto... P>
constexpr SettingField boolean() {
  return {SettingType::boolean,
          [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
            if (t != "true" && t != "false") return bad_value(s, t, "true or false");
            at<P...>(c) = t == "true";
            return {};
          },
          [](const TrainConfig& c) -> std::string { return at<P...>(c) ? "true" : "false"; }};
}

template <typename E>
struct Name {
  E value;
  const char* name;
};

// One of a fixed list of names.
template <const auto& kNames, auto... P>
constexpr SettingField choice() {
  return {SettingType::text,
          [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
            std::string accepted;
            for (const auto& n : kNames) {
              if (t == n.name) {
                at<P...>(c) = n.value;
                return {};
              }
              accepted += (accepted.empty() ? "" : ", ") + std::string(n.name);
            }
            return invalid_argument("--" + std::string(s.name) + ": '" + std::string(t) +
                                    "' (accepted: " + accepted + ")");
          },
          [](const TrainConfig& c) -> std::string {
            for (const auto& n : kNames)
              if (at<P...>(c) == n.value) return n.name;
            return "?";
          },
          []() {
            std::vector<std::string> v;
            for (const auto& n : kNames)
              v.emplace_back(n.name);
            return v;
          }};
}

constexpr Name<MomentumForm> kMomentumForms[] = {{MomentumForm::nesterov, "nesterov"},
                                                 {MomentumForm::heavy_ball, "heavy-ball"}};
constexpr Name<ReduceMode> kReduceModes[] = {{ReduceMode::tree, "tree"},
                                             {ReduceMode::serial, "serial"}};
constexpr Name<PackMode> kPackModes[] = {{PackMode::single, "single"},
                                         {PackMode::per_layer, "per-layer"}};
constexpr Name<SyncExchange> kSyncExchanges[] = {{SyncExchange::automatic, "auto"},
                                                 {SyncExchange::comm, "comm"},
                                                 {SyncExchange::partitioned, "partitioned"},
                                                 {SyncExchange::mirrored, "mirrored"}};
constexpr Name<OnFailure> kOnFailures[] = {{OnFailure::automatic, "auto"},
                                           {OnFailure::stop, "stop"},
                                           {OnFailure::drop, "drop"},
                                           {OnFailure::restart, "restart"}};
constexpr Name<Optimizer> kOptimizers[] = {{Optimizer::msgd, "msgd"}, {Optimizer::adamw, "adamw"}};
constexpr Name<ExchangePrecision> kPrecisions[] = {{ExchangePrecision::fp32, "fp32"},
                                                   {ExchangePrecision::bf16, "bf16"},
                                                   {ExchangePrecision::int8, "int8"}};
constexpr Name<bool> kOnOff[] = {{true, "on"}, {false, "off"}};
constexpr Name<SyncCentre> kSyncCentres[] = {{SyncCentre::automatic, "auto"},
                                             {SyncCentre::master, "master"},
                                             {SyncCentre::allreduce, "allreduce"}};
constexpr Name<Progress> kProgress[] = {{Progress::automatic, "auto"},
                                        {Progress::bar, "bar"},
                                        {Progress::lines, "lines"},
                                        {Progress::none, "none"}};

// The fields whose names and messages come from the floor that owns the type.

constexpr SettingField kLrPolicy{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      EASEL_ASSIGN_OR_RETURN(c.lr_policy, parse_lr_policy(std::string(t)));
      return {};
    },
    [](const TrainConfig& c) -> std::string { return lr_policy_name(c.lr_policy); },
    []() {
      std::vector<std::string> v;
      for (LrSchedule::Policy p : kLrPolicies)
        v.emplace_back(lr_policy_name(p));
      return v;
    }};

// No sign, no wrap-around past 2^64 - 1.
constexpr SettingField kSeed{
    SettingType::integer,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      const bool digits = !t.empty() && t.size() <= 19 &&
                          t.find_first_not_of("0123456789") == std::string_view::npos;
      if (!digits)
        return invalid_argument("--seed: '" + std::string(t) +
                                "' is not a whole number from 0 to 10^19 - 1");
      const std::string text(t);  // as the flag parser read it before: strtoull with base 0
      char* end = nullptr;
      c.seed = std::strtoull(text.c_str(), &end, 0);
      if (end != text.c_str() + text.size())
        return invalid_argument("--seed: '" + text +
                                "' is not a whole number (a leading 0 reads "
                                "it as octal)");
      return {};
    },
    [](const TrainConfig& c) -> std::string { return std::to_string(c.seed); }};

constexpr SettingField kPlacement{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      auto p = parse_placement(t);
      if (!p.ok()) return invalid_argument("--" + p.status().message());  // "placement..."
      c.placement = *p;
      return {};
    },
    [](const TrainConfig& c) -> std::string { return placement_text(c.placement); }};

constexpr SettingField kLayout{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      if (t == "auto")
        c.layout.reset();
      else if (t == "nchw")
        c.layout = Layout::nchw;
      else if (t == "nhwc")
        c.layout = Layout::nhwc;
      else
        return invalid_argument("--layout: unknown layout '" + std::string(t) +
                                "' (accepted: auto, nchw, nhwc)");
      return {};
    },
    [](const TrainConfig& c) -> std::string {
      return !c.layout ? "auto" : *c.layout == Layout::nchw ? "nchw" : "nhwc";
    }};

// --groups, parsed here once (engine/topology.hpp's GroupCount).
constexpr SettingField kGroups{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      EASEL_ASSIGN_OR_RETURN(c.plan.groups, parse_group_count(t));
      return {};
    },
    [](const TrainConfig& c) -> std::string { return c.plan.groups.text(); }};

constexpr SettingField kImpl{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      EASEL_ASSIGN_OR_RETURN(c.impl, parse_impl_choice(std::string(t)));
      return {};
    },
    [](const TrainConfig& c) -> std::string { return c.impl == ImplChoice::ref ? "ref" : "fast"; }};

constexpr SettingField kPrecision{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      EASEL_ASSIGN_OR_RETURN(c.precision, parse_precision(std::string(t)));
      return {};
    },
    [](const TrainConfig& c) -> std::string { return precision_name(c.precision); }};

constexpr SettingField kDevice{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      EASEL_ASSIGN_OR_RETURN(c.device, parse_device(std::string(t)));
      return {};
    },
    [](const TrainConfig& c) -> std::string { return device_text(c.device); }};

// nets/data/augment.hpp's text; its errors begin "augment '...'", so "--" names the flag.
constexpr SettingField kAugment{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      auto a = parse_augment(t);
      if (!a.ok()) return invalid_argument("--" + a.status().message());
      c.augment = std::move(a).value();
      return {};
    },
    [](const TrainConfig& c) -> std::string { return augment_text(c.augment); }};

// --collective: a row of engine/comm/collectives/list.cpp, by name.
constexpr SettingField kCollective{
    SettingType::text,
    [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
      const CollectiveEntry* e = find_collective(t);
      if (e == nullptr)
        return invalid_argument("--" + std::string(s.name) + ": '" + std::string(t) +
                                "' (accepted: " + collective_names() + ")");
      c.collective = e->algo;
      return {};
    },
    [](const TrainConfig& c) -> std::string { return collective_algo_name(c.collective); },
    []() {
      std::vector<std::string> v;
      for (const CollectiveEntry& e : collective_list())
        v.emplace_back(e.name);
      return v;
    }};

// --algo; with --lr auto, the learning rate follows it (default_lr), whichever is set first.
constexpr SettingField kAlgo{SettingType::text,
                             [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
                               c.algo = std::string(t);
                               if (c.lr_auto) c.lr = default_lr(c.algo);
                               if (c.tau_auto) c.tau = default_tau(c.algo);
                               return {};
                             },
                             [](const TrainConfig& c) -> std::string { return c.algo; }};

// --lr: a number, or auto (the default): --algo's default_lr. Shown as the rate the run takes
// (config.json keeps the number).
constexpr SettingField kLr{SettingType::real,
                           [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
                             if (t == "auto") {
                               c.lr_auto = true;
                               c.lr = default_lr(c.algo);
                               return {};
                             }
                             double v = 0;
                             EASEL_RETURN_IF_ERROR(read_real(s, t, &v));
                             c.lr = v;
                             c.lr_auto = false;
                             return {};
                           },
                           [](const TrainConfig& c) -> std::string { return show_real(c.lr); }};

// --checkpoint-every: a whole number of evaluations, or auto (0 in the config; config.json keeps
// the text).
constexpr SettingField kCheckpointEvery{
    SettingType::text,
    [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
      if (t == "auto") {
        c.checkpoint_every = 0;
        return {};
      }
      int64_t v = 0;
      EASEL_RETURN_IF_ERROR(read_integer(s, t, &v));
      if (v < 1)
        return invalid_argument("--checkpoint-every: " + std::string(t) +
                                " must be >= 1 (evaluations between checkpoints) or auto");
      c.checkpoint_every = v;
      return {};
    },
    [](const TrainConfig& c) -> std::string {
      return c.checkpoint_every == 0 ? "auto" : std::to_string(c.checkpoint_every);
    }};

// --tau: a whole number, or auto (the default): --algo's default_tau (config.json keeps the
// number).
constexpr SettingField kTau{
    SettingType::integer,
    [](const Setting& s, std::string_view t, TrainConfig& c) -> Status {
      if (t == "auto") {
        c.tau_auto = true;
        c.tau = default_tau(c.algo);
        return {};
      }
      int64_t v = 0;
      EASEL_RETURN_IF_ERROR(read_integer(s, t, &v));
      c.tau = v;
      c.tau_auto = false;
      return {};
    },
    [](const TrainConfig& c) -> std::string { return std::to_string(c.tau); }};

// --lr's help: the rule and every algorithm's default.
std::string lr_help() {
  std::string h = "base learning rate eta, or auto: the algorithm's own (";
  for (const AlgoEntry& a : algo_list())
    h += std::string(a.name) + " " + show_real(a.default_lr) + ", ";
  h.resize(h.size() - 2);
  return h + "; docs/RESULTS.md)";
}
const std::string kLrHelp = lr_help();

// Empty: EASEL_LOG or info.
constexpr SettingField kLogLevel{
    SettingType::text,
    [](const Setting&, std::string_view t, TrainConfig& c) -> Status {
      LogLevel level;
      if (t.empty()) {
        c.log_level.reset();
      } else if (parse_log_level(t, &level)) {
        c.log_level = level;
      } else {
        return invalid_argument("--log-level: unknown level '" + std::string(t) +
                                "' (accepted: debug, info, warn, error)");
      }
      return {};
    },
    [](const TrainConfig& c) -> std::string {
      return c.log_level ? log_level_name(*c.log_level) : "";
    }};

// ---- the table -----------------------------------------------------------------------------

using T = TrainConfig;
using R = OnResume;
constexpr unsigned kTrain = kTrainCommand, kBoth = kTrainCommand | kTopologyCommand;
constexpr unsigned kModel = kModelCommand, kPlan = kPlanCommand;

// clang-format off
const Setting kSettings[] = {
  {"net", text<&T::net>(), kBoth | kModel | kPlan, R::fixed,
   "a built-in net (easel list: lenet, resnet18, ...) or a net description file (a path with a "
   "'/' or ending in .toml), or an ONNX file ending in .onnx, its weights the initial ones "
   "(docs/NETS.md)"},
  {"data", text<&T::data>(), kBoth, R::fixed,
   "fashion-mnist, mnist, synthetic[:N[:CxHxW[:classes]]], or a directory: IDX files, "
   "CIFAR-10/100 binary, or an image folder (DIR[:SIDE], default 224)"},
  {"augment", kAugment, kTrain, R::fixed,
   "training-time augmentation: none, or comma-separated crop-pad=N (random crop after zero "
   "padding), flip (random horizontal flip), normalize=NAME (cifar10, cifar100, imagenet, "
   "mnist, fashion-mnist) or mean=M/M/M,std=S/S/S; e.g. crop-pad=4,flip,normalize=cifar10 "
   "(the test set is normalised alike)"},
  {"algo", kAlgo, kBoth | kModel | kPlan, R::fixed,
   "algorithm (easel list; one-group algorithms plan one group)"},
  {"epochs", real<&T::epochs>(), kTrain, R::changeable,
   "epochs to train (ignored when --iterations > 0)"},
  {"iterations", integer<&T::iterations>(), kTrain, R::changeable,
   "iterations to train (each group steps once per iteration)"},
  {"batch", integer<&T::batch>(), kBoth | kModel | kPlan, R::fixed, "mini-batch size per group"},
  {"lr", kLr, kTrain, R::fixed, kLrHelp.c_str(), nullptr, "auto"},
  {"lr-policy", kLrPolicy, kTrain, R::fixed,
   "fixed, step, inv, exp, poly (Caffe's definitions), or cosine: base * (1 + cos(pi * t)) / 2, "
   "t the share of the run after the warmup (0 at the end; algos/schedule.hpp)"},
  {"lr-gamma", real<&T::lr_gamma>(), kTrain, R::fixed, "gamma of the step, inv and exp policies"},
  {"lr-power", real<&T::lr_power>(), kTrain, R::fixed, "power of the inv and poly policies"},
  {"lr-stepsize", integer<&T::lr_stepsize>(), kTrain, R::fixed,
   "iterations per step of the step policy"},
  {"lr-warmup", integer<&T::lr_warmup>(), kTrain, R::fixed,
   "iterations of a linear warmup before any policy: iteration i < N takes the policy's rate "
   "times (i + 1) / N (0: none)"},
  {"momentum", real<&T::momentum>(), kTrain, R::fixed,
   "momentum mu (msgd, sync-sgd, async-msgd) or the groups' delta (async-measgd, sync-easgd)"},
  {"weight-decay", real<&T::weight_decay>(), kTrain, R::fixed, "L2 weight decay"},
  {"seed", kSeed, kTrain, R::fixed, "seed of the initial weights, shuffling and dropout"},
  {"groups", kGroups, kBoth | kModel, R::changeable,
   "worker groups: a count, 'auto' (one per core) or 'numa' (on --resume, only the EASGD "
   "algorithms may change it, new groups starting from the centre, and local-sgd, slowmo and "
   "diloco from a checkpoint at a meeting, from the anchor)"},
  {"threads-per-group", integer<&T::plan, &PlanRequest::threads_per_group>(), kBoth | kModel, R::fixed,
   "threads in each group (0: derive)"},
  {"threads", integer<&T::plan, &PlanRequest::threads>(), kBoth, R::fixed,
   "total threads (0: all cores; with --groups or --cpus it must agree)"},
  {"cpus", text<&T::plan, &PlanRequest::cpu_lists>(), kBoth, R::fixed,
   "explicit cpu list per group, e.g. '0-3;4-7' (sets the groups and their threads)"},
  {"oversubscribe", boolean<&T::plan, &PlanRequest::oversubscribe>(), kBoth, R::fixed,
   "allow more threads than cores"},
  {"placement", kPlacement, kBoth | kModel, R::fixed,
   "memory kind per buffer class: KIND or CLASS=KIND,... (classes: all, centre, weights, grads, "
   "momentum, activations, dataset; kinds: dram, hbw, hbw-preferred, interleave, and with "
   "--device cuda pinned-host for the data set)"},
  {"target-accuracy", real<&T::target_accuracy>(), kTrain, R::changeable,
   "stop when the test accuracy reaches it (0: never)"},
  {"eval-every", integer<&T::eval_every>(), kTrain, R::changeable,
   "iterations between test evaluations (0: once per epoch)"},
  {"eval-images", integer<&T::eval_images>(), kTrain, R::changeable,
   "test images per evaluation, spread evenly over the test set (0: all of it; for quick runs: "
   "the accuracy is that of the part)"},
  {"out", text<&T::out>(), kTrain, R::fresh_only, "output directory (default runs/DATE-TIME-ALGO)"},
  {"overwrite", boolean<&T::overwrite>(), kTrain, R::fresh_only,
   "allow --out to hold the results of an earlier run"},
  {"layout", kLayout, kTrain, R::fixed,
   "activation layout: auto (nhwc on the CPU, nchw on GPUs), nhwc or nchw"},
  {"impl", kImpl, kTrain, R::fixed, "kernels: fast (oneDNN, reference fallback) or ref"},
  {"precision", kPrecision, kTrain, R::fixed,
   "fast-kernel arithmetic: fp32, tf32 (GPUs' tensor cores) or bf16 (bf16 compute; f32 "
   "master weights, gradients, momentum, exchange)"},
  {"device", kDevice, kBoth, R::fixed,
   "where the groups run: cpu, cuda (one worker group per GPU; sgd and msgd: the first) or "
   "cuda:0,1,... (one group per GPU listed; cuda:0,0: two groups on GPU 0)"},
  {"rho", real<&T::rho>(), kTrain, R::fixed,
   "EASGD elastic coefficient rho: alpha = lr * rho (-1: unset)"},
  {"alpha", real<&T::alpha>(), kTrain, R::fixed,
   "fixed EASGD moving rate alpha (-1: unset; both unset: alpha = 0.9 / groups)"},
  {"tau", kTau, kTrain | kModel | kPlan, R::fixed,
   "communication period (steps between exchanges) of the EASGD family, local-sgd, slowmo and "
   "diloco, or auto: the algorithm's own (local-sgd 8, slowmo 8, diloco 16, others 1)",
   nullptr, "auto"},
  {"optimizer", choice<kOptimizers, &T::optimizer>(), kTrain, R::fixed,
   "the groups' own steps in local-sgd, slowmo and diloco: msgd (--momentum; 0: plain SGD) or "
   "adamw (--adam-beta1, --adam-beta2, --adam-epsilon; --weight-decay decoupled)"},
  {"adam-beta1", real<&T::adam_beta1>(), kTrain, R::fixed, "AdamW's beta1"},
  {"adam-beta2", real<&T::adam_beta2>(), kTrain, R::fixed, "AdamW's beta2"},
  {"adam-epsilon", real<&T::adam_epsilon>(), kTrain, R::fixed, "AdamW's epsilon"},
  {"outer-lr", real<&T::outer_lr>(), kTrain, R::fixed,
   "the outer step's rate: slowmo's alpha (1), diloco's Nesterov rate (0.7); -1: the algorithm's"},
  {"outer-momentum", real<&T::outer_momentum>(), kTrain, R::fixed,
   "the outer momentum: slowmo's beta (0.5), diloco's Nesterov mu (0.9); -1: the algorithm's"},
  {"exchange-precision", choice<kPrecisions, &T::exchange_precision>(), kTrain | kModel | kPlan, R::fixed,
   "what local-sgd, slowmo and diloco send: fp32, bf16 or int8 (a scale per 256 floats, with "
   "error feedback)"},
  {"momentum-form", choice<kMomentumForms, &T::momentum_form>(), kTrain, R::fixed,
   "group momentum of async-measgd and sync-easgd: nesterov or heavy-ball"},
  {"reduce", choice<kReduceModes, &T::reduce>(), kTrain | kModel, R::fixed,
   "sync-easgd exchange: tree (collective) or serial (P exchanges)"},
  {"pack", choice<kPackModes, &T::pack>(), kTrain | kModel, R::fixed,
   "exchange: single (one message over the arena) or per-layer"},
  {"overlap", choice<kOnOff, &T::overlap>(), kTrain | kModel, R::fixed,
   "sync-easgd: overlap the centre exchange with the next step (on/off)"},
  {"exchange", choice<kSyncExchanges, &T::exchange>(), kTrain | kModel, R::fixed,
   "sync-easgd's exchange code: auto (the fastest that applies), comm (the Comm's, which "
   "--reduce, --pack and --overlap switch), partitioned or mirrored (one process, CPU)"},
  {"sync-centre", choice<kSyncCentres, &T::sync_centre>(), kTrain | kModel, R::fixed,
   "sync-easgd's centre: master (reduce into one group, which broadcasts Wc), allreduce (every "
   "process updates its copy of Wc from the allreduced sum, no broadcast), auto (allreduce "
   "across MPI ranks on the CPU, else master)"},
  {"collective", kCollective, kTrain | kModel, R::fixed,
   "the exchange's collective algorithm: auto (the cheapest by the latency-bandwidth model for "
   "the arena, ranks and ranks per node, said in the log), tree, ring, halving-doubling, "
   "hierarchical, or mpi (the MPI library's own; not bit for bit across layouts)"},
  {"progress", choice<kProgress, &T::progress>(), kTrain, R::per_run, "auto, bar, lines or none"},
  {"prefetch", boolean<&T::prefetch>(), kTrain, R::changeable,
   "prepare batches ahead, off the groups' threads", "no-prefetch"},
  {"skip-bad-images", boolean<&T::skip_bad_images>(), kTrain, R::changeable,
   "a streamed image folder or shards: skip an unreadable, corrupt or truncated image, a "
   "broken shard's rest or a bad class file (counted in summary.json skipped_images, the first "
   "ten named in the log) instead of exiting with code 2"},
  {"data-threads", integer<&T::data_threads>(), kTrain, R::changeable,
   "threads preparing each group's batches with --prefetch (oneTBB pipeline; 0: one), on the "
   "cores no group uses, else on the group's own"},
  {"shuffle-buffer", integer<&T::shuffle_buffer>(), kTrain, R::fixed,
   "tar shards (--data shards:...): each group reads its own shards, each in order, through a "
   "shuffle buffer of N samples (WebDataset's; -1: 1000); 0: the samples read at random and "
   "shuffled over the whole list, as an image folder's"},
  {"on-failure", choice<kOnFailures, &T::on_failure>(), kTrain, R::changeable,
   "what a group that fails (its thread throws; with drop or restart also a non-finite train "
   "loss) does to the run: stop (every group stops), drop (the group leaves, the others go on), "
   "restart (it re-enters from the centre, or local-sgd's, slowmo's and diloco's next average, "
   "momentum zero), or auto: drop for the async centre algorithms and local-sgd, slowmo and "
   "diloco in one process, stop for the others (docs/FAULTS.md)"},
  {"checkpoint", boolean<&T::checkpoint>(), kTrain, R::changeable,
   "write checkpoint.bin to --out after every evaluation (for --resume)", "no-checkpoint"},
  {"checkpoint-every", kCheckpointEvery, kTrain, R::changeable,
   "evaluations between checkpoints (the last evaluation and a signal's stop always write one), "
   "or auto: at the first evaluation past Young/Daly's interval sqrt(2 C M), C the measured "
   "cost a checkpoint takes from training, M --mtbf; written by a background thread"},
  {"mtbf", real<&T::mtbf_seconds>(), kTrain, R::changeable,
   "with --checkpoint-every auto: the mean time between failures the run expects, in seconds "
   "(e.g. 86400 for one a day)"},
  {"stall-timeout", real<&T::stall_timeout>(), kTrain, R::changeable,
   "seconds a group may go without a step, or wait for the others, before it is stalled "
   "(--on-failure: stopped, dropped or restarted); default: 10x the model's step and exchange "
   "of this machine's calibration, at least 30 s, else EASEL_STALL_TIMEOUT, else 300"},
  {"resume", text<&T::resume>(), kTrain, R::per_run,
   "continue the run in this directory (an earlier --out) from its checkpoint.bin, with its "
   "config.json; only the flags marked 'may change on --resume' may change"},
  {"log-level", kLogLevel, kTrain, R::per_run,
   "debug, info, warn, error (default: EASEL_LOG or info)"},
  {"trace", text<&T::trace>(), kTrain, R::per_run,
   "write a Chrome trace-event timeline of the run to FILE.json, in --out when FILE has no '/' "
   "(Perfetto, chrome://tracing; "
   "under mpirun rank R > 0 writes FILE.rankR.json): a track per group, the centre and the main "
   "thread; at most trace-steps + 256 steps per group are kept (docs/TRACE.md)"},
  {"clock", text<&T::clock>(), kTrain, R::fixed,
   "train on a described machine's clock: FILE or a name of tools/machines (one process); each "
   "step and exchange costs what `easel model` prices, async groups act in the order of their "
   "simulated times, and metrics.jsonl and summary.json carry simulated seconds (wall time in "
   "wall_seconds). Under SMPI (tools/simulate --compute clock) each step costs the model's price "
   "and each exchange the platform's links"},
  {"trace-steps", integer<&T::trace_steps>(), kTrain, R::per_run,
   "with --trace: the first N steps of each group in full"},
  {"trace-every", integer<&T::trace_every>(), kTrain, R::per_run,
   "with --trace: after them every K-th step (K doubles whenever 256 such steps are kept)"},
};
// clang-format on

Status check_range(const char* flag, double v, double lo, double hi, bool lo_open = false) {
  if (!std::isfinite(v) || v > hi || (lo_open ? v <= lo : v < lo)) {
    return invalid_argument(std::string(flag) + ": " + show_real(v) + " is out of range " +
                            (lo_open ? "(" : "[") + show_real(lo) + ", " + show_real(hi) + "]");
  }
  return {};
}

// --checkpoint-every and --mtbf: auto needs the failure rate, and the rate only serves auto.
Status check_checkpoint_cadence(const TrainConfig& c) {
  if (c.checkpoint_every == 0 && !(c.mtbf_seconds > 0))
    return invalid_argument(
        "--checkpoint-every auto: needs --mtbf SECONDS > 0 (the mean time between failures "
        "that the checkpoints' cost is balanced against)");
  if (c.mtbf_seconds != 0 && c.checkpoint_every != 0)
    return invalid_argument("--mtbf: only with --checkpoint-every auto");
  if (c.mtbf_seconds != 0)
    EASEL_RETURN_IF_ERROR(check_range("--mtbf", c.mtbf_seconds, 0, 1e9, true));
  if (c.stall_timeout != 0)
    EASEL_RETURN_IF_ERROR(check_range("--stall-timeout", c.stall_timeout, 0, 1e9, true));
  if (!c.checkpoint && (c.checkpoint_every != 1))
    return invalid_argument("--checkpoint-every: with --no-checkpoint no checkpoint is written");
  return {};
}

// The names of the rows that take an option, "a, b and c".
std::string rows_with(bool AlgoEntry::*option) {
  std::vector<std::string> names;
  for (const AlgoEntry& a : algo_list())
    if (a.*option) names.push_back(a.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

// --optimizer, the AdamW and outer settings and --exchange-precision: in range, and given only
// to an algorithm that takes them (its list row says).
Status check_algo_options(const TrainConfig& c, const AlgoEntry& a) {
  const std::string algo = "--algo " + std::string(a.name);
  if (c.optimizer == Optimizer::adamw && !a.adamw)
    return invalid_argument("--optimizer adamw: " + algo +
                            "'s update is written in SGD's terms (its exchange applies the "
                            "learning rate times the gradient); adamw is defined for " +
                            rows_with(&AlgoEntry::adamw));
  if (c.exchange_precision != ExchangePrecision::fp32 && !a.compressed)
    return invalid_argument(std::string("--exchange-precision ") +
                            exchange_precision_name(c.exchange_precision) + ": " + algo +
                            " exchanges fp32 weights or gradients; " +
                            rows_with(&AlgoEntry::compressed) + " compress what they send");
  for (const auto& [flag, v] :
       {std::pair{"--outer-lr", c.outer_lr}, std::pair{"--outer-momentum", c.outer_momentum}})
    if (v != -1 && a.outer_lr == 0)
      return invalid_argument(std::string(flag) + ": " + algo +
                              " has no outer step (slowmo and diloco have one)");
  if (c.outer_lr != -1) EASEL_RETURN_IF_ERROR(check_range("--outer-lr", c.outer_lr, 0, 10, true));
  if (c.outer_momentum != -1) {
    EASEL_RETURN_IF_ERROR(check_range("--outer-momentum", c.outer_momentum, 0, 1));
    if (c.outer_momentum >= 1) return invalid_argument("--outer-momentum: must be < 1");
  }
  for (const auto& [flag, v] :
       {std::pair{"--adam-beta1", c.adam_beta1}, std::pair{"--adam-beta2", c.adam_beta2}}) {
    EASEL_RETURN_IF_ERROR(check_range(flag, v, 0, 1));
    if (v >= 1) return invalid_argument(std::string(flag) + ": must be < 1");
  }
  return check_range("--adam-epsilon", c.adam_epsilon, 0, 1, true);
}

LrSchedule lr_schedule(const TrainConfig& c, int64_t total_iterations) {
  LrSchedule s;
  s.policy = c.lr_policy;
  s.base = c.lr;
  s.gamma = c.lr_gamma;
  s.power = c.lr_power;
  s.stepsize = c.lr_stepsize;
  s.warmup = c.lr_warmup;
  s.max_iter = total_iterations;
  return s;
}

}  // namespace

int64_t default_tau(std::string_view algo) {
  const AlgoEntry* a = find_algo(algo);
  return a ? a->default_tau : 1;
}

double default_lr(std::string_view algo) {
  const AlgoEntry* a = find_algo(algo);
  return a ? a->default_lr : 0;
}

const std::vector<AlgoLr> kAlgoDefaultLr = [] {
  std::vector<AlgoLr> v;
  for (const AlgoEntry& a : algo_list())
    v.push_back({a.name, a.default_lr});
  return v;
}();

std::span<const Setting> train_settings() {
  return kSettings;
}

const Setting* find_setting(std::string_view name) {
  for (const Setting& s : kSettings)
    if (name == s.name || (s.negation && name == s.negation)) return &s;
  return nullptr;
}

Status set_setting(TrainConfig& cfg, std::string_view name, std::string_view text) {
  const Setting* s = find_setting(name);
  if (!s) return invalid_argument("--" + std::string(name) + ": no such setting");
  return s->field.parse(*s, text, cfg);
}

Status validate_config(const TrainConfig& c) {
  // The CPU refuses a precision it lacks or cannot pay with before anything is built (a GPU's
  // capability is asked when its device is made).
  if (!c.device.gpu) EASEL_RETURN_IF_ERROR(check_cpu_precision(c.precision, c.impl));
  if (c.batch < 1 || c.batch > 65536)
    return invalid_argument("--batch: " + std::to_string(c.batch) + " is out of range [1, 65536]");
  if (c.iterations < 0) return invalid_argument("--iterations: must be >= 0");
  if (c.iterations == 0) EASEL_RETURN_IF_ERROR(check_range("--epochs", c.epochs, 0, 1e6, true));
  EASEL_RETURN_IF_ERROR(check_range("--momentum", c.momentum, 0, 1));
  if (c.momentum >= 1) return invalid_argument("--momentum: must be < 1");
  // A forced fast exchange of sync-easgd is refused here where the switches rule it out
  // (algos/sync_easgd.hpp: the rule; the run checks again what only it knows: ranks, a net with
  // state, the groups' residence).
  if (c.exchange == SyncExchange::partitioned || c.exchange == SyncExchange::mirrored) {
    EASEL_RETURN_IF_ERROR(
        choose_sync_exchange(c.exchange, sync_switches(c, 1, c.device.gpu), false, 2).status());
  }
  EASEL_RETURN_IF_ERROR(check_range("--weight-decay", c.weight_decay, 0, 1));
  if (c.rho != -1) EASEL_RETURN_IF_ERROR(check_range("--rho", c.rho, 0, 1e3));
  if (c.alpha != -1) EASEL_RETURN_IF_ERROR(check_range("--alpha", c.alpha, 0, 1));
  if (c.alpha != -1 && c.rho != -1)
    return invalid_argument(
        "--alpha and --rho: give one (--alpha fixes the elastic step, --rho "
        "makes it lr * rho)");
  if (c.tau < 1 || c.tau > 1000000) return invalid_argument("--tau: must be in [1, 1000000]");
  if (collective_entry(c.collective).needs_ranks != nullptr && process_count() == 1)
    return invalid_argument(collective_needs_ranks(collective_entry(c.collective)));
  EASEL_RETURN_IF_ERROR(check_range("--target-accuracy", c.target_accuracy, 0, 1));
  if (c.eval_every < 0) return invalid_argument("--eval-every: must be >= 0");
  EASEL_RETURN_IF_ERROR(check_checkpoint_cadence(c));
  if (c.eval_images < 0)
    return invalid_argument("--eval-images: " + std::to_string(c.eval_images) +
                            " must be >= 0 (0: the whole test set)");
  if (c.data_threads < 0 || c.data_threads > kMaxDataThreads)
    return invalid_argument("--data-threads: " + std::to_string(c.data_threads) +
                            " is out of range [0, " + std::to_string(kMaxDataThreads) +
                            "] (0: one thread per group)");
  if (c.shuffle_buffer < -1 || c.shuffle_buffer > kMaxShuffleBuffer)
    return invalid_argument("--shuffle-buffer: " + std::to_string(c.shuffle_buffer) +
                            " is out of range [0, " + std::to_string(kMaxShuffleBuffer) +
                            "] (samples of tar shards held to shuffle; 0: read at random)");
  if (c.trace_steps < 0 || c.trace_steps > kMaxTraceSteps)
    return invalid_argument("--trace-steps: " + std::to_string(c.trace_steps) +
                            " is out of range [0, " + std::to_string(kMaxTraceSteps) + "]");
  if (c.trace_every < 1)
    return invalid_argument("--trace-every: " + std::to_string(c.trace_every) + " must be >= 1");
  // A bare file name with a run directory goes into it (api::Run::open), which the run makes.
  const bool trace_in_out =
      c.trace.find('/') == std::string::npos && (!c.out.empty() || !c.resume.empty());
  if (!c.trace.empty() && !trace_in_out) EASEL_RETURN_IF_ERROR(check_trace_path(c.trace));
  EASEL_ASSIGN_OR_RETURN(const AlgoEntry* row, algo_row(c.algo));
  EASEL_RETURN_IF_ERROR(check_algo_options(c, *row));
  // A number of groups a one-group algorithm cannot take is a bad request, refused before any
  // data is read (exit 2); "auto", "numa" and cpu lists are checked once planned (trainer.cpp).
  if (c.plan.groups.is_count())
    EASEL_RETURN_IF_ERROR(check_group_count(*row->make(), c.plan.groups.n));
  // A net description is checked whole (but its shapes, which follow the data) before the data
  // is read.
  EASEL_RETURN_IF_ERROR(check_model(c.net));
  EASEL_RETURN_IF_ERROR(validate(lr_schedule(c, 1)));
  if (!c.device.gpu) {
    std::string accelerators;  // the device list's kinds whose units are GPUs
    for (const DeviceEntry& e : device_list())
      if (e.accelerator) accelerators += (accelerators.empty() ? "" : " or ") + std::string(e.name);
    for (MemKind k : c.placement.kind)
      if (k == MemKind::pinned_host || k == MemKind::device)
        return invalid_argument("--placement " + placement_text(c.placement) + ": " +
                                mem_kind_name(k) + " memory belongs to a GPU; it needs --device " +
                                accelerators);
  }
  return {};
}

Placement host_placement(const TrainConfig& cfg) {
  return cfg.clock.empty() ? cfg.placement : Placement();
}

AlgoParams make_params(const TrainConfig& c, int64_t total_iterations, int groups) {
  AlgoParams p;
  p.lr = lr_schedule(c, total_iterations);
  p.momentum = static_cast<float>(c.momentum);
  p.weight_decay = static_cast<float>(c.weight_decay);
  p.rho = static_cast<float>(c.rho);
  p.alpha = static_cast<float>(c.alpha);
  if (c.alpha < 0 && c.rho < 0) p.alpha = 0.9f / static_cast<float>(groups);  // beta = 0.9
  p.tau = static_cast<int>(c.tau);
  p.nesterov = c.momentum_form == MomentumForm::nesterov;
  p.reduce = c.reduce;
  p.pack = c.pack;
  p.overlap = c.overlap;
  p.collective = c.collective;
  p.exchange = c.exchange;
  p.sync_centre = c.sync_centre;
  p.optimizer = c.optimizer;
  p.adamw = {static_cast<float>(c.adam_beta1), static_cast<float>(c.adam_beta2),
             static_cast<float>(c.adam_epsilon)};
  if (const AlgoEntry* a = find_algo(c.algo)) {
    p.outer_lr = static_cast<float>(c.outer_lr != -1 ? c.outer_lr : a->outer_lr);
    p.outer_momentum =
        static_cast<float>(c.outer_momentum != -1 ? c.outer_momentum : a->outer_momentum);
  }
  p.precision = c.exchange_precision;
  return p;
}

Layout resolve_layout(const TrainConfig& cfg) {
  return cfg.layout.value_or(cfg.device.gpu ? Layout::nchw : Layout::nhwc);
}

}  // namespace easel
