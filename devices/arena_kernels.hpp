// The update rules over flat arenas (engine/span_ops.hpp has their definitions), as a device
// runs them on arenas in its own memory: the CPU calls the span ops, the CUDA device launches
// its kernels on the group's stream (asynchronously: Device::synchronize() waits). Algorithms
// that keep a group's arenas on its device (Algorithm::device_resident) reach them only
// through this interface and the Comm.
#pragma once

#include <cstdint>
#include <span>

#include "engine/arena.hpp"

namespace easel {

class ArenaKernels {
 public:
  virtual ~ArenaKernels() = default;
  // y <- x; y <- y + a*x; y <- a*y
  virtual void copy(float* y, const float* x, int64_t n) = 0;
  virtual void axpy(float* y, float a, const float* x, int64_t n) = 0;
  virtual void scale(float* y, float a, int64_t n) = 0;
  // The local rules, one pass over the arena each (per-segment lr_mult and decay_mult).
  virtual void sgd_step(std::span<const Segment> segs, float* w, const float* g, float lr,
                        float wd) = 0;
  virtual void momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v,
                             float lr, float mu, float wd) = 0;
  virtual void nesterov_step(std::span<const Segment> segs, float* w, const float* g, float* v,
                             float lr, float mu, float wd) = 0;
  // EASGD: the group's step with the elastic pull, and the centre's update from the sum.
  virtual void elastic_sgd_step(std::span<const Segment> segs, float* w, const float* g,
                                const float* centre, float lr, float wd, float alpha) = 0;
  virtual void elastic_momentum_step(std::span<const Segment> segs, float* w, const float* g,
                                     float* v, const float* centre, float lr, float delta, float wd,
                                     float alpha, bool nesterov) = 0;
  virtual void elastic_centre_sum(float* centre, const float* sum_w, float alpha, int p,
                                  int64_t n) = 0;
};

// The CPU's: engine/span_ops.hpp, on the calling thread (and its OpenMP team).
ArenaKernels& cpu_arena_kernels();

}  // namespace easel
