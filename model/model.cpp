#include "model/model.hpp"

#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/list.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "algos/list.hpp"
#include "algos/sync_easgd.hpp"

namespace easel::model {

namespace {

constexpr double kGB = 1e9;

int levels_of(int p) {
  int l = 0;
  while ((1 << l) < p)
    ++l;
  return l;
}

// The algorithm's facts (its row of algos/list.cpp); nullptr for an unknown name.
const ModelFacts* facts_of(const std::string& a) {
  const AlgoEntry* e = find_algo(a);
  return e ? &e->model : nullptr;
}
ExchangeKind kind_of(const std::string& a) {
  const ModelFacts* f = facts_of(a);
  return f ? f->kind : ExchangeKind::unset;
}
bool is_one_group(const std::string& a) {
  return kind_of(a) == ExchangeKind::none;
}
bool is_sync(const std::string& a) {
  return kind_of(a) == ExchangeKind::collective;
}
bool is_easgd(const std::string& a) {
  const ModelFacts* f = facts_of(a);
  return f && f->elastic;
}
bool is_locked(const std::string& a) {
  return kind_of(a) == ExchangeKind::locked_centre;
}
bool is_hogwild(const std::string& a) {
  return kind_of(a) == ExchangeKind::lockfree_centre;
}
bool is_average(const std::string& a) {
  return kind_of(a) == ExchangeKind::average;
}
bool is_round_robin(const std::string& a) {
  return kind_of(a) == ExchangeKind::round_robin;
}
// The collective algorithms' names, "a, b and c".
std::string sync_names() {
  std::vector<std::string> names;
  for (const AlgoEntry& a : algo_list())
    if (a.model.kind == ExchangeKind::collective) names.push_back(a.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The memory a group's buffers are in.
const MemoryFigure& memory_of(const Machine& m, const ModelRequest& req) {
  if (m.gpu) return m.device;
  if (req.placement == "hbw" && m.hbw.present) return m.hbw;
  return m.dram;
}

double core_bandwidth(const Machine& m, const MemoryFigure& mem) {
  return (mem.core_bandwidth_gbs > 0 ? mem.core_bandwidth_gbs
                                     : mem.bandwidth_gbs / std::max(m.cores, 1)) *
         kGB;
}

// The share of a group's steps that run its own momentum update: all of them, but for an
// algorithm whose exchange takes the local step's place (ModelFacts::update_in_exchange: the
// centre algorithms) those that do not exchange, 1 - 1/tau (none for async-sgd's every step).
double update_share(const ModelRequest& req) {
  const AlgoEntry* e = find_algo(req.algo);
  if (e == nullptr || !e->model.update_in_exchange) return 1;
  AlgoParams ap;
  ap.tau = req.tau;
  const int64_t k = steps_per_exchange(*e, ap);
  return k > 0 ? 1 - 1.0 / static_cast<double>(k) : 1;
}

// Bytes one step streams through memory besides the FLOPs: the update over the arena (w, g, v
// read, w, v written: 20 n, on its share of the steps) and each activation written, read by
// the backward pass and its gradient written and read (4 passes of 4 bytes per float).
double step_bytes(const ModelRequest& req) {
  return 20.0 * static_cast<double>(req.cost.arena_floats) * update_share(req) +
         16.0 * static_cast<double>(req.cost.activation_floats) * static_cast<double>(req.batch);
}

// A CPU group's step from its layers at the calibrated per-class rates (its own step never
// timed), before time slicing.
double rated_step(const Machine& m, const ModelRequest& req, const MemoryFigure& mem,
                  double speedup, Prediction& out) {
  out.compute_source = "layer rates";
  StepRates r = m.step;
  r.fallback_gflops = m.peak_gflops * m.efficiency;
  r.fallback_gbs = core_bandwidth(m, mem) / kGB;
  // The update's weights, gradients and momentum (12 n bytes) beyond the last-level cache
  // stream from memory: at most one core's bandwidth.
  const double n = static_cast<double>(req.cost.arena_floats);
  if (r.update_by_size.empty() && m.cache_mb > 0 && 12 * n > m.cache_mb * 1e6)
    r.update_gbs = std::min(r.update_gbs, core_bandwidth(m, mem) / kGB);
  // Out of the cache after the step's activations: the update's cold timings.
  if (passes_cold(m, req) && !m.update_passes.empty() && m.update_passes[0].cold_seconds > 0) {
    r.update_by_size.clear();
    for (const ExchangePoint& x : m.update_passes)
      r.update_by_size.emplace_back(x.bytes, x.cold_seconds);
  }
  const StepEstimate e =
      estimate_step(r, req.layers, static_cast<double>(req.cost.arena_floats), req.batch);
  const double skipped = (1 - update_share(req)) * e.update_seconds;
  for (size_t i = 0; i < req.layers.size(); ++i)
    out.layers.push_back({req.layers[i].name, req.layers[i].cls, e.forward[i], e.backward[i]});
  for (const std::string& c : e.fallback)
    out.notes.push_back("no calibrated rate for layer class '" + c +
                        "': priced at peak x efficiency and one core's bandwidth");
  double t = (e.seconds - skipped) / speedup * m.peak_gflops / m.compute_rate(req.precision);
  const double groups_at_once = std::min(req.groups, m.cores);
  if (m.cores > 1)
    t *= 1 + (m.contention - 1) * (groups_at_once - 1) / static_cast<double>(m.cores - 1);
  return t;
}

// One group's step among the others, and where the figure comes from.
double step_seconds(const Machine& m, const ModelRequest& req, Prediction& out) {
  const double b = static_cast<double>(req.batch);
  if (const double share = update_share(req); share <= 0)
    out.notes.push_back(
        "the exchange applies the update at every step: no momentum update of "
        "the group's own");
  else if (share < 1)
    out.notes.push_back(
        "the exchange applies the update on its steps: the group's own momentum "
        "update on the other " +
        fmt("%.3g", 100 * share) + "% of them");
  const double flops = req.cost.train_flops * b;
  if (m.gpu) {
    out.compute_source = "described";
    const double t = flops / (m.compute_rate(req.precision) * kGB * m.efficiency) +
                     step_bytes(req) / (m.device.bandwidth_gbs * kGB);
    // The batch crosses the host link every step (all co-design steps keep that).
    return t + m.host_device.seconds(b * static_cast<double>(req.input_floats) * 4);
  }
  const int t_threads = std::max(req.threads_per_group, 1);
  const int n_threads = req.groups * t_threads;
  const int active = std::min(n_threads, m.cores);
  const double speedup = t_threads / (1 + m.serial_fraction * (t_threads - 1));
  const MemoryFigure& mem = memory_of(m, req);
  double t = 0;
  const NetCalibration* cal = m.calibration(req.net);
  const bool rated = !m.step.rates.empty() && !req.layers.empty() && req.placement != "hbw";
  if (rated) {
    t = rated_step(m, req, mem, speedup, out);
  } else if (cal != nullptr && req.placement != "hbw") {
    out.compute_source = "calibrated";
    // Calibrated at fp32: another precision scales it by the rates' ratio.
    t = (cal->step_seconds - (1 - update_share(req)) * cal->update_seconds) * b /
        static_cast<double>(cal->batch) / speedup * m.peak_gflops / m.compute_rate(req.precision);
    if (cal->batch != req.batch)
      out.notes.push_back("the step was measured at batch " + std::to_string(cal->batch) +
                          ", scaled linearly to " + std::to_string(req.batch));
    const double groups_at_once = std::min(req.groups, m.cores);
    if (m.cores > 1)
      t *= 1 + (m.contention - 1) * (groups_at_once - 1) / static_cast<double>(m.cores - 1);
  } else {
    out.compute_source = "described";
    const double t_flops = flops / (m.compute_rate(req.precision) * kGB * m.efficiency) / speedup;
    // Memory: the group's threads stream at up to T cores' bandwidth, and all active cores
    // share the kind's bandwidth.
    const double bytes = step_bytes(req);
    const double own = bytes / (core_bandwidth(m, mem) * t_threads);
    const double shared = bytes * std::min(req.groups, active) / (mem.bandwidth_gbs * kGB);
    t = t_flops + std::max(own, shared);
    if (cal != nullptr)
      out.notes.push_back("placement " + req.placement +
                          ": the measured step (DRAM) is not used; FLOPs and bandwidth are");
  }
  if (n_threads > m.cores) {
    out.oversubscribed = true;
    const double over = static_cast<double>(n_threads) / m.cores;
    const double overhead =
        !rated && cal != nullptr && req.placement != "hbw" && cal->oversubscription_overhead >= 0
            ? cal->oversubscription_overhead
            : m.oversubscription_overhead;
    // Time slicing: a core runs its N / C threads in turn, so a group's step takes N / C of
    // the cores' time; each turn starts with the caches the others left (a group is switched
    // out at least at every barrier and lock), a cost per step, whatever N / C: (1 + overhead).
    t *= over * (1 + overhead);
    out.notes.push_back(std::to_string(n_threads) + " threads on " + std::to_string(m.cores) +
                        " cores: each step takes " + fmt("%.2f", over) +
                        "x as long (time slicing), plus the calibrated switching overhead");
  }
  return t;
}

// The transport among the groups and the memory bandwidth of a shared-memory exchange.
struct Link {
  std::string name;
  const Transport* t = nullptr;
  bool shared_memory = false;
};

Link link_of(const Machine& m, const ModelRequest& req, bool to_master) {
  if (!m.gpu) return {"shared_memory", &m.shared_memory, true};
  // GPUs: the original EASGD's master is on the host, over the host link; a non-resident run's
  // weights are in host memory already (copied every step): its exchange is the host's.
  if (to_master) return {"host_device", &m.host_device, false};
  if (!req.resident) return {"shared_memory", &m.shared_memory, true};
  if (m.nccl.present) return {"nccl", &m.nccl, false};
  return {"host_device", &m.host_device, false};
}

// sync-easgd's exchange path, chosen by the trainer's own rule (algos/sync_easgd.hpp) from the
// same switches: a fast exchange in one process on the CPU where the switches and the net allow
// (a net with running statistics, batch norm's, takes the Comm path), else the Comm's.
bool takes_sync_path(const ModelRequest& req) {
  return takes_sync_exchange(req.algo);
}
Result<SyncExchangeChoice> sync_path_of(const Machine& m, const ModelRequest& req) {
  SyncSwitches s;
  s.ranks = req.ranks;
  s.on_devices = m.gpu && req.resident;
  s.reduce = req.reduce;
  s.pack = req.pack;
  s.collective = req.collective;
  s.overlap = req.overlap;
  return choose_sync_exchange(req.exchange, s, req.cost.state_floats > 0, req.groups);
}

// Whether sync-easgd runs the trainer's Comm path on the CPU, priced from the machine's Comm
// path timings where it has them.
bool on_comm_path(const Machine& m, const ModelRequest& req) {
  if (m.gpu || !takes_sync_path(req) || m.shm_comm_exchange.empty()) return false;
  const auto path = sync_path_of(m, req);
  return path.ok() && path.value().path == SyncExchangePath::comm;
}

// What the Comm path's exchange steps add to a group's compute: the elastic momentum step where
// the step's momentum update was priced (the trainer times it as compute), both timed by size
// (with momentum, as the algorithm's defaults run; the model takes no --momentum).
double elastic_step_extra(const Machine& m, const ModelRequest& req) {
  if (m.elastic_passes.empty() || m.update_passes.empty()) return 0;
  const double w = 4.0 * static_cast<double>(req.cost.arena_floats);
  const bool cold = passes_cold(m, req);
  return std::max(
      0.0, seconds_by_size(m.elastic_passes, w, cold) - seconds_by_size(m.update_passes, w, cold));
}

// --reduce serial: P exchanges with the centre, one after the other, weights both ways each.
double serial_exchange(const Machine& m, const Link& link, int p, double n, int msgs,
                       Prediction& out) {
  const double w = 4 * n;
  out.exchange_messages = 2 * msgs * p;
  if (link.shared_memory) {
    out.exchange_bytes = 36 * n * p;  // read centre, write group (8n), elastic (16n), centre (12n)
    return p * (2 * msgs * link.t->latency_us * 1e-6 + 36 * n / (link.t->bandwidth_gbs * kGB));
  }
  out.exchange_bytes = 2 * w * p;
  // The centre's elastic update in host memory, once per group.
  return p * 2 * (msgs * link.t->latency_us * 1e-6 + w / (link.t->bandwidth_gbs * kGB)) +
         p * 12 * n / (m.dram.bandwidth_gbs * kGB);
}

// The collective across ranks (engine/comm/collective_cost.hpp), on the MPI transport's latency
// and bandwidth, one message per process; sync-easgd's centre by an allreduce or by the master's
// reduce and broadcast. Its seconds; its messages, bytes and transport added to out's.
double across_ranks(const Machine& m, const ModelRequest& req, Prediction& out, double w, int msgs,
                    bool sgd) {
  CollectiveShape shape;
  shape.bytes = w / msgs;
  shape.ranks = req.ranks;
  shape.ranks_per_node = req.ranks_per_node;
  shape.intra = shape.inter = LinkCost{m.mpi.latency_us * 1e-6, m.mpi.bandwidth_gbs * kGB};
  const CollectiveChoice pick = resolve_collective(req.collective, shape);
  const bool allreduce = sgd || req.sync_centre != "master";
  const double t = msgs * (allreduce ? allreduce_seconds(pick.algo, shape, pick.inter)
                                     : reduce_broadcast_seconds(pick.algo, shape, pick.inter));
  const bool whole = collective_entry(pick.algo).whole_span_messages;
  const double factor =
      whole ? 2.0 * levels_of(req.ranks) : 2.0 * (req.ranks - 1) / req.ranks * (allreduce ? 1 : 2);
  out.exchange_messages += msgs * (whole ? 2 * levels_of(req.ranks) : 2 * (req.ranks - 1));
  out.exchange_bytes += factor * w;
  out.transport +=
      std::string("+mpi(") + collective_algo_name(pick.algo) + (allreduce ? "" : ", master") + ")";
  return t;
}

// Sync EASGD's (and sync-sgd's) exchange among P groups of one node.
double sync_exchange(const Machine& m, const ModelRequest& req, Prediction& out) {
  const int p = req.groups;
  const double n = static_cast<double>(req.cost.arena_floats);
  const double w = 4 * n;
  const int msgs = req.pack == PackMode::per_layer ? std::max(req.param_layers, 1) : 1;
  const bool sgd = !is_easgd(req.algo);  // sync-sgd's gradients: no centre, no elastic step
  const Link link = link_of(m, req, false);
  out.transport = link.name;
  // One group of sync-easgd still takes its elastic step against the centre; sync-sgd has
  // nothing to exchange.
  if (p == 1 && (sgd || !link.shared_memory)) return 0;
  double t = 0;
  if (req.reduce == ReduceMode::serial && !sgd) return serial_exchange(m, link, p, n, msgs, out);
  const int levels = levels_of(p);
  if (link.shared_memory) {
    // STREAM-counted bytes of the whole exchange: the reduce's and broadcast's 20n per level
    // pair (P - 1 of them), every group's elastic step (16n) and the centre's (12n); the
    // trainer's exchanges (partitioned, mirrored for two) spread them evenly over the groups'
    // threads, each at the link's bandwidth, all at most at the memory's.
    const int threads = m.gpu ? 1 : std::max(req.threads_per_group, 1);
    const MemoryFigure& mem = m.gpu ? m.dram : memory_of(m, req);
    out.exchange_messages = msgs * (2 * levels + 1);
    out.exchange_bytes = shm_exchange_floats(p, sgd) * n;
    // The trainer's path: a net with running statistics (batch norm) takes the Comm path, whose
    // comm is the reduce and the centre's update (its elastic step is compute: predict adds
    // elastic_step_extra); the others the fused exchange (mirrored or partitioned).
    const bool comm_path = on_comm_path(m, req);
    const double by_size =
        m.gpu ? -1
              : shm_exchange_by_size(comm_path ? m.shm_comm_exchange : m.shm_exchange, m, p, sgd, n,
                                     msgs, threads, comm_path, comm_path && passes_cold(m, req));
    if (by_size >= 0) {
      // A group's CPU time for it, timed by size; groups sharing a core take turns at it.
      const double over = std::max(1.0, static_cast<double>(p * threads) / std::max(m.cores, 1));
      t = by_size * over;
      out.exchange_turns_seconds = by_size * (over - 1);
      // On the Comm path the root sums and updates the centre while the others wait at the
      // barriers; with a core each they spin there (the trainer's kShmSpinSeconds), so each
      // group's CPU is the root's: the slowest group's timings less the mean.
      if (comm_path && p > 1 && over == 1) {
        std::vector<ExchangePoint> slowest;
        for (const ExchangePoint& x : m.shm_comm_exchange)
          if (x.slowest_seconds > 0)
            slowest.push_back({x.groups, x.bytes, x.slowest_seconds, x.slowest_cold_seconds});
        if (slowest.size() == m.shm_comm_exchange.size()) {
          const double root =
              shm_exchange_by_size(slowest, m, p, sgd, n, msgs, threads, true, passes_cold(m, req));
          out.exchange_root_wait_seconds = std::max(0.0, root - by_size);
        }
      }
      out.notes.push_back(std::string("the exchange priced from its calibrated timings by size (") +
                          (comm_path ? "the Comm path a net with running statistics takes, " : "") +
                          fmt("%.1f", w / 1e6) + " MB arena)");
    } else {
      t = shm_exchange_seconds(m, mem, p, sgd, n, msgs, threads);
    }
    if (by_size < 0 && shm_exchange_cached(m, p, n))
      out.notes.push_back("the exchange's arenas (" + fmt("%.1f", (2.0 * p + 1) * w / 1e6) +
                          " MB) fit the " + fmt("%.0f", m.cache_mb) +
                          " MB last-level cache: its bytes are not bounded by memory bandwidth");
  } else {
    // A reduce and a broadcast of the arena, each ceil(log2 P) levels of one message.
    out.exchange_messages = 2 * levels * msgs;
    out.exchange_bytes = 2 * levels * w;
    t = 2 * levels * (msgs * link.t->latency_us * 1e-6 + w / (link.t->bandwidth_gbs * kGB));
    // The elastic updates on the devices (or host): w, centre read, w written, centre summed.
    const MemoryFigure& mem = req.resident ? m.device : m.dram;
    t += 28 * n / (mem.bandwidth_gbs * kGB);
  }
  if (req.ranks > 1) t += across_ranks(m, req, out, w, msgs, sgd);
  return t;
}

// One group's exchange with the centre (easgd-rr's turn, the async algorithms' locked update,
// hogwild's unlocked one): its weights or step there and the centre back.
double centre_exchange(const Machine& m, const ModelRequest& req, Prediction& out) {
  const double n = static_cast<double>(req.cost.arena_floats);
  const double w = 4 * n;
  const int msgs = req.pack == PackMode::per_layer ? std::max(req.param_layers, 1) : 1;
  const Link link = link_of(m, req, true);
  out.transport = link.name;
  out.exchange_messages = 2 * msgs;
  if (link.shared_memory) {
    // The group reads the centre and its own weights, updates both (EASGD: 16n + 12n; SGD's
    // step onto the centre and the copy back: 12n + 8n).
    const double bytes = is_easgd(req.algo) ? 28 * n : 20 * n;
    out.exchange_bytes = bytes;
    // The locked exchange timed by size (a calibrated machine): async-easgd's, in a group's CPU
    // time; another's by its bytes against it.
    const double timed = is_locked(req.algo) && !m.gpu
                             ? seconds_by_size(m.shm_centre_exchange, w, passes_cold(m, req))
                             : -1;
    if (timed >= 0) {
      out.notes.push_back("the locked exchange priced from its calibrated timings by size (" +
                          fmt("%.1f", w / 1e6) + " MB arena)");
      return timed * bytes / (28 * n) + 2 * (msgs - 1) * link.t->latency_us * 1e-6;
    }
    double bw = link.t->bandwidth_gbs * kGB;
    // Hogwild's groups write the centre all at once: they share the machine's bandwidth.
    if (is_hogwild(req.algo))
      bw = std::min(bw, m.dram.bandwidth_gbs * kGB / std::min(req.groups, m.cores));
    return 2 * msgs * link.t->latency_us * 1e-6 + bytes / bw;
  }
  out.exchange_bytes = 2 * w;
  return 2 * (msgs * link.t->latency_us * 1e-6 + w / (link.t->bandwidth_gbs * kGB)) +
         12 * n / (m.dram.bandwidth_gbs * kGB);
}

Status check(const Machine& m, const ModelRequest& req) {
  if (facts_of(req.algo) == nullptr)
    return invalid_argument("--algo: unknown algorithm '" + req.algo + "' (easel list)");
  if (req.groups < 1 || req.groups > 65536)
    return invalid_argument("--groups: " + std::to_string(req.groups) +
                            " is out of range [1, 65536]");
  if (is_one_group(req.algo) && req.groups != 1)
    return invalid_argument("--algo " + req.algo + " runs one group, not " +
                            std::to_string(req.groups));
  if (req.threads_per_group < 1 || req.threads_per_group > 4096)
    return invalid_argument("--threads-per-group: " + std::to_string(req.threads_per_group) +
                            " is out of range [1, 4096]");
  if (m.gpu && req.threads_per_group != 1)
    return invalid_argument("--threads-per-group: " + m.file +
                            " is a GPU machine (one group per device)");
  if (m.gpu && req.groups > m.devices)
    return invalid_argument("--groups: " + std::to_string(req.groups) + " groups, but " + m.file +
                            " has " + std::to_string(m.devices) + " devices");
  if (req.tau < 1 || req.tau > 1000000)
    return invalid_argument("--tau: " + std::to_string(req.tau) + " is out of range [1, 1000000]");
  if (req.batch < 1 || req.batch > 65536)
    return invalid_argument("--batch: " + std::to_string(req.batch) +
                            " is out of range [1, 65536]");
  if (req.placement != "dram" && req.placement != "hbw")
    return invalid_argument("--placement: '" + req.placement + "' (the model takes dram or hbw)");
  if (req.placement == "hbw" && !m.gpu && !m.hbw.present)
    return invalid_argument("--placement hbw: " + m.file + " has no [memory.hbw]");
  if (req.sync_centre != "auto" && req.sync_centre != "master" && req.sync_centre != "allreduce")
    return invalid_argument("--sync-centre: '" + req.sync_centre + "' (auto, master or allreduce)");
  if (req.precision != "fp32" && req.precision != "tf32" && req.precision != "bf16")
    return invalid_argument("--precision: '" + req.precision + "' (fp32, tf32 or bf16)");
  if (m.compute_rate(req.precision) <= 0)
    return invalid_argument("--precision " + req.precision + ": " + m.file + " has no " +
                            req.precision + " rate ([compute] " + req.precision + "_gflops)");
  if (takes_sync_path(req)) EASEL_RETURN_IF_ERROR(sync_path_of(m, req).status());
  if (req.ranks < 1 || req.ranks > 65536)
    return invalid_argument("--ranks: " + std::to_string(req.ranks) +
                            " is out of range [1, 65536]");
  if (req.ranks > 1 && !is_sync(req.algo) && !is_average(req.algo))
    return invalid_argument("--ranks: the model spans ranks for " + sync_names() + " only");
  if (req.ranks_per_node < 1 || req.ranks_per_node > req.ranks)
    return invalid_argument("--ranks-per-node: " + std::to_string(req.ranks_per_node) +
                            " is out of range [1, " + std::to_string(req.ranks) + "] (--ranks)");
  if (m.gpu && req.groups * req.ranks_per_node > m.devices)
    return invalid_argument("--ranks-per-node: " + std::to_string(req.ranks_per_node) +
                            " ranks of " + std::to_string(req.groups) + " groups need " +
                            std::to_string(req.groups * req.ranks_per_node) + " devices; " +
                            m.file + " has " + std::to_string(m.devices));
  if (!m.gpu && req.ranks_per_node > m.cores)
    return invalid_argument("--ranks-per-node: " + std::to_string(req.ranks_per_node) +
                            " ranks on " + std::to_string(m.cores) + " cores: use at most " +
                            std::to_string(m.cores) + " per machine");
  if (req.ranks > 1 && !m.mpi.present)
    return invalid_argument("--ranks: " + m.file + " has no [transport.mpi]");
  if (!req.resident && !m.gpu) return invalid_argument("--resident off: only for a GPU machine");
  return Status::ok_status();
}

}  // namespace

double shm_exchange_floats(int p, bool sgd) {
  if (p <= 1) return sgd ? 0 : 28;
  return sgd ? 20.0 * (p - 1) + 20.0 * p : 20.0 * (p - 1) + 16.0 * p + 12;
}
int shm_exchange_levels(int p) {
  return levels_of(p);
}

bool shm_exchange_cached(const Machine& m, int p, double n) {
  return m.cache_mb > 0 && (2.0 * p + 1) * 4 * n <= m.cache_mb * 1e6;
}

double shm_comm_path_floats(int p) {
  return 4.0 * (std::max(p, 1) + 1) + 12;
}

double shm_exchange_by_size(const std::vector<ExchangePoint>& points, const Machine& m, int p,
                            bool sgd, double n, int msgs, int threads, bool comm_path, bool cold) {
  if (points.empty() || n <= 0) return -1;
  int g = points.front().groups;
  for (const ExchangePoint& x : points)
    if (std::abs(x.groups - p) < std::abs(g - p) ||
        (std::abs(x.groups - p) == std::abs(g - p) && x.groups > g))
      g = x.groups;
  std::vector<ExchangePoint> at;
  for (const ExchangePoint& x : points)
    if (x.groups == g) at.push_back(x);
  const double s = seconds_by_size(std::move(at), 4 * n, cold);
  const double per_group =
      (comm_path ? shm_comm_path_floats(p) : shm_exchange_floats(p, sgd)) / std::max(p, 1);
  const double at_g = (comm_path ? shm_comm_path_floats(g) : shm_exchange_floats(g, sgd)) / g;
  return s * per_group / at_g / std::max(threads, 1) +
         (msgs - 1) * (2 * levels_of(p) + 1) * m.shared_memory.latency_us * 1e-6;
}

double seconds_by_size(std::vector<ExchangePoint> at, double bytes, bool cold) {
  std::vector<std::pair<double, double>> xy;
  for (const ExchangePoint& x : at)
    xy.emplace_back(x.bytes, cold && x.cold_seconds > 0 ? x.cold_seconds : x.seconds);
  return log_log_interpolate(std::move(xy), bytes);
}

double shm_exchange_seconds(const Machine& m, const MemoryFigure& mem, int p, bool sgd, double n,
                            int msgs, int threads) {
  const double total = shm_exchange_floats(p, sgd) * n;
  const double own =
      total / std::max(p, 1) / (std::max(threads, 1) * m.shared_memory.bandwidth_gbs * kGB);
  const double through_memory =
      shm_exchange_cached(m, p, n) ? 0 : total / (mem.bandwidth_gbs * kGB);
  return msgs * (2 * levels_of(p) + 1) * m.shared_memory.latency_us * 1e-6 +
         std::max(own, through_memory);
}

double group_bytes(const ModelRequest& req) {
  // weights, gradients, momentum and the algorithm's own (sync-easgd's partitioned exchange: a
  // second weights arena); the list's row says how many.
  const ModelFacts* f = facts_of(req.algo);
  const double arenas = f ? f->arenas_per_group : 3;
  return 4.0 * static_cast<double>(req.cost.arena_floats) * arenas +
         8.0 * static_cast<double>(req.cost.activation_floats) * static_cast<double>(req.batch);
}

bool passes_cold(const Machine& m, const ModelRequest& req) {
  if (m.gpu || m.cache_mb <= 0) return false;
  const double bytes =
      req.groups * group_bytes(req) + 4.0 * static_cast<double>(req.cost.arena_floats);
  return bytes > 0.5 * m.cache_mb * 1e6;
}

// What one rank's exchange has of `whole` when `ranks` ranks share it: 1/ranks of its cores,
// of its memories' bandwidth and of its last-level cache (their compute is priced on the whole
// machine, as groups x ranks groups: predict).
Machine rank_share(const Machine& whole, int ranks) {
  Machine m = whole;
  m.cores = std::max(1, whole.cores / ranks);
  for (MemoryFigure* mem : {&m.dram, &m.hbw})
    mem->bandwidth_gbs /= ranks;
  m.cache_mb /= ranks;
  return m;
}

namespace {

// How often a group exchanges and what it sends each time (the algorithm's row).
void exchange_rate(const ModelRequest& req, Prediction& out) {
  const AlgoEntry& e = *find_algo(req.algo);  // check() refused an unknown one
  AlgoParams ap;
  ap.tau = req.tau;
  ap.precision = req.exchange_precision;
  const int64_t k = steps_per_exchange(e, ap);
  out.exchanges_per_step = k > 0 ? 1.0 / static_cast<double>(k) : 0;
  out.group_exchange_bytes =
      k > 0 ? static_cast<double>(exchange_bytes(e, ap, req.cost.arena_floats)) : 0;
}

// A sync algorithm's iteration: the step tc (with the Comm path's elastic step), the exposed
// exchange as comm, the turns of groups sharing a core and the root's wait as wait.
void sync_iteration(const Machine& m, const ModelRequest& req, Prediction& out, double& tc,
                    double& comm, double& wait, double& iteration) {
  const int p = req.groups;
  const double x = sync_exchange(m, req, out);
  out.exchange_seconds = x;
  if (on_comm_path(m, req)) {
    // Its exchange steps' elastic step, a pass per group, time-sliced as the step is.
    const double over =
        std::max(1.0, static_cast<double>(p * std::max(req.threads_per_group, 1)) / m.cores);
    const double e = elastic_step_extra(m, req) * over / req.tau;
    if (e > 0) {
      tc += e;
      out.notes.push_back("the Comm path's elastic momentum step: " + fmt("%.3g", e * 1e3) +
                          " ms a step over the momentum update, timed by size");
    }
  }
  const double per_step = is_easgd(req.algo) ? x / req.tau : x;
  double exposed = per_step;
  if (req.overlap && facts_of(req.algo)->overlappable) {
    exposed = std::max(0.0, per_step - tc);
    out.notes.push_back("overlap on: the exchange runs beside the next step; exposed " +
                        fmt("%.3g", exposed) + " s of " + fmt("%.3g", per_step) + " s");
  }
  // Groups that share a core wait at the exchange's barriers while the others take their
  // turns: that part of it is wait, as the trainer counts it.
  const double turns = std::min(exposed, is_easgd(req.algo) ? out.exchange_turns_seconds / req.tau
                                                            : out.exchange_turns_seconds);
  comm += exposed - turns;
  wait = turns + out.exchange_root_wait_seconds / req.tau;
  if (out.oversubscribed) wait += m.oversubscribed_wait * tc;
  iteration = tc + comm + wait;
}

// A centre under a lock: the lock serialises the groups' exchanges. With a core each, at
// utilisation U = P x / (step + x) a group queues about x U / (2 (1 - U)) (M/D/1), at most
// (P - 1) x; at U >= 1 the lock is the bottleneck and a round takes P x.
void locked_iteration(const Machine& m, const ModelRequest& req, Prediction& out,
                      double host_copies, double tc, double& comm, double& wait,
                      double& iteration) {
  const int p = req.groups;
  const double x = centre_exchange(m, req, out) / (is_easgd(req.algo) ? req.tau : 1);
  out.exchange_seconds = x * (is_easgd(req.algo) ? req.tau : 1);
  const int threads = std::max(req.threads_per_group, 1);
  if (!m.gpu && p * threads > m.cores) {
    // Groups sharing the cores: the exchange is time-sliced as the step is (N / C of the
    // cores' time), and a group blocked at the lock leaves its core to another group, which
    // steps meanwhile: the cores stay busy unless the lock itself is the bottleneck (its P
    // exchanges, one at a time, take longer than the round).
    const double over = static_cast<double>(p * threads) / m.cores;
    comm += x * over;
    iteration = std::max(tc + comm, p * x + host_copies);
    wait = iteration - tc - comm;
  } else if (const double u = p * x / (tc + comm + x); u >= 1) {
    comm += x;
    iteration = p * x + host_copies;
    wait = std::max(0.0, iteration - tc - comm);
  } else {
    comm += x;
    wait = std::min(x * u / (2 * (1 - u)), (p - 1) * x);
    iteration = tc + comm + wait;
  }
}

}  // namespace

Result<Prediction> predict(const Machine& whole, const ModelRequest& req) {
  EASEL_RETURN_IF_ERROR(check(whole, req));
  const int rpn = req.ranks_per_node;
  const Machine m = rpn > 1 ? rank_share(whole, rpn) : whole;
  Prediction out;
  if (takes_sync_path(req))
    out.exchange_path = sync_exchange_path_name(sync_path_of(m, req).value().path);
  // Ranks sharing the machine: each group's step is one of groups x rpn on all of its cores.
  ModelRequest node = req;
  node.groups = req.groups * rpn;
  if (rpn > 1)
    out.notes.push_back(std::to_string(rpn) + " ranks share the machine: the step is one of " +
                        std::to_string(node.groups) + " groups on its " +
                        std::to_string(whole.cores) + " cores; each rank's exchange has 1/" +
                        std::to_string(rpn) + " of its memory bandwidth and cache");
  double tc = step_seconds(whole, node, out);
  out.step_seconds = tc;
  const int p = req.groups;
  // Weights that do not stay on the device cross the host link at every step: down before the
  // step, the gradient back after it (the original EASGD and Sync EASGD1 on GPUs).
  double host_copies = 0;
  if (m.gpu && !req.resident) {
    const double w = 4.0 * static_cast<double>(req.cost.arena_floats);
    host_copies = 2 * m.host_device.seconds(w);
    out.notes.push_back("weights not resident: " + fmt("%.1f", 2 * w / 1e6) +
                        " MB cross the host link every step");
  }
  double comm = host_copies, wait = 0, iteration = 0;
  exchange_rate(req, out);
  if (is_one_group(req.algo)) {
    iteration = tc + comm;
  } else if (is_sync(req.algo)) {
    sync_iteration(m, req, out, tc, comm, wait, iteration);
  } else if (is_average(req.algo)) {
    // local-sgd, slowmo, diloco: every tau steps an allreduce of each group's pseudo-gradient
    // at its precision (sync-sgd's allreduce of as many bytes), then the outer rule over the
    // arena (x, u, d and w read, x, u, w written: 28n bytes through the groups' memory).
    ModelRequest a = req;
    a.cost.arena_floats = (out.group_exchange_bytes + 3) / 4;
    const double x = sync_exchange(m, a, out) + 28.0 * static_cast<double>(req.cost.arena_floats) /
                                                    (memory_of(m, req).bandwidth_gbs * kGB);
    out.exchange_seconds = x;
    comm += x / req.tau;
    if (out.oversubscribed) wait = m.oversubscribed_wait * tc;
    iteration = tc + comm + wait;
  } else if (is_round_robin(req.algo)) {
    // The master serves one group at a time, by id: a round takes max(own step + turn, P turns).
    const double x = centre_exchange(m, req, out) / req.tau;
    out.exchange_seconds = x * req.tau;
    comm += x;
    iteration = std::max(tc + comm, p * x + host_copies);
    wait = iteration - tc - comm;
  } else if (is_locked(req.algo)) {
    locked_iteration(m, req, out, host_copies, tc, comm, wait, iteration);
  } else {  // hogwild: no lock, the groups' writes share the bandwidth
    const double x = centre_exchange(m, req, out) / (is_easgd(req.algo) ? req.tau : 1);
    out.exchange_seconds = x * (is_easgd(req.algo) ? req.tau : 1);
    comm += x;
    iteration = tc + comm;
  }
  out.seconds_per_iteration = iteration;
  out.compute_seconds = tc;
  out.comm_seconds = comm;
  out.wait_seconds = wait;
  out.compute_share = tc / iteration;
  out.comm_share = comm / iteration;
  out.wait_share = wait / iteration;
  out.images_per_second =
      static_cast<double>(p) * req.ranks * static_cast<double>(req.batch) / iteration;
  return out;
}

Result<std::vector<PlanRow>> plan_partitions(const Machine& m, const ModelRequest& base,
                                             int64_t iterations) {
  std::vector<LocalityMode> modes = m.modes;
  if (modes.empty()) {
    LocalityMode all;
    all.name = m.gpu ? "gpus" : "one locality";
    all.localities = 1;
    all.hbw_gb = m.gpu ? m.device.capacity_gb : (m.hbw.present ? m.hbw.capacity_gb : 0);
    all.dram_gb = m.dram.capacity_gb;
    modes.push_back(all);
  }
  std::vector<PlanRow> rows;
  for (const LocalityMode& mode : modes) {
    std::vector<int> counts;
    const int limit = m.gpu ? m.devices : m.cores;
    for (int g = 1; g <= limit; g *= 2)
      counts.push_back(g);
    if (!m.gpu) counts.push_back(mode.localities);
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (int g : counts) {
      if (is_one_group(base.algo) && g != 1) continue;
      if (!m.gpu && g > mode.localities && g % mode.localities != 0) continue;
      if (!m.gpu && g > 1 && g < mode.localities) continue;  // would straddle localities
      PlanRow row;
      row.mode = mode.name;
      row.localities = mode.localities;
      row.groups = g;
      row.threads = m.gpu ? 1 : m.cores / g;
      ModelRequest req = base;
      req.groups = g;
      req.threads_per_group = row.threads;
      req.batch = std::max<int64_t>(1, base.batch / g);
      row.group_bytes = group_bytes(req);
      // The fast memory one group may use: its locality's, shared by the groups in it (one
      // group over every locality has all of it); a GPU's own memory.
      const double share = m.gpu ? 1.0 : std::max(1.0, static_cast<double>(g) / mode.localities);
      row.hbw_bytes_per_group =
          m.gpu ? mode.hbw_gb * kGB
                : mode.hbw_gb * kGB * (g < mode.localities ? mode.localities : 1) / share;
      row.fits_fast = row.hbw_bytes_per_group >= row.group_bytes;
      if (m.gpu) {
        row.fit_note = row.fits_fast ? "fits in the device" : "does not fit in the device";
      } else if (mode.hbw_gb <= 0) {
        row.fit_note = "no high-bandwidth node (cache mode or none): dram";
      } else {
        row.fit_note = row.fits_fast ? "fits in hbw" : "over hbw: dram";
        req.placement = row.fits_fast ? "hbw" : "dram";
      }
      if (!m.gpu && !m.hbw.present) req.placement = "dram";
      row.batch = req.batch;
      for (const char* p : {"fp32", "tf32", "bf16"}) {
        if (base.precision == "all" ? m.compute_rate(p) <= 0 : base.precision != p) continue;
        req.precision = p;
        row.precision = p;
        EASEL_ASSIGN_OR_RETURN(row.p, predict(m, req));
        row.seconds = static_cast<double>(iterations) * row.p.seconds_per_iteration;
        rows.push_back(row);
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const PlanRow& a, const PlanRow& b) { return a.seconds < b.seconds; });
  return rows;
}

}  // namespace easel::model
