// The compressed ring allreduce (engine/comm/collectives/compressed_ring.hpp) over the
// shared-memory transport, ranks as threads: within the error bound its header derives of a
// float64 sum, the same bits on every rank, repeatable, the bytes it says it sent equal to what
// the transport carried and to bytes_sent's plan, residuals that hold every rounding (so that
// error feedback keeps every coordinate's cumulative sum within one call's bound of the fp32
// ring's over 200 calls), a value that is not finite not finite in the sum, as in fp32, and a
// stalled peer named in time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/comm/collectives/compressed_ring.hpp"
#include "engine/comm/comm.hpp"
#include "engine/worker.hpp"
#include "tests/engine/rank_threads.hpp"

namespace easel {
namespace {

using test::run_ranks;
using test::run_without;
using test::StallSeen;

// The shared-memory transport, counting the floats every rank sends.
class CountingTransport final : public Transport {
 public:
  explicit CountingTransport(int p) : shm_(make_shm_transport(p)), sent_(p) {}
  int size() const override { return shm_->size(); }
  std::string name() const override { return "counting shm"; }
  int node_of(int) const override { return 0; }
  int nodes() const override { return 1; }
  int first_local() const override { return 0; }
  int local_size() const override { return size(); }
  void step(int rank, const Transfer& x, const char* what) override {
    if (x.send_peer >= 0) sent_[static_cast<size_t>(rank)] += 4 * x.send_n;
    shm_->step(rank, x, what);
  }
  void barrier(int rank) override { shm_->barrier(rank); }
  double wait_seconds(int rank) const override { return shm_->wait_seconds(rank); }
  int64_t sent(int rank) const { return sent_[static_cast<size_t>(rank)]; }

 private:
  std::unique_ptr<Transport> shm_;
  std::vector<int64_t> sent_;  // each written by its rank's thread
};

// Rank r's input: normal values, a few blocks a hundred times larger, rank-dependent.
std::vector<float> input(int r, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(17 + r));
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = dist(rng) * ((i / 300) % 3 == 1 ? 100.f : 1.f);
  return x;
}

struct Outcome {
  std::vector<std::vector<float>> out;  // [rank]
  std::vector<std::vector<float>> err;  // [rank]
  std::vector<int64_t> said;            // bytes each rank's call returned
  std::vector<int64_t> carried;         // bytes the transport carried for each rank
};

Outcome allreduce(int p, int64_t n, WireFormat f) {
  CountingTransport t(p);
  Outcome o;
  o.out.resize(static_cast<size_t>(p));
  o.err.resize(static_cast<size_t>(p));
  o.said.resize(static_cast<size_t>(p));
  run_ranks(p, [&](int r) {
    std::vector<float> x = input(r, n), e(static_cast<size_t>(n), -1.f);
    ScratchFloats s;
    const size_t ri = static_cast<size_t>(r);
    o.said[ri] = compressed_ring::allreduce(Team::all(t, r), x.data(), x.data(), n, f, s, e.data());
    o.out[ri] = std::move(x);
    o.err[ri] = std::move(e);
  });
  for (int r = 0; r < p; ++r)
    o.carried.push_back(t.sent(r));
  return o;
}

// Element i's int8 block, [b, e): blocks of kInt8Block from the start of i's chunk of p.
void block_of(int64_t n, int p, int64_t i, int64_t* b, int64_t* e) {
  int j = 0;
  while (chunk_begin(n, j + 1, p) <= i)
    ++j;
  const int64_t c = chunk_begin(n, j, p);
  *b = c + (i - c) / kInt8Block * kInt8Block;
  *e = std::min(chunk_begin(n, j + 1, p), *b + kInt8Block);
}

// The largest |x| in element i's int8 block.
double block_max(const std::vector<float>& x, int64_t n, int p, int64_t i) {
  int64_t b, e;
  block_of(n, p, i, &b, &e);
  float a = 0;
  for (int64_t j = b; j < e; ++j)
    a = std::max(a, std::fabs(x[static_cast<size_t>(j)]));
  return a;
}

// The header's M at element i: the sum over ranks of the largest |x| in its int8 block.
double block_maxima(int p, int64_t n, int64_t i, const std::vector<std::vector<float>>& in) {
  double m = 0;
  for (const auto& x : in)
    m += block_max(x, n, p, i);
  return m;
}

// The header's bound on |result - exact sum| at element i.
double bound(int p, int64_t n, int64_t i, WireFormat f, const std::vector<std::vector<float>>& in) {
  double m = 0;
  if (f == WireFormat::bf16)
    for (const auto& x : in)
      m += std::fabs(x[static_cast<size_t>(i)]);
  else
    m = block_maxima(p, n, i, in);
  return compressed_ring::error_bound(p, f, m);
}

// The residuals account for every rounding: the sum over ranks of in - err is the result, up to
// the fp32 rounding of a few adds a rank (8 p 2^-24 M); each rank's residual is at most its own
// rounding and that of the one partial sum it re-encodes per element (int8: M (1 + p / 127) /
// 254). Returns the failures it added.
int residual_failures(int p, int64_t n, WireFormat f, const std::vector<std::vector<float>>& in,
                      const Outcome& o) {
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const double m = block_maxima(p, n, i, in);
    double kept = 0, total = 0;  // the sums over ranks of in - err, of |in|
    for (int r = 0; r < p; ++r) {
      kept += in[static_cast<size_t>(r)][k] - o.err[static_cast<size_t>(r)][k];
      total += std::fabs(in[static_cast<size_t>(r)][k]);
    }
    if (!(std::fabs(kept - o.out[0][k]) <= 8.0 * p * std::ldexp(m, -24)) && bad++ < 3)
      ADD_FAILURE() << "element " << i << ": the inputs less the residuals sum to " << kept
                    << ", the result is " << o.out[0][k];
    const double hop = f == WireFormat::bf16 ? std::ldexp(total, -8) * (1 + std::ldexp(p, -7))
                                             : m / 254 * (1 + p / 127.0);
    for (int r = 0; r < p; ++r) {
      const std::vector<float>& x = in[static_cast<size_t>(r)];
      const double own =
          f == WireFormat::bf16 ? std::ldexp(std::fabs(x[k]), -8) : block_max(x, n, p, i) / 254;
      const float res = o.err[static_cast<size_t>(r)][k];
      if (!(std::fabs(res) <= (own + hop) * (1 + 1e-5)) && bad++ < 3)
        ADD_FAILURE() << "rank " << r << " residual " << res << " at " << i;
    }
  }
  return bad;
}

