// The memory fit (run/fit.hpp). What is counted follows what the trainer allocates, as
// an approximation written down here rather than measured:
//   per group (build_group, on the group's thread, so on its own nodes):
//     activations  every layer's output and the outputs' gradient buffers, shared by their
//                  lives in the backward pass as Net allocates them (NetCost::activation_floats
//                  + NetCost::gradient_floats per image x batch), plus the batch stream's input
//                  batches (3 with prefetch, else 1) and the evaluation's one; oneDNN's scratch and
//                  small buffers not counted
//     weights, grads, momentum  one arena each (NetCost::arena_floats); momentum always, as
//                  build_group allocates it whatever the algorithm
//   the centre (algorithms that have one; on group 0's thread, so group 0's nodes), and the
//     algorithm's extra arenas, as its row of the list says (AlgoEntry::extra_arenas)
//   the data set: training and test images as bytes (labels are ordinary heap), loaded on the
//     main thread before the run: counted on group 0's nodes, where memkind's nearest node
//     would be for a thread on group 0's cores.
// On a node, hbw buffers are bound (never elsewhere): more than the node's capacity is refused.
// hbw-preferred ones take what the bound and dram ones leave, in allocation order (data set,
// then group by group, then the centre), and the rest goes to the group's DRAM node. dram
// buffers are preferred on their node: past its capacity the kernel takes other nodes (a note);
// past the machine's memory the run is refused. interleave spreads over every node.
#include "run/fit.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "algos/list.hpp"
#include "algos/sync_easgd.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/log.hpp"
#include "nets/models/models.hpp"
#include "run/fit_probe.hpp"

namespace easel {

namespace {

// The start of the spill that says no group has a high-bandwidth node: the allocator's fallback
// (engine/memory.hpp) in the fit's words, logged under the allocator's key.
constexpr const char* kNoHbwNode = "hbw-preferred: no high-bandwidth node for the groups; ";

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / kGiB);
  return b;
}

// "0-3,8": group ids as ranges.
std::string id_ranges(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1)
      ++j;
    s += (s.empty() ? "" : ",") + std::to_string(ids[i]);
    if (j > i) s += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return s;
}

// One allocation of the run.
struct Item {
  int row;  // its buffer class, or kFitKernels, kFitCopies
  MemKind kind;
  int group;  // whose nodes it goes to
  int owner;  // the group that holds it, -1 for the run's own (centre, data set)
  uint64_t bytes;
};

// The run's allocations in the order the trainer makes them.
std::vector<Item> items_of(const FitRequest& req, int p, const AlgoEntry& a, bool uses_centre) {
  const Placement& pl = req.placement;
  const uint64_t arena = static_cast<uint64_t>(req.cost.arena_floats) * sizeof(float);
  const uint64_t batches = req.prefetch ? 3 + 1 : 1 + 1;
  const uint64_t acts = static_cast<uint64_t>(req.batch) * sizeof(float) *
                        (static_cast<uint64_t>(req.cost.activation_floats) +
                         static_cast<uint64_t>(req.cost.gradient_floats) +
                         batches * static_cast<uint64_t>(req.input_floats));
  using C = BufferClass;
  std::vector<Item> v;
  const auto row = [](C c) { return static_cast<int>(c); };
  v.push_back({row(C::dataset), pl[C::dataset], 0, -1, req.dataset_bytes});
  v.push_back({kFitCopies, MemKind::dram, 0, -1, 2 * arena});
  if (req.checkpoints) {  // capture_run's snapshot; across ranks gather_checkpoint_groups'
    const uint64_t held = req.ranks == 1 ? static_cast<uint64_t>(p)
                          : req.root     ? 2ull * static_cast<uint64_t>(p) * req.ranks
                                         : 2ull * static_cast<uint64_t>(p);
    v.push_back({kFitCheckpoint, MemKind::dram, 0, -1, ((uses_centre ? 1 : 0) + 2 * held) * arena});
  }
  if (req.gpu) return v;  // the groups' buffers are on their GPUs (or pinned, staged)
  for (int g = 0; g < p; ++g) {
    v.push_back({row(C::activations), pl[C::activations], g, g, acts});
    if (req.kernel_bytes > 0) v.push_back({kFitKernels, MemKind::dram, g, g, req.kernel_bytes});
    for (C c : {C::weights, C::grads, C::momentum})
      v.push_back({row(c), pl[c], g, g, arena});
  }
  if (uses_centre) v.push_back({row(C::centre), pl[C::centre], 0, -1, arena});
  for (const ExtraArena& x :
       a.extra_arenas({p, req.sync_fast, req.overlap, req.adamw, req.feedback}))
    v.push_back({row(x.cls), pl[x.cls], std::max(x.owner, 0), x.owner, arena});
  return v;
}

