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
#include "engine/comm/collectives/list.hpp"
#include "engine/comm/comm.hpp"
#include "engine/comm/transport.hpp"
#include "engine/rng.hpp"
#include "engine/worker.hpp"
#include "tests/engine/rank_threads.hpp"

namespace easel {
namespace {

using test::run_ranks;
using test::run_without;
using test::StallSeen;
using test::value;
float expected_sum(int p, int64_t i) {
  double s = 0;
  for (int r = 0; r < p; ++r)
    s += value(r, i);
  return static_cast<float>(s);
}

struct Case {
  CollectiveAlgo algo;
  int p;
  int64_t n;
};

constexpr CollectiveAlgo kAlgos[] = {CollectiveAlgo::tree, CollectiveAlgo::ring,
                                     CollectiveAlgo::halving_doubling,
                                     CollectiveAlgo::hierarchical};

// Every algorithm, p = 1..9 (non-powers of two included), sizes 0, 1, p - 1, p + 1 and large.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (CollectiveAlgo a : kAlgos) {
    for (int p = 1; p <= 9; ++p) {
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{p - 1}, int64_t{p + 1}, int64_t{100003}})
        cases.push_back({a, p, n});
    }
  }
  return cases;
}

std::string describe(const Case& c) {
  return std::string(collective_algo_name(c.algo)) + " p=" + std::to_string(c.p) +
         " n=" + std::to_string(c.n);
}

TEST(ShmComm, NameAndSize) {
  auto c = make_shm_comm(4, CollectiveAlgo::ring);
  EXPECT_EQ(c->size(), 4);
  EXPECT_NE(c->name().find("ring"), std::string::npos);
  EXPECT_STREQ(collective_algo_name(CollectiveAlgo::tree), "tree");
  EXPECT_STREQ(collective_algo_name(CollectiveAlgo::halving_doubling), "halving-doubling");
  EXPECT_STREQ(collective_algo_name(CollectiveAlgo::automatic), "auto");
}

TEST(ShmComm, AllreduceIsExact) {
  for (const Case& c : all_cases()) {
    auto comm = make_shm_comm(c.p, c.algo);
    std::vector<std::vector<float>> bufs(static_cast<size_t>(c.p));
    run_ranks(c.p, [&](int r) {
      auto& b = bufs[static_cast<size_t>(r)];
      b.resize(static_cast<size_t>(c.n));
      for (int64_t i = 0; i < c.n; ++i)
        b[static_cast<size_t>(i)] = value(r, i);
      comm->allreduce_sum(r, b.data(), c.n);
    });
    for (int r = 0; r < c.p; ++r) {
      int wrong = 0;
      for (int64_t i = 0; i < c.n; ++i) {
        wrong += bufs[static_cast<size_t>(r)][static_cast<size_t>(i)] != expected_sum(c.p, i);
      }
      ASSERT_EQ(wrong, 0) << describe(c) << " rank " << r;
    }
  }
}

// Random floats against a float64 sum: every algorithm is within float32 rounding of it (the
// error of p - 1 additions), every rank holds the same bits, and the algorithms differ from each
// other by that rounding only.
TEST(ShmComm, EveryAlgorithmWithinRoundingOfAFloat64Sum) {
  for (int p = 2; p <= 9; ++p) {
    const int64_t n = 4099;
    std::vector<std::vector<float>> input(static_cast<size_t>(p));
    std::vector<double> exact(n, 0.0), magnitude(n, 0.0);
    for (int r = 0; r < p; ++r) {
      Rng rng = Rng::stream(11, static_cast<uint64_t>(r));
      input[static_cast<size_t>(r)].resize(n);
      for (int64_t i = 0; i < n; ++i) {
        const float x = rng.uniform(-1.f, 1.f) * 1e3f;
        input[static_cast<size_t>(r)][static_cast<size_t>(i)] = x;
        exact[static_cast<size_t>(i)] += x;
        magnitude[static_cast<size_t>(i)] += std::abs(x);
      }
    }
    for (CollectiveAlgo algo : kAlgos) {
      auto comm = make_shm_comm(p, algo);
      auto bufs = input;
      run_ranks(p, [&](int r) { comm->allreduce_sum(r, bufs[static_cast<size_t>(r)].data(), n); });
      const double eps = std::numeric_limits<float>::epsilon();
      int far = 0, disagree = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double bound = (p - 1) * eps * magnitude[static_cast<size_t>(i)];
        far += std::abs(bufs[0][static_cast<size_t>(i)] - exact[static_cast<size_t>(i)]) > bound;
        for (int r = 1; r < p; ++r)
          disagree += bufs[static_cast<size_t>(r)][static_cast<size_t>(i)] !=
                      bufs[0][static_cast<size_t>(i)];
      }
      EXPECT_EQ(far, 0) << collective_algo_name(algo) << " p=" << p;
      EXPECT_EQ(disagree, 0) << collective_algo_name(algo) << " p=" << p;
    }
  }
}

