// The one gradient checker every op test uses (Caffe's GradientChecker idea), plus the helpers
// that compare one implementation with another.
//
// check_gradients() fills every input (src, then desc.more_src's) and the weights with seeded
// uniform values, takes the loss L = sum_i dst[i] * r[i] for a random projection r (so
// diff_dst = r), runs forward_n + backward_n once for the analytic gradients, and compares the
// gradients of every input and every trained parameter with central differences
// (L(x+h) - L(x-h)) / 2h, L summed in double. Large tensors are checked on a seeded sample.
// Elements whose two one-sided differences disagree sit on a kink (ReLU at 0, a max-pool tie
// within h) and are skipped; the check fails if more than max_skip_fraction are skipped. The
// failure message names the worst element, its coordinates and both values. The state
// parameters (state_params(): batch norm's running statistics) must get a gradient of 0.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "devices/op.hpp"
#include "engine/tensor.hpp"

namespace easel::test {

struct GradCheckOptions {
  uint64_t seed = 1;
  float src_lo = -1.f, src_hi = 1.f;        // src ~ U[src_lo, src_hi)
  float weight_lo = -1.f, weight_hi = 1.f;  // every weights tensor ~ U[weight_lo, weight_hi)
  float step = 1e-2f;                       // h
  float rtol = 1e-2f, atol = 1e-3f;         // |analytic - numeric| <= atol + rtol * max(|.|)
  int64_t max_checks = 150;                 // per tensor; a seeded sample beyond that
  float max_skip_fraction = 0.25f;          // of the checked elements, at kinks
  bool training = true;                     // passed to forward()
  bool check_src = true;                    // diff_src of every input
  bool check_weights = true;                // every diff_weights[i]
};

// Deterministic ops: the same op serves the analytic pass and every perturbed forward.
::testing::AssertionResult check_gradients(Op& op, const GradCheckOptions& opt = {});

// Stochastic ops (dropout): a fresh op from `make` for every forward, so that each one draws
// the same mask as the first forward of an op created with the same seed.
using OpFactory = std::function<std::unique_ptr<Op>()>;
::testing::AssertionResult check_gradients(const OpFactory& make, const GradCheckOptions& opt = {});

// Softmax cross-entropy: random logits and labels, n <= batch rows used; the analytic
// backward (scale 1) against central differences of forward's summed loss, and rows past n
// zeroed.
::testing::AssertionResult check_loss_gradients(LossOp& loss, int64_t batch, int64_t classes,
                                                int64_t n, const GradCheckOptions& opt = {});

// n values ~ U[lo, hi) from easel::Rng(seed).
std::vector<float> random_vector(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);

// Element-wise |a - b| <= atol + rtol * max(|a|, |b|); on failure names `what`, the worst
// index, both values and how many differ.
::testing::AssertionResult near_all(const float* a, const float* b, int64_t n, float rtol,
                                    float atol, const char* what);
// near_all of two whole tensors, with atol = atol_scale * max(1, max |want|): an absolute floor
// scaled to the reference's magnitude (fast kernels against the reference, summed in another
// order). Sizes must match.
::testing::AssertionResult near_scaled(const std::vector<float>& got,
                                       const std::vector<float>& want, float rtol, float atol_scale,
                                       const std::string& what);

// The same tensor in another layout: dst[offset4(s, to, ...)] = src[offset4(s, from, ...)].
std::vector<float> relayout(const float* src, const Shape4& s, Layout from, Layout to);

// Random parameters for op `d`, one vector per param_shapes(d) entry, and pointer views of
// them in the form forward()/backward() take.
std::vector<std::vector<float>> random_params(const OpDesc& d, uint64_t seed, float lo = -1.f,
                                              float hi = 1.f);
std::vector<const float*> const_ptrs(const std::vector<std::vector<float>>& v);
std::vector<float*> mut_ptrs(std::vector<std::vector<float>>& v);

}  // namespace easel::test