// Accumulates placements on the nodes.
class Placer {
 public:
  Placer(const Topology& topo, Fit& fit) : fit_(fit) {
    for (const NumaNode& n : topo.numa) {
      FitNode f;
      f.os_index = n.os_index;
      f.kind = n.kind;
      f.capacity = n.memory_bytes;
      fit.nodes.push_back(f);
    }
  }
  FitNode* at(int os) {
    for (FitNode& n : fit_.nodes)
      if (n.os_index == os) return &n;
    return nullptr;
  }
  void put(int os, const Item& it, uint64_t bytes, bool bound) {
    fit_.need += bytes;
    FitNode* n = at(os);
    if (n == nullptr) return;  // nowhere known: counted against the machine only
    n->need += bytes;
    n->bytes[it.row] += bytes;
    if (bound) {
      n->bound += bytes;
      bound_[{os, it.row}].bytes += bytes;
      if (it.owner >= 0) bound_[{os, it.row}].owners.push_back(it.owner);
    }
    if (it.owner >= 0 && std::find(n->groups.begin(), n->groups.end(), it.owner) == n->groups.end())
      n->groups.push_back(it.owner);
  }
  void spread(const Item& it) {  // interleave: equal shares over every node
    if (fit_.nodes.empty()) return put(-1, it, it.bytes, false);
    const uint64_t share = it.bytes / fit_.nodes.size();
    for (size_t i = 0; i < fit_.nodes.size(); ++i)
      put(fit_.nodes[i].os_index, it, i == 0 ? it.bytes - share * (fit_.nodes.size() - 1) : share,
          false);
  }
  // The classes bound to `os`, for the refusal: "4 groups x 466.6 MB of weights + ...".
  std::string bound_text(int os) const {
    std::string s;
    for (int c = 0; c < kFitRows; ++c) {
      const auto f = bound_.find({os, c});
      if (f == bound_.end()) continue;
      std::vector<int> owners = f->second.owners;
      std::sort(owners.begin(), owners.end());
      owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
      s += s.empty() ? "" : " + ";
      if (owners.empty())
        s += fit_bytes(f->second.bytes);
      else
        s += std::to_string(owners.size()) + (owners.size() == 1 ? " group x " : " groups x ") +
             fit_bytes(f->second.bytes / owners.size());
      s += std::string(" of ") + fit_row_name(c);
    }
    return s;
  }

 private:
  struct Bound {
    uint64_t bytes = 0;
    std::vector<int> owners;
  };
  Fit& fit_;
  std::map<std::pair<int, int>, Bound> bound_;  // (node, row)
};

// Group g's DRAM node: its plan's, else the machine's first DRAM node, else -1.
int dram_node_of(const Topology& topo, const GroupPlan& plan, int g) {
  if (g < static_cast<int>(plan.groups.size()) &&
      plan.groups[static_cast<size_t>(g)].dram_node >= 0)
    return plan.groups[static_cast<size_t>(g)].dram_node;
  for (const NumaNode& n : topo.numa)
    if (n.kind == NodeKind::dram) return n.os_index;
  return topo.numa.empty() ? -1 : topo.numa[0].os_index;
}

int hbw_node_of(const GroupPlan& plan, int g) {
  return g < static_cast<int>(plan.groups.size()) ? plan.groups[static_cast<size_t>(g)].hbw_node
                                                  : -1;
}

