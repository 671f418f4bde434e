// Training steps (forward, softmax cross-entropy, backward, momentum update over the flat
// arena) of the real Net on synthetic inputs, every group on its own pinned WorkerThread, all
// groups stepping at once; with more than one group, each step ends with sync-easgd's exchange
// (tau = 1): the trainer's exchange (mirrored for two groups, else partitioned), the same work,
// ordered here by barriers where the trainer uses counters that let a group run a step ahead
// (tools/weak-scaling times the trainer itself). And the layer-level view of one group's step.
#include <array>
#include <cmath>
#include <span>

#include "algos/exchange.hpp"
#include "algos/sync_easgd_fast.hpp"
#include "engine/arena.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"
#include "tools/bench/bench.hpp"

namespace easel::bench {

namespace {

constexpr float kLr = 0.01f, kMomentum = 0.9f, kDecay = 5e-4f;  // Caffe's LeNet solver

// What the groups share for sync-easgd's exchange: the Comm (its barrier), and partitioned
// (P > 2): the centre's two buffers (old and new, swapped at every exchange) and every group's
// weights; mirrored (P == 2): every group's two published copies of its weights, by parity.
struct Exchange {
  std::unique_ptr<Comm> comm;
  Arena centre[2];
  std::vector<const float*> weights;
  std::vector<std::array<float*, 2>> published;
  float alpha = 0;
};

// One group's replica: its thread, net, arenas and one synthetic batch.
struct Replica {
  std::unique_ptr<WorkerThread> worker;
  std::unique_ptr<Net> net;
  Arena weights, diff, momentum;
  Buffer images;  // [batch, C, H, W] in the net's layout, values in [0, 1)
  std::vector<int32_t> labels;
  int id = 0;
  int64_t exchanges = 0;
  std::vector<float> sum_tmp;
  Arena mirror[3];  // mirrored: its own centre, its two published copies

  // One training step; with an Exchange, sync-easgd's (algos/sync_easgd.cpp). Mirrored: after
  // a barrier, one pass updates the group's own centre from both weights and takes its elastic
  // momentum step (heavy-ball, as momentum_step), streaming its new weights into the copy the
  // other group reads next. Partitioned: between two barriers the group updates its slice of
  // the centre, then it takes its elastic step from the old centre, the stores other groups
  // read streamed.
  void step(Exchange* ex = nullptr) {
    net->train_step(images.as<float>(), labels.data(), weights.data(), diff.data());
    if (ex == nullptr) {
      momentum_step(net->params().segments(), weights.data(), diff.data(), momentum.data(), kLr,
                    kMomentum, kDecay);
      return;
    }
    const int p = static_cast<int>(ex->weights.size());
    if (!ex->published.empty()) {
      std::array<const float*, 2> ws{};
      ws[static_cast<size_t>(id)] = weights.data();
      ws[static_cast<size_t>(1 - id)] = ex->published[static_cast<size_t>(1 - id)][exchanges % 2];
      ex->comm->barrier(id);
      mirrored_exchange(net->params().segments(), ws, weights.data(),
                        mirror[1 + (exchanges + 1) % 2].data(), diff.data(), momentum.data(),
                        mirror[0].data(), kLr, kMomentum, kDecay, ex->alpha, false, sum_tmp);
      exchanges += 1;
      return;
    }
    const float* c_old = ex->centre[exchanges % 2].data();
    float* c_new = ex->centre[(exchanges + 1) % 2].data();
    const auto [lo, hi] = centre_slice(weights.size(), p, id);
    ex->comm->barrier(id);
    centre_update_slice(ex->weights, c_old, c_new, ex->alpha, lo, hi, sum_tmp);
    ex->comm->barrier(id);
    elastic_momentum_step_streamed(net->params().segments(), weights.data(), weights.data(),
                                   diff.data(), momentum.data(), c_old, kLr, kMomentum, kDecay,
                                   ex->alpha, false, lo, hi);
    exchanges += 1;
  }
};

// Fills `arenas` with copies of `from`, allocated on `worker`'s thread (first touch).
Status copies_on(WorkerThread& worker, std::span<Arena> arenas, const Arena& from) {
  Status st;
  worker.run([&] {
    for (Arena& c : arenas) {
      auto a = Arena::create(from.size(), MemKind::dram);
      if (!a.ok()) {
        st = a.status();
        return;
      }
      c = std::move(a).value();
      span_copy(c.data(), from.data(), c.size());
    }
  });
  return st;
}

Layout layout_of(const BenchConfig& cfg) {
  return cfg.layout == "nchw" ? Layout::nchw : Layout::nhwc;
}

// Builds the replica on its own (already started) thread: first touch puts its pages there.
Status build_replica(Replica& r, const NetSpec& spec, int64_t batch, Layout layout,
                     Device& device) {
  Status st;
  r.worker->run([&] {
    auto net = Net::create(spec, batch, layout, device, MemKind::dram);
    if (!net.ok()) {
      st = net.status();
      return;
    }
    r.net = std::move(net).value();
    const int64_t n = r.net->params().total_floats();
    auto w = Arena::create(n, MemKind::dram);
    auto d = Arena::create(n, MemKind::dram);
    auto m = Arena::create(n, MemKind::dram);
    const int64_t count = r.net->input_shape().count();
    auto img = Buffer::allocate(static_cast<size_t>(count) * sizeof(float), MemKind::dram);
    for (const Status* s : {&w.status(), &d.status(), &m.status(), &img.status()})
      if (!s->ok()) {
        st = *s;
        return;
      }
    r.weights = std::move(w).value();
    r.diff = std::move(d).value();
    r.momentum = std::move(m).value();
    r.images = std::move(img).value();
    r.net->init_params(r.weights.data(), 1);
    uint32_t x = 12345;  // a fixed LCG: the same images on every run
    float* p = r.images.as<float>();
    for (int64_t i = 0; i < count; ++i) {
      x = x * 1664525u + 1013904223u;
      p[i] = static_cast<float>(x >> 8) * (1.f / 16777216.f);
    }
    r.labels.resize(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i)
      r.labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % spec.classes);
  });
  return st;
}

std::string impl_list(const Net& net) {
  std::string s;
  for (const LayerInfo& l : net.describe()) {
    if (!s.empty()) s += ", ";
    s += l.name + "=" + l.impl;
  }
  return s;
}

}  // namespace

