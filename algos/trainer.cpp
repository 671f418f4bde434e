#include "algos/trainer.hpp"

#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <future>
#include <thread>

#include "algos/groups.hpp"
#include "engine/log.hpp"
#include "engine/span_ops.hpp"
#include "nets/models/models.hpp"

namespace easel {

namespace {

// P groups (over all ranks) for `algo`, or why not.
Status check_group_count(const Algorithm& algo, int p) {
  if (p > algo.max_groups())
    return invalid_argument("--groups: " + algo.name() + " runs on one group, the plan has " +
                            std::to_string(p) + " (use a multi-group algorithm, e.g. sync-easgd)");
  return {};
}
}  // namespace

Result<GroupPlan> plan_groups(const TrainConfig& cfg, const Topology& topo, const GpuBackend& gpu) {
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Algorithm> algo, make_algorithm(cfg.algo));
  const DeviceRequest& dev = cfg.device;
  PlanRequest req = cfg.plan;
  if (dev.gpu) {
    // One worker group per GPU; its host thread (plus OpenMP team) gathers batches and runs
    // whatever the algorithm does on the host.
    auto gpus = gpu.list();
    if (!gpus.ok())
      return unavailable("--device " + device_text(cfg.device) + ": " + gpus.status().message());
    std::vector<int> ordinals = dev.ordinals;
    if (ordinals.empty())  // every GPU; a one-group algorithm the first
      for (const GpuInfo& g : *gpus)
        if (ordinals.size() < static_cast<size_t>(algo->max_groups()))
          ordinals.push_back(g.ordinal);
    for (int o : ordinals)
      if (o >= static_cast<int>(gpus->size()))
        return invalid_argument("--device " + device_text(cfg.device) + ": there is no GPU " +
                                std::to_string(o) + " (this machine has " +
                                std::to_string(gpus->size()) + ")");
    const int n = static_cast<int>(ordinals.size());
    if (req.groups != "auto" && req.groups != std::to_string(n))
      return invalid_argument("--groups " + req.groups + ": with --device " +
                              device_text(cfg.device) + " each GPU is one worker group (" +
                              std::to_string(n) + " GPU(s)" +
                              (algo->max_groups() == 1 && dev.ordinals.empty()
                                   ? ": " + algo->name() + " runs on the first)"
                                   : ")"));
    req.groups = std::to_string(n);
    if (req.threads_per_group == 0 && req.threads == 0 && req.cpu_lists.empty())
      req.threads_per_group = std::max(1, topo.core_count() / n);
    if (n > topo.core_count()) req.oversubscribe = true;  // host threads mostly wait on GPUs
    EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
    for (size_t i = 0; i < plan.groups.size(); ++i)
      plan.groups[i].gpu = ordinals[i];
    EASEL_RETURN_IF_ERROR(check_group_count(*algo, n));
    return plan;
  }
  if (algo->max_groups() == 1 && req.groups == "auto" && req.cpu_lists.empty()) {
    req.groups = "1";
    if (req.threads_per_group == 0)
      req.threads_per_group = req.threads > 0 ? req.threads : topo.core_count();
  }
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  // Refused here too, so that `easel topology` shows no plan that `easel train` would refuse.
  EASEL_RETURN_IF_ERROR(check_group_count(*algo, static_cast<int>(plan.groups.size())));
  EASEL_RETURN_IF_ERROR(check_hbw_placement(topo, cfg.placement));  // cache mode: no hbw node
  return plan;
}

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

// What each group reports to rank 0 after a round, as doubles (every count is below 2^53).
enum GroupRow : int {
  kSteps,
  kLossSum,
  kLossCount,
  kCompute,
  kComm,
  kWait,
  kPreempted,
  kStaleSum,
  kStaleCount,
  kStaleMax,
  kEvalLoss,
  kEvalCorrect,
  kEvalCount,
  kRowSize
};

