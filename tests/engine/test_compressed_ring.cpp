// The compressed ring allreduce (engine/comm/collectives/compressed_ring.hpp) over the
// shared-memory transport, ranks as threads: within the error bound its header derives of a
// float64 sum, the same bits on every rank, repeatable, the bytes it says it sent equal to what
// the transport carried and to bytes_sent's plan, and a stalled peer named in time.
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

// The header's bound on |result - exact sum| at element i.
double bound(int p, int64_t n, int64_t i, WireFormat f, const std::vector<std::vector<float>>& in) {
  const double k = 2.0 * p - 1;
  if (f == WireFormat::bf16) {
    double m = 0;
    for (const auto& x : in)
      m += std::fabs(x[static_cast<size_t>(i)]);
    return k * std::ldexp(m, -8) * (1 + std::ldexp(p, -7)) + p * std::ldexp(m, -24);
  }
  int64_t b, e;
  block_of(n, p, i, &b, &e);
  double m = 0;
  for (const auto& x : in) {
    float a = 0;
    for (int64_t j = b; j < e; ++j)
      a = std::max(a, std::fabs(x[static_cast<size_t>(j)]));
    m += a;
  }
  return k * m / 254 * (1 + p / 127.0) + p * std::ldexp(m, -24) * 4;
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
          // The residual is what this rank's own rounding took off: within one rounding.
          int64_t b, e;
          block_of(n, p, i, &b, &e);
          for (int r = 0; r < p; ++r) {
            const std::vector<float>& x = in[static_cast<size_t>(r)];
            float amax = 0;
            for (int64_t j = b; j < e; ++j)
              amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
            const double one = f == WireFormat::bf16
                                   ? std::ldexp(std::fabs(x[static_cast<size_t>(i)]), -8)
                                   : amax / 254.0 * (1 + 1e-5);
            const float res = o.err[static_cast<size_t>(r)][static_cast<size_t>(i)];
            if (!(std::fabs(res) <= one) && bad++ < 3) {
              ADD_FAILURE() << "rank " << r << " residual " << res << " at " << i;
            }
          }
        }
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

// Error feedback through one rank's call: sent + residual carries what was meant, so over many
// exchanges the rounding does not accumulate (without it the first block's small values, under
// a large one's scale, would be rounded away every time).
TEST(CompressedRing, ErrorFeedbackCarriesTheResidual) {
  const int64_t n = 300;
  auto comm = make_shm_comm(1, CollectiveAlgo::ring);
  std::vector<float> e(n, 0.f);
  std::vector<double> meant(n, 0), sent(n, 0);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int k = 0; k < 50; ++k) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = dist(rng) * (i == 0 ? 100.f : 1.f);
      meant[i] += x[i];
      x[i] += e[i];
    }
    comm->allreduce_compressed(0, x.data(), x.data(), n, WireFormat::int8, e.data());
    for (int64_t i = 0; i < n; ++i)
      sent[i] += x[i];
  }
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(sent[i] + e[i], meant[i], 1e-3) << i;
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