TEST(ShmComm, ReduceIsExactIncludingInPlaceRoot) {
  for (const Case& c : all_cases()) {
    for (bool in_place : {false, true}) {
      const int root = c.p - 1;
      auto comm = make_shm_comm(c.p, c.algo);
      std::vector<std::vector<float>> src(static_cast<size_t>(c.p));
      std::vector<float> dst(static_cast<size_t>(c.n), -1.f);
      run_ranks(c.p, [&](int r) {
        auto& s = src[static_cast<size_t>(r)];
        s.resize(static_cast<size_t>(c.n));
        for (int64_t i = 0; i < c.n; ++i)
          s[static_cast<size_t>(i)] = value(r, i);
        float* d = r == root ? (in_place ? s.data() : dst.data()) : nullptr;
        comm->reduce_sum(r, s.data(), d, c.n, root);
      });
      const std::vector<float>& out = in_place ? src[static_cast<size_t>(root)] : dst;
      int wrong = 0;
      for (int64_t i = 0; i < c.n; ++i) {
        wrong += out[static_cast<size_t>(i)] != expected_sum(c.p, i);
      }
      ASSERT_EQ(wrong, 0) << describe(c) << (in_place ? " in place" : "");
      // Non-root sources are untouched.
      for (int r = 0; r < c.p; ++r) {
        if (r == root && in_place) continue;
        for (int64_t i = 0; i < c.n; ++i) {
          ASSERT_EQ(src[static_cast<size_t>(r)][static_cast<size_t>(i)], value(r, i))
              << describe(c) << " rank " << r << " src changed";
        }
      }
    }
  }
}

TEST(ShmComm, BroadcastCopiesRoot) {
  for (const Case& c : all_cases()) {
    const int root = 1 % c.p;
    auto comm = make_shm_comm(c.p, c.algo);
    std::vector<std::vector<float>> bufs(static_cast<size_t>(c.p));
    run_ranks(c.p, [&](int r) {
      auto& b = bufs[static_cast<size_t>(r)];
      b.resize(static_cast<size_t>(c.n));
      for (int64_t i = 0; i < c.n; ++i)
        b[static_cast<size_t>(i)] = value(r, i);
      comm->broadcast(r, b.data(), c.n, root);
    });
    for (int r = 0; r < c.p; ++r) {
      int wrong = 0;
      for (int64_t i = 0; i < c.n; ++i) {
        wrong += bufs[static_cast<size_t>(r)][static_cast<size_t>(i)] != value(root, i);
      }
      ASSERT_EQ(wrong, 0) << describe(c) << " rank " << r;
    }
  }
}