// "--placement weights=hbw,grads=hbw": the classes placed hbw.
std::string hbw_classes(const Placement& pl) {
  std::string s;
  for (int c = 0; c < kBufferClassCount; ++c)
    if (pl.kind[c] == MemKind::hbw)
      s += (s.empty() ? "" : ",") + std::string(buffer_class_name(static_cast<BufferClass>(c))) +
           "=hbw";
  return s;
}

}  // namespace

const char* fit_row_name(int row) {
  if (row == kFitKernels) return "kernels";
  if (row == kFitCopies) return "copies";
  if (row == kFitCheckpoint) return "checkpoint";
  return buffer_class_name(static_cast<BufferClass>(row));
}

std::string fit_bytes(uint64_t bytes) {
  char b[32];
  const double x = static_cast<double>(bytes);
  if (x >= 1e9)
    std::snprintf(b, sizeof b, "%.1f GB", x / 1e9);
  else
    std::snprintf(b, sizeof b, "%.1f MB", x / 1e6);
  return b;
}

const FitNode* Fit::node(int os_index) const {
  for (const FitNode& n : nodes)
    if (n.os_index == os_index) return &n;
  return nullptr;
}

FitRequest fit_request(const TrainConfig& cfg, const NetCost& cost, const DataSplit& data,
                       const std::optional<SyncExchangeChoice>& exchange) {
  FitRequest r;
  r.cost = cost;
  r.input_floats = data.train.channels * data.train.height * data.train.width;
  r.batch = cfg.batch;
  r.algo = cfg.algo;
  r.prefetch = cfg.prefetch;
  r.sync_fast = exchange && exchange->path != SyncExchangePath::comm;
  r.overlap = cfg.overlap;
  r.adamw = cfg.optimizer == Optimizer::adamw;
  r.feedback = cfg.exchange_precision == ExchangePrecision::int8;
  r.gpu = cfg.device.gpu;
  r.placement = host_placement(cfg);
  r.checkpoints = cfg.checkpoint;
  // A streamed set (nets/data/stream_source.hpp) holds no images, only its list.
  const auto held = [](const Dataset& d) { return d.source ? 0 : d.count * d.image_bytes(); };
  r.dataset_bytes = static_cast<uint64_t>(held(data.train) + held(data.test));
  return r;
}

