// The counter-based draw behind dropout's mask, shared by the CPU's own kernel
// (devices/cpu/own_dropout.cpp) and the CUDA kernel (devices/cuda/op_kernels.cu), so that both
// keep the same elements for the same seed and call. Element j of training forward number
// `call` of an op seeded `seed` is SplitMix64's output number j+1 from the state
// key(seed, call): any element is drawn alone, in any order, on any thread. Plain C++ (no CUDA
// headers); under nvcc the functions are also device functions.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EASEL_HOST_DEVICE __host__ __device__
#else
#define EASEL_HOST_DEVICE
#endif

namespace easel::dropout_hash {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// SplitMix64's finalizer: a bijective 64-bit mix.
EASEL_HOST_DEVICE constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// An op's seed in draw stream `stream` (Op::set_draw): stream 0 is the op's own seed.
EASEL_HOST_DEVICE constexpr uint64_t stream_seed(uint64_t op_seed, uint64_t stream) {
  return op_seed ^ mix64(stream);  // mix64(0) == 0
}

// The stream of one training forward (call = 0, 1, ... per op).
EASEL_HOST_DEVICE constexpr uint64_t key(uint64_t seed, uint64_t call) {
  return mix64(seed ^ mix64((call + 1) * kGolden));
}

// u >= ratio for u = b * 2^-24 (b an integer below 2^24) exactly when b >= threshold(ratio):
// the draw compares integers.
EASEL_HOST_DEVICE constexpr uint64_t threshold(float ratio) {
  const float t = ratio * 0x1.0p24f;  // exact: a power-of-two scale
  const uint64_t b = static_cast<uint64_t>(t);
  return static_cast<float>(b) < t ? b + 1 : b;
}

// Whether element j of stream `k` is kept: the top 24 bits of its draw, as u in [0, 1), at least
// ratio (probability 1 - ratio); `t` is threshold(ratio).
EASEL_HOST_DEVICE constexpr bool keep(uint64_t k, uint64_t j, uint64_t t) {
  return (mix64(k + (j + 1) * kGolden) >> 40) >= t;
}

}  // namespace easel::dropout_hash

#undef EASEL_HOST_DEVICE
