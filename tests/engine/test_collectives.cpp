// The collective algorithms across nodes: threads of this process standing for ranks placed in
// nodes of K (a shared-memory transport that reports nodes), so that the hierarchical
// algorithm's pipelined path (inside the node, across nodes, back inside; chunks in flight side
// by side) runs here as it does under MPI. tests/engine/test_comm.cpp covers one node.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/team.hpp"
#include "engine/comm/comm.hpp"
#include "engine/rng.hpp"
#include "engine/worker.hpp"
#include "tests/engine/rank_threads.hpp"

namespace easel {
namespace {

// Shared memory among `p` threads, ranks [k K, (k+1) K) on node k. With `reversed`, the streams
// of a slot (Transport::run_streams) run last first: a pipelined algorithm's streams must not
// depend on their order (the MPI transport runs each at its own pace).
class NodesTransport final : public Transport {
 public:
  NodesTransport(int p, int per_node, bool reversed)
      : shm_(make_shm_transport(p)), per_node_(per_node), reversed_(reversed) {}
  int size() const override { return shm_->size(); }
  std::string name() const override { return "nodes of " + std::to_string(per_node_); }
  int node_of(int rank) const override { return rank / per_node_; }
  int nodes() const override { return (size() + per_node_ - 1) / per_node_; }
  int first_local() const override { return 0; }
  int local_size() const override { return size(); }
  void step(int rank, const Transfer& x, const char* what) override { shm_->step(rank, x, what); }
  void run_streams(int rank, const std::vector<Stream>& streams, const char* what) override {
    batches_with_two_ += run_streams_in_slots(*this, rank, streams, what, reversed_);
  }
  void barrier(int rank) override { shm_->barrier(rank); }
  double wait_seconds(int rank) const override { return shm_->wait_seconds(rank); }
  int64_t pipeline_floats() const override { return shm_->pipeline_floats(); }
  int batches_with_two() const { return batches_with_two_; }