namespace {

// Each class's total, and what one group holds of it (the table's one-group column).
void count_classes(const std::vector<Item>& items, Fit& fit) {
  std::map<std::pair<int, int>, std::pair<uint64_t, int>> owned;  // bytes, arenas
  for (const Item& it : items) {
    FitClass& fc = fit.classes[it.row];
    fc.total += it.bytes;
    if (it.owner < 0) continue;
    auto& o = owned[{it.owner, it.row}];
    o.first += it.bytes;
    o.second += 1;
    fc.per_group = std::max(fc.per_group, o.first);
    fc.arenas = std::max(fc.arenas, o.second);
  }
}

// hbw-preferred items take what is left on their hbw node, in allocation order; the rest spills
// to DRAM, each node's spill said in one line.
void spill_preferred(const std::vector<const Item*>& preferred, const Topology& topo,
                     const GroupPlan& plan, Placer& placer, Fit& fit) {
  std::map<int, std::map<int, uint64_t>> spilled;  // hbw node -> class -> bytes
  std::map<int, std::vector<int>> spilled_to;      // hbw node -> dram nodes
  for (const Item* it : preferred) {
    const int hbw = hbw_node_of(plan, it->group), dram = dram_node_of(topo, plan, it->group);
    const FitNode* n = placer.at(hbw);
    const uint64_t free = n == nullptr || n->need >= n->capacity ? 0 : n->capacity - n->need;
    const uint64_t here = n == nullptr ? it->bytes : std::min(free, it->bytes);
    if (here > 0) placer.put(hbw, *it, here, false);
    if (here == it->bytes) continue;
    placer.put(dram, *it, it->bytes - here, false);
    fit.classes[it->row].spilled += it->bytes - here;
    spilled[hbw][it->row] += it->bytes - here;
    auto& to = spilled_to[hbw];
    if (std::find(to.begin(), to.end(), dram) == to.end()) to.push_back(dram);
  }
  for (const auto& [hbw, by_class] : spilled) {
    std::string what, to;
    for (const auto& [c, bytes] : by_class)
      what += (what.empty() ? "" : ", ") + std::string(fit_row_name(c)) + " " + fit_bytes(bytes);
    for (int d : spilled_to[hbw])
      to += (to.empty() ? "" : ",") + std::to_string(d);
    fit.spills.push_back("hbw-preferred: node " + std::to_string(hbw) + " (" +
                         gib(placer.at(hbw)->capacity) + ") is full; " + what +
                         " spill to DRAM node " + to);
  }
}

// The notes (a DRAM node given more than it has, GPU groups) and the refusal of a plan that
// needs more than the machine's memory.
void finish_fit(const FitRequest& req, Fit& fit) {
  for (const FitNode& n : fit.nodes)
    if (n.kind == NodeKind::dram && !n.fits())
      fit.notes.push_back("node " + std::to_string(n.os_index) + " (dram, " + gib(n.capacity) +
                          ") is given " + fit_bytes(n.need) +
                          ": the kernel puts the rest on other nodes");
  if (req.gpu)
    fit.notes.push_back(
        "GPU groups: their weights, gradients, momentum, activations and the "
        "centre are on the devices (or pinned, staged), not counted here");
  if (fit.refusal.ok() && fit.machine_bytes > 0 && fit.need > fit.machine_bytes) {
    std::string what;
    for (int c = 0; c < kFitRows; ++c) {
      const FitClass& fc = fit.classes[c];
      if (fc.total > 0)
        what +=
            (what.empty() ? "" : ", ") + std::string(fit_row_name(c)) + " " + fit_bytes(fc.total);
    }
    fit.refusal =
        invalid_argument(std::to_string(fit.groups) + " group(s) need " + fit_bytes(fit.need) +
                         " (" + what + "), more than this machine's " + gib(fit.machine_bytes) +
                         " of memory; plan fewer groups or a smaller --batch");
  }
}

}  // namespace

Result<Fit> compute_fit(const FitRequest& req, const Topology& topo, const GroupPlan& plan) {
  EASEL_ASSIGN_OR_RETURN(const AlgoEntry* row, algo_row(req.algo));
  Fit fit;
  fit.groups = static_cast<int>(plan.groups.size());
  fit.machine_bytes = topo.total_memory_bytes;
  for (int c = 0; c < kBufferClassCount; ++c)
    fit.classes[c].kind = req.placement.kind[c];
  const std::vector<Item> items = items_of(req, fit.groups, *row, row->make()->uses_centre());
  count_classes(items, fit);

  Placer placer(topo, fit);
  std::vector<const Item*> preferred;  // hbw-preferred items with an hbw node, in order
  bool no_hbw_spill[kFitRows] = {};
  for (const Item& it : items) {
    const int dram = dram_node_of(topo, plan, it.group), hbw = hbw_node_of(plan, it.group);
    switch (it.kind) {
      case MemKind::interleave:
        placer.spread(it);
        break;
      case MemKind::hbw:  // without an hbw node (this machine's memkind): where memkind puts it
        placer.put(hbw >= 0 ? hbw : dram, it, it.bytes, hbw >= 0);
        break;
      case MemKind::hbw_preferred:
        if (hbw >= 0) {
          preferred.push_back(&it);
        } else {
          placer.put(dram, it, it.bytes, false);
          fit.classes[it.row].spilled += it.bytes;
          no_hbw_spill[it.row] = true;
        }
        break;
      case MemKind::device:
        break;
      default:  // dram, pinned_host
        placer.put(dram, it, it.bytes, false);
    }
  }

  // Bound hbw beyond a node's capacity: refused, naming the classes, the node and both sizes.
  for (const FitNode& n : fit.nodes) {
    if (n.bound <= n.capacity) continue;
    fit.refusal = invalid_argument(
        "--placement " + hbw_classes(req.placement) + ": " + placer.bound_text(n.os_index) +
        " need " + fit_bytes(n.bound) + " of hbw on node " + std::to_string(n.os_index) + " (" +
        gib(n.capacity) + ", " + std::to_string(n.groups.size()) +
        " group(s)); place some classes hbw-preferred (they spill to DRAM) or dram, or plan "
        "fewer groups per node");
    break;
  }
  spill_preferred(preferred, topo, plan, placer, fit);
  std::string none;
  for (int c = 0; c < kBufferClassCount; ++c)
    if (no_hbw_spill[c])
      none +=
          (none.empty() ? "" : ", ") + std::string(buffer_class_name(static_cast<BufferClass>(c)));
  if (!none.empty()) fit.spills.push_back(kNoHbwNode + none + " stay in DRAM");
  finish_fit(req, fit);
  return fit;
}

