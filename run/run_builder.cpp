// Building the run train() trains: the plan across ranks, the devices, the groups on their
// threads, the Comm, the initial weights; restoring it from a checkpoint; describing it.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/log.hpp"
#include "engine/span_ops.hpp"
#include "run/comm_list.hpp"
#include "run/fit.hpp"
#include "run/groups.hpp"
#include "run/train_run.hpp"

namespace easel {

namespace {

// Across ranks on one node, `mpirun --bind-to none` leaves every rank all the cores; each rank
// then plans on its own slice of them (ranks bound by the launcher keep what they were given).
void share_cores_among_local_ranks(Topology& topo, const MpiComm& w, std::string* note) {
  if (w.local_size() <= 1 || topo.core_count() == 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < online) {
    *note = "MPI: rank " + std::to_string(w.rank()) + " keeps the " +
            std::to_string(topo.core_count()) + " core(s) the launcher bound it to";
    return;
  }
  const int c = topo.core_count(), ls = w.local_size(), lr = w.local_rank();
  std::vector<std::vector<int>> keep;
  if (c >= ls) {
    for (int i = lr * c / ls; i < (lr + 1) * c / ls; ++i)
      keep.push_back(topo.cores[static_cast<size_t>(i)]);
    *note = "MPI: the launcher did not bind; local rank " + std::to_string(lr) + " of " +
            std::to_string(ls) + " on this node uses cores " + std::to_string(lr * c / ls) + "-" +
            std::to_string((lr + 1) * c / ls - 1);
  } else {
    keep.push_back(topo.cores[static_cast<size_t>(lr % c)]);
    *note = "MPI: " + std::to_string(ls) + " ranks on " + std::to_string(c) +
            " cores: local rank " + std::to_string(lr) + " shares core " + std::to_string(lr % c);
  }
  topo.cores = std::move(keep);
}

// A described machine (EASEL_TOPOLOGY_XML, HWLOC_XMLFILE) plans its own cores, but the run's
// threads start here: more of them than this process's cpus need --oversubscribe, as on this
// machine's own plan.
Status check_described_threads(const Topology& topo, const GroupPlan& plan,
                               const TrainConfig& cfg) {
  if (topo.described_by.empty() || cfg.plan.oversubscribe) return {};
  size_t threads = 0;
  for (const GroupSpec& g : plan.groups)
    threads += g.cpus.size();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
  const auto here = static_cast<size_t>(CPU_COUNT(&set));
  if (threads <= here) return {};
  return invalid_argument("--oversubscribe: the plan for the machine " + topo.described_by +
                          " describes (EASEL_TOPOLOGY_XML or HWLOC_XMLFILE) starts " +
                          std::to_string(threads) + " threads here, where this process has " +
                          std::to_string(here) +
                          " cpus; pass --oversubscribe to run them anyway, plan fewer "
                          "(--groups, --threads-per-group) or unset the variable");
}

// The devices: one of the kind for every group, or one per accelerator group (its unit).
Status make_devices(TrainRun& t) {
  const TrainConfig& cfg = t.cfg;
  const DeviceEntry& kind = *t.dev_req.kind;
  if (!kind.accelerator) {
    EASEL_ASSIGN_OR_RETURN(auto d, kind.make_device(0, t.cfg.impl, t.cfg.precision));
    t.devices.push_back(std::move(d));
    return {};
  }
  const Placement placement = host_placement(t.cfg);
  if (t.world)
    return invalid_argument("--device " + device_text(cfg.device) +
                            ": GPU groups run within one process; run it without mpirun");
  if (placement[BufferClass::dataset] == MemKind::device)
    return invalid_argument(
        "--placement dataset=device: the data set stays in host memory (pinned-host or a "
        "host kind); only each batch is copied to the GPU");
  for (BufferClass c : {BufferClass::centre, BufferClass::weights, BufferClass::grads,
                        BufferClass::momentum, BufferClass::activations})
    if (placement[c] != MemKind::dram)
      return invalid_argument(
          std::string("--placement ") + buffer_class_name(c) + "=" + mem_kind_name(placement[c]) +
          ": with --device " + device_text(cfg.device) +
          " the groups' buffers live on their GPUs (in pinned host memory for the staged "
          "algorithms); only dataset= can be placed");
  for (const GroupSpec& gs : t.plan.groups) {
    EASEL_ASSIGN_OR_RETURN(auto d, kind.make_device(gs.gpu, t.cfg.impl, t.cfg.precision));
    t.devices.push_back(std::move(d));
  }
  return {};
}

// GPU groups keep their arenas on the device when the algorithm allows (Sync EASGD2), else in
// pinned host memory, staged through device copies every step. Multi-group resident runs
// exchange over the kind's Comm (NCCL); without it they fall back to staging.
void choose_residence(TrainRun& t) {
  const DeviceEntry& kind = *t.dev_req.kind;
  const Algorithm& algo = *t.algo;
  const bool may = kind.accelerator && algo.device_resident();
  t.run.resident = t.resolved.resident;
  if (may && !t.run.resident) {
    const std::string comm = kind.comm_name ? kind.comm_name : "device Comm";
    log_once(LogLevel::warn, "train", "no-nccl",
             "--algo " + algo.name() + ": this build has no " + comm +
                 ", so the groups' weights stay in pinned host memory and go through the GPUs "
                 "every step (install " +
                 comm + " and rebuild for the resident path)");
  }
}

// Where a group's arenas live: as placed on the CPU; on GPUs on the device when resident, else
// in pinned host memory.
MemKind arena_kind_of(const TrainRun& t, BufferClass c) {
  if (!t.dev_req.gpu) return host_placement(t.cfg)[c];
  return t.run.resident ? MemKind::device : MemKind::pinned_host;
}

// The PUs of the cores where no group of `plan` runs a thread.
std::vector<int> spare_cpus(const Topology& topo, const GroupPlan& plan) {
  std::vector<int> used;
  for (const GroupSpec& g : plan.groups)
    used.insert(used.end(), g.cpus.begin(), g.cpus.end());
  std::vector<int> spare;
  for (const std::vector<int>& core : topo.cores) {
    const bool taken = std::any_of(core.begin(), core.end(), [&](int pu) {
      return std::find(used.begin(), used.end(), pu) != used.end();
    });
    if (!taken) spare.insert(spare.end(), core.begin(), core.end());
  }
  return spare;
}

// Says once where the data pipelines' threads run.
void log_data_threads(const TrainRun& t) {
  const int n = std::max(1, t.cfg.data_threads);
  const std::string threads =
      std::to_string(n) + " data thread" + (n == 1 ? "" : "s") + " per group (--data-threads)";
  if (!t.data_cpus.empty()) {
    std::string cpus;
    for (int c : t.data_cpus)
      cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    log_info("data", threads + " on cpus " + cpus + ", the cores no group uses");
  } else {
    log_info("data", threads +
                         " on each group's own cores (the groups use every core; plan "
                         "fewer --threads to leave cores for the data)");
  }
}

// Builds every replica on its own thread (first touch puts its pages on its node, device
// memory lands on its GPU), one group at a time (set-up logs stay ordered). Group g of rank r
// reads data shard r*L + g of P.
Status build_groups(TrainRun& t, const Dataset& train) {
  const bool gpu = t.dev_req.gpu;
  const auto arena_kind = [&](BufferClass c) { return arena_kind_of(t, c); };
  for (int i = 0; i < t.local; ++i) {
    EASEL_ASSIGN_OR_RETURN(auto w,
                           WorkerThread::start(t.plan.groups[static_cast<size_t>(i)], true));
    auto g = std::make_unique<Group>();
    g->id = i;
    g->global_id = t.rank * t.local + i;
    g->worker = w.get();
    g->device = t.devices[gpu ? static_cast<size_t>(i) : 0].get();
    Status st;
    w->run([&] {
      st = build_group(*g, t.spec, t.cfg, resolve_layout(t.cfg), host_placement(t.cfg), arena_kind,
                       train, t.local, t.p, t.data_cpus);
    });
    EASEL_RETURN_IF_ERROR(st);
    t.workers.push_back(std::move(w));
    t.run.groups.push_back(std::move(g));
  }
  t.run.layout = &t.run.groups[0]->net->params();
  return {};
}

// The Comm among the groups, from the list (run/comm_list.hpp). sgd and msgd never call it.
Status make_comm(TrainRun& t) {
  std::vector<Device*> devs;
  for (const auto& d : t.devices)
    devs.push_back(d.get());
  const CommNeeds needs = comm_needs(t, t.run.arena_floats(), devs);
  // The plan's Comm and collective (said once the algorithm is prepared, if it runs
  // collectives), and the processes' own arena broadcasts with the algorithm picked among them.
  CollectivePick& pick = t.resolved.collective;
  if (needs.on_devices && needs.collective == CollectiveAlgo::automatic)
    pick.why = shared_units_note(devs);  // the plan was made before the devices
  if (t.world) t.world_comm = world_comm(*t.world, pick);
  const CommEntry& entry = *t.resolved.comm;
  auto comm = entry.make(needs, pick);
  if (!comm.ok())
    return unavailable("--device " + device_text(t.cfg.device) + ": " + comm.status().message());
  t.run.comm = std::move(comm).value();
  t.run.spin_seconds = entry.spin_seconds(needs);
  return {};
}

// The plan of all P groups on rank 0, each rank's cpus as that rank planned them.
void gather_plan(const TrainRun& t, GroupPlan& all_plan) {
  constexpr size_t kMaxCpus = 256;
  const GroupPlan& plan = t.plan;
  std::vector<int32_t> mine(static_cast<size_t>(t.local) * kMaxCpus, -1), all;
  for (int i = 0; i < t.local; ++i) {
    const auto& cpus = plan.groups[static_cast<size_t>(i)].cpus;
    for (size_t c = 0; c < cpus.size() && c < kMaxCpus; ++c)
      mine[static_cast<size_t>(i) * kMaxCpus + c] = cpus[c];
  }
  if (t.rank == 0) all.resize(mine.size() * static_cast<size_t>(t.ranks));
  t.world->gather_bytes(mine.data(), mine.size() * sizeof(int32_t), all.data(), 0);
  if (t.rank != 0) return;
  all_plan.groups.clear();
  for (int q = 0; q < t.p; ++q) {
    GroupSpec gs = plan.groups[static_cast<size_t>(q % t.local)];
    gs.id = q;
    gs.cpus.clear();
    for (size_t c = 0; c < kMaxCpus; ++c)
      if (const int32_t cpu = all[static_cast<size_t>(q) * kMaxCpus + c]; cpu >= 0)
        gs.cpus.push_back(cpu);
    all_plan.groups.push_back(std::move(gs));
  }
  all_plan.notes.push_back("MPI: " + std::to_string(t.ranks) + " ranks x " +
                           std::to_string(t.local) + " groups");
}

}  // namespace

// Same initial weights everywhere (rank 0's, broadcast), in every group and the centre.
Status init_weights(TrainRun& t) {
  Run& run = t.run;
  Group& g0 = *run.groups[0];
  t.arena_bytes = static_cast<size_t>(run.arena_floats()) * sizeof(float);
  // Simulated with injected compute (tools/simulate --compute model) no value is computed, so
  // none is drawn or copied: rank 0's broadcast is sent from group 0's weights as they are.
  const bool values = !values_ignored();
  std::vector<float> init(values ? static_cast<size_t>(run.arena_floats()) : 0);
  float* w0 = values ? init.data() : g0.weights.data();
  Status reported;  // after the broadcast, which every rank reaches
  if (values) {
    g0.net->init_params(init.data(), t.cfg.seed);
    // An ONNX net's own weights replace the fillers' (rank 0's, as the rest, broadcast).
    reported = initial_weights(t.cfg.net, *g0.net, init.data());
    if (reported.ok()) reported = t.report->on_init_weights(init);
  }
  if (t.world) t.world_comm->broadcast(t.rank, w0, run.arena_floats(), 0);
  EASEL_RETURN_IF_ERROR(reported);
  if (values)
    for (auto& g : run.groups)
      copy_bytes(g->weights.data(), g->weights.kind(), init.data(), MemKind::dram, t.arena_bytes);
  if (t.algo->uses_centre()) {
    const MemKind centre_kind = arena_kind_of(t, BufferClass::centre);
    auto centre = arena_on(g0, run.arena_floats(), centre_kind);
    if (!centre.ok())  // named as the groups' buffers are
      return Status(centre.status().code(), "centre: " + centre.status().message());
    run.centre = std::move(centre).value();
    if (values)
      copy_bytes(run.centre.data(), run.centre.kind(), init.data(), MemKind::dram, t.arena_bytes);
  }
  return {};
}

bool resident_for(const TrainRun& t) {
  const DeviceEntry& kind = *t.dev_req.kind;
  const Algorithm& algo = *t.algo;
  return kind.accelerator && algo.device_resident() && (kind.has_comm() || algo.max_groups() == 1);
}

CommNeeds comm_needs(const TrainRun& t, int64_t arena_floats, std::span<Device* const> devices) {
  CommNeeds needs;
  needs.local_groups = t.local;
  needs.collective = t.run.params.collective;
  needs.arena_floats = arena_floats;
  needs.world = t.world;
  needs.has_cores = !t.world && !t.plan.oversubscribed;
  needs.on_devices = resident_for(t) && t.algo->max_groups() > 1;
  needs.kind = t.dev_req.kind;
  needs.devices = devices;
  return needs;
}

Status agreed_outcome(const TrainRun& t, Status mine) {
  return t.world ? agree_on_outcome(*t.world, mine) : mine;
}

TrainRun::~TrainRun() {
  if (prepared) algo->finish(run);
  if (tracer) write_trace(*this);  // every thread that records has stopped
  run.comm.reset();                // NCCL's communicators go before the devices' streams
  // A group given up as stalled whose thread never came back: the thread and what it may still
  // use are left (never joined, never freed; docs/FAULTS.md, "Stalls").
  for (auto& g : run.groups) {
    if (!given_up(*g)) continue;
    for (auto& w : workers)
      if (w.get() == g->worker) (void)w.release();
    (void)g.release();
  }
  run.groups.clear();  // nets and streams go before their threads
  workers.clear();
}

Status check_group_count(const Algorithm& algo, int p) {
  if (p > algo.max_groups())
    return invalid_argument("--groups: " + algo.name() + " runs on one group, the plan has " +
                            std::to_string(p) + " (use a multi-group algorithm, e.g. sync-easgd)");
  return {};
}

namespace {

// EASEL_FAULT's fault (engine/fault.hpp), its target checked against the run's ranks and groups.
Status plan_fault(TrainRun& t) {
  EASEL_ASSIGN_OR_RETURN(t.fault, injected_fault());
  if (!t.fault) return {};
  const Fault::Action a = t.fault->action;
  const bool stall = a == Fault::Action::stall || a == Fault::Action::hang;
  const std::string what = std::string("EASEL_FAULT: ") + (a == Fault::Action::raise   ? "throw: "
                                                           : a == Fault::Action::stall ? "stall: "
                                                                                       : "hang: ");
  if ((stall || a == Fault::Action::raise) && !t.algo->survives_group_loss())
    return invalid_argument(what + t.algo->name() +
                            "'s groups wait for each other in its exchanges, some without a "
                            "deadline, so one that throws or stalls would hang the others; throw "
                            "is injected into the async centre algorithms and local-sgd, slowmo "
                            "and diloco, stall and hang into the async centre algorithms (kill "
                            "and nan into any)");
  // A periodic algorithm's average waits for every group: a stalled one is not watched there.
  if (stall && t.algo->uses_collectives())
    return invalid_argument(what + t.algo->name() +
                            "'s averages wait for every group, so a stalled one would hold the "
                            "others; stall and hang are injected into the async centre "
                            "algorithms (throw, kill and nan into " +
                            t.algo->name() + ")");
  // (Across ranks the others learn of no failure on another rank: a periodic one would wait.)
  if (a == Fault::Action::raise && t.ranks > 1 && t.algo->uses_collectives())
    return invalid_argument("EASEL_FAULT: throw: " + t.algo->name() +
                            "'s groups meet across ranks, where a group that throws would "
                            "leave the other ranks waiting; throw is injected in one process "
                            "(kill and nan across ranks)");
  if (stall && t.ranks > 1)
    return invalid_argument(
        "EASEL_FAULT: stall and hang: one process only (across MPI ranks a stalled rank's peers "
        "name it and the job stops)");
  const bool rank = t.fault->rank_target;
  const int has = rank ? t.ranks : t.p;
  if (t.fault->target < has) return {};
  return invalid_argument("EASEL_FAULT: " + std::string(rank ? "rank " : "group ") +
                          std::to_string(t.fault->target) + ": the run has " + std::to_string(has) +
                          (rank ? " rank(s)" : " group(s)"));
}

// --on-failure resolved for this run's algorithm and ranks (auto: drop where the algorithm
// survives a lost group in one process, else stop), or the refusal of drop or restart.
Status resolve_on_failure(TrainRun& t) {
  OnFailure mode = t.cfg.on_failure;
  if (mode == OnFailure::automatic)
    mode = t.algo->survives_group_loss() && t.ranks == 1 ? OnFailure::drop : OnFailure::stop;
  if (std::string why = failure_refusal(*t.algo, mode, t.ranks); !why.empty())
    return invalid_argument(why);
  t.run.on_failure = mode;
  return {};
}

// The plan's end, once its groups, net and data are known: the run's length and parameters,
// the rest of the plan resolved (resolve_plan), its memory fit, refused here, after the data and
// before any group's arena (run/fit.hpp), and the described machine's threads.
Status finish_plan(TrainRun& t, const Topology& topo, const DataSplit& data) {
  const TrainConfig& cfg = t.cfg;
  t.total =
      cfg.iterations > 0
          ? cfg.iterations
          : std::max<int64_t>(
                1, static_cast<int64_t>(std::ceil(cfg.epochs * static_cast<double>(t.per_epoch))));
  t.eval_every = cfg.eval_every > 0 ? cfg.eval_every : t.per_epoch;
  t.run.world = t.world;
  t.run.rank = t.rank;
  t.run.ranks = t.ranks;
  t.run.params = make_params(cfg, t.total, t.p);
  EASEL_ASSIGN_OR_RETURN(const NetCost cost, net_cost(t.spec));
  EASEL_RETURN_IF_ERROR(resolve_plan(t, cost));
  EASEL_RETURN_IF_ERROR(check_run_fit(cfg, topo, t.plan, data, t.spec, cost, t.resolved.exchange,
                                      t.ranks, t.rank == 0, &t.resolved.fit));
  return check_described_threads(topo, t.plan, cfg);
}

}  // namespace

Status plan_run(TrainRun& t, DataSplit& data, const DeviceRegistry& devices) {
  const TrainConfig& cfg = t.cfg;
  const Algorithm& algo = *t.algo;
  t.world = mpi_world();
  if (t.world && t.world->size() == 1) t.world = nullptr;
  t.ranks = t.world ? t.world->size() : 1;
  t.rank = t.world ? t.world->rank() : 0;
  t.report = t.rank == 0 ? t.obs : &t.null_observer;
  // Across ranks every refusal before a collective is agreed (agreed_outcome): the ranks end
  // together instead of each stopping the job.
  Topology topo;
  EASEL_RETURN_IF_ERROR(agreed_outcome(t, [&]() -> Status {
    if (t.ranks > 1 && !algo.multi_process())
      return invalid_argument("--algo " + algo.name() +
                              " runs within one process; across MPI ranks use sync-sgd, "
                              "sync-easgd, async-easgd or async-measgd");
    EASEL_ASSIGN_OR_RETURN(topo, detect_topology());
    return {};
  }()));
  std::string mpi_note;
  if (t.world) share_cores_among_local_ranks(topo, *t.world, &mpi_note);
  EASEL_RETURN_IF_ERROR(agreed_outcome(t, [&]() -> Status {
    EASEL_ASSIGN_OR_RETURN(t.plan, plan_groups(*t.algo, cfg, topo, devices));
    return {};
  }()));
  if (!mpi_note.empty()) t.plan.notes.push_back(mpi_note);
  t.local = static_cast<int>(t.plan.groups.size());
  t.data_cpus = spare_cpus(topo, t.plan);
  if (cfg.prefetch) log_data_threads(t);
  if (t.world) {
    int32_t local0 = t.local;
    t.world->broadcast_bytes(&local0, sizeof local0, 0);
    if (local0 != t.local)
      return invalid_argument("--groups: rank " + std::to_string(t.rank) + " planned " +
                              std::to_string(t.local) + " groups, rank 0 planned " +
                              std::to_string(local0) +
                              " (give every rank the same cores, or an explicit --groups)");
  }
  t.p = t.local * t.ranks;
  EASEL_RETURN_IF_ERROR(check_group_count(algo, t.p));
  EASEL_RETURN_IF_ERROR(plan_fault(t));
  EASEL_RETURN_IF_ERROR(resolve_on_failure(t));

  EASEL_ASSIGN_OR_RETURN(t.spec, build_model(cfg.net, {data.train.channels, data.train.height,
                                                       data.train.width, data.train.classes}));
  t.train_count = data.train.count;
  t.per_epoch = std::max<int64_t>(1, (t.train_count + cfg.batch * t.p - 1) / (cfg.batch * t.p));
  if (cfg.shuffle_buffer >= 0 && !reads_shards(data.train))
    return invalid_argument(
        "--shuffle-buffer: only streamed tar shards (--data shards:DIR, without :SIDE) are "
        "read through a shuffle buffer, not '" +
        data.train.name + "'");
  if (shuffle_buffer_for(data.train, cfg.shuffle_buffer) > 0)
    EASEL_RETURN_IF_ERROR(check_even_shards(data.train, t.p));
  // Keep only this rank's shards (groups rank*L .. rank*L+L-1 of P); shards read through a
  // shuffle buffer stay whole: each group picks its own tar files (build_group).
  if (t.ranks > 1 && shuffle_buffer_for(data.train, cfg.shuffle_buffer) == 0) {
    EASEL_ASSIGN_OR_RETURN(Dataset part, keep_shards(data.train, t.rank * t.local, t.local, t.p,
                                                     host_placement(t.cfg)[BufferClass::dataset]));
    data.train = std::move(part);
  }
  return finish_plan(t, topo, data);
}

Status build_run(TrainRun& t, const Dataset& train) {
  EASEL_RETURN_IF_ERROR(make_devices(t));
  choose_residence(t);
  EASEL_RETURN_IF_ERROR(build_groups(t, train));
  for (auto& g : t.run.groups)
    if (t.fault && fault_targets(*t.fault, t.rank, g->id, g->global_id)) g->fault = t.fault;
  if (mpi_fault_fail())
    return internal_error("EASEL_MPI_FAULT: injected failure on rank " + std::to_string(t.rank));
  EASEL_RETURN_IF_ERROR(make_comm(t));
  // What a checkpoint must match (the seed and layouts may differ: the weights, the centre and
  // the data positions come from the checkpoint).
  const TrainConfig& cfg = t.cfg;
  t.identity = "algo " + t.algo->name() + ", net " + t.spec.name + ", data " + cfg.data + " (" +
               std::to_string(t.train_count) + " images), " + std::to_string(t.p) +
               " group(s), batch " + std::to_string(cfg.batch) + ", " +
               std::to_string(t.run.arena_floats()) + " parameters" +
               (cfg.settings.empty() ? "" : kSettingsMark + cfg.settings);
  if (t.world || t.run.resident) {
    EASEL_ASSIGN_OR_RETURN(t.eval_buf, Arena::create(t.run.arena_floats(), MemKind::dram));
  }
  return {};
}

Status restore_from(TrainRun& t, const Checkpoint& resume) {
  const TrainConfig& cfg = t.cfg;
  const int64_t total = t.total;
  EASEL_RETURN_IF_ERROR(restore_run(resume, t.identity, *t.algo, cfg.seed, t.run));
  // On a clock the run goes on at the checkpoint's simulated time, each group's times with it.
  if ((resume.clock_seconds >= 0) != (t.clock != nullptr))
    return invalid_argument(resume.clock_seconds >= 0
                                ? "--resume: the checkpoint was taken on a clock (--clock): the "
                                  "run goes on on the same one"
                                : "--resume: the checkpoint was taken without --clock (or "
                                  "before checkpoint format 3, which holds the clock): a run on "
                                  "a clock cannot go on from it");
  if (t.clock) {
    std::vector<GroupTimes> times;
    for (const auto& g : t.run.groups)
      times.push_back(g->times);
    t.clock->resume_at(resume.clock_seconds, times);
  }
  if (resume.iterations_done >= total)
    return invalid_argument(
        "--resume: the run already did " + std::to_string(resume.iterations_done) + " of its " +
        std::to_string(total) + " iterations (give more with --iterations or --epochs)");
  // poly's rate depends on the run's length: another length is another schedule.
  if (depends_on_length(t.run.params.lr.policy) && resume.total_iterations != total)
    return invalid_argument(
        std::string("--resume: --lr-policy ") + lr_policy_name(t.run.params.lr.policy) +
        " ties the rate to the run's length (" + std::to_string(resume.total_iterations) +
        " iterations); it cannot change when the run continues");
  if (cfg.target_accuracy > 0 && resume.best_accuracy >= cfg.target_accuracy)
    return invalid_argument("--resume: the run already reached --target-accuracy " +
                            std::to_string(cfg.target_accuracy) + " (best " +
                            std::to_string(resume.best_accuracy) + "; give a higher one)");
  return {};
}

Status prepare_algorithm(TrainRun& t, const Checkpoint* resume) {
  Algorithm* algo = t.algo.get();
  Run& run = t.run;
  const int64_t total = t.total;
  // The centre is what a centre algorithm evaluates: with alpha 0 it never moves.
  if (algo->uses_centre() && run.params.alpha_at(0) == 0.f && run.params.alpha_at(total - 1) == 0.f)
    log_warn("train", "alpha is 0 (--alpha 0 or --rho 0): " + algo->name() +
                          "'s centre never moves, so every evaluation reads the initial weights");
  t.prepared = true;  // finish(run) is due even when prepare fails half-way
  EASEL_RETURN_IF_ERROR(algo->prepare(run));
  const std::string& why = t.resolved.collective.why;
  if (!why.empty() && t.rank == 0 && (t.world || algo->uses_collectives())) log_info("comm", why);
  if (resume) {
    AlgoState state = resume->algo;
    state.step = resume->iterations_done;
    // Into another number of groups (restore_run): easgd-rr's turn goes on among the new ones.
    if (regrouped(*resume, run)) state.turn %= run.size();
    EASEL_RETURN_IF_ERROR(algo->restore_state(run, state));
  }
  return {};
}

void describe_run(TrainRun& t, RunInfo& info) {
  const Run& run = t.run;
  const Group& g0 = *run.groups[0];
  info.algorithm = t.algo->name();
  info.net = t.spec.name;
  info.data = t.cfg.data;
  info.layout = layout_name(resolve_layout(t.cfg));
  info.exchange_path = t.algo->exchange_path();
  for (const auto& d : t.devices)
    info.device += (info.device.empty() ? "" : ",") + d->name();
  info.plan = t.plan;
  if (t.world) gather_plan(t, info.plan);
  info.ranks = t.ranks;
  info.params = run.layout->trained_count();
  info.total_iterations = t.total;
  info.iterations_per_epoch = t.per_epoch;
  info.eval_every = t.eval_every;
  info.flops_per_image = g0.net->flops_per_image_train();
  info.layers = g0.net->describe();
  info.channels = t.spec.channels, info.height = t.spec.height, info.width = t.spec.width;
  info.classes = t.spec.classes;
  info.placement = placement_to_string(t.cfg.placement);
  info.clock = t.cfg.clock;
  if (t.resolved.clock) info.clock_placement = t.resolved.clock->placement;
  info.stall_seconds = t.resolved.stall_seconds;
  info.stall_source = t.resolved.stall_source;
  info.stall_why = t.resolved.stall_why;
  if (t.rank == 0) {
    char b[64];
    std::snprintf(b, sizeof b, "stall deadline %.4g s (", info.stall_seconds);
    log_info("train",
             b + info.stall_source + (info.stall_why.empty() ? "" : ": " + info.stall_why) + ")");
  }
  // Each layer's kernel is in summary.json ("layers"); the log says it at --log-level debug, and
  // every fallback (a refusal and its reason) at info, once.
  for (const auto& l : info.layers)
    log_debug("net", l.name + " [" + l.kind + "] " + l.impl);
}

}  // namespace easel
