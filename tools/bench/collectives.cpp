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

// Runs `op(rank, buf, n)` on every local rank: `repeats` timed calls after one warm-up, each
// started together (a barrier of the comm's own), the median of the slowest rank's times.
using Op = std::function<void(int, float*, int64_t)>;

}  // namespace

Status run_collectives_bench(const CollectivesFlags& f, nlohmann::json* doc) {
  MpiComm* world = mpi_world();
  const bool across = world != nullptr && world->size() > 1;
  const int local = across ? 1 : f.ranks;
  if (local < 1 || local > 256)
    return invalid_argument("--ranks: " + std::to_string(f.ranks) + " is out of range [1, 256]");
  if (f.repeats < 1) return invalid_argument("--repeats: must be >= 1");
  std::shared_ptr<Transport> transport =
      across ? world->transport() : std::shared_ptr<Transport>(make_shm_transport(local));
  const int p = transport->size();
  const int me0 = transport->first_local();
  const bool print = !across || world->rank() == 0;
  const double max_bytes = f.max_mb > 0 ? f.max_mb * 1e6 : largest_arena_bytes();
  std::vector<double> sizes;
  for (double b = 4096; b < max_bytes; b *= 4)
    sizes.push_back(b);
  sizes.push_back(max_bytes);

  std::vector<Algo> algos;
  for (CollectiveAlgo a : {CollectiveAlgo::tree, CollectiveAlgo::ring,
                           CollectiveAlgo::halving_doubling, CollectiveAlgo::hierarchical})
    algos.push_back({collective_algo_name(a), make_collective_comm(transport, a), {}});
  for (WireFormat w : {WireFormat::bf16, WireFormat::int8}) {
    auto comm = make_collective_comm(transport, CollectiveAlgo::ring);
    if (comm->compressed_refusal().empty())
      algos.push_back({std::string("ring ") + wire_format_name(w), std::move(comm), w});
  }
  if (across) algos.push_back({"mpi (MPI_Allreduce)", world->native_comm()});

  LinkCost intra, inter;
  std::string error;
  if (!collective_links(&intra, &inter, &error)) return invalid_argument(error);
  if (print) {
    std::printf("# collectives: %d ranks over %s (%d node(s)), median of %d, in place\n", p,
                transport->name().c_str(), transport->nodes(), f.repeats);
    std::printf("%12s %12s  %-20s %11s %11s %11s %7s\n", "size(B)", "count", "algorithm",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::vector<float>> bufs(static_cast<size_t>(local)), errs(bufs.size());
  for (double bytes : sizes) {
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(bytes / 4));
    for (auto& b : bufs)
      b.assign(static_cast<size_t>(n), 0.f);
    for (auto& e : errs)
      e.assign(static_cast<size_t>(n), 0.f);
    CollectiveShape shape;
    shape.bytes = static_cast<double>(n) * 4;
    shape.ranks = p;
    shape.ranks_per_node = std::max(1, p / std::max(1, transport->nodes()));
    shape.intra = intra;
    shape.inter = inter;
    const CollectiveChoice pick = choose_collective(shape);
    for (Algo& a : algos) {
      std::vector<double> times;
      int64_t wrong = 0;
      for (int rep = 0; rep <= f.repeats; ++rep) {
        std::vector<double> took(static_cast<size_t>(local));
        std::vector<int64_t> bad(static_cast<size_t>(local));
        auto body = [&](int l) {
          const int r = me0 + l;
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
            bad[static_cast<size_t>(l)] += !right(a, p, i, b[static_cast<size_t>(i)]);
        };
        std::vector<std::thread> ts;
        for (int l = 1; l < local; ++l)
          ts.emplace_back(body, l);
        body(0);
        for (auto& t : ts)
          t.join();
        double slowest = *std::max_element(took.begin(), took.end());
        int64_t wrong_here = 0;
        for (int64_t w : bad)
          wrong_here += w;
        if (across) {  // the slowest rank's time and everyone's errors, on every rank
          float v[2] = {static_cast<float>(slowest), static_cast<float>(wrong_here)};
          std::vector<float> all(static_cast<size_t>(2 * p));
          world->gather_bytes(v, sizeof v, all.data(), 0);
          if (world->rank() == 0) {
            for (int r = 0; r < p; ++r) {
              slowest = std::max(slowest, static_cast<double>(all[static_cast<size_t>(2 * r)]));
              wrong_here += r == 0 ? 0 : static_cast<int64_t>(all[static_cast<size_t>(2 * r + 1)]);
            }
          }
        }
        if (rep > 0) times.push_back(slowest);  // rep 0 warms up
        wrong += wrong_here;
      }
      std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2),
                       times.end());
      const double t = times[times.size() / 2];
      const double algbw = shape.bytes / t / 1e9;
      const double busbw = algbw * 2.0 * (p - 1) / p;
      const bool chosen = a.name == collective_algo_name(pick.algo);
      if (print) {
        std::printf("%12.0f %12lld  %-20s %11.1f %11.2f %11.2f %7lld%s\n", shape.bytes,
                    static_cast<long long>(n), a.name.c_str(), t * 1e6, algbw, busbw,
                    static_cast<long long>(wrong), chosen ? "  <- auto" : "");
      }
      rows.push_back({{"bytes", shape.bytes},
                      {"count", n},
                      {"algorithm", a.name},
                      {"seconds", t},
                      {"algbw_gbs", algbw},
                      {"busbw_gbs", busbw},
                      {"wrong", wrong},
                      {"auto_choice", chosen},
                      {"predicted_seconds",
                       a.name.rfind("mpi", 0) == 0 || a.packed
                           ? nlohmann::json(nullptr)
                           : nlohmann::json(allreduce_seconds(
                                 a.name == "tree"               ? CollectiveAlgo::tree
                                 : a.name == "ring"             ? CollectiveAlgo::ring
                                 : a.name == "halving-doubling" ? CollectiveAlgo::halving_doubling
                                                                : CollectiveAlgo::hierarchical,
                                 shape, pick.inter))}});
    }
  }
  (*doc)["collectives"] = {{"ranks", p},
                           {"transport", transport->name()},
                           {"nodes", transport->nodes()},
                           {"repeats", f.repeats},
                           {"rows", rows}};
  return Status::ok_status();
}

}  // namespace easel::bench
