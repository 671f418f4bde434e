// Whether a precision can pay on this CPU, decided from what the core measures, not from its
// feature flags alone (docs/PERFORMANCE.md "bf16"): AVX512_BF16 only speeds training up where its
// dot product (vdpbf16ps, 32 products an instruction) multiplies faster than the fp32 FMA it
// replaces (vfmadd231ps, 16). On the Intel Xeon guest (AMX not exposed) one core measures 44.7
// against 89.3 GMAC/s, 0.50x: the dot product issues a quarter as often as the FMA, so oneDNN's
// bf16 kernels, which also add conversions, lose to fp32. AMD's Zen 4 splits a 512-bit FMA in
// two and issues the dot product as often, so there bf16 has twice the multiply-adds.
#pragma once

#include <string>

#include "devices/device.hpp"
#include "engine/status.hpp"

namespace easel {

// One core's multiply-add rates: the best of many short interleaved bursts of independent
// vdpbf16ps and vfmadd231ps chains (robust on a loaded machine: a burst either runs or is
// preempted, and the best of each is the core's rate). Zero rates where the CPU or the build
// has no AVX512_BF16.
struct Bf16Rates {
  double bf16_gmacs = 0;  // bf16 products per second (vdpbf16ps), 1e9
  double fp32_gmacs = 0;  // fp32 products per second (vfmadd231ps), 1e9
  bool amx = false;       // AMX-BF16 tiles (oneDNN's avx512_core_amx): bf16 pays without a probe
  double ratio() const { return fp32_gmacs > 0 ? bf16_gmacs / fp32_gmacs : 0; }
};
Bf16Rates measure_bf16_rates();  // ~10 ms the first time; the result is kept for the process

// bf16 runs where the dot product is at least this much faster than fp32's FMA: AMD Zen 4
// measures 2x (1.13-1.40x on whole steps), Intel without AMX 1.0x (0.4-0.7x on whole steps).
inline constexpr double kBf16MinRateRatio = 1.5;

// The CPU device's verdict on `p` for the fast kernels: ok, or invalid_argument naming the flag
// and the measured reason (tf32: no CPU has it; bf16: no native bf16, or a dot product that
// cannot pay). EASEL_BF16=force lets bf16 run where it cannot pay (accuracy studies; logged
// once). ImplChoice::ref computes in fp32 whatever is asked, and is always ok.
Status check_cpu_precision(Precision p, ImplChoice impl);

// Whether the CPU device times each layer's bf16 kernel against its fp32 one (true), or runs
// every layer at bf16 (EASEL_BF16=force: the accuracy studies' bf16 everywhere).
bool bf16_per_layer_wanted();

// The measured reason, in words (for the refusal and `easel bench`).
std::string describe_bf16_rates(const Bf16Rates& r);

}  // namespace easel