namespace {

// req with one host group's kernels' bytes measured (run/fit_probe.hpp). Not for GPU groups
// (their buffers are not counted here), nor under SMPI with injected compute, whose ranks'
// buffers share pages and whose kernels never run.
Result<FitRequest> with_kernels(FitRequest req, const TrainConfig& cfg, const NetSpec& spec) {
  if (req.gpu || sim_injected_flops() > 0) return req;
  EASEL_ASSIGN_OR_RETURN(req.kernel_bytes, kernel_bytes(spec, cfg.batch, resolve_layout(cfg),
                                                        cfg.impl, cfg.precision));
  return req;
}

}  // namespace

Result<Fit> fit_of(const TrainConfig& cfg, const Topology& topo, const GroupPlan& plan,
                   const DataSplit& data) {
  const Dataset& d = data.train;
  EASEL_ASSIGN_OR_RETURN(const NetSpec spec,
                         build_model(cfg.net, {d.channels, d.height, d.width, d.classes}));
  EASEL_ASSIGN_OR_RETURN(const NetCost cost, net_cost(spec));
  std::optional<SyncExchangeChoice> exchange;
  if (takes_sync_exchange(cfg.algo)) {
    auto choice = choose_sync_exchange(cfg.exchange, sync_switches(cfg, process_count(), false),
                                       cost.state_floats > 0, static_cast<int>(plan.groups.size()));
    if (choice.ok()) exchange = std::move(choice).value();
  }
  EASEL_ASSIGN_OR_RETURN(const FitRequest req,
                         with_kernels(fit_request(cfg, cost, data, exchange), cfg, spec));
  return compute_fit(req, topo, plan);
}

Status check_run_fit(const TrainConfig& cfg, const Topology& topo, const GroupPlan& plan,
                     const DataSplit& data, const NetSpec& spec, const NetCost& cost,
                     const std::optional<SyncExchangeChoice>& exchange, int ranks, bool root,
                     Fit* kept) {
  EASEL_ASSIGN_OR_RETURN(FitRequest req,
                         with_kernels(fit_request(cfg, cost, data, exchange), cfg, spec));
  req.ranks = ranks;
  req.root = root;
  EASEL_ASSIGN_OR_RETURN(const Fit fit, compute_fit(req, topo, plan));
  if (kept) *kept = fit;
  if (root) {
    for (const std::string& l : fit.summary_lines())
      log_info("train", l);
    for (size_t i = 0; i < fit.spills.size() && fit.refusal.ok(); ++i)
      log_once(LogLevel::warn, "train",
               fit.spills[i].rfind(kNoHbwNode, 0) == 0 ? std::string(kHbwFallbackLogKey)
                                                       : "fit-spill-" + std::to_string(i),
               fit.spills[i]);
  }
  return fit.refusal;
}

