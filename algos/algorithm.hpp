// The Algorithm interface: a policy around the one shared local step (forward, backward, local
// update) that each worker group runs on its own thread. Each algorithm file holds only its
// communication pattern. A run proceeds in rounds between evaluations: the trainer posts
// run_round() to every group's thread at once and waits for all of them; between rounds no
// group runs, so the evaluator may read any buffer.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "algos/outer_ops.hpp"
#include "algos/schedule.hpp"
#include "algos/step_clock.hpp"
#include "engine/arena.hpp"
#include "engine/comm/comm.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/fault.hpp"
#include "engine/trace.hpp"
#include "engine/worker.hpp"
#include "nets/data/batch_stream.hpp"
#include "nets/net.hpp"

namespace easel {

enum class ReduceMode { tree, serial };     // Sync EASGD: tree collective vs P serial exchanges
enum class PackMode { single, per_layer };  // one message over the arena vs one per layer
// sync-easgd's exchange code (--exchange): automatic, the fastest that applies (one of the
// single-process fast exchanges of algos/sync_easgd_fast.hpp where the switches allow, else the
// Comm path); comm, the Comm path always (the one whose order, messages and overlap --reduce,
// --pack and --overlap switch, one at a time); partitioned or mirrored, that fast exchange.
enum class SyncExchange { automatic, comm, partitioned, mirrored };
// sync-easgd's centre on its Comm path: master, the paper's reduce of S into one group that
// updates Wc and broadcasts it; allreduce, every process (group 0 of each) holds Wc and updates
// it from the allreduced S, with no broadcast (the same rule and, for every collective algorithm,
// the same S bit for bit); auto, allreduce across MPI ranks on the CPU, else master.
enum class SyncCentre { automatic, master, allreduce };
// The groups' own optimiser where an algorithm lets them choose (--optimizer; AlgoEntry::adamw).
enum class Optimizer { msgd, adamw };
// What the run does when one group fails (--on-failure; docs/FAULTS.md): its thread throws, or
// (drop, restart) its train loss turns non-finite. stop: the run stops (a non-finite loss as
// diverged, exit 3; a throw as an error, exit 1); drop: the group leaves the run and the others
// go on; restart: the group re-enters from the centre with its momentum zero and goes on.
// automatic: drop where the algorithm survives a lost group (Algorithm::survives_group_loss),
// else stop.
enum class OnFailure { automatic, stop, drop, restart };

// A group's own failure, thrown on its thread (a non-finite train loss under drop or restart,
// EASEL_FAULT's throw); the trainer drops or restarts the group, or stops the run.
struct GroupFailed : std::runtime_error {
  GroupFailed(const std::string& what, bool non_finite)
      : std::runtime_error(what), nonfinite(non_finite) {}
  bool nonfinite;  // a non-finite train loss (else a throw)
};

// Thrown on a group's thread that the trainer gave up as stalled (Group::abandoned) when it
// comes back: before it writes into the centre or steps again. Its failure is recorded already.
struct Abandoned : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Hyper-parameters of the algorithms (DESIGN.md 4): eta = lr, alpha = eta * rho.
struct AlgoParams {
  LrSchedule lr;
  float momentum = 0.9f;  // mu (msgd, async-msgd) and delta (async-measgd)
  float weight_decay = 5e-4f;
  float rho = 0.f;       // elastic coefficient; alpha = lr * rho unless alpha >= 0 is given
  float alpha = -1.f;    // fixed elastic step alpha (>= 0 overrides rho)
  int tau = 1;           // communication period
  bool nesterov = true;  // async-measgd: Nesterov (EAMSGD) or heavy-ball
  ReduceMode reduce = ReduceMode::tree;
  PackMode pack = PackMode::single;
  bool overlap = false;
  CollectiveAlgo collective = CollectiveAlgo::automatic;
  SyncExchange exchange = SyncExchange::automatic;
  SyncCentre sync_centre = SyncCentre::automatic;
  // local-sgd, slowmo, diloco (algos/periodic.hpp): the inner optimiser, the outer step (its
  // rate and momentum, the row's when not given) and the precision of what is exchanged.
  Optimizer optimizer = Optimizer::msgd;
  AdamW adamw;
  float outer_lr = 1.f, outer_momentum = 0.f;
  ExchangePrecision precision = ExchangePrecision::fp32;

