// sync-easgd's single-process fast exchanges and their kernels (algos/sync_easgd_fast.hpp).
#include "algos/sync_easgd_fast.hpp"

#include <algorithm>
#include <array>
#include <atomic>

#include "algos/exchange.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

// S[0, m) = the sum of w[v] + c over the P arenas in the shared-memory Comm's binomial-tree
// order (pairs (v, v+1), then (v, v+2), ...), into tmp's first chunk (a copy when P == 1, so
// that the arenas may change after); tmp holds at least P chunks.
const float* tree_sum(std::span<const float* const> w, int64_t c, int64_t m, float* tmp) {
  const int p = static_cast<int>(w.size());
  for (int v = 0; v < p; v += 2) {
    float* a = tmp + static_cast<size_t>(v) * kCentreChunk;
    const float* w0 = w[static_cast<size_t>(v)] + c;
    if (v + 1 < p) {
      const float* w1 = w[static_cast<size_t>(v + 1)] + c;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i)
        a[i] = w0[i] + w1[i];
    } else {
      span_copy(a, w0, m);
    }
  }
  for (int mask = 2; mask < p; mask <<= 1) {
    for (int v = 0; v + mask < p; v += 2 * mask) {
      float* a = tmp + static_cast<size_t>(v) * kCentreChunk;
      const float* b = tmp + static_cast<size_t>(v + mask) * kCentreChunk;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i)
        a[i] = a[i] + b[i];
    }
  }
  return tmp;
}

struct alignas(64) Counter {  // one group's progress counter, on a cache line of its own
  std::atomic<uint32_t> v{0};
};

// Sets c to `value` and wakes its waiters. seq_cst, not release: notify_all reads the waiter
// count, and that read must not pass the store (a waiter that just registered would otherwise
// sleep with no wake-up coming).
void set_and_wake(Counter& c, int64_t value) {
  c.v.store(static_cast<uint32_t>(value), std::memory_order_seq_cst);
  c.v.notify_all();
}

// Waits until every group's counter in c has reached target; the time goes to g.times.wait.
void wait_for_all(Run& run, Group& g, const Counter* c, int64_t target) {
  const double t0 = now_seconds();
  for (int j = 0; j < run.size(); ++j)
    wait_for_counter(c[j].v, static_cast<uint32_t>(target), run.spin_seconds);
  add_time(&g.times.wait, t0, now_seconds());
}

// The partitioned exchange, scheduled so that the groups meet only through two counters each,
// and a group waits only when another is about a whole step behind (the barriers' per-step
// waits for the slowest group's jitter go). The centre has two buffers (run.centre and
// centre2_) and each group's weights two (g.weights and its alternate), which swap roles at
// every exchange. Exchange e of group i:
//   published[i] = e+1          before its gradient: its W (buffer e%2) is final
//   wait summed[j] >= e, all j  the centre c_e is whole, and nobody still reads the buffers
//                               of exchange e-1 (W buffer (e+1)%2, the other centre buffer)
//   elastic step from W (buffer e%2) and c_e into buffer (e+1)%2, which becomes g.weights
//   wait published[j] >= e+1    every W of exchange e is final
//   its slice of c_{e+1} from every W (buffer e%2) and c_e, into the other centre buffer
//   summed[i] = e+1
// The same arithmetic as the exchange through the Comm (bit for bit), in another order. The
// stores other groups read next are streamed (non-temporal).
class PartitionedExchange final : public FastExchange {
 public:
  Status prepare(Run& run) override {
    const size_t p = run.groups.size();
    EASEL_ASSIGN_OR_RETURN(centre2_,
                           arena_on(*run.groups[0], run.arena_floats(), run.centre.kind()));
    sum_tmp_.assign(p, std::vector<float>((p + 1) * static_cast<size_t>(kCentreChunk)));
    for (size_t j = 0; j < p; ++j) {  // each group's second weights buffer
      Group& g = *run.groups[j];
      EASEL_ASSIGN_OR_RETURN(Arena alt, arena_on(g, run.arena_floats(), g.weights.kind()));
      span_copy(alt.data(), g.weights.data(), run.arena_floats());
      for (int b = 0; b < 2; ++b)
        weights_by_parity_[b].push_back(b == 0 ? g.weights.data() : alt.data());
      alt_weights_.push_back(std::move(alt));
    }
    published_ = std::make_unique<Counter[]>(p);
    summed_ = std::make_unique<Counter[]>(p);
    exchanges_.assign(p, 0);
    return {};
  }

