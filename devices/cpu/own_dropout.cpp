// Dropout, the same definition as the reference (devices/cpu/ref_ops.cpp, RefDropout): in
// training, keep each element with probability 1-ratio and scale it by 1/(1-ratio); identity
// otherwise. The mask is counter-based (devices/dropout_hash.hpp): element j of the logical
// (n, c, h, w) order in training forward number `call` is kept by a hash of (desc.seed, call, j),
// so both layouts drop the same elements, every element is drawn on its own (the loops run in
// parallel and vectorise) and the result does not depend on the thread count. In nchw, and
// wherever h = w = 1 (dropout after an inner product), the logical index is the memory index
// and the mask is the CUDA kernel's for the same seed and call.
//
// Not the reference's mask (that one is a sequential stream): equal in distribution only.
// set_draw (the trainer's group stream and step) sets the seed and the call counter, so a
// resumed run draws the masks of the uninterrupted one.
#include <cstring>
#include <vector>

#include "devices/cpu/own_ops.hpp"
#include "devices/dropout_hash.hpp"

namespace easel {

namespace {

class OwnDropout final : public Op {
 public:
  explicit OwnDropout(const OpDesc& d)
      : Op(d),
        seed_(d.seed),
        count_(d.src.count()),
        scale_(1.f / (1.f - d.ratio)),
        mask_(static_cast<size_t>(count_), 1) {}
  std::string impl() const override { return "own:dropout"; }

  void set_draw(uint64_t stream, uint64_t n) override {
    seed_ = dropout_hash::stream_seed(desc_.seed, stream);
    calls_ = n;
  }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool training) override {
    last_training_ = training;
    if (!training) {
      if (dst != src) std::memcpy(dst, src, static_cast<size_t>(count_) * sizeof(float));
      return;
    }
    const uint64_t k = dropout_hash::key(seed_, calls_++);
    const uint64_t t = dropout_hash::threshold(desc_.ratio);
    const float scale = scale_;
    uint8_t* m = mask_.data();
    const Shape4& s = desc_.src;
    const int64_t hw = s.h * s.w;
    if (desc_.layout == Layout::nchw || hw == 1 || s.c == 1) {
      // The memory order is the logical order.
#pragma omp parallel for simd
      for (int64_t i = 0; i < count_; ++i) {
        const bool kept = dropout_hash::keep(k, static_cast<uint64_t>(i), t);
        m[i] = kept;
        dst[i] = src[i] * (kept ? scale : 0.f);
      }
      return;
    }
    // nhwc, memory [n][h][w][c]: pixel p = (n, h, w) holds C contiguous elements whose logical
    // indices are ((n*C + c)*H + h)*W + w = first + c*H*W.
    const int64_t c_count = s.c, chw = s.c * hw;
#pragma omp parallel for
    for (int64_t p = 0; p < s.n * hw; ++p) {
      const int64_t first = (p / hw) * chw + p % hw;
      const float* x = src + p * c_count;
      float* y = dst + p * c_count;
      uint8_t* mp = m + p * c_count;
#pragma omp simd
      for (int64_t c = 0; c < c_count; ++c) {
        const bool kept = dropout_hash::keep(k, static_cast<uint64_t>(first + c * hw), t);
        mp[c] = kept;
        y[c] = x[c] * (kept ? scale : 0.f);
      }
    }
  }

  // After a training forward diff_src = diff_dst * mask * scale; after any other, diff_dst.
  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (!diff_src) return;
    if (!last_training_) {
      if (diff_src != diff_dst)
        std::memcpy(diff_src, diff_dst, static_cast<size_t>(count_) * sizeof(float));
      return;
    }
    const uint8_t* m = mask_.data();
    const float scale = scale_;
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i)
      diff_src[i] = diff_dst[i] * (static_cast<float>(m[i]) * scale);
  }

 private:
  uint64_t seed_;  // desc.seed in the stream set_draw named
  int64_t count_;
  float scale_;
  std::vector<uint8_t> mask_;  // 1 kept, 0 dropped, per element (memory order) of the last
                               // training forward
  uint64_t calls_ = 0;         // training forwards so far: the hash's counter
  bool last_training_ = false;
};

}  // namespace

Result<std::unique_ptr<Op>> make_own_dropout(const OpDesc& d, const DnnlOptions& /*options*/) {
  return std::unique_ptr<Op>(new OwnDropout(d));
}

}  // namespace easel