  // alpha for a given local iteration.
  float alpha_at(int64_t iter) const {
    return alpha >= 0 ? alpha : static_cast<float>(lr.at(iter)) * rho;
  }
};

// Where a group's time goes. compute: forward, backward and local update; comm: moving
// parameters (reduce, broadcast, centre reads and writes; an exchange fused with the local
// update in one pass, as easgd-rr's, hogwild-easgd's and sync-easgd's mirrored one, counts here
// whole); wait: blocked on a lock, a barrier or a turn. preempted: not a share of the others but a
// part of them (mostly of compute): the time the group's thread was runnable while another thread
// had its cpu (Linux schedstat; thread_runqueue_seconds), measured by the trainer around each
// round; 0 where unknown.
struct GroupTimes {
  double compute = 0, comm = 0, wait = 0, preempted = 0;
};

struct Group {
  int id = 0;         // index in run.groups (this process)
  int global_id = 0;  // over all processes: run.rank * run.size() + id; the Comm rank
  WorkerThread* worker = nullptr;
  // The group's device: the CPU (shared by all groups), or its own GPU, attached to `worker`.
  Device* device = nullptr;
  // The rules over weights/diff/momentum, on the memory they are in: the device's kernels when
  // they are resident on a GPU (Run::resident), else the CPU's span ops.
  ArenaKernels* kernels = &cpu_arena_kernels();
  std::unique_ptr<Net> net;
  // The stream of the net's random draws (dropout), from the run's seed and global_id: before
  // each step the net draws number `steps` of it (Net::set_draw), so a resumed run, which
  // restores `steps` and takes the seed from its config.json, draws what the first one did.
  uint64_t draw_stream = 0;
  Arena weights, diff, momentum;
  // A GPU group: the batch's copy on the device (one batch of images, and labels); and when
  // the arenas stay on the host (not resident), the device copies the net reads and writes:
  // weights are uploaded before each step and the gradient downloaded after it. With
  // batch_bytes the images cross as uint8 (the stream's bytes, 4x fewer than floats) and are
  // normalised on the device into dev_input through dev_table (Device::normalize_bytes); float
  // images go to dev_input converted when the net's activations are bf16; else the net reads
  // dev_images itself (dev_input empty).
  Buffer dev_images, dev_labels, dev_input, dev_table;
  bool batch_bytes = false;
  Arena dev_weights, dev_diff;
  Arena eval_weights;  // a GPU group: the evaluated model, copied to its device per evaluation
  std::unique_ptr<BatchStream> data;
  // Test and benchmark seam: when set, local_gradient() calls it instead of reading a batch and
  // stepping the net (it must fill diff).
  std::function<void(Group&)> fake_gradient;
  // The fault EASEL_FAULT injects into this group (engine/fault.hpp; set by the trainer on the
  // target group only), before its step number fault->step; cleared once it happened.
  std::optional<Fault> fault;
  // Test seam: when set, local_gradient() calls it first, at every step (tests raise a signal at
  // a given step, or make one group stall).
  std::function<void(Group&)> before_step;
  Buffer eval_images;  // one batch of test images, for the evaluator
  std::vector<int32_t> eval_labels;

