// easel bench --collectives: nccl-tests' table for easel's collective algorithms. For message
// sizes from 4 KB to the largest built-in net's arena, every algorithm's allreduce over the
// run's transport (threads of this process, or the MPI world under mpirun / SMPI), next to the
// MPI library's own MPI_Allreduce on the same buffers in the same run: time (median), algbw =
// bytes / time, busbw = algbw * 2 (p - 1) / p (nccl-tests' definitions, so that every algorithm
// is compared with the link), and #wrong (elements differing from the exact sum: the inputs are
// small integers, so every order gives the same floats). The compressed ring's rows (ring bf16,
// ring int8: what --exchange-precision runs, int8 with its error-feedback residual) count their
// algbw on the fp32 bytes of the message, so that they read against the fp32 algorithms', and
// #wrong as the elements outside the error bound of engine/comm/collectives/compressed_ring.hpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/compressed_ring.hpp"
#include "engine/comm/collectives/list.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/comm/transport.hpp"
#include "nets/graph.hpp"
#include "nets/models/models.hpp"
#include "tools/bench/collectives.hpp"

namespace easel::bench {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

float value(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * (i % 7));
}
float exact(int p, int64_t i) {
  return static_cast<float>((i % 7) * p * (p + 1) / 2);
}

// The largest built-in net's arena, in bytes.
double largest_arena_bytes() {
  double best = 0;
  for (const ModelEntry& m : model_list()) {
    auto spec = build_model(m.name, m.input);
    if (!spec.ok()) continue;
    auto cost = net_cost(spec.value());
    if (cost.ok()) best = std::max(best, static_cast<double>(cost->arena_floats) * 4);
  }
  return best;
}

struct Algo {
  std::string name;
  std::unique_ptr<Comm> comm;
  std::optional<WireFormat> packed;  // the compressed ring's rows
};

// Whether `got` is right at element i: the exact sum, or for the compressed ring within its
// bound of it (M: the ranks' largest values 6 (r + 1), in every int8 block of 7 or more; a
// shorter block's are smaller, so the bound still holds).
bool right(const Algo& a, int p, int64_t i, float got) {
  if (!a.packed) return got == exact(p, i);
  const double m = *a.packed == WireFormat::int8 ? 3.0 * p * (p + 1) : exact(p, i);
  return std::fabs(got - exact(p, i)) <= compressed_ring::error_bound(p, *a.packed, m);
}

// Message sizes from 4 KB up by factors of 4 while below max_bytes, then max_bytes itself.
std::vector<double> message_sizes(double max_bytes) {
  std::vector<double> sizes;
  for (double b = 4096; b < max_bytes; b *= 4)
    sizes.push_back(b);
  sizes.push_back(max_bytes);
  return sizes;
}

// The table's rows: easel's fp32 algorithms (the rows of collectives/list.cpp that run over a
// transport), the compressed ring's wire formats where the ring takes them, and under mpirun the
// MPI library's own MPI_Allreduce.
std::vector<Algo> bench_algos(const std::shared_ptr<Transport>& transport, MpiComm* world,
                              bool across) {
  std::vector<Algo> algos;
  for (const CollectiveEntry& e : collective_list())
    if (e.allreduce != nullptr)
      algos.push_back({e.name, make_collective_comm(transport, e.algo), {}});
  for (WireFormat w : {WireFormat::bf16, WireFormat::int8}) {
    auto comm = make_collective_comm(transport, CollectiveAlgo::ring);
    if (comm->compressed_refusal().empty())
      algos.push_back({std::string("ring ") + wire_format_name(w), std::move(comm), w});
  }
  if (across) algos.push_back({"mpi (MPI_Allreduce)", world->native_comm()});
  return algos;
}

// Where the run's ranks are: `local` of them in this process, the first numbered me0, of p in
// all; `world` set when they span MPI processes (across).
struct Ranks {
  MpiComm* world = nullptr;
  bool across = false;
  int local = 1, me0 = 0, p = 1;
};

