// Training steps (forward, softmax cross-entropy, backward, then the update) of the real Net on
// synthetic inputs, every group on its own pinned WorkerThread, all groups stepping at once,
// each driven by the algorithm itself (its run_round; the group's fake gradient is the net's
// step on its synthetic batch): msgd with one group (a momentum_step over the flat arena);
// with more, sync-easgd at tau 1 with heavy-ball momentum, exactly as the trainer runs it
// (mirrored for two groups, else partitioned; tools/weak-scaling times the trainer itself).
// And the layer-level view of one group's step.
#include <cmath>
#include <span>

#include "algos/list.hpp"
#include "engine/arena.hpp"
#include "engine/span_ops.hpp"
#include "tools/bench/bench.hpp"

namespace easel::bench {

namespace {

constexpr float kLr = 0.01f, kMomentum = 0.9f, kDecay = 5e-4f;  // Caffe's LeNet solver

// One group's synthetic batch: [batch, C, H, W] in the net's layout, values in [0, 1), and
// its labels.
struct Inputs {
  Buffer images;
  std::vector<int32_t> labels;
};

Layout layout_of(const BenchConfig& cfg) {
  return cfg.layout == "nchw" ? Layout::nchw : Layout::nhwc;
}

// Builds group g's replica on its own (already started) thread, g.worker: first touch puts its
// pages there. Its fake gradient is the net's training step on `in`.
Status build_replica(Group& g, Inputs& in, const NetSpec& spec, int64_t batch, Layout layout,
                     Device& device) {
  Status st;
  g.device = &device;
  g.worker->run([&] {
    auto net = Net::create(spec, batch, layout, device, MemKind::dram);
    if (!net.ok()) {
      st = net.status();
      return;
    }
    g.net = std::move(net).value();
    const int64_t n = g.net->params().total_floats();
    auto w = Arena::create(n, MemKind::dram);
    auto d = Arena::create(n, MemKind::dram);
    auto m = Arena::create(n, MemKind::dram);
    const int64_t count = g.net->input_shape().count();
    auto img = Buffer::allocate(static_cast<size_t>(count) * sizeof(float), MemKind::dram);
    for (const Status* s : {&w.status(), &d.status(), &m.status(), &img.status()})
      if (!s->ok()) {
        st = *s;
        return;
      }
    g.weights = std::move(w).value();
    g.diff = std::move(d).value();
    g.momentum = std::move(m).value();
    in.images = std::move(img).value();
    g.net->init_params(g.weights.data(), 1);
    uint32_t x = 12345;  // a fixed LCG: the same images on every run
    float* p = in.images.as<float>();
    for (int64_t i = 0; i < count; ++i) {
      x = x * 1664525u + 1013904223u;
      p[i] = static_cast<float>(x >> 8) * (1.f / 16777216.f);
    }
    in.labels.resize(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i)
      in.labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % spec.classes);
  });
  g.fake_gradient = [&in](Group& gr) {
    gr.net->train_step(in.images.as<float>(), in.labels.data(), gr.weights.data(), gr.diff.data());
  };
  return st;
}

// Frees the groups' nets on their own threads, before those threads stop.
void free_nets(Run& run) {
  for (auto& g : run.groups)
    g->worker->run([&] { g->net.reset(); });
}

std::string impl_list(const Net& net) {
  std::string s;
  for (const LayerInfo& l : net.describe()) {
    if (!s.empty()) s += ", ";
    s += l.name + "=" + l.impl;
  }
  return s;
}

// The groups of `plan`, each built on its own thread (a worker in `workers`), with the
// algorithm the table times prepared on them: msgd for one, sync-easgd for more (tau 1, the
// trainer's default alpha = 0.9 / P, heavy-ball momentum as momentum_step's).
Result<std::unique_ptr<Algorithm>> build_run(Run& run, std::vector<Inputs>& inputs,
                                             std::vector<std::unique_ptr<WorkerThread>>& workers,
                                             const GroupPlan& plan, const BenchConfig& cfg,
                                             const NetSpec& spec, int64_t batch, Device& device) {
  inputs.resize(plan.groups.size());
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    EASEL_ASSIGN_OR_RETURN(auto w, WorkerThread::start(plan.groups[i], true));
    auto g = std::make_unique<Group>();
    g->id = g->global_id = static_cast<int>(i);
    g->worker = w.get();
    workers.push_back(std::move(w));
    run.groups.push_back(std::move(g));
    EASEL_RETURN_IF_ERROR(
        build_replica(*run.groups[i], inputs[i], spec, batch, layout_of(cfg), device));
  }
  AlgoParams params;
  params.lr.policy = LrSchedule::Policy::fixed;
  params.lr.base = kLr;
  params.momentum = kMomentum;
  params.weight_decay = kDecay;
  params.nesterov = false;
  params.alpha = 0.9f / static_cast<float>(run.size());
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Algorithm> algo,
                         make_algorithm(run.size() > 1 ? kDefaultAlgo : kOneGroupAlgo));
  EASEL_RETURN_IF_ERROR(prepare_bench_run(run, *algo, run.groups[0]->net->params(), params,
                                          plan.oversubscribed ? 0 : kShmSpinSeconds));
  return algo;
}

