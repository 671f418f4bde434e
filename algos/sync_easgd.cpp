// sync-easgd: every tau steps all groups exchange with the centre at once (deterministic):
//   S = sum_i W^i                        (reduce: tree collective, or P serial exchanges)
//   W^i <- W^i - eta*dW^i - alpha*(W^i - Wc)   on every group (each reads the centre)
//   Wc  <- Wc + alpha*(S - P*Wc)               on the root
// The groups' local step is plain SGD with --momentum 0, else momentum SGD with delta =
// --momentum (Nesterov or heavy-ball, --momentum-form), i.e. a synchronous EAMSGD: the same
// exchange, with the local step that reaches a target accuracy soonest (docs/DESIGN.md).
// The paper's co-design switches: --reduce tree|serial, --pack single|per-layer, and
// --overlap on, where the reduction and the centre update run on a communication thread while
// the groups compute their next steps; the groups wait for it only at their next exchange, so
// the result is the same as without overlap (up to the summation order of S).
// Across MPI ranks (--reduce tree, --overlap off): S is reduced over all P groups into global
// group 0 (hierarchical Comm), rank 0 updates Wc and broadcasts it into every rank's copy, so a
// run of R ranks x L groups equals one process with R*L groups when L is a power of two.
// In one process on the CPU (--reduce tree, --pack single, --collective tree, --overlap off)
// the exchange is partitioned: each group sums its 1/P slice of S (in the Comm's tree order)
// and updates that slice of Wc into a second centre buffer, chunk by chunk in one pass over the
// slice (centre_update_slice: S is never stored), and takes its elastic step from the old Wc;
// the two buffers swap roles at every exchange. The weights are double-buffered too
// (the elastic step writes the other buffer), so the groups need no barrier: two counters per
// group order the reads and writes (exchange_partitioned), and a group waits only for one that is
// about a whole step behind. The stores other groups read next are streamed (non-temporal).
// The same numbers as the reduce to the root and the root's update, bit for bit.
// With P <= 2 groups the exchange is mirrored instead (exchange_mirrored): every group keeps
// its own copy of Wc and updates all of it from every group's weights in the same pass as its
// elastic step, so that no group writes a centre the other reads (only the weights cross
// between cores, streamed into two published copies by parity), and one counter per group
// orders it. Measured 0.6-1.7% (about 1%) more pair throughput than the partitioned exchange on
// LeNet (docs/PERFORMANCE.md); the partitioned one reads less of the other groups' data from
// P = 3. Its pass is timed as comm, as every fused exchange is (algos/algorithm.hpp GroupTimes).
// On GPUs with resident weights (Run::resident, --reduce tree, --overlap off): the same with
// NCCL: Wc lives on group 0's GPU, every other group keeps a copy on its own GPU, S is reduced
// into group 0's GPU and the updated Wc broadcast into the copies; only the batch crosses the
// host link (Sync EASGD2). With --overlap on (Sync EASGD3) the master Wc moves to pinned host
// memory: each group downloads its snapshot, the communication thread reduces and updates Wc
// while the GPUs compute, and every group uploads the new Wc into its copy at its next exchange
// (the same centre it would read without overlap, as on the CPU).
#include <array>
#include <atomic>

