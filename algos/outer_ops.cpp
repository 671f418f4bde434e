#include "algos/outer_ops.hpp"

#include <algorithm>
#include <cmath>

#include "engine/status.hpp"

namespace easel {

const char* exchange_precision_name(ExchangePrecision p) {
  switch (p) {
    case ExchangePrecision::fp32:
      return "fp32";
    case ExchangePrecision::bf16:
      return "bf16";
    case ExchangePrecision::int8:
      return "int8";
  }
  return "?";
}

int64_t exchange_payload_bytes(int64_t n, ExchangePrecision p) {
  switch (p) {
    case ExchangePrecision::fp32:
      return 4 * n;
    case ExchangePrecision::bf16:
      return 2 * n;
    case ExchangePrecision::int8:
      return n + 4 * ((n + kInt8Block - 1) / kInt8Block);
  }
  return 4 * n;
}

WireFormat wire_format(ExchangePrecision p) {
  EASEL_CHECK(p != ExchangePrecision::fp32);
  return p == ExchangePrecision::bf16 ? WireFormat::bf16 : WireFormat::int8;
}

void exchange_round_trip(float* x, int64_t n, ExchangePrecision p) {
  if (p != ExchangePrecision::fp32) wire_round_trip(x, n, wire_format(p));
}

void adamw_step(std::span<const Segment> segs, float* w, const float* g, float* m, float* v,
                float lr, float wd, const AdamW& a, int64_t t) {
  const double bc1 = 1 - std::pow(static_cast<double>(a.beta1), static_cast<double>(t));
  const double bc2 = 1 - std::pow(static_cast<double>(a.beta2), static_cast<double>(t));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  for (const Segment& s : segs) {
    if (s.state || s.lr_mult == 0) continue;
    const float l = lr * s.lr_mult;
    const float decay = 1.f - l * wd * s.decay_mult;
    const float step = static_cast<float>(l / bc1);
    for (int64_t i = s.offset; i < s.offset + s.count; ++i) {
      w[i] *= decay;
      m[i] = a.beta1 * m[i] + (1 - a.beta1) * g[i];
      v[i] = a.beta2 * v[i] + (1 - a.beta2) * g[i] * g[i];
      w[i] -= step * m[i] / (std::sqrt(v[i]) / bc2_sqrt + a.eps);
    }
  }
}

void outer_average(float* x, const float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    x[i] -= d[i];
}

void outer_slowmo(float* x, float* u, const float* d, int64_t n, float alpha, float beta,
                  float gamma) {
  for (int64_t i = 0; i < n; ++i) {
    u[i] = beta * u[i] + d[i] / gamma;
    x[i] -= alpha * gamma * u[i];
  }
}

void outer_nesterov(float* x, float* u, const float* d, int64_t n, float eta, float mu) {
  for (int64_t i = 0; i < n; ++i) {
    u[i] = mu * u[i] + d[i];
    x[i] -= eta * (d[i] + mu * u[i]);
  }
}

}  // namespace easel