// What a timed run stands on: the plan of `groups` groups of `threads` threads each on topo (as
// cfg allows oversubscription) and the CPU device of cfg's kernels.
struct BenchBase {
  GroupPlan plan;
  std::unique_ptr<Device> device;
};
Result<BenchBase> bench_base(const Topology& topo, const BenchConfig& cfg, int groups,
                             int threads) {
  PlanRequest req;
  req.groups = GroupCount::of(groups);
  req.threads_per_group = threads;
  req.oversubscribe = cfg.oversubscribe;
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  EASEL_ASSIGN_OR_RETURN(ImplChoice impl, parse_impl_choice(cfg.impl));
  return BenchBase{std::move(plan), make_cpu_device(impl)};
}

}  // namespace

Result<StepResult> time_steps(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                              int64_t batch, GroupLayout gl) {
  EASEL_ASSIGN_OR_RETURN(BenchBase base, bench_base(topo, cfg, gl.groups, gl.threads));
  const GroupPlan& plan = base.plan;
  const std::unique_ptr<Device>& device = base.device;

  // The workers outlive the run (run_together wants them in a vector of their own).
  std::vector<std::unique_ptr<WorkerThread>> workers;
  Run run;
  std::vector<Inputs> inputs;
  auto algo = build_run(run, inputs, workers, plan, cfg, spec, batch, *device);
  if (!algo.ok()) {
    free_nets(run);
    return algo.status();
  }

  StepResult out;
  out.net = spec.name;
  out.batch = batch;
  out.layout = gl;
  for (const GroupSpec& g : plan.groups)
    out.cpus.push_back(g.cpus);
  out.flops_per_image = run.groups[0]->net->flops_per_image_train();
  out.impls = impl_list(*run.groups[0]->net);

  std::vector<double> cpu(run.groups.size());  // each group's thread CPU seconds, last call
  auto steps = [&](int64_t k) {
    return [&, k](int i) {
      const double c0 = thread_cpu_seconds();
      algo.value()->run_round(run, *run.groups[static_cast<size_t>(i)], k);
      cpu[static_cast<size_t>(i)] = thread_cpu_seconds() - c0;
    };
  };
  run_together(workers, steps(cfg.warmup));
  std::vector<double> each;
  run_together(workers, steps(3), &each);
  const double t_step = std::max(each[0] / 3, 1e-6);
  out.steps_per_repeat =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cfg.min_time / t_step)));

  const int g = run.size();
  const double images = static_cast<double>(out.steps_per_repeat * batch);
  std::vector<std::vector<double>> per_group(static_cast<size_t>(g));
  std::vector<double> aggregate, step_ms, cpu_ms;
  for (int r = 0; r < cfg.repeats; ++r) {
    const double span = run_together(workers, steps(out.steps_per_repeat), &each);
    cpu_ms.push_back(1e3 * summarize(cpu).median / static_cast<double>(out.steps_per_repeat));
    for (int i = 0; i < g; ++i)
      per_group[static_cast<size_t>(i)].push_back(images / each[static_cast<size_t>(i)]);
    aggregate.push_back(images * g / span);
    step_ms.push_back(1e3 * each[0] / static_cast<double>(out.steps_per_repeat));
  }
  for (const auto& v : per_group)
    out.group_ips.push_back(summarize(v));
  out.aggregate_ips = summarize(aggregate);
  out.step_ms = summarize(step_ms);
  out.cpu_step_ms = summarize(cpu_ms);
  for (const auto& gp : run.groups) {
    out.compute_seconds += gp->times.compute;
    out.comm_seconds += gp->times.comm;
    out.wait_seconds += gp->times.wait;
  }
  free_nets(run);
  out.rss_kib = peak_rss_kib();
  return out;
}

