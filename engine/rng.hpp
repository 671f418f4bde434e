// A small, fast, reproducible generator (xoshiro256**) whose whole state is four 64-bit words,
// so that it can be saved in a checkpoint and compared in tests. Seeded through splitmix64.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace easel {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0x5eed) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_)
      s = splitmix64(&x);
  }
  // A generator for a sub-stream (group i, layer j): deterministic in (seed, stream).
  static Rng stream(uint64_t seed, uint64_t stream_id) {
    return Rng(seed ^ (0x9e3779b97f4a7c15ull * (stream_id + 1)));
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 random bits.
  float uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) (n > 0), Lemire's method without the rare-rejection step bias
  // being measurable for the sizes used here.
  uint64_t below(uint64_t n) {
    __extension__ using u128 = unsigned __int128;  // __extension__: clean under -Wpedantic
    return static_cast<uint64_t>((static_cast<u128>(next_u64()) * n) >> 64);
  }
  // Standard normal through Box-Muller.
  float normal() {
    float u1 = uniform();
    if (u1 < 1e-12f) u1 = 1e-12f;
    const float u2 = uniform();
    return std::sqrt(-2.f * std::log(u1)) * std::cos(6.28318530718f * u2);
  }

  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t* x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::array<uint64_t, 4> s_;
};

}  // namespace easel