Result<StepResult> time_steps(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                              int64_t batch, GroupLayout gl) {
  PlanRequest req;
  req.groups = std::to_string(gl.groups);
  req.threads_per_group = gl.threads;
  req.oversubscribe = cfg.oversubscribe;
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  EASEL_ASSIGN_OR_RETURN(ImplChoice impl, parse_impl_choice(cfg.impl));
  std::unique_ptr<Device> device = make_cpu_device(impl);

  std::vector<Replica> reps(plan.groups.size());
  std::vector<std::unique_ptr<WorkerThread>> workers;
  for (size_t i = 0; i < reps.size(); ++i) {
    EASEL_ASSIGN_OR_RETURN(reps[i].worker, WorkerThread::start(plan.groups[i], true));
    EASEL_RETURN_IF_ERROR(build_replica(reps[i], spec, batch, layout_of(cfg), *device));
    reps[i].id = static_cast<int>(i);
  }
  // More than one group: the sync-easgd exchange after every step, the centre on group 0's
  // thread (first touch), starting from the groups' common initial weights.
  std::unique_ptr<Exchange> ex;
  if (reps.size() > 1) {
    ex = std::make_unique<Exchange>();
    const int p = static_cast<int>(reps.size());
    ex->comm = make_shm_comm(p, CollectiveAlgo::tree, plan.oversubscribed ? 0 : kShmSpinSeconds);
    ex->alpha = 0.9f / static_cast<float>(p);  // the trainer's default (beta = 0.9)
    for (Replica& r : reps)
      ex->weights.push_back(r.weights.data());
    if (p == 2) {  // mirrored: every group's own centre and published copies, on its thread
      for (Replica& r : reps) {
        EASEL_RETURN_IF_ERROR(copies_on(*r.worker, r.mirror, r.weights));
        ex->published.push_back({r.mirror[1].data(), r.mirror[2].data()});
      }
    } else {  // partitioned: the centre's two buffers on group 0's thread
      EASEL_RETURN_IF_ERROR(copies_on(*reps[0].worker, ex->centre, reps[0].weights));
    }
  }
  // run_together wants the workers in a vector of their own; the replicas keep ownership.
  for (auto& r : reps)
    workers.push_back(std::move(r.worker));

  StepResult out;
  out.net = spec.name;
  out.batch = batch;
  out.layout = gl;
  for (const GroupSpec& g : plan.groups)
    out.cpus.push_back(g.cpus);
  out.flops_per_image = reps[0].net->flops_per_image_train();
  out.impls = impl_list(*reps[0].net);

  auto steps = [&](int64_t k) {
    return [&, k](int i) {
      for (int64_t s = 0; s < k; ++s)
        reps[static_cast<size_t>(i)].step(ex.get());
    };
  };
  run_together(workers, steps(cfg.warmup));
  std::vector<double> each;
  run_together(workers, steps(3), &each);
  const double t_step = std::max(each[0] / 3, 1e-6);
  out.steps_per_repeat =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cfg.min_time / t_step)));

  const int g = static_cast<int>(reps.size());
  const double images = static_cast<double>(out.steps_per_repeat * batch);
  std::vector<std::vector<double>> per_group(reps.size());
  std::vector<double> aggregate, step_ms;
  for (int r = 0; r < cfg.repeats; ++r) {
    const double span = run_together(workers, steps(out.steps_per_repeat), &each);
    for (int i = 0; i < g; ++i)
      per_group[static_cast<size_t>(i)].push_back(images / each[static_cast<size_t>(i)]);
    aggregate.push_back(images * g / span);
    step_ms.push_back(1e3 * each[0] / static_cast<double>(out.steps_per_repeat));
  }
  for (const auto& v : per_group)
    out.group_ips.push_back(summarize(v));
  out.aggregate_ips = summarize(aggregate);
  out.step_ms = summarize(step_ms);
  // Nets are freed on their own threads, before those threads stop.
  for (size_t i = 0; i < reps.size(); ++i)
    workers[i]->run([&, i] { reps[i].net.reset(); });
  out.rss_kib = peak_rss_kib();
  return out;
}