  // Written by the group's own thread; `steps` is also read live for progress.
  std::atomic<int64_t> steps{0};
  double loss_sum = 0;  // since the last evaluation
  int64_t loss_count = 0;
  GroupTimes times;
  int64_t staleness_sum = 0, staleness_count = 0, staleness_max = 0;
  int64_t centre_read_version = 0;  // async: the centre version this group's weights came from
  // Set by the trainer when the run stops early at step boundaries (single process): raised by
  // local_gradient() at the group's first non-finite loss, whose step and value it records.
  std::atomic<bool>* diverged = nullptr;
  // Set by the trainer under --on-failure drop or restart: a non-finite train loss throws
  // GroupFailed before the step's loss is counted or its update made (so the centre never sees
  // it), instead of raising `diverged`.
  bool fail_on_nonfinite = false;
  // Set by the trainer when the group was dropped (--on-failure drop): it runs no more rounds.
  bool dropped = false;
  // Set by the trainer (another thread) when the group did no step within the stall deadline:
  // from then on the group's thread throws Abandoned where it notices (claim_step, the end of
  // local_gradient, under the centre lock: lock_or_stall), so that it never writes into the
  // centre again unless the trainer restarts it; EASEL_FAULT's stall waits for it.
  std::atomic<bool> abandoned{false};
  // Set by the trainer while the group's round runs on its thread (its steps are watched).
  std::atomic<bool> in_round{false};
  int64_t nonfinite_step = -1;  // the group's first step with a non-finite loss (-1: none)
  double nonfinite_loss = 0;
  std::string nonfinite_where;  // then, the first non-finite weight the step read (first_nonfinite)
};

// No stop decided (Run::stop_at).
inline constexpr int64_t kNoStop = INT64_MAX;

// The shared state of a run that algorithms work on. State that one algorithm alone needs (a
// lock, a turn, a scratch arena, a staging buffer) is a member of that algorithm; what stays
// here is what the trainer, the checkpoint or several algorithms read.
struct Run {
  std::vector<std::unique_ptr<Group>> groups;  // this process's groups
  // Across MPI ranks (engine/comm/mpi_comm.hpp): this process is `rank` of `ranks`, world is
  // null in a single-process run. comm spans all total_groups() groups.
  MpiComm* world = nullptr;
  int rank = 0, ranks = 1;
  const ArenaLayout* layout = nullptr;  // the parameter segments (same for every replica)
  AlgoParams params;
  std::unique_ptr<Comm> comm;
  // How long a group spins before it sleeps when it waits for others outside the Comm
  // (wait_for_counter): kShmSpinSeconds when every thread of this process has a core, else 0.
  double spin_seconds = 0;
  // The centre W-bar (EASGD, async-sgd); empty when unused. Here, not in an algorithm: the
  // trainer allocates it with the placement's centre kind and fills it with the initial
  // weights, and a checkpoint saves and restores it for every centre algorithm.
  Arena centre;
  // Centre updates so far: every centre algorithm counts them (staleness), and a checkpoint
  // carries the count.
  std::atomic<int64_t> centre_version{0};
  // Async algorithms: group-steps left in this round, set by the trainer before each round.
  std::atomic<int64_t> budget{0};
  // A test hook that several algorithms feed (easgd-rr, async-easgd): the group ids in the order
  // the centre served them.
  std::vector<int>* serve_log = nullptr;
  // `easel train --clock FILE` (one process): the described machine's clock that orders the
  // async algorithms' steps and exchanges (claim_step, clock_exchange); null otherwise. Owned
  // by the trainer.
  StepClock* clock = nullptr;
  // GPU groups whose weights, gradients, momentum (and the centre) live in device memory,
  // updated by the device's kernels and exchanged over NCCL (device_resident algorithms on
  // --device cuda: the paper's Sync EASGD2). False on the CPU. Set by the trainer.
  bool resident = false;
  // With --trace: the track of a thread an algorithm runs for the centre (async-easgd's server
  // across ranks), which binds it (engine/trace.hpp); else null.
  TraceTrack* centre_trace = nullptr;

  // Ending a round early at the same step on every group (stop_here, claim_step). In one process
  // the trainer points `interrupt` at the process's signal flag (non-zero: the signal asking the
  // run to stop) and sets stop_lead; a group that sees a non-finite loss raises `diverged`.
  // Group 0 decides, at a step boundary, stop_at = its steps + stop_lead, which is past every
  // step another group can have begun without group 0 (sync algorithms meet every tau steps).
  const std::atomic<int>* interrupt = nullptr;
  std::atomic<bool> diverged{false};
  std::atomic<int64_t> stop_at{kNoStop};
  int64_t stop_lead = 2;
  // --on-failure, resolved (never automatic); `failed` is raised by the trainer when a group fails
  // under stop, so that the others end the round early as for a signal (async: the budget is
  // drained). lost_steps: group-steps claimed from the round's budget by a group that failed in
  // them (never done); the round's iterations count them (train_round).
  OnFailure on_failure = OnFailure::stop;
  std::atomic<bool> failed{false};
  std::atomic<int64_t> lost_steps{0};
  // The group-steps lost in the run's earlier rounds (lost_steps summed; carried by a
  // checkpoint): with the groups' steps they make the run's iterations x P.
  int64_t lost_before = 0;
  // Test seam: called by rejoin_from_centre() once a group's replica and momentum are reset,
  // while the centre cannot move (under the algorithm's centre lock where it has one).
  std::function<void(const Run&, const Group&)> on_rejoin;