// Random floats: the sum's rounding depends on the order, which must be fixed by (p, algo).
TEST(ShmComm, DeterministicAcrossRuns) {
  for (CollectiveAlgo algo : kAlgos) {
    for (int p : {3, 6, 8}) {
      const int64_t n = 10007;
      std::vector<std::vector<float>> input(static_cast<size_t>(p));
      for (int r = 0; r < p; ++r) {
        Rng rng = Rng::stream(7, static_cast<uint64_t>(r));
        input[static_cast<size_t>(r)].resize(n);
        for (auto& x : input[static_cast<size_t>(r)])
          x = rng.uniform(-1.f, 1.f) * 1e3f;
      }
      std::vector<float> first, first_reduce;
      for (int run = 0; run < 4; ++run) {
        auto comm = make_shm_comm(p, algo);
        auto bufs = input;
        std::vector<float> red(n);
        run_ranks(p, [&](int r) {
          if (r == 1) std::this_thread::sleep_for(std::chrono::microseconds(200 * run));
          auto& b = bufs[static_cast<size_t>(r)];
          comm->reduce_sum(r, b.data(), r == 0 ? red.data() : nullptr, n, 0);
          comm->allreduce_sum(r, b.data(), n);
        });
        for (int r = 1; r < p; ++r) {
          ASSERT_EQ(
              std::memcmp(bufs[0].data(), bufs[static_cast<size_t>(r)].data(), n * sizeof(float)),
              0)
              << "ranks disagree, " << collective_algo_name(algo) << " p=" << p;
        }
        if (run == 0) {
          first = bufs[0];
          first_reduce = red;
        } else {
          ASSERT_EQ(std::memcmp(first.data(), bufs[0].data(), n * sizeof(float)), 0)
              << "allreduce differs on run " << run << ", " << collective_algo_name(algo);
          ASSERT_EQ(std::memcmp(first_reduce.data(), red.data(), n * sizeof(float)), 0)
              << "reduce differs on run " << run << ", " << collective_algo_name(algo);
        }
      }
    }
  }
}

// Mixed collectives back to back with changing buffers; with sleeping waiters (8 ranks on the
// cores) and with spinning ones (the trainer's choice when every group has a core).
void back_to_back(CollectiveAlgo algo, int p, double spin) {
  {
    const int iters = 150;
    auto comm = make_shm_comm(p, algo, spin);
    std::vector<int> wrong(p, 0);
    run_ranks(p, [&](int r) {
      std::vector<float> buf, out;
      for (int it = 0; it < iters; ++it) {
        const int64_t n = 1 + (it * 37) % 300;
        buf.assign(static_cast<size_t>(n), 0.f);  // a different pointer and size every time
        for (int64_t i = 0; i < n; ++i)
          buf[static_cast<size_t>(i)] = value(r, i + it);
        switch (it % 4) {
          case 0:
            comm->allreduce_sum(r, buf.data(), n);
            for (int64_t i = 0; i < n; ++i)
              wrong[r] += buf[i] != expected_sum(p, i + it);
            break;
          case 1: {
            const int root = it % p;
            out.assign(static_cast<size_t>(n), 0.f);
            comm->reduce_sum(r, buf.data(), out.data(), n, root);
            if (r == root) {
              for (int64_t i = 0; i < n; ++i)
                wrong[r] += out[i] != expected_sum(p, i + it);
            }
            break;
          }
          case 2: {
            const int root = (it / 4) % p;
            comm->broadcast(r, buf.data(), n, root);
            for (int64_t i = 0; i < n; ++i)
              wrong[r] += buf[i] != value(root, i + it);
            break;
          }
          default:
            comm->barrier(r);
        }
      }
    });
    for (int r = 0; r < p; ++r)
      EXPECT_EQ(wrong[r], 0) << collective_algo_name(algo) << " p=" << p << " spin=" << spin
                             << " rank " << r;
  }
}

TEST(ShmComm, BackToBackStress) {
  for (CollectiveAlgo algo : kAlgos) {
    back_to_back(algo, 8, 0);
    back_to_back(algo, 2, kShmSpinSeconds);
    back_to_back(algo, 3, kShmSpinSeconds);
  }
}

TEST(ShmComm, WaitSecondsCountsArrivalSkew) {
  for (CollectiveAlgo algo : kAlgos) {
    auto comm = make_shm_comm(2, algo);
    std::vector<double> before(2), after(2);
    run_ranks(2, [&](int r) {
      std::vector<float> buf(100, 1.f);
      comm->allreduce_sum(r, buf.data(), 100);
      before[r] = comm->wait_seconds(r);
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(60));
      comm->allreduce_sum(r, buf.data(), 100);
      after[r] = comm->wait_seconds(r);
    });
    EXPECT_GE(after[1], before[1]);
    EXPECT_GE(after[0] - before[0], 0.04) << "rank 0 waited for the sleeping rank 1";
  }
}