TEST(CompressedRing, WithinTheBoundOfTheExactSumSameBitsEverywhereBytesAsSent) {
  for (WireFormat f : {WireFormat::int8, WireFormat::bf16})
    for (int p = 1; p <= 9; ++p)
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{p - 1}, int64_t{p + 1}, int64_t{5000}}) {
        SCOPED_TRACE(std::string(wire_format_name(f)) + " p=" + std::to_string(p) +
                     " n=" + std::to_string(n));
        const Outcome o = allreduce(p, n, f);
        std::vector<std::vector<float>> in;
        for (int r = 0; r < p; ++r)
          in.push_back(input(r, n));
        int64_t said = 0, carried = 0;
        for (int r = 0; r < p; ++r) {
          const size_t ri = static_cast<size_t>(r);
          said += o.said[ri];
          carried += o.carried[ri];
          EXPECT_EQ(o.said[ri], o.carried[ri]) << "rank " << r;
          ASSERT_EQ(std::memcmp(o.out[ri].data(), o.out[0].data(), sizeof(float) * n), 0)
              << "rank " << r << " holds other bits than rank 0";
        }
        EXPECT_EQ(said, compressed_ring::bytes_sent(n, p, f));
        EXPECT_EQ(carried, said);
        int bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          double exact = 0;
          for (int r = 0; r < p; ++r)
            exact += in[static_cast<size_t>(r)][static_cast<size_t>(i)];
          const double got = o.out[0][static_cast<size_t>(i)];
          if (!(std::fabs(got - exact) <= bound(p, n, i, f, in)) && bad++ < 3)
            ADD_FAILURE() << "element " << i << ": " << got << " against " << exact << " (bound "
                          << bound(p, n, i, f, in) << ")";
        }
        residual_failures(p, n, f, in, o);
      }
}

// The packed int8 span is about a quarter of fp32: the ring's bytes against fp32's 2 (p-1)/p.
TEST(CompressedRing, SendsAQuarterOfTheFp32Ring) {
  const int64_t n = 431080;  // lenet
  for (int p : {4, 8}) {
    const double fp32 = 2.0 * (p - 1) * 4 * static_cast<double>(n);
    const double int8 = static_cast<double>(compressed_ring::bytes_sent(n, p, WireFormat::int8));
    EXPECT_NEAR(fp32 / int8, 4.0 / (1 + 4.0 / kInt8Block), 0.01) << p;
    const double bf16 = static_cast<double>(compressed_ring::bytes_sent(n, p, WireFormat::bf16));
    EXPECT_NEAR(fp32 / bf16, 2.0, 0.001) << p;
  }
  EXPECT_EQ(compressed_ring::bytes_sent(1000, 1, WireFormat::int8), 0);
}

