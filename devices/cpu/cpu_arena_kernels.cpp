// The CPU's arena kernels: the span ops of engine/span_ops.hpp, unchanged.
#include "devices/arena_kernels.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class CpuArenaKernels final : public ArenaKernels {
 public:
  void copy(float* y, const float* x, int64_t n) override { span_copy(y, x, n); }
  void axpy(float* y, float a, const float* x, int64_t n) override { span_axpy(y, a, x, n); }
  void scale(float* y, float a, int64_t n) override { span_scale(y, a, n); }
  void sgd_step(std::span<const Segment> segs, float* w, const float* g, float lr,
                float wd) override {
    easel::sgd_step(segs, w, g, lr, wd);
  }
  void momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    easel::momentum_step(segs, w, g, v, lr, mu, wd);
  }
  void nesterov_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    easel::nesterov_step(segs, w, g, v, lr, mu, wd);
  }
  void elastic_sgd_step(std::span<const Segment> segs, float* w, const float* g,
                        const float* centre, float lr, float wd, float alpha) override {
    easel::elastic_sgd_step(segs, w, g, centre, lr, wd, alpha);
  }
  void elastic_momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v,
                             const float* centre, float lr, float delta, float wd, float alpha,
                             bool nesterov) override {
    easel::elastic_momentum_step(segs, w, g, v, centre, lr, delta, wd, alpha, nesterov);
  }
  void elastic_centre_sum(float* centre, const float* sum_w, float alpha, int p,
                          int64_t n) override {
    easel::elastic_centre_sum(centre, sum_w, alpha, p, n);
  }
};

}  // namespace

ArenaKernels& cpu_arena_kernels() {
  static CpuArenaKernels k;
  return k;
}

}  // namespace easel
