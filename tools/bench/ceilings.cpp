// The machine's ceilings: the FP32 FMA peak (a register-blocked loop of independent vector
// FMAs, one pinned thread per core) and a STREAM-like triad a[i] = b[i] + s*c[i] over arrays
// far larger than the last-level cache (one core, then all cores at once).
#include <immintrin.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "engine/memory.hpp"
#include "tools/bench/bench.hpp"

namespace easel::bench {

namespace {

// ---- the FMA loop ----
// kAcc independent accumulators hide the FMA latency (4 cycles x 2 ports needs >= 8); each is
// a register, so the loop issues nothing but FMAs.
#if defined(__AVX512F__)
constexpr const char* kIsa = "avx512f";
constexpr int kLanes = 16;
constexpr int kAcc = 24;  // of 32 zmm registers; two more hold the constants
using Vec = __m512;
inline Vec vset(float x) {
  return _mm512_set1_ps(x);
}
inline Vec vfma(Vec a, Vec b, Vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline float vsum(Vec a) {  // not _mm512_reduce_add_ps: GCC 12 warns inside it
  alignas(64) float t[16];
  _mm512_store_ps(t, a);
  float s = 0;
  for (float x : t)
    s += x;
  return s;
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kIsa = "avx2+fma";
constexpr int kLanes = 8;
constexpr int kAcc = 12;  // of 16 ymm registers
using Vec = __m256;
inline Vec vset(float x) {
  return _mm256_set1_ps(x);
}
inline Vec vfma(Vec a, Vec b, Vec c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline float vsum(Vec a) {
  alignas(32) float t[8];
  _mm256_store_ps(t, a);
  float s = 0;
  for (float x : t)
    s += x;
  return s;
}
#else
constexpr const char* kIsa = "scalar";
constexpr int kLanes = 1;
constexpr int kAcc = 12;
using Vec = float;
inline Vec vset(float x) {
  return x;
}
inline Vec vfma(Vec a, Vec b, Vec c) {
  return std::fma(a, b, c);
}
inline float vsum(Vec a) {
  return a;
}
#endif

// acc <- acc*m + a converges to a/(1-m): no overflow, no denormals, nothing to hoist.
__attribute__((noinline)) float fma_kernel(int64_t iterations, float m, float a) {
  Vec acc[kAcc];
  for (int k = 0; k < kAcc; ++k)
    acc[k] = vset(static_cast<float>(k) * 0.01f);
  const Vec vm = vset(m), va = vset(a);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 32
    for (int k = 0; k < kAcc; ++k)
      acc[k] = vfma(acc[k], vm, va);
  }
  float s = 0;
  for (int k = 0; k < kAcc; ++k)
    s += vsum(acc[k]);
  return s;
}

volatile float g_sink = 0;  // keeps the FMA results alive

// Iterations that take about `seconds` on one core (calibrated on the calling thread).
int64_t calibrate_fma(double seconds) {
  int64_t it = 1 << 16;
  for (;;) {
    const double t0 = seconds_now();
    g_sink = g_sink + fma_kernel(it, 0.999f, 0.001f);
    const double dt = seconds_now() - t0;
    if (dt > 0.02 || it > (int64_t{1} << 34))
      return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(it) * seconds / dt));
    it *= 4;
  }
}

// ---- the triad ----
void triad(float* a, const float* b, const float* c, float s, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i)
    a[i] = b[i] + s * c[i];
}

struct TriadFigures {
  double core[3] = {0, 0, 0}, all[3] = {0, 0, 0};  // GB/s min, median, max
  int ok = 0;
};

TriadFigures run_triad(const Topology& topo, int64_t n, int repeats) {
  TriadFigures out;
  auto workers = one_worker_per_core(topo);
  if (!workers.ok()) return out;
  const int w = static_cast<int>(workers->size());
  auto a = Buffer::allocate(static_cast<size_t>(n) * sizeof(float), MemKind::dram);
  auto b = Buffer::allocate(static_cast<size_t>(n) * sizeof(float), MemKind::dram);
  auto c = Buffer::allocate(static_cast<size_t>(n) * sizeof(float), MemKind::dram);
  if (!a.ok() || !b.ok() || !c.ok()) return out;
  float* pa = a->as<float>();
  float* pb = b->as<float>();
  float* pc = c->as<float>();
  auto lo = [&](int i) { return n * i / w; };
  // First touch by the worker that streams the slice (its pages on its node).
  run_together(*workers, [&](int i) {
    for (int64_t j = lo(i); j < lo(i + 1); ++j) {
      pa[j] = 0.f;
      pb[j] = 1.f;
      pc[j] = 2.f;
    }
  });
  const double bytes = traffic_bytes(Traffic::triad, n, 1);
  std::vector<double> core, all;
  for (int r = 0; r < repeats + 1; ++r) {  // the first pass of each is a warm-up
    const double t0 = seconds_now();
    (*workers)[0]->run([&] { triad(pa, pb, pc, 0.5f, 0, n); });
    const double t_core = seconds_now() - t0;
    const double t_all =
        run_together(*workers, [&](int i) { triad(pa, pb, pc, 0.5f, lo(i), lo(i + 1)); });
    if (r == 0) continue;
    core.push_back(bytes / t_core / 1e9);
    all.push_back(bytes / t_all / 1e9);
  }
  const Summary sc = summarize(core), sa = summarize(all);
  out.core[0] = sc.min, out.core[1] = sc.median, out.core[2] = sc.max;
  out.all[0] = sa.min, out.all[1] = sa.median, out.all[2] = sa.max;
  out.ok = 1;
  return out;
}

// Runs the triad in a child process so that its arrays stay out of this process's peak RSS.
// Falls back to running it here when fork or the pipe fails.
TriadFigures run_triad_in_child(const Topology& topo, int64_t n, int repeats, bool* in_child) {
  int fds[2];
  *in_child = false;
  if (pipe(fds) != 0) return run_triad(topo, n, repeats);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_triad(topo, n, repeats);
  }
  if (pid == 0) {
    close(fds[0]);
    const TriadFigures f = run_triad(topo, n, repeats);
    const ssize_t wrote = write(fds[1], &f, sizeof f);
    _exit(wrote == static_cast<ssize_t>(sizeof f) ? 0 : 1);
  }
  close(fds[1]);
  TriadFigures f;
  size_t got = 0;
  while (got < sizeof f) {
    const ssize_t r = read(fds[0], reinterpret_cast<char*>(&f) + got, sizeof f - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != sizeof f) return TriadFigures{};
  *in_child = true;
  return f;
}

}  // namespace