// A spinning waiter is released by a late arrival within its spin budget (2 ms), and falls back
// to sleeping beyond it (60 ms); either way its wait is counted. The bounds are taken from when
// each rank called the barrier, so that a rank preempted on a loaded machine does not fail it.
TEST(ShmComm, SpinningWaiterIsReleasedAndCounted) {
  using clock = std::chrono::steady_clock;
  auto comm = make_shm_comm(2, CollectiveAlgo::tree, kShmSpinSeconds);
  for (int ms : {2, 60}) {
    std::vector<double> before(2), after(2);
    // Rank 1 sleeps, so it calls the barrier last, unless rank 0 was preempted for longer than
    // that sleep (seen under TSan at load 10): such a round says nothing and is run again.
    double skew = 0;
    for (int round = 0; round < 10 && skew <= 0.0; ++round) {
      std::vector<clock::time_point> called(2);
      run_ranks(2, [&](int r) {
        comm->barrier(r);
        before[r] = comm->wait_seconds(r);
        if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        called[r] = clock::now();
        comm->barrier(r);
        after[r] = comm->wait_seconds(r);
      });
      skew = std::chrono::duration<double>(called[1] - called[0]).count();
    }
    ASSERT_GT(skew, 0.0) << "rank 1 slept, so it called the barrier last (in none of 10 rounds)";
    EXPECT_GE(after[0] - before[0], 0.9 * skew - 2e-4) << ms << " ms";
    if (ms == 60) {
      EXPECT_LT(after[1] - before[1], 0.030) << "rank 1 arrived last";
    }
  }
}

TEST(ShmComm, SizeOneIsTrivial) {
  for (CollectiveAlgo algo : kAlgos) {
    auto comm = make_shm_comm(1, algo);
    std::vector<float> a = {1.f, 2.f, 3.f}, d(3, 0.f);
    comm->allreduce_sum(0, a.data(), 3);
    EXPECT_EQ(a, (std::vector<float>{1.f, 2.f, 3.f}));
    comm->reduce_sum(0, a.data(), d.data(), 3, 0);
    EXPECT_EQ(d, a);
    comm->broadcast(0, a.data(), 3, 0);
    comm->barrier(0);
    EXPECT_EQ(comm->wait_seconds(0), 0.0) << "one rank waits for nobody";
  }
}

// A rank that never arrives is named within the stall timeout by the ranks that wait, in every
// algorithm, even when the rank that times out waits for it through others.
TEST(ShmComm, StalledPeerIsNamedInEveryAlgorithm) {
  set_stall_timeout_seconds(0.3);
  for (CollectiveAlgo algo : kAlgos) {
    for (int p : {3, 5, 8}) {
      const int missing = p - 2;
      auto comm = make_shm_comm(p, algo);
      const StallSeen seen = run_without(p, missing, [&](int r) {
        std::vector<float> buf(1000, 1.f);
        comm->allreduce_sum(r, buf.data(), 1000);
      });
      EXPECT_NE(seen.what.find("group " + std::to_string(missing) + " has not"), std::string::npos)
          << collective_algo_name(algo) << " p=" << p << ": " << seen.what;
      EXPECT_LT(seen.seconds, 5.0) << collective_algo_name(algo);
      EXPECT_GE(seen.threw, 1);
    }
  }
  clear_stall();
  set_stall_timeout_seconds(300);
}

// The shared-memory part of a composed transport (process r's groups r*L ..): its stall messages
// name the global group numbers.
TEST(ShmComm, StallNamesGroupsFromTheFirstGroup) {
  set_stall_timeout_seconds(0.3);
  ShmOptions o;
  o.first_group = 6;
  auto comm = make_collective_comm(make_shm_transport(3, o), CollectiveAlgo::ring);
  const StallSeen seen = run_without(3, 1, [&](int r) {
    std::vector<float> buf(10, 1.f);
    comm->allreduce_sum(r, buf.data(), 10);
  });
  EXPECT_NE(seen.what.find("group 7 has not"), std::string::npos) << seen.what;
  clear_stall();
  set_stall_timeout_seconds(300);
}