Result<std::vector<double>> time_corun(const Topology& topo, const BenchConfig& cfg,
                                       const NetSpec& spec, int64_t batch, int groups, int rounds) {
  EASEL_ASSIGN_OR_RETURN(BenchBase base, bench_base(topo, cfg, groups, 1));
  const GroupPlan& plan = base.plan;
  const std::unique_ptr<Device>& device = base.device;
  std::vector<std::unique_ptr<WorkerThread>> workers;
  Run run;
  std::vector<Inputs> inputs(plan.groups.size());
  auto cleanup = [&] { free_nets(run); };
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    auto w = WorkerThread::start(plan.groups[i], true);
    if (!w.ok()) {
      cleanup();
      return w.status();
    }
    auto g = std::make_unique<Group>();
    g->id = g->global_id = static_cast<int>(i);
    g->worker = w.value().get();
    workers.push_back(std::move(w).value());
    run.groups.push_back(std::move(g));
    if (Status st = build_replica(*run.groups[i], inputs[i], spec, batch, layout_of(cfg), *device);
        !st.ok()) {
      cleanup();
      return st;
    }
  }
  // One step of group i: its training step and the momentum update (as msgd's round).
  auto step = [&](int i) {
    Group& g = *run.groups[static_cast<size_t>(i)];
    g.fake_gradient(g);
    momentum_step(g.net->params().segments(), g.weights.data(), g.diff.data(), g.momentum.data(),
                  kLr, kMomentum, kDecay);
  };
  std::vector<double> cpu(run.groups.size());
  auto steps = [&](int64_t k) {
    return [&, k](int i) {
      const double c0 = thread_cpu_seconds();
      for (int64_t s = 0; s < k; ++s)
        step(i);
      cpu[static_cast<size_t>(i)] = (thread_cpu_seconds() - c0) / static_cast<double>(k);
    };
  };
  run_together(workers, steps(2));  // warm-up: first touches, oneDNN's primitives
  double one = 0;
  workers[0]->run([&] { steps(2)(0); });
  one = std::max(cpu[0], 1e-6);
  const int64_t k = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(cfg.min_time / one)));
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    workers[0]->run([&] { steps(k)(0); });
    const double alone = std::max(cpu[0], 1e-9);
    run_together(workers, steps(k));
    ratios.push_back(summarize(cpu).median / alone);
  }
  cleanup();
  return ratios;
}

Result<LayerView> time_layers(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                              int64_t batch) {
  EASEL_ASSIGN_OR_RETURN(ImplChoice impl, parse_impl_choice(cfg.impl));
  std::unique_ptr<Device> device = make_cpu_device(impl);
  GroupSpec gs;
  gs.cpus = {topo.cores[0][0]};
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<WorkerThread> worker, WorkerThread::start(gs, true));
  Group r;
  Inputs in;
  r.worker = worker.get();
  if (Status st = build_replica(r, in, spec, batch, layout_of(cfg), *device); !st.ok()) {
    worker->run([&] { r.net.reset(); });
    return st;
  }

  LayerView out;
  out.net = spec.name;
  out.batch = batch;
  out.flops_per_image = r.net->flops_per_image_train();
  const std::vector<LayerInfo> info = r.net->describe();
  const size_t nl = info.size();
  std::vector<std::vector<double>> fwd(nl), bwd(nl), fwd_cpu(nl), bwd_cpu(nl);
  std::vector<double> step, update, step_cpu, update_cpu;
  const int iterations = std::max(3 * cfg.repeats, 21);
  r.worker->run([&] {
    Net& net = *r.net;
    float* w = r.weights.data();
    for (int i = 0; i < cfg.warmup; ++i) {
      r.fake_gradient(r);
      momentum_step(net.params().segments(), r.weights.data(), r.diff.data(), r.momentum.data(),
                    kLr, kMomentum, kDecay);
    }
    // Wall and thread CPU time of f, in ms, appended to `wall` and `cpu`.
    auto timed = [](std::vector<double>& wall, std::vector<double>& cpu, auto&& f) {
      const double c0 = thread_cpu_seconds(), t0 = seconds_now();
      f();
      const double t1 = seconds_now(), c1 = thread_cpu_seconds();
      wall.push_back(1e3 * (t1 - t0));
      cpu.push_back(1e3 * (c1 - c0));
    };
    for (int it = 0; it < iterations; ++it) {
      timed(step, step_cpu,
            [&] { net.train_step(in.images.as<float>(), in.labels.data(), w, r.diff.data()); });
      // The same step again, one layer at a time (train_step has set the input and the loss
      // gradient that the last layer's backward reads).
      for (size_t i = 0; i < nl; ++i)
        timed(fwd[i], fwd_cpu[i], [&] { net.forward_layer(i, w, true); });
      for (size_t i = nl; i-- > 0;)
        timed(bwd[i], bwd_cpu[i], [&] { net.backward_layer(i, w, r.diff.data()); });
      timed(update, update_cpu, [&] {
        momentum_step(net.params().segments(), r.weights.data(), r.diff.data(), r.momentum.data(),
                      kLr, kMomentum, kDecay);
      });
    }
  });
  double sum = 0;
  for (size_t i = 0; i < nl; ++i) {
    LayerTime lt;
    lt.info = info[i];
    lt.forward_ms = summarize(fwd[i]);
    lt.backward_ms = summarize(bwd[i]);
    lt.forward_cpu_ms = summarize(fwd_cpu[i]);
    lt.backward_cpu_ms = summarize(bwd_cpu[i]);
    sum += lt.forward_ms.median + lt.backward_ms.median;
    out.layers.push_back(std::move(lt));
  }
  out.step_ms = summarize(step);
  out.update_ms = summarize(update);
  out.step_cpu_ms = summarize(step_cpu);
  out.update_cpu_ms = summarize(update_cpu);
  out.other_ms = out.step_ms.median - sum;
  r.worker->run([&] { r.net.reset(); });
  return out;
}

}  // namespace easel::bench