std::string Fit::to_string() const {
  std::string s;
  char line[256];
  // Each line without the padding of its last column.
  const auto add = [&s, &line] {
    std::string l = line;
    while (l.size() > 1 && l[l.size() - 2] == ' ')
      l.erase(l.size() - 2, 1);
    s += l;
  };
  std::snprintf(line, sizeof line, "  %-12s %-14s %-18s %s\n", "class", "kind", "one group",
                (std::to_string(groups) + " group(s) and the run's own").c_str());
  add();
  uint64_t one = 0;
  for (int c = 0; c < kFitRows; ++c) {
    const FitClass& fc = classes[c];
    if (c >= kBufferClassCount && fc.total == 0) continue;
    one += fc.per_group;
    std::string per = fc.per_group == 0 ? "-" : fit_bytes(fc.per_group / std::max(fc.arenas, 1));
    if (fc.arenas > 1) per = std::to_string(fc.arenas) + " x " + per;
    std::string all = fit_bytes(fc.total);
    if (fc.spilled > 0) all += " (" + fit_bytes(fc.spilled) + " spill to DRAM)";
    std::snprintf(line, sizeof line, "  %-12s %-14s %-18s %s\n", fit_row_name(c),
                  mem_kind_name(fc.kind), per.c_str(), all.c_str());
    add();
  }
  std::snprintf(line, sizeof line, "  %-12s %-14s %-18s %s of %s\n", "all", "",
                fit_bytes(one).c_str(), fit_bytes(need).c_str(), gib(machine_bytes).c_str());
  add();
  std::snprintf(line, sizeof line, "  %-5s %-5s %-9s %-9s %-8s %s\n", "node", "kind", "capacity",
                "holds", "groups", "");
  add();
  for (const FitNode& n : nodes) {
    std::vector<int> ids = n.groups;
    std::sort(ids.begin(), ids.end());
    const char* verdict = n.bound > n.capacity                    ? "does not fit"
                          : !n.fits() && n.kind == NodeKind::dram ? "over (spills to other nodes)"
                                                                  : "";
    std::snprintf(line, sizeof line, "  %-5d %-5s %-9s %-9s %-8s %s\n", n.os_index,
                  node_kind_name(n.kind), gib(n.capacity).c_str(),
                  n.need == 0 ? "-" : fit_bytes(n.need).c_str(),
                  ids.empty() ? "-" : id_ranges(ids).c_str(), verdict);
    add();
  }
  if (!refusal.ok()) s += "  refused: " + refusal.message() + "\n";
  for (const std::string& l : spills)
    s += "  " + l + "\n";
  for (const std::string& l : notes)
    s += "  note: " + l + "\n";
  if (refusal.ok()) s += "  fits\n";
  return s;
}

std::vector<std::string> Fit::summary_lines() const {
  std::string group, run;
  uint64_t one = 0;
  for (int c = 0; c < kFitRows; ++c) {
    const FitClass& fc = classes[c];
    const std::string name = fit_row_name(c);
    if (fc.per_group > 0) {
      one += fc.per_group;
      std::string b = fit_bytes(fc.per_group / std::max(fc.arenas, 1));
      if (fc.arenas > 1) b = std::to_string(fc.arenas) + " x " + b;
      group += (group.empty() ? "" : ", ") + name + " " + b + " " + mem_kind_name(fc.kind);
    } else if (fc.total > 0) {
      run += ", " + name + " " + fit_bytes(fc.total) + " " + mem_kind_name(fc.kind);
    }
  }
  std::vector<std::string> out;
  out.push_back("fit: one group " + fit_bytes(one) + " (" + group + "); " + std::to_string(groups) +
                " group(s) and the run's own " + fit_bytes(need) + run);
  std::string nodes_line;
  for (const FitNode& n : nodes)
    if (n.need > 0)
      nodes_line += (nodes_line.empty() ? "" : ", ") + std::string("node ") +
                    std::to_string(n.os_index) + " " + node_kind_name(n.kind) + " " +
                    fit_bytes(n.need) + " of " + gib(n.capacity);
  if (!nodes_line.empty()) out.push_back("fit: " + nodes_line);
  for (const std::string& l : notes)
    out.push_back("fit: " + l);
  return out;
}

}  // namespace easel