 private:
  std::unique_ptr<Transport> shm_;
  const int per_node_;
  const bool reversed_;
  std::atomic<int> batches_with_two_{0};
};

using test::run_ranks;
using test::run_without;
using test::StallSeen;
using test::value;

// Every rank's allreduce of `input` by the hierarchical algorithm in `chunks` chunks.
std::vector<std::vector<float>> hierarchical_allreduce(NodesTransport& t,
                                                       std::vector<std::vector<float>> bufs,
                                                       CollectiveAlgo inter, int chunks) {
  const int p = t.size();
  run_ranks(p, [&](int r) {
    ScratchFloats s;
    auto& b = bufs[static_cast<size_t>(r)];
    hierarchical::allreduce_chunked(Team::all(t, r), b.data(), static_cast<int64_t>(b.size()), s,
                                    inter, chunks);
  });
  return bufs;
}

std::string describe(int p, int k, int64_t n, CollectiveAlgo inter, int chunks, bool rev) {
  return "p=" + std::to_string(p) + " per node " + std::to_string(k) + " n=" + std::to_string(n) +
         " inter " + collective_algo_name(inter) + " chunks " + std::to_string(chunks) +
         (rev ? " reversed" : "");
}

// Exact on integer inputs for p = 1..9 in nodes of 2, 3 and 4 (equal and unequal nodes; a power
// of two inside, halving-doubling, and not, the ring), sizes 0, 1, p - 1, p + 1 and larger, in
// 1, 2, 3 and 5 chunks, with the batches' streams in either order.
TEST(HierarchicalAcrossNodes, AllreduceIsExact) {
  int pipelined = 0;
  for (int p = 1; p <= 9; ++p) {
    for (int k : {2, 3, 4}) {
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{p - 1}, int64_t{p + 1}, int64_t{10007}}) {
        for (CollectiveAlgo inter : {CollectiveAlgo::ring, CollectiveAlgo::halving_doubling}) {
          for (int chunks : {1, 2, 3, 5}) {
            for (bool rev : {false, true}) {
              // Small spans: few chunks suffice; the other order with 3 chunks only.
              if ((n < 100 && chunks > 2) || (rev && chunks != 3)) continue;
              NodesTransport t(p, k, rev);
              std::vector<std::vector<float>> in(static_cast<size_t>(p));
              for (int r = 0; r < p; ++r)
                for (int64_t i = 0; i < n; ++i)
                  in[static_cast<size_t>(r)].push_back(value(r, i));
              const auto out = hierarchical_allreduce(t, in, inter, chunks);
              for (int r = 0; r < p; ++r) {
                int wrong = 0;
                for (int64_t i = 0; i < n; ++i) {
                  double e = 0;
                  for (int q = 0; q < p; ++q)
                    e += value(q, i);
                  wrong +=
                      out[static_cast<size_t>(r)][static_cast<size_t>(i)] != static_cast<float>(e);
                }
                ASSERT_EQ(wrong, 0) << describe(p, k, n, inter, chunks, rev) << " rank " << r;
              }
              pipelined += t.batches_with_two() > 0;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(pipelined, 50) << "the streams seldom ran side by side";
}

// Random floats against a float64 sum: within float32 rounding of it, every rank the same bits,
// the same bits again on a second run and with the batches' streams in the other order.
TEST(HierarchicalAcrossNodes, WithinRoundingAndRepeatable) {
  for (int p : {4, 6, 8, 9}) {
    for (int k : {2, 3, 4}) {
      const int64_t n = 4099;
      std::vector<std::vector<float>> input(static_cast<size_t>(p));
      std::vector<double> exact(n, 0.0), magnitude(n, 0.0);
      for (int r = 0; r < p; ++r) {
        Rng rng = Rng::stream(13, static_cast<uint64_t>(r));
        for (int64_t i = 0; i < n; ++i) {
          const float x = rng.uniform(-1.f, 1.f) * 1e3f;
          input[static_cast<size_t>(r)].push_back(x);
          exact[static_cast<size_t>(i)] += x;
          magnitude[static_cast<size_t>(i)] += std::abs(x);
        }
      }
      for (CollectiveAlgo inter : {CollectiveAlgo::ring, CollectiveAlgo::halving_doubling}) {
        NodesTransport t1(p, k, false), t2(p, k, true);
        const auto a = hierarchical_allreduce(t1, input, inter, 3);
        const auto b = hierarchical_allreduce(t2, input, inter, 3);
        const double eps = std::numeric_limits<float>::epsilon();
        int far = 0;
        for (int64_t i = 0; i < n; ++i)
          far += std::abs(a[0][static_cast<size_t>(i)] - exact[static_cast<size_t>(i)]) >
                 (p - 1) * eps * magnitude[static_cast<size_t>(i)];
        EXPECT_EQ(far, 0) << describe(p, k, n, inter, 3, false);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(std::memcmp(a[0].data(), a[static_cast<size_t>(r)].data(), n * sizeof(float)),
                    0)
              << "ranks disagree, " << describe(p, k, n, inter, 3, false);
          EXPECT_EQ(std::memcmp(a[static_cast<size_t>(r)].data(), b[static_cast<size_t>(r)].data(),
                                n * sizeof(float)),
                    0)
              << "runs disagree, " << describe(p, k, n, inter, 3, false);
        }
      }
    }
  }
}

// Through the Comm (the chunks the span's size gives), reduce and broadcast included.
TEST(HierarchicalAcrossNodes, CommAllreduceReduceBroadcast) {
  for (int p : {5, 8}) {
    auto t = std::make_shared<NodesTransport>(p, 4, false);
    auto comm = make_collective_comm(t, CollectiveAlgo::hierarchical, CollectiveAlgo::ring);
    const int64_t n = 3001;
    std::vector<int> wrong(static_cast<size_t>(p), 0);
    run_ranks(p, [&](int r) {
      std::vector<float> b(n), out(n, -1.f);
      for (int64_t i = 0; i < n; ++i)
        b[static_cast<size_t>(i)] = value(r, i);
      comm->reduce_sum(r, b.data(), r == 1 ? out.data() : nullptr, n, 1);
      comm->allreduce_sum(r, b.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        double e = 0;
        for (int q = 0; q < p; ++q)
          e += value(q, i);
        wrong[static_cast<size_t>(r)] += b[static_cast<size_t>(i)] != static_cast<float>(e);
        if (r == 1) wrong[1] += out[static_cast<size_t>(i)] != static_cast<float>(e);
      }
      if (r == 2)
        for (int64_t i = 0; i < n; ++i)
          b[static_cast<size_t>(i)] = 7;
      comm->broadcast(r, b.data(), n, 2);
      for (int64_t i = 0; i < n; ++i)
        wrong[static_cast<size_t>(r)] += b[static_cast<size_t>(i)] != 7;
    });
    for (int r = 0; r < p; ++r)
      EXPECT_EQ(wrong[static_cast<size_t>(r)], 0) << "p=" << p << " rank " << r;
  }
}

// A rank that never arrives is named by the ranks that wait, in the pipelined allreduce.
TEST(HierarchicalAcrossNodes, StalledPeerIsNamed) {
  set_stall_timeout_seconds(0.3);
  for (int p : {6, 8}) {
    const int missing = p - 3;
    NodesTransport t(p, 2, false);
    const StallSeen seen = run_without(p, missing, [&](int r) {
      std::vector<float> buf(1000, 1.f);
      ScratchFloats s;
      hierarchical::allreduce_chunked(Team::all(t, r), buf.data(), 1000, s, CollectiveAlgo::ring,
                                      3);
    });
    EXPECT_NE(seen.what.find("group " + std::to_string(missing) + " has not"), std::string::npos)
        << "p=" << p << ": " << seen.what;
    EXPECT_LT(seen.seconds, 5.0);
  }
  clear_stall();
  set_stall_timeout_seconds(300);
}

// The ring's broadcast: a pipelined chain where the links make it faster than the scatter and
// all-gather (in pieces: many for a large span, few for a small one), else (two ranks) the
// scatter and all-gather; both copy the root's span exactly.
TEST(RingBroadcast, ChainOrScatterAllgather) {
  ::setenv("EASEL_COLLECTIVE_LINKS", "1,10,1,10", 1);
  EXPECT_GT(ring_broadcast_pieces(233e6, 63), 100);
  EXPECT_LT(ring_broadcast_pieces(4e3, 63), 10);
  EXPECT_EQ(ring_broadcast_pieces(233e6, 2), 0);
  for (const char* links : {"1,10,1,10", "1000,10,1000,10"}) {
    ::setenv("EASEL_COLLECTIVE_LINKS", links, 1);
    for (int p : {2, 3, 5, 9}) {
      for (int64_t n : {int64_t{1}, int64_t{p + 1}, int64_t{100003}}) {
        auto comm = make_shm_comm(p, CollectiveAlgo::ring);
        const int root = p / 2;
        std::vector<int> wrong(static_cast<size_t>(p), 0);
        run_ranks(p, [&](int r) {
          std::vector<float> b(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i)
            b[static_cast<size_t>(i)] = value(r, i);
          comm->broadcast(r, b.data(), n, root);
          for (int64_t i = 0; i < n; ++i)
            wrong[static_cast<size_t>(r)] += b[static_cast<size_t>(i)] != value(root, i);
        });
        for (int r = 0; r < p; ++r)
          EXPECT_EQ(wrong[static_cast<size_t>(r)], 0)
              << links << " p=" << p << " n=" << n << " rank " << r;
      }
    }
  }
  ::unsetenv("EASEL_COLLECTIVE_LINKS");
}

// The cost model prices the pipeline: on the simulated GPU nodes (SMPI's large-message
// latency; 4 ranks under a PCIe switch, as tools/simulate reports gpu-pcie-ib.xml, and 8) the
// overlapped hierarchical allreduce of a large span beats both the flat ring's 254 latencies and
// the same three phases run one after another (halving-doubling across nodes); it cuts
// AlexNet-CIFAR's 233 MB into many chunks and GoogLeNet's 26.6 MB into several, a 4 KB span
// into one.
TEST(HierarchicalAcrossNodes, CostModelPricesTheOverlap) {
  for (int per_node : {4, 8}) {
    CollectiveShape s;
    s.intra = LinkCost{23e-6, 22.6e9};
    s.inter = LinkCost{70e-6, 22.6e9};
    s.ranks = 128;
    s.ranks_per_node = per_node;
    s.bytes = 233e6;
    const CollectiveAlgo hd = CollectiveAlgo::halving_doubling;
    EXPECT_GE(hierarchical_chunks(s, hd), 8) << per_node;
    const double h = allreduce_seconds(CollectiveAlgo::hierarchical, s, hd);
    const double ring = allreduce_seconds(CollectiveAlgo::ring, s);
    EXPECT_LT(h, ring);
    const CollectiveChoice c = choose_collective(s);
    EXPECT_EQ(c.algo, CollectiveAlgo::hierarchical) << c.why;
    EXPECT_EQ(c.inter, hd) << c.why;
    // Unpipelined: inside (reduce-scatter and all-gather), then across, one after another.
    const double L = per_node, N = 128 / per_node;
    const double inside = 2 * std::log2(L) * 23e-6 + 2 * (L - 1) / L * 233e6 / 22.6e9;
    const double across =
        2 * std::log2(N) * 70e-6 + 2 * (N - 1) / N * 233e6 / 22.6e9;  // L shares fill the uplink
    EXPECT_LT(h, 0.9 * (inside + across)) << per_node;
    EXPECT_GT(h, across) << per_node;  // the uplink's own time is not hidden
    s.bytes = 26.6e6;
    EXPECT_GT(hierarchical_chunks(s, hd), 1) << per_node;
    s.bytes = 4096;
    EXPECT_EQ(hierarchical_chunks(s, hd), 1) << per_node;
  }
}

// The pipeline's streams: A in chunk order, D in chunk order, the B's in lanes of two chunks;
// each B starts once its chunk's A is done, each D once its chunk's B is done.
TEST(HierarchicalAcrossNodes, PlanStreamsAndTheirDependencies) {
  const int C = 5, na = 3, nb = 4, nd = 3;
  const HierarchicalPlan plan = hierarchical_plan(C, na, nb, nd);
  ASSERT_EQ(plan.streams.size(), 2u + 3u);  // A, D, three lanes of B
  EXPECT_EQ(plan.streams[0].size(), static_cast<size_t>(C * na));
  EXPECT_EQ(plan.streams[1].size(), static_cast<size_t>(C * nd));
  for (int c = 0; c < C; ++c) {
    const auto& lane = plan.streams[static_cast<size_t>(2 + c % 3)];
    const PlanStep& b0 = lane[static_cast<size_t>((c / 3) * nb)];
    EXPECT_EQ(b0.phase, 1);
    EXPECT_EQ(b0.chunk, c);
    EXPECT_EQ(b0.after_stream, 0);
    EXPECT_EQ(b0.after_count, (c + 1) * na);
    const PlanStep& d0 = plan.streams[1][static_cast<size_t>(c * nd)];
    EXPECT_EQ(d0.chunk, c);
    EXPECT_EQ(d0.after_stream, 2 + c % 3);
    EXPECT_EQ(d0.after_count, (c / 3 + 1) * nb);
    for (int i = 1; i < nb; ++i)
      EXPECT_EQ(lane[static_cast<size_t>((c / 3) * nb + i)].after_stream, -1);
  }
}

// The default run_streams: a stream waits for its dependency; slots run side by side.
TEST(RunStreams, SlotsKeepDependencies) {
  auto t = make_shm_transport(2);
  std::vector<float> got(2, 0.f);
  run_ranks(2, [&](int r) {
    // Rank 0 sends 2 on stream 0, which waits for stream 1's exchange with rank 1 (listed
    // first, it would run first without its dependency).
    float one = 1, two = 2, in = 0, x = 0;
    std::vector<Stream> streams(2);
    StreamStep ex;
    ex.x.send_peer = 1 - r;
    ex.x.send = &one;
    ex.x.send_n = 1;
    ex.x.recv_peer = 1 - r;
    ex.x.dst = &x;
    ex.x.recv_n = 1;
    streams[1].push_back(ex);
    StreamStep st;
    st.after_stream = 1;
    st.after_count = 1;
    if (r == 0) {
      st.x.send_peer = 1;
      st.x.send = &two;
      st.x.send_n = 1;
    } else {
      st.x.recv_peer = 0;
      st.x.dst = &in;
      st.x.own = &x;  // in = x + 2: x must hold the exchange's value by then
      st.x.recv_n = 1;
      st.x.op = RecvOp::add;
    }
    streams[0].push_back(st);
    t->run_streams(r, streams, "test");
    got[static_cast<size_t>(r)] = r == 0 ? x : in;
  });
  EXPECT_EQ(got[0], 1.f);
  EXPECT_EQ(got[1], 3.f);
}

}  // namespace
}  // namespace easel