  int size() const { return static_cast<int>(groups.size()); }  // groups of this process
  int total_groups() const { return size() * ranks; }           // P in every formula
  int64_t arena_floats() const { return layout->total_floats(); }
  std::span<const Segment> segments() const { return layout->segments(); }
};

// What an algorithm keeps of its own from one round to the next, beyond the groups and the
// centre, in the form a checkpoint carries it (run/checkpoint.hpp: one slot of each).
struct AlgoState {
  int32_t turn = 0;           // a group id (easgd-rr: whose turn it is); 0 when unused
  std::vector<float> buffer;  // one arena, on the host (async-msgd: the centre's momentum)
  // Whole numbers of the algorithm's own per group (local-sgd, slowmo, diloco: whether a group
  // that failed is absent until the next meeting, where its inner optimiser restarted).
  std::vector<int64_t> words;
  // Not saved: the iterations the run had done (the checkpoint's), for restore_state.
  int64_t step = 0;
};
// OK when s holds nothing (turn 0, no buffer); else the --resume error for `algo`.
Status expect_no_state(const AlgoState& s, const std::string& algo);

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;
  // Most groups it supports (sgd, msgd: 1).
  virtual int max_groups() const { return 1 << 20; }
  // Whether run.centre is used (allocated by the trainer before prepare()).
  virtual bool uses_centre() const { return false; }
  // Whether a checkpoint of it may resume with another number of groups (restore_run): its
  // state is the centre, to which every replica is elastically pulled, so new groups may start
  // from the centre (the EASGD family). The others' replicas, momentum or shared weights are
  // not a function of a centre and cannot be re-split.
  virtual bool regroupable() const { return false; }
  // Where every group of a run resumed into another number of groups starts (regroupable()
  // algorithms only; restore_run): the weights and whether each group's momentum is the old
  // groups' mean (else zero). `centre` is the checkpoint's centre (empty without one), `st` the
  // algorithm's saved state, `step` the iterations done, `had` the checkpoint's group count.
  // Default: the centre, momentum zero (the EASGD family). An algorithm that can re-split only
  // some of its checkpoints refuses the others here, naming --groups and why.
  struct RegroupStart {
    const float* weights = nullptr;
    bool mean_momentum = false;
  };
  virtual Result<RegroupStart> regroup_start(const Run& run, std::span<const float> centre,
                                             const AlgoState& st, int64_t step, size_t had) const {
    (void)run, (void)st, (void)step, (void)had;
    return RegroupStart{centre.data(), false};
  }
  // Extra buffers, after the groups and the centre exist and hold the initial weights.
  virtual Status prepare(Run& run) {
    (void)run;
    return {};
  }
  // Runs `iterations` iterations of the run on group g's thread. Sync algorithms: every group
  // does exactly `iterations` steps and they meet in collectives. Async algorithms: the groups
  // share run.budget (= iterations * P group-steps) first come first served. Where
  // survives_group_loss() and uses_collectives() (local-sgd, slowmo, diloco) it is also called
  // for a group that failed in the round and was not restarted (again, after its failure) and
  // for a dropped one (each later round): the group attends the meetings as an absent member,
  // each step it skips added to run.lost_steps.
  virtual void run_round(Run& run, Group& g, int64_t iterations) = 0;
  // The model the evaluator tests (the centre, or a replica); called between rounds. Across
  // ranks, rank 0's is the one evaluated.
  virtual const float* eval_weights(Run& run) = 0;
  // Whether it runs across MPI ranks (run.ranks > 1); the others say why not in the trainer.
  virtual bool multi_process() const { return false; }
  // Whether its groups meet in run.comm's reductions (allreduce, reduce, broadcast), whose
  // algorithm --collective picks; asked after prepare(). The others (a centre under a lock or
  // none, a single-process fast exchange) never run one, so the pick is not said for them.
  virtual bool uses_collectives() const { return false; }
  // The exchange path it runs, asked after prepare() (summary.json's "exchange_path"):
  // sync-easgd's choose_sync_exchange() (algos/sync_easgd.hpp); empty for the others.
  virtual std::string exchange_path() const { return {}; }
  // Whether its groups' arenas may stay on their GPUs (Run::resident): it touches them only
  // through Group::kernels and run.comm, and allocates device buffers on the owning group's
  // thread. The others run on GPUs with the arenas in pinned host memory, each step uploading
  // the weights and downloading the gradient (the paper's original, non-co-designed scheme).
  virtual bool device_resident() const { return false; }
  // Whether the run goes on when one of its groups is lost (--on-failure drop and restart; the
  // default drop in one process): the run's state is one every survivor holds or reaches and no
  // group waits for a lost one. async-easgd, async-measgd, async-sgd, async-msgd, hogwild-easgd,
  // hogwild-sgd: the groups meet only at the centre, first come first served; local-sgd, slowmo,
  // diloco: every group holds the anchor, and a lost group attends the meetings as an absent
  // member (run_round). The others refuse drop and restart (failure_refusal).
  virtual bool survives_group_loss() const { return false; }
  // --on-failure drop and restart, on g's thread after its failure (g not running): its replica
  // the run's state, its momentum zero; under restart it goes on. The centre algorithms: from
  // the centre's copy at once (rejoin_from_centre), under the algorithm's centre lock where it
  // has one; local-sgd, slowmo, diloco: from the anchor, re-entering at the next meeting from
  // its average. survives_group_loss() algorithms only.
  virtual void rejoin(Run& run, Group& g) {
    (void)run, (void)g;
    EASEL_CHECK_MSG(false, "rejoin: the algorithm does not survive a lost group");
  }
  // Called once after the last round (and on error exits), before the run is destroyed: stops
  // helper threads (e.g. the centre's server on rank 0).
  virtual void finish(Run& run) { (void)run; }
  // Its own state beyond the groups and the centre, as a checkpoint carries it (called between
  // rounds; no group running). Default: none.
  virtual AlgoState save_state(Run& run) {
    (void)run;
    return {};
  }
  // Puts a saved state back into a run it has prepared (after prepare()). Fails, naming
  // --resume, when the state does not fit this run. Default: accepts only no state.
  virtual Status restore_state(Run& run, const AlgoState& s) {
    (void)run;
    return expect_no_state(s, name());
  }
};