TEST(CompressedRing, RepeatsBitForBit) {
  for (int p : {3, 7}) {
    const Outcome a = allreduce(p, 3001, WireFormat::int8),
                  b = allreduce(p, 3001, WireFormat::int8);
    for (int r = 0; r < p; ++r) {
      const size_t ri = static_cast<size_t>(r);
      EXPECT_EQ(std::memcmp(a.out[ri].data(), b.out[ri].data(), 3001 * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(a.err[ri].data(), b.err[ri].data(), 3001 * sizeof(float)), 0);
    }
  }
}

// Rank r's gradient at step t: every 64th value large (|x| < 100), the others small (0.1 to 0.3,
// under half the step of a large one's int8 block), so every block of 256 holds both.
std::vector<float> mixed_gradient(int r, int t, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(1000 * t + r));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = i % 64 == 0 ? 100 * u(rng) : 0.2f + 0.1f * u(rng);
  return x;
}

// Error feedback over 200 exchanges, ranks as threads, each sending its gradient plus its
// residual: the cumulative sum of every coordinate stays within the header's bound of one
// exchange (for the last exchange's inputs) of the fp32 ring's, however many steps. Why: the
// residuals hold every rounding made anywhere, so the sums telescope to the exact cumulative
// sum less the residuals left after the last exchange, which are that exchange's error; the
// fp32 arithmetic adds a few 2^-24 M a step, over the steps. Without feedback where a partial sum
// is re-encoded, a small value under a large one's step is erased at the next hop.
TEST(CompressedRing, ErrorFeedbackKeepsEveryCoordinatesCumulativeSum) {
  const int64_t n = 3000;
  const int steps = 200;
  for (int p : {1, 2, 3, 4, 8}) {
    SCOPED_TRACE("p=" + std::to_string(p));
    auto comm = make_shm_comm(p, CollectiveAlgo::ring);
    std::vector<std::vector<float>> e(p, std::vector<float>(n, 0.f)), src(p), int8(p), fp32(p);
    std::vector<double> sum_int8(n, 0), sum_fp32(n, 0);
    for (int t = 0; t < steps; ++t) {
      run_ranks(p, [&](int r) {
        const size_t ri = static_cast<size_t>(r);
        fp32[ri] = mixed_gradient(r, t, n);
        src[ri] = fp32[ri];
        for (int64_t i = 0; i < n; ++i)
          src[ri][static_cast<size_t>(i)] += e[ri][static_cast<size_t>(i)];
        int8[ri] = src[ri];
        comm->allreduce_compressed(r, int8[ri].data(), int8[ri].data(), n, WireFormat::int8,
                                   e[ri].data());
        comm->allreduce_sum(r, fp32[ri].data(), n);
      });
      for (int64_t i = 0; i < n; ++i) {
        sum_int8[static_cast<size_t>(i)] += int8[0][static_cast<size_t>(i)];
        sum_fp32[static_cast<size_t>(i)] += fp32[0][static_cast<size_t>(i)];
      }
    }
    // |x| <= 100 plus a residual under 1% of it: M <= 110 p, a bound on every step's.
    const double drift = steps * 8.0 * p * std::ldexp(110.0 * p, -24);
    int bad = 0;
    double worst = 0;  // the largest share of a small coordinate's cumulative sum lost
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const double b = bound(p, n, i, WireFormat::int8, src) + drift;
      if (i % 64 != 0) worst = std::max(worst, std::fabs(sum_int8[k] - sum_fp32[k]) / sum_fp32[k]);
      if (!(std::fabs(sum_int8[k] - sum_fp32[k]) <= b) && bad++ < 3)
        ADD_FAILURE() << "coordinate " << i << ": cumulative " << sum_int8[k] << " against fp32's "
                      << sum_fp32[k] << " (bound " << b << ")";
    }
    EXPECT_EQ(bad, 0) << "coordinates outside the bound; the worst small one lost " << 100 * worst
                      << "% of its cumulative sum";
  }
}