// The cost model: a ring or halving-doubling beats the tree on a large span over many ranks,
// a log-latency algorithm (tree or halving-doubling) wins on a tiny one, and with a slow,
// far uplink the hierarchical algorithm's few inter-node steps beat the flat ring.
TEST(CollectiveCost, ChoosesByLatencyAndBandwidth) {
  CollectiveShape s;
  s.intra = LinkCost{1e-6, 24e9};
  s.inter = LinkCost{1e-6, 24e9};
  s.ranks = 128;
  s.ranks_per_node = 8;
  s.bytes = 233e6;
  EXPECT_GT(allreduce_seconds(CollectiveAlgo::tree, s),
            3 * allreduce_seconds(CollectiveAlgo::ring, s));
  CollectiveChoice big = choose_collective(s);
  EXPECT_NE(big.algo, CollectiveAlgo::tree) << big.why;
  EXPECT_NE(big.why.find("collective auto:"), std::string::npos);
  s.bytes = 64;
  const CollectiveAlgo tiny = choose_collective(s).algo;
  EXPECT_TRUE(tiny == CollectiveAlgo::tree || tiny == CollectiveAlgo::halving_doubling)
      << choose_collective(s).why;
  s.bytes = 4e6;
  s.inter = LinkCost{50e-6, 2e9};
  EXPECT_LT(allreduce_seconds(CollectiveAlgo::hierarchical, s),
            0.5 * allreduce_seconds(CollectiveAlgo::ring, s));
  EXPECT_NE(choose_collective(s).algo, CollectiveAlgo::ring) << choose_collective(s).why;
  // The ring's bandwidth term is 2 (p-1)/p of the span over the slowest link it crosses.
  s.bytes = 233e6;
  s.inter = LinkCost{0, 24e9};
  s.intra = LinkCost{0, 24e9};
  EXPECT_NEAR(allreduce_seconds(CollectiveAlgo::ring, s), 2.0 * 127 / 128 * 233e6 / 24e9, 1e-9);
}

// The list of collectives: every row's name reads back to it, the flag's words and the refusal
// of a row that needs MPI ranks come from the rows, and auto's reason prices every row it weighs.
TEST(CollectiveList, RowsNameTheFlagAndAutoSaysWhy) {
  for (const CollectiveEntry& e : collective_list()) {
    const CollectiveEntry* found = find_collective(e.name);
    ASSERT_NE(found, nullptr) << e.name;
    EXPECT_EQ(found->algo, e.algo) << e.name;
    EXPECT_STREQ(collective_algo_name(e.algo), e.name);
    EXPECT_EQ(&collective_entry(e.algo), &e);
  }
  EXPECT_EQ(find_collective("bogus"), nullptr);
  EXPECT_EQ(collective_names(), "auto, tree, ring, halving-doubling, hierarchical, mpi");
  EXPECT_EQ(collective_needs_ranks(collective_entry(CollectiveAlgo::mpi)),
            "--collective mpi: the MPI library's own collectives run among the ranks of an "
            "mpirun launch (an MPI build); one process takes auto, tree, ring, halving-doubling "
            "or hierarchical");
  CollectiveShape s;
  s.bytes = 93e6;
  s.ranks = 64;
  s.ranks_per_node = 4;
  const CollectiveChoice c = choose_collective(s);
  EXPECT_EQ(c.why.rfind(std::string("collective auto: ") + collective_algo_name(c.algo), 0), 0u)
      << c.why;
  for (const CollectiveEntry& e : collective_list()) {
    if (e.auto_candidate) {
      EXPECT_NE(c.why.find(std::string(" ") + e.name + " "), std::string::npos) << c.why;
    }
  }
}

TEST(CollectiveCost, LinksFromTheEnvironment) {
  LinkCost a, b;
  std::string error;
  ::setenv("EASEL_COLLECTIVE_LINKS", "1,24,5,12.5", 1);
  ASSERT_TRUE(collective_links(&a, &b, &error)) << error;
  EXPECT_DOUBLE_EQ(a.latency_s, 1e-6);
  EXPECT_DOUBLE_EQ(b.bytes_per_s, 12.5e9);
  ::setenv("EASEL_COLLECTIVE_LINKS", "1,24,5", 1);
  EXPECT_FALSE(collective_links(&a, &b, &error));
  EXPECT_NE(error.find("EASEL_COLLECTIVE_LINKS"), std::string::npos);
  ::unsetenv("EASEL_COLLECTIVE_LINKS");
}

}  // namespace
}  // namespace easel