// ---- an algorithm's facts, as its row of the list (algos/list.cpp) gives them ----------------

// What the trace (--trace) calls the time a group spends in g.times.comm and g.times.wait
// outside the Comm (the Comm's own waits are "barrier" spans); nullptr: it spends none there.
struct PhaseNames {
  const char* exchange;
  const char* wait;
};

// An arena an algorithm allocates beyond every group's weights, gradients and momentum and the
// run's centre, as the memory fit (run/fit.cpp) counts it: its class, and the group that holds
// it (-1: the run's own, allocated on group 0's thread).
struct ExtraArena {
  BufferClass cls;
  int owner;
};
// What an algorithm's extra arenas depend on.
struct ArenaQuery {
  int groups = 1;  // P in this process
  // sync-easgd's shared-memory exchanges apply (one process on the CPU, --reduce tree, --pack
  // single, --collective tree, --overlap off).
  bool sync_fast = true;
  bool overlap = false;   // --overlap on
  bool adamw = false;     // --optimizer adamw: a second moment per group
  bool feedback = false;  // --exchange-precision int8: an error-feedback residual per group
};

// How the performance model (model/) prices an algorithm's exchange.
enum class ExchangeKind {
  unset,            // (a row that forgot it: the list's test refuses it)
  none,             // one group: nothing exchanged
  collective,       // every group meets in the Comm's collectives (sync-sgd, sync-easgd)
  round_robin,      // the master serves one group at a time, by id (easgd-rr)
  locked_centre,    // a group's exchange with the centre under its lock, first come first served
  lockfree_centre,  // the same without the lock (Hogwild)
  average,          // every tau steps an allreduce of each group's pseudo-gradient (local SGD)
};
struct ModelFacts {
  ExchangeKind kind = ExchangeKind::unset;
  // EASGD's elastic exchange of weights every tau steps; else a gradient or step every step.
  bool elastic = false;
  bool overlappable = false;  // --overlap hides the exchange behind the next step
  // The exchange takes the local step's place (the update is applied in it, at the centre or
  // fused with the elastic pull): the group's own momentum update runs on the other steps only.
  bool update_in_exchange = false;
  // Arenas a group holds at most, as the model counts its bytes: weights, gradients, momentum
  // and the algorithm's own per group (sync-easgd's partitioned exchange: a second weights).
  int arenas_per_group = 0;
};