// A value that is not finite (NaN, +-Inf) in one rank's input: the sum is not finite there on
// every rank, as the fp32 ring's is, so a run stops as diverged as it would in fp32 (its next
// loss is not finite: exit 3); the rest of the block is summed within the bound of its finite
// values.
TEST(CompressedRing, NonFiniteInputIsNotFiniteInTheSumAsInFp32) {
  const int64_t n = 1000, at = 300;
  for (WireFormat f : {WireFormat::int8, WireFormat::bf16})
    for (float bad : {std::nanf(""), INFINITY, -INFINITY})
      for (int p : {1, 2, 3}) {
        SCOPED_TRACE(std::string(wire_format_name(f)) + " " + std::to_string(bad) +
                     " p=" + std::to_string(p));
        std::vector<std::vector<float>> in;
        for (int r = 0; r < p; ++r)
          in.push_back(input(r, n));
        std::vector<std::vector<float>> out = in, fp32 = in;
        const size_t last = static_cast<size_t>(p - 1), k = static_cast<size_t>(at);
        out[last][k] = fp32[last][k] = bad;
        in[last][k] = 0;  // the bound's finite inputs
        auto comm = make_shm_comm(p, CollectiveAlgo::ring);
        run_ranks(p, [&](int r) {
          const size_t ri = static_cast<size_t>(r);
          std::vector<float> e(static_cast<size_t>(n));
          comm->allreduce_compressed(r, out[ri].data(), out[ri].data(), n, f, e.data());
          comm->allreduce_sum(r, fp32[ri].data(), n);
        });
        EXPECT_FALSE(std::isfinite(fp32[0][k]));
        int wrong = 0;
        for (int r = 0; r < p; ++r)
          for (int64_t i = 0; i < n; ++i) {
            const float got = out[static_cast<size_t>(r)][static_cast<size_t>(i)];
            double exact = 0;
            for (int q = 0; q < p; ++q)
              exact += in[static_cast<size_t>(q)][static_cast<size_t>(i)];
            const bool ok =
                i == at ? !std::isfinite(got) : std::fabs(got - exact) <= bound(p, n, i, f, in);
            if (!ok && wrong++ < 3)
              ADD_FAILURE() << "rank " << r << " element " << i << ": " << got << " against "
                            << exact;
          }
      }
}

// A rank that never arrives is named by the ranks that wait, within the stall deadline.
TEST(CompressedRing, StalledPeerIsNamed) {
  set_stall_timeout_seconds(0.3);
  for (int p : {3, 5}) {
    const int missing = p - 2;
    auto t = make_shm_transport(p);
    const StallSeen seen = run_without(p, missing, [&](int r) {
      std::vector<float> buf(1000, 1.f);
      ScratchFloats s;
      compressed_ring::allreduce(Team::all(*t, r), buf.data(), buf.data(), 1000, WireFormat::int8,
                                 s, nullptr);
    });
    EXPECT_NE(seen.what.find("group " + std::to_string(missing) + " has not"), std::string::npos)
        << "p=" << p << ": " << seen.what;
    EXPECT_NE(seen.what.find("compressed ring"), std::string::npos) << seen.what;
    EXPECT_LT(seen.seconds, 5.0);
  }
  clear_stall();
  set_stall_timeout_seconds(300);
}

// Where the Comm cannot run it, it says why: a device transport's spans are device memory.
class DeviceSpans final : public Transport {
 public:
  DeviceSpans() : shm_(make_shm_transport(2)) {}
  int size() const override { return 2; }
  std::string name() const override { return "gpu-shm"; }
  int node_of(int) const override { return 0; }
  int nodes() const override { return 1; }
  int first_local() const override { return 0; }
  int local_size() const override { return 2; }
  void step(int rank, const Transfer& x, const char* what) override { shm_->step(rank, x, what); }
  void barrier(int rank) override { shm_->barrier(rank); }
  double wait_seconds(int rank) const override { return shm_->wait_seconds(rank); }
  bool scratch_on_device() const override { return true; }

 private:
  std::unique_ptr<Transport> shm_;
};

TEST(CompressedRing, RefusedOverADeviceTransport) {
  EXPECT_EQ(make_shm_comm(3, CollectiveAlgo::tree)->compressed_refusal(), "");
  const std::string why =
      make_collective_comm(std::make_shared<DeviceSpans>(), CollectiveAlgo::ring)
          ->compressed_refusal();
  EXPECT_NE(why.find("device kernels"), std::string::npos) << why;
}

}  // namespace
}  // namespace easel