// One pass's figures: the slowest rank's seconds and the elements wrong.
struct Pass {
  double slowest = 0;
  int64_t wrong = 0;
};

// One allreduce of `a` over n floats on every local rank (threads, started together by a
// barrier of the comm's own), each rank's buffer filled with its values first.
Pass run_local_pass(Algo& a, const Ranks& rk, int64_t n, std::vector<std::vector<float>>& bufs,
                    std::vector<std::vector<float>>& errs) {
  std::vector<double> took(static_cast<size_t>(rk.local));
  std::vector<int64_t> bad(static_cast<size_t>(rk.local));
  auto body = [&](int l) {
    const int r = rk.me0 + l;
    std::vector<float>& b = bufs[static_cast<size_t>(l)];
    for (int64_t i = 0; i < n; ++i)
      b[static_cast<size_t>(i)] = value(r, i);
    a.comm->barrier(r);
    float* e = a.packed == WireFormat::int8 ? errs[static_cast<size_t>(l)].data() : nullptr;
    const double t0 = now();
    if (a.packed)
      a.comm->allreduce_compressed(r, b.data(), b.data(), n, *a.packed, e);
    else
      a.comm->allreduce_sum(r, b.data(), n);
    took[static_cast<size_t>(l)] = now() - t0;
    for (int64_t i = 0; i < n; ++i)
      bad[static_cast<size_t>(l)] += !right(a, rk.p, i, b[static_cast<size_t>(i)]);
  };
  std::vector<std::thread> ts;
  for (int l = 1; l < rk.local; ++l)
    ts.emplace_back(body, l);
  body(0);
  for (auto& t : ts)
    t.join();
  Pass pass;
  pass.slowest = *std::max_element(took.begin(), took.end());
  for (int64_t w : bad)
    pass.wrong += w;
  return pass;
}

// Under mpirun: the slowest rank's time and every rank's errors, on rank 0 (the one that
// prints); every rank calls.
void combine_across_ranks(MpiComm* world, int p, Pass* pass) {
  float v[2] = {static_cast<float>(pass->slowest), static_cast<float>(pass->wrong)};
  std::vector<float> all(static_cast<size_t>(2 * p));
  world->gather_bytes(v, sizeof v, all.data(), 0);
  if (world->rank() == 0) {
    for (int r = 0; r < p; ++r) {
      pass->slowest = std::max(pass->slowest, static_cast<double>(all[static_cast<size_t>(2 * r)]));
      pass->wrong += r == 0 ? 0 : static_cast<int64_t>(all[static_cast<size_t>(2 * r + 1)]);
    }
  }
}

// An algorithm's figures at one size: the median of its passes' slowest-rank seconds, and the
// elements wrong over all its passes.
struct Timed {
  double seconds = 0;
  int64_t wrong = 0;
};

// `repeats` timed passes of `a` over n floats after one warm-up (nccl-tests' median of the
// slowest rank); the warm-up's wrong elements count too.
Timed time_allreduce(Algo& a, const Ranks& rk, int64_t n, int repeats,
                     std::vector<std::vector<float>>& bufs, std::vector<std::vector<float>>& errs) {
  std::vector<double> times;
  int64_t wrong = 0;
  for (int rep = 0; rep <= repeats; ++rep) {
    Pass pass = run_local_pass(a, rk, n, bufs, errs);
    if (rk.across) combine_across_ranks(rk.world, rk.p, &pass);
    if (rep > 0) times.push_back(pass.slowest);  // rep 0 warms up
    wrong += pass.wrong;
  }
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  return {times[times.size() / 2], wrong};
}

// The cost model's seconds for one of easel's fp32 algorithms; null for MPI's own and the
// compressed ring's rows, which it does not price.
nlohmann::json predicted_seconds(const Algo& a, const CollectiveShape& shape,
                                 const CollectiveChoice& pick) {
  const CollectiveEntry* e = find_collective(a.name);
  if (e == nullptr || a.packed) return nlohmann::json(nullptr);
  return nlohmann::json(allreduce_seconds(e->algo, shape, pick.inter));
}