  void publish(Run&, Group& g) override {
    const size_t i = static_cast<size_t>(g.id);
    set_and_wake(published_[i], exchanges_[i] + 1);
  }

  void exchange(Run& run, Group& g, float lr, float alpha) override {
    const AlgoParams& p = run.params;
    const size_t i = static_cast<size_t>(g.id);
    const int64_t e = exchanges_[i];
    const auto [lo, hi] = centre_slice(run.arena_floats(), run.size(), g.id);
    const float* c_old = e % 2 == 1 ? centre2_.data() : run.centre.data();
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
    set_and_wake(summed_[i], e + 1);
    exchanges_[i] += 1;
  }

  const float* centre(Run& run) const override {
    return exchanges_[0] % 2 == 1 ? centre2_.data() : run.centre.data();
  }

 private:
  std::vector<int64_t> exchanges_;           // [i]: exchanges group i has made (its thread only)
  std::vector<std::vector<float>> sum_tmp_;  // per group, P + 1 chunks of the sum
  Arena centre2_;                            // Wc's second buffer
  // Each group's second weights buffer, and every group's two weights buffers by parity.
  std::vector<Arena> alt_weights_;
  std::array<std::vector<float*>, 2> weights_by_parity_;
  std::unique_ptr<Counter[]> published_, summed_;
};

// The mirrored exchange (P <= 2): every group updates its own copy of the whole centre from
// every group's weights at this exchange, fused with its elastic step, and no group computes
// anything for another, so that no group writes a centre the other reads: only the weights
// cross between cores, streamed into two published copies by parity. Measured 0.6-1.7% (about
// 1%) more pair throughput than the partitioned exchange on LeNet (docs/PERFORMANCE.md); the
// partitioned one reads less of the other groups' data from P = 3. Its pass is timed as comm,
// as every fused exchange is (algos/algorithm.hpp GroupTimes). Exchange e of group i:
//   published[i] = e+1          its W of exchange e is in shared buffer e%2 (written by its
//                               previous exchange, or copied there at tau > 1), and it no
//                               longer reads the shared buffers of exchange e-1
//   wait published[j] >= e+1    every W of exchange e is there; nobody reads buffer (e+1)%2
//   one pass: S from every W, the elastic step from its W and Wc, Wc <- Wc + alpha*(S-P*Wc),
//   its new W also streamed into shared buffer (e+1)%2 (tau 1)
class MirroredExchange final : public FastExchange {
 public:
  Status prepare(Run& run) override {
    const size_t p = run.groups.size();
    if (p > 2)
      return invalid_argument("sync-easgd's mirrored exchange takes at most 2 groups, not " +
                              std::to_string(p));
    // Every group but 0 keeps its own copy of Wc (group 0's is run.centre), and publishes its
    // weights into two shared buffers, by exchange parity.
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
    exchanges_.assign(p, 0);
    return {};
  }

  void publish(Run& run, Group& g) override {
    const size_t i = static_cast<size_t>(g.id);
    if (run.params.tau > 1 && run.size() > 1) {  // tau 1: the exchange wrote it
      ScopedTimer t(&g.times.comm);
      stream_store(shared_by_parity_[exchanges_[i] % 2][i], g.weights.data(), run.arena_floats());
      stream_fence();
    }
    set_and_wake(published_[i], exchanges_[i] + 1);
  }