// One row of the explicit list of the algorithms: every fact about an algorithm that is looked
// up by its name lives here (tests/algos/test_algos.cpp's AlgoList checks that none is missing).
struct AlgoEntry {
  const char* name = nullptr;
  const char* summary = nullptr;
  std::unique_ptr<Algorithm> (*make)() = nullptr;
  // --lr auto's rate: chosen by a sweep of LeNet on Fashion-MNIST with 2 groups for 2 epochs
  // (docs/RESULTS.md, "Algorithm defaults").
  double default_lr = 0;
  // --tau auto's period (1 for the algorithms that exchange every step or are tuned for it).
  int default_tau = 0;
  PhaseNames (*phases)(const AlgoParams& p) = nullptr;                     // --trace's names
  std::vector<ExtraArena> (*extra_arenas)(const ArenaQuery& q) = nullptr;  // the memory fit
  ModelFacts model;                                                        // easel model
  // What it lets a run choose (a flag it does not take is refused, naming the ones that do):
  bool adamw = false;       // --optimizer adamw for its groups' own steps
  bool compressed = false;  // --exchange-precision bf16 or int8 for what it sends
  // Its outer step's defaults (--outer-lr, --outer-momentum); outer_lr 0: it has none.
  double outer_lr = 0, outer_momentum = 0;
};
std::span<const AlgoEntry> algo_list();
// The row named `name`; nullptr when there is none.
const AlgoEntry* find_algo(std::string_view name);
// The row named `name`, or the refusal that names --algo and the known algorithms.
Result<const AlgoEntry*> algo_row(std::string_view name);
Result<std::unique_ptr<Algorithm>> make_algorithm(const std::string& name);

// The shared local step: next batch, forward, backward into g.diff, loss bookkeeping; adds its
// time to g.times.compute. On a GPU it uploads the batch (and, when not resident, the weights,
// downloading the gradient after) and returns when the step is done on the device. Returns the
// batch loss.
double local_gradient(Group& g);
// A GPU group's batch to its device: images [n, C, H, W] (bytes with g.batch_bytes, else
// floats) and labels from host memory into dev_images/dev_labels, then into the net's input
// (see Group::dev_input). Returns what the net reads; in the device's order of work.
const float* stage_batch(Group& g, const void* images, const int32_t* labels, int64_t n);

// An arena of n floats of `kind`, allocated (and zeroed) on g's own thread, so that device
// memory lands on g's GPU.
Result<Arena> arena_on(Group& g, int64_t n, MemKind kind);

// Whether the run asks its groups to stop (a signal, a diverged group); cheap, per step.
inline bool stop_wanted(const Run& run) {
  return (run.interrupt != nullptr && run.interrupt->load(std::memory_order_relaxed) != 0) ||
         run.diverged.load(std::memory_order_relaxed) || run.failed.load(std::memory_order_relaxed);
}
// The sync algorithms' check at the boundary before each step of group g: true when g must stop
// there (every group stops at the same step, Run::stop_at); group 0 decides it.
bool stop_here(Run& run, const Group& g);

// The first non-finite value among `segs` of the host arena w, as "SEGMENT (element I)"; empty
// when every value is finite. Scans the whole arena: called once divergence is seen.
std::string first_nonfinite(std::span<const Segment> segs, const float* w);

// Monotonic seconds.
double now_seconds();

// Algorithm::rejoin's work, the caller holding what keeps the centre still (or, lock-free
// algorithms, `racy`: the centre read through the relaxed atomic helpers): g's weights <- the
// centre, its momentum <- 0, its read version the centre's; then the test seam Run::on_rejoin.
void rejoin_from_centre(Run& run, Group& g, bool racy);

// Why `algo` cannot run with --on-failure `mode` (drop or restart) in this run, as one line
// naming the flag and the algorithm; empty when it can.
std::string failure_refusal(const Algorithm& algo, OnFailure mode, int ranks);

}  // namespace easel