Result<Ceilings> measure_ceilings(const Topology& topo, const BenchConfig& cfg) {
  Ceilings c;
  c.isa = kIsa;
  c.accumulators = kAcc;
  c.lanes = kLanes;
  c.cores = topo.core_count();
  c.triad_floats = cfg.triad_mib * (int64_t{1} << 20) / static_cast<int64_t>(sizeof(float));

  // Triad first: the child must be forked before this process starts any thread.
  const TriadFigures tf = run_triad_in_child(topo, c.triad_floats, cfg.repeats, &c.triad_in_child);
  if (!tf.ok)
    return unavailable("bench: the triad could not allocate 3 x " + std::to_string(cfg.triad_mib) +
                       " MiB (lower --triad-mib)");
  c.triad_core_gbs = {tf.core[0], tf.core[1], tf.core[2]};
  c.triad_all_gbs = {tf.all[0], tf.all[1], tf.all[2]};

  EASEL_ASSIGN_OR_RETURN(auto workers, one_worker_per_core(topo));
  int64_t iterations = 0;
  workers[0]->run([&] { iterations = calibrate_fma(0.1); });
  const double flops = fma_loop_flops(iterations, kAcc, kLanes);
  std::vector<double> core, all;
  std::vector<float> sums(workers.size());
  for (int r = 0; r < cfg.repeats + 1; ++r) {
    const double t0 = seconds_now();
    workers[0]->run([&] { sums[0] = fma_kernel(iterations, 0.999f, 0.001f); });
    const double t_core = seconds_now() - t0;
    const double t_all = run_together(workers, [&](int i) {
      sums[static_cast<size_t>(i)] = fma_kernel(iterations, 0.999f, 0.001f);
    });
    if (r == 0) continue;  // warm-up (frequency ramp)
    core.push_back(flops / t_core / 1e9);
    all.push_back(flops * static_cast<double>(workers.size()) / t_all / 1e9);
  }
  for (float s : sums)
    g_sink = g_sink + s;
  c.fma_core_gflops = summarize(core);
  c.fma_all_gflops = summarize(all);
  return c;
}

}  // namespace easel::bench