Result<LayerView> time_layers(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                              int64_t batch) {
  EASEL_ASSIGN_OR_RETURN(ImplChoice impl, parse_impl_choice(cfg.impl));
  std::unique_ptr<Device> device = make_cpu_device(impl);
  GroupSpec gs;
  gs.cpus = {topo.cores[0][0]};
  Replica r;
  EASEL_ASSIGN_OR_RETURN(r.worker, WorkerThread::start(gs, true));
  EASEL_RETURN_IF_ERROR(build_replica(r, spec, batch, layout_of(cfg), *device));

  LayerView out;
  out.net = spec.name;
  out.batch = batch;
  out.flops_per_image = r.net->flops_per_image_train();
  const std::vector<LayerInfo> info = r.net->describe();
  const size_t nl = info.size();
  std::vector<std::vector<double>> fwd(nl), bwd(nl);
  std::vector<double> step, update;
  const int iterations = std::max(3 * cfg.repeats, 21);
  r.worker->run([&] {
    Net& net = *r.net;
    const float* w = r.weights.data();
    for (int i = 0; i < cfg.warmup; ++i)
      r.step();
    for (int it = 0; it < iterations; ++it) {
      double t0 = seconds_now();
      net.train_step(r.images.as<float>(), r.labels.data(), w, r.diff.data());
      double t1 = seconds_now();
      step.push_back(1e3 * (t1 - t0));
      // The same step again, one layer at a time (train_step has set the input and the loss
      // gradient that the last layer's backward reads).
      for (size_t i = 0; i < nl; ++i) {
        t0 = seconds_now();
        net.forward_layer(i, w, true);
        t1 = seconds_now();
        fwd[i].push_back(1e3 * (t1 - t0));
      }
      for (size_t i = nl; i-- > 0;) {
        t0 = seconds_now();
        net.backward_layer(i, w, r.diff.data());
        t1 = seconds_now();
        bwd[i].push_back(1e3 * (t1 - t0));
      }
      t0 = seconds_now();
      momentum_step(net.params().segments(), r.weights.data(), r.diff.data(), r.momentum.data(),
                    kLr, kMomentum, kDecay);
      t1 = seconds_now();
      update.push_back(1e3 * (t1 - t0));
    }
  });
  double sum = 0;
  for (size_t i = 0; i < nl; ++i) {
    LayerTime lt;
    lt.info = info[i];
    lt.forward_ms = summarize(fwd[i]);
    lt.backward_ms = summarize(bwd[i]);
    sum += lt.forward_ms.median + lt.backward_ms.median;
    out.layers.push_back(std::move(lt));
  }
  out.step_ms = summarize(step);
  out.update_ms = summarize(update);
  out.other_ms = out.step_ms.median - sum;
  r.worker->run([&] { r.net.reset(); });
  return out;
}

}  // namespace easel::bench