// Calls algo.finish(run) when it goes out of scope (declared after the Run it stops).
struct FinishGuard {
  Algorithm& algo;
  Run& run;
  ~FinishGuard() { algo.finish(run); }
};

}  // namespace

Result<TrainSummary> train(const TrainConfig& cfg, DataSplit& data, TrainObserver* obs,
                           const GpuBackend& gpu, const Checkpoint* resume) {
  TrainObserver null_observer;
  if (!obs) obs = &null_observer;
  const double t_setup = now_seconds();
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Algorithm> algo, make_algorithm(cfg.algo));
  const DeviceRequest& dev_req = cfg.device;
  const Layout layout = resolve_layout(cfg);
  const ImplChoice impl = cfg.impl;
  const Precision precision = cfg.precision;
  const Placement& placement = cfg.placement;
  if (data.train.count == 0 || data.test.count == 0)
    return invalid_argument("--data: the training and test sets must not be empty");

  // Across MPI ranks: rank 0 reports (the observer), every rank trains its groups.
  MpiComm* world = mpi_world();
  if (world && world->size() == 1) world = nullptr;
  const int ranks = world ? world->size() : 1;
  const int rank = world ? world->rank() : 0;
  TrainObserver* report = rank == 0 ? obs : &null_observer;
  if (ranks > 1 && !algo->multi_process())
    return invalid_argument("--algo " + algo->name() +
                            " runs within one process; across MPI ranks use sync-sgd, "
                            "sync-easgd, async-easgd or async-measgd");

  EASEL_ASSIGN_OR_RETURN(Topology topo, detect_topology());
  std::string mpi_note;
  if (world) share_cores_among_local_ranks(topo, *world, &mpi_note);
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, plan_groups(cfg, topo, gpu));
  if (!mpi_note.empty()) plan.notes.push_back(mpi_note);
  const int local = static_cast<int>(plan.groups.size());
  if (world) {
    int32_t local0 = local;
    world->broadcast_bytes(&local0, sizeof local0, 0);
    if (local0 != local)
      return invalid_argument("--groups: rank " + std::to_string(rank) + " planned " +
                              std::to_string(local) + " groups, rank 0 planned " +
                              std::to_string(local0) +
                              " (give every rank the same cores, or an explicit --groups)");
  }
  const int p = local * ranks;  // P, the groups of the whole run
  EASEL_RETURN_IF_ERROR(check_group_count(*algo, p));

  EASEL_ASSIGN_OR_RETURN(
      NetSpec spec, build_model(cfg.net, {data.train.channels, data.train.height, data.train.width,
                                          data.train.classes}));
  const int64_t train_count = data.train.count;  // the whole training set, on every rank
  const int64_t per_epoch =
      std::max<int64_t>(1, (train_count + cfg.batch * p - 1) / (cfg.batch * p));
  if (ranks > 1) {  // keep only this rank's shards: groups rank*L .. rank*L+L-1 of P
    EASEL_ASSIGN_OR_RETURN(Dataset part, keep_shards(data.train, rank * local, local, p,
                                                     placement[BufferClass::dataset]));
    data.train = std::move(part);
  }
  const int64_t total =
      cfg.iterations > 0
          ? cfg.iterations
          : std::max<int64_t>(
                1, static_cast<int64_t>(std::ceil(cfg.epochs * static_cast<double>(per_epoch))));
  const int64_t eval_every = cfg.eval_every > 0 ? cfg.eval_every : per_epoch;

  // Devices outlive the run (its nets, arenas and Comm use their streams and handles).
  std::unique_ptr<Device> cpu_device = make_cpu_device(impl, precision);
  std::vector<std::unique_ptr<Device>> gpu_devices;
  Run run;
  run.world = world;
  run.rank = rank;
  run.ranks = ranks;
  run.params = make_params(cfg, total, p);
  // Devices: the CPU one is shared by every group; a GPU group has its own.
  if (dev_req.gpu) {
    if (world)
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
    for (const GroupSpec& gs : plan.groups) {
      EASEL_ASSIGN_OR_RETURN(auto d, gpu.make_device(gs.gpu, precision));
      gpu_devices.push_back(std::move(d));
    }
  }
  // GPU groups keep their arenas on the device when the algorithm allows (Sync EASGD2), else
  // in pinned host memory, staged through device copies every step.
  // Multi-group resident runs exchange over NCCL; without it they fall back to staging.
  run.resident =
      dev_req.gpu && algo->device_resident() && (gpu.comm_built() || algo->max_groups() == 1);
  if (dev_req.gpu && algo->device_resident() && !run.resident)
    log_once(LogLevel::warn, "train", "no-nccl",
             "--algo " + algo->name() +
                 ": this build has no NCCL, so the groups' weights stay in pinned host memory and "
                 "go through the GPUs every step (install NCCL and rebuild for the resident path)");
  const auto arena_kind = [&](BufferClass c) {
    if (!dev_req.gpu) return placement[c];
    return run.resident ? MemKind::device : MemKind::pinned_host;
  };

  // Build every replica on its own thread (first touch puts its pages on its node, device
  // memory lands on its GPU), one group at a time (set-up logs stay ordered). Group g of rank r
  // reads data shard r*L + g of P.
  std::vector<std::unique_ptr<WorkerThread>> workers;
  for (int i = 0; i < local; ++i) {
    EASEL_ASSIGN_OR_RETURN(auto w, WorkerThread::start(plan.groups[static_cast<size_t>(i)], true));
    auto g = std::make_unique<Group>();
    g->id = i;
    g->global_id = rank * local + i;
    g->worker = w.get();
    g->device = dev_req.gpu ? gpu_devices[static_cast<size_t>(i)].get() : cpu_device.get();
    Status st;
    w->run(
        [&] { st = build_group(*g, spec, cfg, layout, placement, arena_kind, data.train, local); });
    EASEL_RETURN_IF_ERROR(st);
    workers.push_back(std::move(w));
    run.groups.push_back(std::move(g));
  }
  run.layout = &run.groups[0]->net->params();
  if (mpi_fault_fail())
    return internal_error("EASEL_MPI_FAULT: injected failure on rank " + std::to_string(rank));
  if (run.resident && algo->max_groups() > 1) {  // sgd and msgd never call the Comm
    std::vector<Device*> devs;
    for (const auto& d : gpu_devices)
      devs.push_back(d.get());
    auto nccl = gpu.make_comm(devs);
    if (!nccl.ok())
      return unavailable("--device " + device_text(cfg.device) + ": " + nccl.status().message());
    run.comm = std::move(nccl).value();
  } else {
    // One process whose threads each have a core: barrier waiters spin (engine/comm/comm.hpp).
    const double spin = !world && !plan.oversubscribed ? kShmSpinSeconds : 0;
    run.spin_seconds = spin;
    run.comm = world ? make_hier_comm(make_shm_comm(local, run.params.collective), *world)
                     : make_shm_comm(local, run.params.collective, spin);
  }

  // Same initial weights everywhere (rank 0's, broadcast).
  Group& g0 = *run.groups[0];
  const size_t arena_bytes = static_cast<size_t>(run.arena_floats()) * sizeof(float);
  std::vector<float> init(static_cast<size_t>(run.arena_floats()));
  g0.net->init_params(init.data(), cfg.seed);
  if (world) world->broadcast(rank, init.data(), run.arena_floats(), 0);
  for (auto& g : run.groups)
    copy_bytes(g->weights.data(), g->weights.kind(), init.data(), MemKind::dram, arena_bytes);
  if (algo->uses_centre()) {
    const MemKind centre_kind = arena_kind(BufferClass::centre);
    EASEL_ASSIGN_OR_RETURN(run.centre, arena_on(g0, run.arena_floats(), centre_kind));
    copy_bytes(run.centre.data(), run.centre.kind(), init.data(), MemKind::dram, arena_bytes);
  }
  // What a checkpoint must match (the seed and layouts may differ: the weights, the centre and
  // the data positions come from the checkpoint).
  const std::string identity = "algo " + algo->name() + ", net " + spec.name + ", data " +
                               cfg.data + " (" + std::to_string(train_count) + " images), " +
                               std::to_string(p) + " group(s), batch " + std::to_string(cfg.batch) +
                               ", " + std::to_string(run.arena_floats()) + " parameters" +
                               (cfg.settings.empty() ? "" : kSettingsMark + cfg.settings);
  if (resume) {
    if (world) return invalid_argument("--resume: checkpoints are for single-process runs");
    EASEL_RETURN_IF_ERROR(restore_run(*resume, identity, *algo, run));
    if (resume->iterations_done >= total)
      return invalid_argument(
          "--resume: the run already did " + std::to_string(resume->iterations_done) + " of its " +
          std::to_string(total) + " iterations (give more with --iterations or --epochs)");
    // poly's rate depends on the run's length: another length is another schedule.
    if (run.params.lr.policy == LrSchedule::Policy::poly && resume->total_iterations != total)
      return invalid_argument("--resume: --lr-policy poly ties the rate to the run's length (" +
                              std::to_string(resume->total_iterations) +
                              " iterations); it cannot change when the run continues");
    if (cfg.target_accuracy > 0 && resume->best_accuracy >= cfg.target_accuracy)
      return invalid_argument("--resume: the run already reached --target-accuracy " +
                              std::to_string(cfg.target_accuracy) + " (best " +
                              std::to_string(resume->best_accuracy) + "; give a higher one)");
  }
  // The centre is what a centre algorithm evaluates: with alpha 0 it never moves.
  if (algo->uses_centre() && run.params.alpha_at(0) == 0.f && run.params.alpha_at(total - 1) == 0.f)
    log_warn("train", "alpha is 0 (--alpha 0 or --rho 0): " + algo->name() +
                          "'s centre never moves, so every evaluation reads the initial weights");
  FinishGuard finish_guard{*algo, run};
  EASEL_RETURN_IF_ERROR(algo->prepare(run));
  if (resume && !resume->centre_momentum.empty()) {
    if (static_cast<size_t>(run.centre_momentum.size()) != resume->centre_momentum.size())
      return invalid_argument("--resume: the checkpoint's centre momentum does not fit " +
                              algo->name());
    copy_bytes(run.centre_momentum.data(), run.centre_momentum.kind(),
               resume->centre_momentum.data(), MemKind::dram, arena_bytes);
  }

  TrainSummary sum;
  RunInfo& info = sum.info;
  info.algorithm = algo->name();
  info.net = spec.name;
  info.data = cfg.data;
  info.layout = layout_name(layout);
  info.device = dev_req.gpu ? "" : cpu_device->name();
  for (const auto& d : gpu_devices)
    info.device += (info.device.empty() ? "" : ",") + d->name();
  info.plan = plan;
  if (world) {  // the plan of all P groups, each rank's cpus as that rank planned them
    constexpr size_t kMaxCpus = 256;
    std::vector<int32_t> mine(static_cast<size_t>(local) * kMaxCpus, -1), all;
    for (int i = 0; i < local; ++i) {
      const auto& cpus = plan.groups[static_cast<size_t>(i)].cpus;
      for (size_t c = 0; c < cpus.size() && c < kMaxCpus; ++c)
        mine[static_cast<size_t>(i) * kMaxCpus + c] = cpus[c];
    }
    if (rank == 0) all.resize(mine.size() * static_cast<size_t>(ranks));
    world->gather_bytes(mine.data(), mine.size() * sizeof(int32_t), all.data(), 0);
    if (rank == 0) {
      info.plan.groups.clear();
      for (int q = 0; q < p; ++q) {
        GroupSpec gs = plan.groups[static_cast<size_t>(q % local)];
        gs.id = q;
        gs.cpus.clear();
        for (size_t c = 0; c < kMaxCpus; ++c)
          if (const int32_t cpu = all[static_cast<size_t>(q) * kMaxCpus + c]; cpu >= 0)
            gs.cpus.push_back(cpu);
        info.plan.groups.push_back(std::move(gs));
      }
      info.plan.notes.push_back("MPI: " + std::to_string(ranks) + " ranks x " +
                                std::to_string(local) + " groups");
    }
  }
  info.ranks = ranks;
  info.params = run.layout->param_count();
  info.total_iterations = total;
  info.iterations_per_epoch = per_epoch;
  info.eval_every = eval_every;
  info.flops_per_image = g0.net->flops_per_image_train();
  info.layers = g0.net->describe();
  info.placement = placement_to_string(placement);
  for (const auto& l : info.layers)
    log_info("net", l.name + " [" + l.kind + "] " + l.impl);
  report->on_start(info);
  obs->on_setup(run);
  sum.setup_seconds = now_seconds() - t_setup;
  sum.target_accuracy = cfg.target_accuracy;

  // The evaluated model in host memory: across ranks rank 0's, broadcast for sharded evaluation;
  // on GPUs with resident weights, downloaded from the device.
  std::vector<float> eval_buf;
  if (world || run.resident) eval_buf.resize(static_cast<size_t>(run.arena_floats()));
  double t0 = now_seconds();
  int64_t done = 0;
  int64_t last_images = 0;
  if (resume) {  // checked at restore_run above
    done = resume->iterations_done;
    last_images = resume->images_before_round;
    t0 -= resume->wall_seconds;
    sum.train_seconds = resume->train_seconds;
    sum.eval_seconds = resume->eval_seconds;
    sum.best_accuracy = resume->best_accuracy;
    if (resume->time_to_target_seconds >= 0)
      sum.time_to_target_seconds = resume->time_to_target_seconds;
  }
  const bool checkpoints = !world && report->wants_checkpoints();
  while (done < total) {
    const int64_t k = std::min(eval_every, total - done);
    run.budget.store(k * local);
    for (auto& g : run.groups) {
      g->loss_sum = 0;
      g->loss_count = 0;
    }
    const double r0 = now_seconds();
    const int64_t steps_before = [&] {
      int64_t s = 0;
      for (auto& g : run.groups)
        s += g->steps.load();
      return s;
    }();
    run_on_groups(
        run,
        [&](Group& g) {
          const double q0 = thread_runqueue_seconds();
          algo->run_round(run, g, k);
          g.device->synchronize();  // between rounds every buffer is settled
          const double q1 = q0 >= 0 ? thread_runqueue_seconds() : -1;
          if (q1 >= q0) g.times.preempted += q1 - q0;
        },
        [&] {
          int64_t s = 0;
          for (auto& g : run.groups)
            s += g->steps.load(std::memory_order_relaxed);
          s *= ranks;  // the other ranks run in lockstep
          const double el = now_seconds() - r0;
          const double ips =
              el > 0 ? static_cast<double>((s - steps_before * ranks) * cfg.batch) / el : 0;
          report->on_progress(s / p, total,
                              static_cast<double>(s * cfg.batch) / static_cast<double>(train_count),
                              0, ips);
        });
    if (world) world->barrier(rank);  // every rank's round is over (async: no request in flight)
    const double round_seconds = now_seconds() - r0;
    sum.train_seconds += round_seconds;
    done += k;

    const double e0 = now_seconds();
    const float* eval_w = algo->eval_weights(run);
    if (run.resident) {
      copy_bytes(eval_buf.data(), MemKind::dram, eval_w, MemKind::device, arena_bytes);
      eval_w = eval_buf.data();
    }
    if (world) {
      if (rank == 0) span_copy(eval_buf.data(), eval_w, run.arena_floats());
      world->broadcast(rank, eval_buf.data(), run.arena_floats(), 0);
      eval_w = eval_buf.data();
    }
    const std::vector<EvalStats> ev_part = evaluate_groups(run, data.test, eval_w);
    // Every group's row, in global group order on rank 0.
    std::vector<double> rows(static_cast<size_t>(local * kRowSize));
    for (int i = 0; i < local; ++i) {
      const Group& g = *run.groups[static_cast<size_t>(i)];
      double* r = &rows[static_cast<size_t>(i * kRowSize)];
      r[kSteps] = static_cast<double>(g.steps.load());
      r[kLossSum] = g.loss_sum;
      r[kLossCount] = static_cast<double>(g.loss_count);
      r[kCompute] = g.times.compute;
      r[kComm] = g.times.comm;
      r[kWait] = g.times.wait;
      r[kPreempted] = g.times.preempted;
      r[kStaleSum] = static_cast<double>(g.staleness_sum);
      r[kStaleCount] = static_cast<double>(g.staleness_count);
      r[kStaleMax] = static_cast<double>(g.staleness_max);
      r[kEvalLoss] = ev_part[static_cast<size_t>(i)].loss_sum;
      r[kEvalCorrect] = static_cast<double>(ev_part[static_cast<size_t>(i)].correct);
      r[kEvalCount] = static_cast<double>(ev_part[static_cast<size_t>(i)].count);
    }
    if (world) {
      std::vector<double> all(rank == 0 ? rows.size() * static_cast<size_t>(ranks) : 0);
      world->gather_bytes(rows.data(), rows.size() * sizeof(double), all.data(), 0);
      rows = std::move(all);
    }
    // 0: go on, 1: target reached, 2: diverged (rank 0 decides; every rank follows).
    int32_t decision = 0;
    EvalRecord rec;
    if (rank == 0) {
      int64_t group_steps = 0;
      double loss = 0;
      int64_t loss_n = 0;
      EvalStats ev;
      int64_t st_sum = 0, st_n = 0;
      for (int q = 0; q < p; ++q) {
        const double* r = &rows[static_cast<size_t>(q * kRowSize)];
        group_steps += static_cast<int64_t>(r[kSteps]);
        loss += r[kLossSum];
        loss_n += static_cast<int64_t>(r[kLossCount]);
        rec.group_times.push_back({r[kCompute], r[kComm], r[kWait], r[kPreempted]});
        rec.group_steps.push_back(static_cast<int64_t>(r[kSteps]));
        rec.staleness_max = std::max(rec.staleness_max, static_cast<int64_t>(r[kStaleMax]));
        st_sum += static_cast<int64_t>(r[kStaleSum]);
        st_n += static_cast<int64_t>(r[kStaleCount]);
        ev.loss_sum += r[kEvalLoss];
        ev.correct += static_cast<int64_t>(r[kEvalCorrect]);
        ev.count += static_cast<int64_t>(r[kEvalCount]);
      }
      const int64_t images = group_steps * cfg.batch;
      rec.eval_seconds = now_seconds() - e0;
      sum.eval_seconds += rec.eval_seconds;
      rec.wall_seconds = now_seconds() - t0;
      rec.train_seconds = sum.train_seconds;
      rec.step = group_steps / p;
      rec.images = images;
      rec.epoch = static_cast<double>(images) / static_cast<double>(train_count);
      rec.train_loss = loss_n ? loss / static_cast<double>(loss_n) : 0;
      rec.test_loss = ev.count ? ev.loss_sum / static_cast<double>(ev.count) : 0;
      rec.test_accuracy =
          ev.count ? static_cast<double>(ev.correct) / static_cast<double>(ev.count) : 0;
      rec.images_per_second =
          round_seconds > 0 ? static_cast<double>(images - last_images) / round_seconds : 0;
      rec.staleness_mean = st_n ? static_cast<double>(st_sum) / static_cast<double>(st_n) : 0;
      last_images = images;
      report->on_eval(rec);

      sum.test_accuracy = rec.test_accuracy;
      sum.test_loss = rec.test_loss;
      sum.best_accuracy = std::max(sum.best_accuracy, rec.test_accuracy);
      sum.steps = rec.step;
      sum.images = images;
      sum.epochs = rec.epoch;
      sum.group_times = rec.group_times;
      sum.staleness_mean = rec.staleness_mean;
      sum.staleness_max = rec.staleness_max;
      if (cfg.target_accuracy > 0 && !sum.time_to_target_seconds &&
          rec.test_accuracy >= cfg.target_accuracy) {
        sum.time_to_target_seconds = sum.train_seconds;
        sum.stopped_at_target = true;
        decision = 1;
      } else if (!std::isfinite(rec.train_loss)) {
        decision = 2;
      }
    } else {
      sum.eval_seconds += now_seconds() - e0;
    }
    if (checkpoints && decision != 2) {  // a diverged round keeps the last good checkpoint
      Checkpoint ck = capture_run(run, *algo, identity);
      ck.iterations_done = done;
      ck.total_iterations = total;
      ck.wall_seconds = rec.wall_seconds;
      ck.train_seconds = sum.train_seconds;
      ck.eval_seconds = sum.eval_seconds;
      ck.best_accuracy = sum.best_accuracy;
      ck.time_to_target_seconds = sum.time_to_target_seconds.value_or(-1);
      ck.images_before_round = last_images;
      // A failed write (disk full, --out removed) leaves the last good checkpoint; training
      // goes on.
      if (Status st = report->on_checkpoint(ck); !st.ok())
        log_error("train", "checkpoint not written: " + st.message() +
                               " (the previous one, if any, is still whole)");
    }
    if (world) world->broadcast_bytes(&decision, sizeof decision, 0);
    if (decision == 1) break;
    if (decision == 2)
      return internal_error(
          rank == 0 ? "training diverged: train loss is " + std::to_string(rec.train_loss) +
                          " at step " + std::to_string(rec.step) + " (lower --lr)"
                    : std::string("training diverged (rank 0 saw a non-finite train loss)"));
  }
  sum.wall_seconds = now_seconds() - t0;
  sum.images_per_second =
      sum.train_seconds > 0 ? static_cast<double>(sum.images) / sum.train_seconds : 0;
  for (const auto& t : sum.group_times) {
    sum.compute_seconds += t.compute;
    sum.comm_seconds += t.comm;
    sum.wait_seconds += t.wait;
    sum.preempted_seconds += t.preempted;
  }
  const double all = sum.compute_seconds + sum.comm_seconds + sum.wait_seconds;
  sum.comm_share = all > 0 ? sum.comm_seconds / all : 0;
  sum.wait_share = all > 0 ? sum.wait_seconds / all : 0;
  sum.preempted_share = all > 0 ? sum.preempted_seconds / all : 0;
  sum.final_weights.resize(static_cast<size_t>(run.arena_floats()));
  if (world)
    sum.final_weights = eval_buf;
  else
    copy_bytes(sum.final_weights.data(), MemKind::dram, algo->eval_weights(run),
               run.resident ? MemKind::device : MemKind::dram, arena_bytes);
  sum.group0_weights.resize(static_cast<size_t>(run.arena_floats()));
  copy_bytes(sum.group0_weights.data(), MemKind::dram, g0.weights.data(), g0.weights.kind(),
             arena_bytes);
  algo->finish(run);
  run.comm.reset();    // NCCL's communicators go before the devices' streams
  run.groups.clear();  // nets and streams go before their threads
  workers.clear();
  return sum;
}

}  // namespace easel