#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class SyncEasgd final : public Algorithm {
  struct alignas(64) Counter {  // one group's progress counter, on a cache line of its own
    std::atomic<uint32_t> v{0};
  };

 public:
  std::string name() const override { return "sync-easgd"; }
  bool uses_centre() const override { return true; }
  bool multi_process() const override { return true; }
  bool device_resident() const override { return true; }

  Status prepare(Run& run) override {
    if (run.resident && run.params.reduce == ReduceMode::serial)
      return invalid_argument(
          "--reduce serial: the P serial exchanges read the other groups' weights in shared "
          "memory; with the weights resident on GPUs use --reduce tree (NCCL)");
    if (run.ranks > 1 && run.params.reduce == ReduceMode::serial)
      return invalid_argument(
          "--reduce serial: the P serial exchanges run through one process's shared memory; "
          "across MPI ranks use --reduce tree");
    if (run.ranks > 1 && run.params.overlap)
      return invalid_argument(
          "--overlap on: the communication thread runs within one process; across MPI ranks use "
          "--overlap off");
    partitioned_ = run.ranks == 1 && !run.resident && run.params.reduce == ReduceMode::tree &&
                   run.params.pack == PackMode::single &&
                   run.params.collective == CollectiveAlgo::tree && !run.params.overlap;
    // S: reduced into the root (partitioned: summed chunk by chunk, never stored whole);
    // overlapped on GPUs it lives in host_scratch_.
    if (!partitioned_ && !(run.resident && run.params.overlap)) {
      EASEL_ASSIGN_OR_RETURN(scratch_,
                             arena_on(*run.groups[0], run.arena_floats(), run.centre.kind()));
    }
    if (run.resident) {  // a copy of Wc on every other group's GPU
      for (size_t i = 1; i < run.groups.size(); ++i) {
        Group& g = *run.groups[i];
        EASEL_ASSIGN_OR_RETURN(Arena c, arena_on(g, run.arena_floats(), MemKind::device));
        copy_bytes(c.data(), c.kind(), run.centre.data(), run.centre.kind(),
                   static_cast<size_t>(run.arena_floats()) * sizeof(float));
        centre_copies_.resize(run.groups.size());
        centre_copies_[i] = std::move(c);
      }
    }
    exchanges_.assign(run.groups.size(), 0);
    mirrored_ = partitioned_ && run.size() <= 2;
    if (mirrored_) {
      // Every group but 0 keeps its own copy of Wc (group 0's is run.centre), and publishes
      // its weights into two shared buffers, by exchange parity.
      const size_t p = run.groups.size();
      mirror_centres_.resize(p);
      sum_tmp_.assign(p, std::vector<float>(p * static_cast<size_t>(kCentreChunk)));
      for (size_t j = 0; j < p; ++j) {
        Group& g = *run.groups[j];
        if (j > 0) {
          EASEL_ASSIGN_OR_RETURN(mirror_centres_[j],
                                 arena_on(g, run.arena_floats(), run.centre.kind()));
          span_copy(mirror_centres_[j].data(), run.centre.data(), run.arena_floats());
        }
        for (int b = 0; b < 2 && p > 1; ++b) {  // one group alone reads only its own
          EASEL_ASSIGN_OR_RETURN(Arena sb, arena_on(g, run.arena_floats(), g.weights.kind()));
          span_copy(sb.data(), g.weights.data(), run.arena_floats());
          shared_by_parity_[b].push_back(sb.data());
          shared_w_.push_back(std::move(sb));
        }
      }
      published_ = std::make_unique<Counter[]>(p);
    } else if (partitioned_) {
      EASEL_ASSIGN_OR_RETURN(centre2_,
                             arena_on(*run.groups[0], run.arena_floats(), run.centre.kind()));
      sum_tmp_.assign(run.groups.size(),
                      std::vector<float>(static_cast<size_t>((run.size() + 1) * kCentreChunk)));
      // Each group's second weights buffer, and the counters.
      const size_t p = run.groups.size();
      for (size_t j = 0; j < p; ++j) {
        Group& g = *run.groups[j];
        EASEL_ASSIGN_OR_RETURN(Arena alt, arena_on(g, run.arena_floats(), g.weights.kind()));
        span_copy(alt.data(), g.weights.data(), run.arena_floats());
        for (int b = 0; b < 2; ++b)
          weights_by_parity_[b].push_back(b == 0 ? g.weights.data() : alt.data());
        alt_weights_.push_back(std::move(alt));
      }
      published_ = std::make_unique<Counter[]>(p);
      summed_ = std::make_unique<Counter[]>(p);
    }
    if (run.params.overlap) {
      // The snapshots, and on GPUs the master Wc and the sum, in host memory for the
      // communication thread (pinned, so that the copies to and from the GPUs are direct).
      const MemKind host = run.resident ? MemKind::pinned_host : MemKind::dram;
      for (auto& g : run.groups) {
        EASEL_ASSIGN_OR_RETURN(
            Arena a, Arena::create(run.arena_floats(), run.resident ? host : g->weights.kind()));
        send_.push_back(std::move(a));
      }
      if (run.resident) {
        EASEL_ASSIGN_OR_RETURN(host_centre_, Arena::create(run.arena_floats(), host));
        EASEL_ASSIGN_OR_RETURN(host_scratch_, Arena::create(run.arena_floats(), host));
        copy_bytes(host_centre_.data(), host, run.centre.data(), run.centre.kind(),
                   static_cast<size_t>(run.arena_floats()) * sizeof(float));
      }
      refreshed_.assign(run.groups.size(), 0);
      GroupSpec spec;
      spec.id = -1;
      for (const auto& g : run.groups)
        for (int c : g->worker->spec().cpus)
          spec.cpus.push_back(c);
      EASEL_ASSIGN_OR_RETURN(comm_thread_, WorkerThread::start(spec, false));
    }
    return {};
  }

  void run_round(Run& run, Group& g, int64_t iterations) override {
    const AlgoParams& p = run.params;
    for (int64_t i = 0; i < iterations; ++i) {
      const int64_t step = g.steps.load(std::memory_order_relaxed);
      const bool exchanging = (step + 1) % p.tau == 0;
      if (partitioned_ && exchanging) publish(run, g);  // its weights for this exchange are final
      local_gradient(g);
      const float lr = static_cast<float>(p.lr.at(step));
      if (exchanging) {
        if (p.overlap)
          exchange_overlapped(run, g, lr, p.alpha_at(step));
        else if (mirrored_)
          exchange_mirrored(run, g, lr, p.alpha_at(step));
        else if (partitioned_)
          exchange_partitioned(run, g, lr, p.alpha_at(step));
        else
          exchange(run, g, lr, p.alpha_at(step));
      } else {
        ScopedTimer t(&g.times.compute);
        local_step(run, g, lr, p.momentum == 0 ? LocalRule::sgd : momentum_rule(p));
      }
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
    if (p.overlap) finish_pending(run, g);
  }

  // Between rounds every group has made the same number of exchanges.
  const float* eval_weights(Run& run) override {
    return partitioned_ && !mirrored_ && exchanges_[0] % 2 == 1 ? centre2_.data()
                                                                : run.centre.data();
  }

 private:
  // Wc as group g reads it: the shared centre (partitioned: the buffer that holds it at g's
  // current exchange count), or g's copy on its GPU.
  float* centre_of(Run& run, const Group& g) {
    const size_t i = static_cast<size_t>(g.id);
    if (partitioned_) return exchanges_[i] % 2 == 1 ? centre2_.data() : run.centre.data();
    return i < centre_copies_.size() && i > 0 ? centre_copies_[i].data() : run.centre.data();
  }

  // The partitioned exchange, scheduled so that the groups meet only through two
  // counters each, and a group waits only when another is about a whole step behind (the
  // barriers' per-step waits for the slowest group's jitter go). Exchange e of group i:
  //   published[i] = e+1          before its gradient: its W (buffer e%2) is final
  //   wait summed[j] >= e, all j  the centre c_e is whole, and nobody still reads the buffers
  //                               of exchange e-1 (W buffer (e+1)%2, the other centre buffer)
  //   elastic step from W (buffer e%2) and c_e into buffer (e+1)%2, which becomes g.weights
  //   wait published[j] >= e+1    every W of exchange e is final
  //   its slice of c_{e+1} from every W (buffer e%2) and c_e, into the other centre buffer
  //   summed[i] = e+1
  // The same arithmetic as the exchange through the Comm (bit for bit), in another order.
  void publish(Run& run, Group& g) {
    const size_t i = static_cast<size_t>(g.id);
    if (mirrored_ && run.params.tau > 1 && run.size() > 1) {  // tau 1: the exchange wrote it
      ScopedTimer t(&g.times.comm);
      stream_store(shared_by_parity_[exchanges_[i] % 2][i], g.weights.data(), run.arena_floats());
      stream_fence();
    }
    // seq_cst, not release: notify_all reads the waiter count, and that read must not pass the
    // store (a waiter that just registered would otherwise sleep with no wake-up coming).
    published_[i].v.store(static_cast<uint32_t>(exchanges_[i] + 1), std::memory_order_seq_cst);
    published_[i].v.notify_all();
  }

  void wait_for_all(Run& run, Group& g, const Counter* c, int64_t target) {
    const double t0 = now_seconds();
    for (int j = 0; j < run.size(); ++j)
      wait_for_counter(c[j].v, static_cast<uint32_t>(target), run.spin_seconds);
    g.times.wait += now_seconds() - t0;
  }

  void exchange_partitioned(Run& run, Group& g, float lr, float alpha) {
    const AlgoParams& p = run.params;
    const size_t i = static_cast<size_t>(g.id);
    const int64_t e = exchanges_[i];
    const auto [lo, hi] = centre_slice(run.arena_floats(), run.size(), g.id);
    const float* c_old = centre_of(run, g);
    float* c_new = e % 2 == 1 ? run.centre.data() : centre2_.data();
    const float* w = weights_by_parity_[e % 2][i];
    float* w_next = weights_by_parity_[(e + 1) % 2][i];
    wait_for_all(run, g, summed_.get(), e);
    {
      // The slices other groups read at the next exchange are streamed (engine/span_ops.hpp).
      ScopedTimer t(&g.times.compute);
      if (p.momentum == 0)
        elastic_sgd_step_streamed(run.segments(), w, w_next, g.diff.data(), c_old, lr,
                                  p.weight_decay, alpha, lo, hi);
      else
        elastic_momentum_step_streamed(run.segments(), w, w_next, g.diff.data(), g.momentum.data(),
                                       c_old, lr, p.momentum, p.weight_decay, alpha, p.nesterov, lo,
                                       hi);
      std::swap(g.weights, alt_weights_[i]);  // g.weights.data() == w_next
    }
    wait_for_all(run, g, published_.get(), e + 1);
    {
      ScopedTimer t(&g.times.comm);
      centre_update_slice(weights_by_parity_[e % 2], c_old, c_new, alpha, lo, hi, sum_tmp_[i]);
    }
    summed_[i].v.store(static_cast<uint32_t>(e + 1), std::memory_order_seq_cst);  // see publish
    summed_[i].v.notify_all();
    exchanges_[i] += 1;
  }

  // The mirrored exchange (P <= 2): every group updates its own copy of the whole centre from
  // every group's weights at this exchange, fused with its elastic step, and no group computes
  // anything for another. Exchange e of group i:
  //   published[i] = e+1          its W of exchange e is in shared buffer e%2 (written by its
  //                               previous exchange, or copied there at tau > 1), and it no
  //                               longer reads the shared buffers of exchange e-1
  //   wait published[j] >= e+1    every W of exchange e is there; nobody reads buffer (e+1)%2
  //   one pass: S from every W, the elastic step from its W and Wc, Wc <- Wc + alpha*(S-P*Wc),
  //   its new W also streamed into shared buffer (e+1)%2 (tau 1)
  void exchange_mirrored(Run& run, Group& g, float lr, float alpha) {
    const AlgoParams& p = run.params;
    const size_t i = static_cast<size_t>(g.id);
    const int64_t e = exchanges_[i];
    wait_for_all(run, g, published_.get(), e + 1);
    std::array<const float*, 2> all{};  // P <= 2
    for (size_t j = 0; j < static_cast<size_t>(run.size()); ++j)
      all[j] = j == i ? g.weights.data() : shared_by_parity_[e % 2][j];
    float* copy = p.tau == 1 && run.size() > 1 ? shared_by_parity_[(e + 1) % 2][i] : nullptr;
    float* c = i == 0 ? run.centre.data() : mirror_centres_[i].data();
    {
      ScopedTimer t(&g.times.comm);
      mirrored_exchange(run.segments(), std::span(all.data(), static_cast<size_t>(run.size())),
                        g.weights.data(), copy, g.diff.data(),
                        p.momentum == 0 ? nullptr : g.momentum.data(), c, lr, p.momentum,
                        p.weight_decay, alpha, p.nesterov, sum_tmp_[i]);
    }
    exchanges_[i] += 1;
  }

  // The local step with the elastic pull towards the centre, from the weights before both.
  void elastic_step(Run& run, Group& g, float lr, float alpha) {
    const AlgoParams& p = run.params;
    if (p.momentum == 0)
      g.kernels->elastic_sgd_step(run.segments(), g.weights.data(), g.diff.data(),
                                  centre_of(run, g), lr, p.weight_decay, alpha);
    else
      g.kernels->elastic_momentum_step(run.segments(), g.weights.data(), g.diff.data(),
                                       g.momentum.data(), centre_of(run, g), lr, p.momentum,
                                       p.weight_decay, alpha, p.nesterov);
  }

  // S = sum of the groups' weights into scratch_ on the root (group 0).
  void reduce_weights(Run& run, Group& g) {
    if (run.params.reduce == ReduceMode::tree) {
      timed_collective(run, g, [&] {
        for_each_message(run, [&](int64_t off, int64_t n) {
          run.comm->reduce_sum(g.global_id, g.weights.data() + off, scratch_.data() + off, n, 0);
        });
      });
      return;
    }
    // Serial: the root pulls the P replicas one after the other; the others wait.
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });
    if (g.id == 0) {
      ScopedTimer t(&g.times.comm);
      for_each_message(run, [&](int64_t off, int64_t n) {
        span_copy(scratch_.data() + off, run.groups[0]->weights.data() + off, n);
        for (int j = 1; j < run.size(); ++j)
          span_axpy(scratch_.data() + off, 1.f,
                    run.groups[static_cast<size_t>(j)]->weights.data() + off, n);
      });
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });
  }

  void exchange(Run& run, Group& g, float lr, float alpha) {
    reduce_weights(run, g);
    {
      ScopedTimer t(&g.times.compute);
      elastic_step(run, g, lr, alpha);
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // everyone has read Wc
    if (g.global_id == 0) {
      ScopedTimer t(&g.times.comm);
      g.kernels->elastic_centre_sum(run.centre.data(), scratch_.data(), alpha, run.total_groups(),
                                    run.arena_floats());
    }
    if (run.ranks == 1 && centre_copies_.empty()) {
      timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // Wc is updated
      return;
    }
    // Across ranks every process keeps a copy of Wc, and on GPUs every group: the root's update
    // is broadcast into all of them (the local groups of a process pass the same buffer; the
    // broadcast ends when Wc is updated).
    timed_collective(run, g, [&] {
      for_each_message(run, [&](int64_t off, int64_t n) {
        run.comm->broadcast(g.global_id, centre_of(run, g) + off, n, 0);
      });
    });
  }

  void exchange_overlapped(Run& run, Group& g, float lr, float alpha) {
    finish_pending(run, g);  // the previous exchange's centre update is done (and uploaded)
    const int64_t n = run.arena_floats();
    float* send = send_[static_cast<size_t>(g.id)].data();
    {
      ScopedTimer t(&g.times.comm);
      if (run.resident)
        g.device->download(send, g.weights.data(), static_cast<size_t>(n) * sizeof(float));
      else
        span_copy(send, g.weights.data(), n);
    }
    {
      ScopedTimer t(&g.times.compute);
      elastic_step(run, g, lr, alpha);
      g.device->synchronize();  // the upload of Wc has landed before the job may rewrite it
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // snapshots taken, Wc read
    if (g.id == 0) {
      float* centre = run.resident ? host_centre_.data() : run.centre.data();
      float* scratch = run.resident ? host_scratch_.data() : scratch_.data();
      posted_ += 1;
      pending_ = comm_thread_->post([this, centre, scratch, n, alpha, p = run.size()] {
        span_copy(scratch, send_[0].data(), n);
        for (size_t j = 1; j < send_.size(); ++j)
          span_axpy(scratch, 1.f, send_[j].data(), n);
        elastic_centre_sum(centre, scratch, alpha, p, n);
      });
    }
  }

  // Waits (as group g) until the communication thread's last job is done; on GPUs, then
  // uploads the new Wc into g's copy (ordered before g's next work on its device).
  void finish_pending(Run& run, Group& g) {
    if (g.id == 0 && pending_.valid()) {
      ScopedTimer t(&g.times.wait);
      pending_.get();
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });
    int64_t& seen = refreshed_[static_cast<size_t>(g.id)];
    if (run.resident && seen != posted_) {  // posted_ is written by group 0 before a barrier
      ScopedTimer t(&g.times.comm);
      g.device->upload(centre_of(run, g), host_centre_.data(),
                       static_cast<size_t>(run.arena_floats()) * sizeof(float));
      seen = posted_;
    }
  }

  bool partitioned_ = false;        // see the file comment
  bool mirrored_ = false;           // partitioned's conditions with P <= 2: exchange_mirrored
  std::vector<int64_t> exchanges_;  // [i]: exchanges group i has made (its thread only)
  // Per group, the chunks of the sum (partitioned: P + 1, mirrored: P).
  std::vector<std::vector<float>> sum_tmp_;
  // Partitioned: Wc's second buffer, each group's second weights buffer and every group's two
  // weights buffers by exchange parity.
  Arena centre2_;
  std::vector<Arena> alt_weights_;
  std::array<std::vector<float*>, 2> weights_by_parity_;
  // Mirrored: group i's own Wc ([0] unused: group 0's is run.centre), and with P == 2 every
  // group's two shared copies of its weights (shared_w_ owns them; shared_by_parity_[b][i] is
  // group i's copy for the exchanges of parity b).
  std::vector<Arena> mirror_centres_;
  std::vector<Arena> shared_w_;
  std::array<std::vector<float*>, 2> shared_by_parity_;
  // The groups' counters: published (both exchanges), summed (partitioned only).
  std::unique_ptr<Counter[]> published_, summed_;
  std::vector<Arena> send_;           // overlap: each group's weights at the exchange
  Arena host_centre_, host_scratch_;  // overlap on GPUs: the master Wc and the sum, pinned
  int64_t posted_ = 0;                // overlap: jobs posted (group 0 writes, before a barrier)
  std::vector<int64_t> refreshed_;    // overlap on GPUs: [i] = jobs whose Wc group i uploaded
  std::vector<Arena> centre_copies_;  // resident on GPUs: [i] is group i's copy of Wc (i > 0)
  Arena scratch_;                     // the Comm path: S, reduced into the root (group 0)
  std::unique_ptr<WorkerThread> comm_thread_;
  std::future<void> pending_;  // touched by group 0 only
};

}  // namespace

std::unique_ptr<Algorithm> make_sync_easgd() {
  return std::make_unique<SyncEasgd>();
}

}  // namespace easel
