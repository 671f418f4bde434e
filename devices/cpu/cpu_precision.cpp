// The CPU's precision verdict (see cpu_precision.hpp): a probe of the core's multiply-add rates.
#include "devices/cpu/cpu_precision.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "devices/cpu/dnnl_ops.hpp"
#include "engine/log.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EASEL_BF16_PROBE 1
#endif

namespace easel {

namespace {

#if defined(EASEL_BF16_PROBE)
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Ten independent accumulator chains each (more than latency x ports), `n` rounds; returns
// products per second.
__attribute__((target("avx512f,avx512bf16"))) double bf16_burst(long n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
         a8 = a0, a9 = a0;
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    a0 = _mm512_dpbf16_ps(a0, x, x);
    a1 = _mm512_dpbf16_ps(a1, x, x);
    a2 = _mm512_dpbf16_ps(a2, x, x);
    a3 = _mm512_dpbf16_ps(a3, x, x);
    a4 = _mm512_dpbf16_ps(a4, x, x);
    a5 = _mm512_dpbf16_ps(a5, x, x);
    a6 = _mm512_dpbf16_ps(a6, x, x);
    a7 = _mm512_dpbf16_ps(a7, x, x);
    a8 = _mm512_dpbf16_ps(a8, x, x);
    a9 = _mm512_dpbf16_ps(a9, x, x);
    asm volatile(""
                 : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7),
                   "+v"(a8), "+v"(a9));
  }
  return static_cast<double>(n) * 10 * 32 / seconds_since(t0);
}

__attribute__((target("avx512f"))) double fp32_burst(long n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
         a8 = a0, a9 = a0;
  const __m512 x = _mm512_set1_ps(1.f);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    a0 = _mm512_fmadd_ps(x, x, a0);
    a1 = _mm512_fmadd_ps(x, x, a1);
    a2 = _mm512_fmadd_ps(x, x, a2);
    a3 = _mm512_fmadd_ps(x, x, a3);
    a4 = _mm512_fmadd_ps(x, x, a4);
    a5 = _mm512_fmadd_ps(x, x, a5);
    a6 = _mm512_fmadd_ps(x, x, a6);
    a7 = _mm512_fmadd_ps(x, x, a7);
    a8 = _mm512_fmadd_ps(x, x, a8);
    a9 = _mm512_fmadd_ps(x, x, a9);
    asm volatile(""
                 : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7),
                   "+v"(a8), "+v"(a9));
  }
  return static_cast<double>(n) * 10 * 16 / seconds_since(t0);
}
#endif

Bf16Rates probe() {
  Bf16Rates r;
  if (!dnnl_bf16_available()) return r;
  r.amx = dnnl_amx_available();
#if defined(EASEL_BF16_PROBE)
  // A warm-up (the core's 512-bit units and clock), then 300 pairs of 40k-instruction bursts:
  // ~10 ms at 3 GHz.
  bf16_burst(20000);
  fp32_burst(20000);
  for (int k = 0; k < 300; ++k) {
    const double b = bf16_burst(4000), f = fp32_burst(4000);
    if (b > r.bf16_gmacs) r.bf16_gmacs = b;
    if (f > r.fp32_gmacs) r.fp32_gmacs = f;
  }
  r.bf16_gmacs /= 1e9;
  r.fp32_gmacs /= 1e9;
#endif
  return r;
}

}  // namespace

Bf16Rates measure_bf16_rates() {
  static const Bf16Rates r = probe();
  return r;
}

std::string describe_bf16_rates(const Bf16Rates& r) {
  char s[200];
  std::snprintf(s, sizeof s,
                "one core's bf16 dot product (vdpbf16ps) %.1f against fp32 FMA (vfmadd231ps) "
                "%.1f GMAC/s, %.2fx; %s",
                r.bf16_gmacs, r.fp32_gmacs, r.ratio(), r.amx ? "AMX" : "no AMX");
  return s;
}

bool bf16_per_layer_wanted() {
  const char* force = std::getenv("EASEL_BF16");
  return force == nullptr || std::strcmp(force, "force") != 0;
}

Status check_cpu_precision(Precision p, ImplChoice impl) {
  if (p == Precision::tf32)
    return invalid_argument(
        "--precision tf32: TF32 is the tensor-core format of NVIDIA GPUs; the CPU has none "
        "(use fp32, or bf16 where the CPU computes it natively)");
  if (p != Precision::bf16 || impl == ImplChoice::ref) return {};
  if (!dnnl_bf16_available())
    return invalid_argument(
        "--precision bf16: this CPU (or this build) has no native bf16 compute (AVX512_BF16 or "
        "AMX with oneDNN); use fp32");
  const Bf16Rates r = measure_bf16_rates();
  if (r.amx || r.ratio() >= kBf16MinRateRatio) return {};
  const char* force = std::getenv("EASEL_BF16");
  const std::string why = describe_bf16_rates(r);
  if (force != nullptr && std::strcmp(force, "force") == 0) {
    log_once(LogLevel::warn, "cpu", "bf16-forced",
             "--precision bf16 with EASEL_BF16=force: bf16 runs though it cannot pay here (" + why +
                 ")");
    return {};
  }
  char need[64];
  std::snprintf(need, sizeof need, "%.1fx", kBf16MinRateRatio);
  return invalid_argument(
      "--precision bf16: bf16 cannot pay on this CPU (" + why + "; bf16 needs " + need +
      ", else oneDNN's conversions make it slower than fp32: docs/PERFORMANCE.md \"bf16\"); use "
      "fp32, or EASEL_BF16=force to run it anyway");
}

}  // namespace easel