// Prints (when `print`) and returns one row of the table: `a` over n floats took `timed`.
nlohmann::json report_row(const Algo& a, const CollectiveShape& shape, const CollectiveChoice& pick,
                          int64_t n, const Timed& timed, bool print) {
  const double t = timed.seconds;
  const double algbw = shape.bytes / t / 1e9;
  const double busbw = algbw * 2.0 * (shape.ranks - 1) / shape.ranks;
  const bool chosen = a.name == collective_algo_name(pick.algo);
  if (print) {
    std::printf("%12.0f %12lld  %-20s %11.1f %11.2f %11.2f %7lld%s\n", shape.bytes,
                static_cast<long long>(n), a.name.c_str(), t * 1e6, algbw, busbw,
                static_cast<long long>(timed.wrong), chosen ? "  <- auto" : "");
  }
  return {{"bytes", shape.bytes},
          {"count", n},
          {"algorithm", a.name},
          {"seconds", t},
          {"algbw_gbs", algbw},
          {"busbw_gbs", busbw},
          {"wrong", timed.wrong},
          {"auto_choice", chosen},
          {"predicted_seconds", predicted_seconds(a, shape, pick)}};
}

}  // namespace

Status run_collectives_bench(const CollectivesFlags& f, nlohmann::json* doc) {
  Ranks rk;
  rk.world = mpi_world();
  rk.across = rk.world != nullptr && rk.world->size() > 1;
  rk.local = rk.across ? 1 : f.ranks;
  if (rk.local < 1 || rk.local > 256)
    return invalid_argument("--ranks: " + std::to_string(f.ranks) + " is out of range [1, 256]");
  if (f.repeats < 1) return invalid_argument("--repeats: must be >= 1");
  std::shared_ptr<Transport> transport =
      rk.across ? rk.world->transport() : std::shared_ptr<Transport>(make_shm_transport(rk.local));
  rk.p = transport->size();
  rk.me0 = transport->first_local();
  const bool print = !rk.across || rk.world->rank() == 0;
  const double max_bytes = f.max_mb > 0 ? f.max_mb * 1e6 : largest_arena_bytes();
  const std::vector<double> sizes = message_sizes(max_bytes);
  std::vector<Algo> algos = bench_algos(transport, rk.world, rk.across);

  LinkCost intra, inter;
  std::string error;
  if (!collective_links(&intra, &inter, &error)) return invalid_argument(error);
  if (print) {
    std::printf("# collectives: %d ranks over %s (%d node(s)), median of %d, in place\n", rk.p,
                transport->name().c_str(), transport->nodes(), f.repeats);
    std::printf("%12s %12s  %-20s %11s %11s %11s %7s\n", "size(B)", "count", "algorithm",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::vector<float>> bufs(static_cast<size_t>(rk.local)), errs(bufs.size());
  for (double bytes : sizes) {
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(bytes / 4));
    for (auto& b : bufs)
      b.assign(static_cast<size_t>(n), 0.f);
    for (auto& e : errs)
      e.assign(static_cast<size_t>(n), 0.f);
    CollectiveShape shape;
    shape.bytes = static_cast<double>(n) * 4;
    shape.ranks = rk.p;
    shape.ranks_per_node = std::max(1, rk.p / std::max(1, transport->nodes()));
    shape.intra = intra;
    shape.inter = inter;
    const CollectiveChoice pick = choose_collective(shape);
    for (Algo& a : algos)
      rows.push_back(
          report_row(a, shape, pick, n, time_allreduce(a, rk, n, f.repeats, bufs, errs), print));
  }
  (*doc)["collectives"] = {{"ranks", rk.p},
                           {"transport", transport->name()},
                           {"nodes", transport->nodes()},
                           {"repeats", f.repeats},
                           {"rows", rows}};
  return Status::ok_status();
}

}  // namespace easel::bench