  void exchange(Run& run, Group& g, float lr, float alpha) override {
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

  const float* centre(Run& run) const override { return run.centre.data(); }

 private:
  std::vector<int64_t> exchanges_;           // [i]: exchanges group i has made (its thread only)
  std::vector<std::vector<float>> sum_tmp_;  // per group, P chunks of the sum
  // Group i's own Wc ([0] unused: group 0's is run.centre), and with P == 2 every group's two
  // shared copies of its weights (shared_w_ owns them; shared_by_parity_[b][i] is group i's
  // copy for the exchanges of parity b).
  std::vector<Arena> mirror_centres_;
  std::vector<Arena> shared_w_;
  std::array<std::vector<float*>, 2> shared_by_parity_;
  std::unique_ptr<Counter[]> published_;
};

}  // namespace

std::unique_ptr<FastExchange> make_partitioned_exchange() {
  return std::make_unique<PartitionedExchange>();
}

std::unique_ptr<FastExchange> make_mirrored_exchange() {
  return std::make_unique<MirroredExchange>();
}

void centre_update_slice(std::span<const float* const> w, const float* c_old, float* c_new,
                         float alpha, int64_t lo, int64_t hi, std::vector<float>& tmp) {
  const int p = static_cast<int>(w.size());
  const size_t need = static_cast<size_t>(p + 1) * kCentreChunk;
  if (tmp.size() < need) tmp.resize(need);
  for (int64_t c = lo; c < hi; c += kCentreChunk) {
    const int64_t m = std::min(kCentreChunk, hi - c);
    const float* sum = tree_sum(w, c, m, tmp.data());
    if (p == 1) {
      elastic_centre_from(c_new + c, c_old + c, sum, alpha, p, m);
    } else {  // every group reads this slice next: streamed (engine/span_ops.hpp)
      float* out = &tmp[static_cast<size_t>(p) * kCentreChunk];
      elastic_centre_from(out, c_old + c, sum, alpha, p, m);
      stream_store(c_new + c, out, m);
    }
  }
  if (p > 1) stream_fence();
}

void mirrored_exchange(std::span<const Segment> segs, std::span<const float* const> w_all, float* w,
                       float* w_copy, const float* g, float* v, float* c, float lr, float delta,
                       float wd, float alpha, bool nesterov, std::vector<float>& tmp) {
  const int p = static_cast<int>(w_all.size());
  const int64_t n = segs.empty() ? 0 : segs.back().offset + segs.back().count;
  if (alpha == 0.f) {  // the plain local step's own code path; the centre stays
    if (v)
      elastic_momentum_step(segs, w, g, v, c, lr, delta, wd, 0.f, nesterov);
    else
      elastic_sgd_step(segs, w, g, c, lr, wd, 0.f);
    if (w_copy) {
      stream_store(w_copy, w, n);
      stream_fence();
    }
    return;
  }
  const size_t need = static_cast<size_t>(p) * kCentreChunk;
  if (tmp.size() < need) tmp.resize(need);
  for (const Segment& s : segs) {
    const float l = lr * s.lr_mult, d = wd * s.decay_mult;
    const int64_t end = s.offset + s.count;
    for (int64_t b = s.offset; b < end; b += kCentreChunk) {
      const int64_t m = std::min(kCentreChunk, end - b);
      const float* sum = tree_sum(w_all, b, m, tmp.data());  // before w, one of its terms, moves
      if (v)
        elastic_momentum_range(w + b, w + b, g + b, v + b, c + b, m, l, d, delta, alpha, nesterov);
      else
        elastic_sgd_range(w + b, w + b, g + b, c + b, m, l, d, alpha);
      elastic_centre_from(c + b, c + b, sum, alpha, p, m);
      if (w_copy) stream_store(w_copy + b, w + b, m);
    }
  }
  if (w_copy) stream_fence();
}

std::pair<int64_t, int64_t> centre_slice(int64_t n, int p, int id) {
  const int64_t per = (n / p + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  const int64_t lo = std::min(n, per * id);
  return {lo, id + 1 == p ? n : std::min(n, lo + per)};
}

}  // namespace easel
