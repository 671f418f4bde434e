// Span operations over flat arenas, vectorised with OpenMP SIMD. Each update is ONE pass over
// the arena; per-segment lr/decay multipliers (Caffe's lr_mult, decay_mult) are applied by
// walking the segments in order. Padding between segments is left untouched.
// Sign convention: v holds the velocity, v <- mu*v - lr*(g + wd*w), w <- w + v.
#pragma once

#include <cstdint>
#include <span>

#include "engine/arena.hpp"

namespace easel {

// Simulated runs with injected compute (tools/simulate --compute model; docs/SIMULATION.md): no
// arena's values matter, so every O(n) pass below except span_sum_squares returns at once, as
// do the Comms' local sums and copies (engine/comm). Set by mpi_start under SMPI when compute is
// injected (once per simulated rank: SMPI gives every rank its own copy); false everywhere else.
void set_values_ignored(bool on);
bool values_ignored();

// y[i] = x[i]
void span_copy(float* y, const float* x, int64_t n);
// y[i] += a * x[i]
void span_axpy(float* y, float a, const float* x, int64_t n);
// y[i] = a * x[i] + b * y[i]
void span_axpby(float* y, float a, const float* x, float b, int64_t n);
// y[i] *= a
void span_scale(float* y, float a, int64_t n);
// y[i] = 0
void span_zero(float* y, int64_t n);
// Sum of x[i]^2 (double accumulation), for norms in tests and diagnostics.
double span_sum_squares(const float* x, int64_t n);

// Plain SGD: w <- w - lr*lr_mult*(g + wd*decay_mult*w).
void sgd_step(std::span<const Segment> segs, float* w, const float* g, float lr, float wd);
// Caffe momentum SGD: v <- mu*v - lr'*(g + wd'*w); w <- w + v.
void momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                   float mu, float wd);
// Caffe Nesterov: v' <- mu*v - lr'*(g + wd'*w); w <- w + (1+mu)*v' - mu*v; v <- v'.
void nesterov_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                   float mu, float wd);

// EASGD group update fused with its local SGD step (DESIGN.md 4):
//   w <- w - lr'*(g + wd'*w) - alpha*(w - centre)
// The elastic term uses the w before this step's gradient update.
void elastic_sgd_step(std::span<const Segment> segs, float* w, const float* g, const float* centre,
                      float lr, float wd, float alpha);
// EAMSGD group update (momentum delta on the group):
//   nesterov:   v' <- d*v - lr'*(g + wd'*w); w <- w + (1+d)*v' - d*v - alpha*(w - centre)
//   heavy-ball: v' <- d*v - lr'*(g + wd'*w); w <- w + v' - alpha*(w - centre)
void elastic_momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v,
                           const float* centre, float lr, float delta, float wd, float alpha,
                           bool nesterov);
// The elastic steps' element rules over [0, n) of arrays already offset to a segment's piece,
// with that segment's effective rates (lr' = lr*lr_mult, wd' = wd*decay_mult) and alpha != 0:
// the new w goes to w_out (w itself, or another buffer). The same bits as the two steps above
// give for those elements (for kernels that fuse more work into the same pass).
void elastic_sgd_range(float* w_out, const float* w, const float* g, const float* centre, int64_t n,
                       float lr_eff, float wd_eff, float alpha);
void elastic_momentum_range(float* w_out, const float* w, const float* g, float* v,
                            const float* centre, int64_t n, float lr_eff, float wd_eff, float delta,
                            float alpha, bool nesterov);
// Elastic pull applied to a group alone (used when the gradient step was already applied):
//   w <- w - alpha*(w - centre)
void elastic_pull(float* w, const float* centre, float alpha, int64_t n);
// EASGD master update from one group: centre <- centre + alpha*(w - centre).
void elastic_centre(float* centre, const float* w, float alpha, int64_t n);
// Sync EASGD master update from the reduced sum of P group weights:
//   centre <- centre + alpha*(sum_w - P*centre)
void elastic_centre_sum(float* centre, const float* sum_w, float alpha, int p, int64_t n);
// The same into another buffer, the same arithmetic element for element (bit for bit):
//   c_new <- c_old + alpha*(sum_w - P*c_old)   (alpha == 0: c_new <- c_old); c_new may be c_old.
void elastic_centre_from(float* c_new, const float* c_old, const float* sum_w, float alpha, int p,
                         int64_t n);

// Streaming (non-temporal) stores, for the lines another core reads next or has just read: a
// store through the cache to a line another core holds costs an invalidation round trip per
// line (on this project's VM, 0.86 MB written after the other core read it: 127 us through
// the cache, 24 us streamed; build/tools/probe_shared_stores). Streamed lines go to memory, so
// the writer's next read of them comes from there: use them only for lines another core will
// read. dst[0, n) <- src; non-temporal where dst is aligned to the vector width. Ordered only
// by stream_fence().
void stream_store(float* dst, const float* src, int64_t n);
// Orders the streaming stores before every later store (e.g. a barrier's release).
void stream_fence();
// elastic_sgd_step / elastic_momentum_step, the same bits, from w into w_out (w itself, or
// another arena of the same layout), with the stores outside [keep_lo, keep_hi) streamed (the
// slices other groups read); ends with stream_fence().
void elastic_sgd_step_streamed(std::span<const Segment> segs, const float* w, float* w_out,
                               const float* g, const float* centre, float lr, float wd, float alpha,
                               int64_t keep_lo, int64_t keep_hi);
void elastic_momentum_step_streamed(std::span<const Segment> segs, const float* w, float* w_out,
                                    const float* g, float* v, const float* centre, float lr,
                                    float delta, float wd, float alpha, bool nesterov,
                                    int64_t keep_lo, int64_t keep_hi);

// The state segments (Segment::state: batch norm's running statistics) of src copied into dst:
// what a parameter-server step hands the centre besides its update, whose rule leaves state
// alone. Nothing happens for an arena without state.
void copy_state(std::span<const Segment> segs, float* dst, const float* src);
// The same into a centre that others read and write without a lock (hogwild-sgd).
void racy_copy_state(std::span<const Segment> segs, float* shared, const float* src);

// Hogwild's intended races: element-wise relaxed atomic loads/stores through
// std::atomic_ref<float>, never a bare racy float pointer. `shared` may be written
// concurrently by other threads; each element is read and written whole (not torn).
//   shared[i] <- shared[i] + a*x[i]     (lock-free, last writer wins per element)
void racy_axpy(float* shared, float a, const float* x, int64_t n);
//   dst[i] <- shared[i]                  (relaxed loads)
void racy_copy_from(float* dst, const float* shared, int64_t n);
//   shared[i] <- shared[i] + alpha*(w[i] - shared[i])
void racy_elastic_centre(float* shared, const float* w, float alpha, int64_t n);

}  // namespace easel
