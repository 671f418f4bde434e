// Per-layer-kind rates: what `easel bench --calibrate` fits from the layers it times and what
// `easel model` prices any net's step with, a net it never ran included (docs/MODEL.md).
//
//   work     each layer of a net, from its spec and input shape alone (nothing is built): its
//            class (the op kind, convolutions split by shape), and per pass (forward, backward)
//            its FLOPs and the bytes it streams, per image and per batch (the parameters).
//   fit      per class and pass, seconds = flops / rate + bytes / bandwidth, the two fitted to
//            the timed layers by least squares on the relative error, both non-negative; the
//            GEMM classes (convolutions, inner products) price their weights at a bandwidth of
//            their own and their flops at most at the core's FMA peak.
//   step     one group's step at a batch: the sum over its layers and passes, plus the
//            momentum update over the arena and the step's own per-image rest (loss, input).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/status.hpp"
#include "nets/net.hpp"

namespace easel::model {

// One layer's work. Per pass: flops_per_image x batch FLOPs, bytes_per_image x batch +
// bytes_per_batch bytes (activations read and written; the weights and their gradient), and
// pixels_per_image x batch pixels: the spatial positions its kernel visits, each at a cost of
// its own whatever the channels (oneDNN's nhwc kernels loop over pixels and vectorise the
// channels: an LRN across 8 channels of 32x32 maps took 9.5 ms forward at batch 16 here, across
// 24 channels 8.8 ms).
struct LayerWork {
  std::string name;  // the graph's name ("conv1+relu1" when a ReLU is fused)
  std::string cls;   // layer_class()
  struct Pass {
    double flops_per_image = 0, bytes_per_image = 0, bytes_per_batch = 0, pixels_per_image = 0;
    double flops(int64_t batch) const { return flops_per_image * static_cast<double>(batch); }
    double pixels(int64_t batch) const { return pixels_per_image * static_cast<double>(batch); }
    double bytes(int64_t batch) const {
      return bytes_per_image * static_cast<double>(batch) + bytes_per_batch;
    }
  };
  Pass forward, backward;
};

// The class a layer is priced by: the op kind's name ("inner_product", "batch_norm", ...),
// convolutions split by shape: "conv-stem" (at most 4 input channels: the first layer on
// images), "conv1x1" (a 1x1 kernel: one GEMM) and "conv" (the rest); an inner product whose
// weights exceed kStreamedWeightBytes is "inner_product-streamed".
std::string layer_class(const OpDesc& d);

// Weights several times a core's private cache (1-2 MB of L2 on the machines easel targets):
// an inner product at a small batch streams them from memory on every pass, at a fraction of
// the rate at which weights that stay in cache are read (measured here: 5-9 GB/s against 40).
inline constexpr double kStreamedWeightBytes = 8.0 * (1 << 20);

// The bytes per image of a convolution's data gradient beyond its activations, as the CPU
// computes it (nhwc, one group: devices/cpu/dnnl_conv.cpp's GEMM and col2im): the column
// matrix, dst.h x dst.w rows of kh x kw x src.c, written by the GEMM and gathered into the
// inputs' gradient (4 bytes each way). It grows with the kernel's area where the activations do
// not (a 5x5 convolution's is 25 times its input), so without it a 3x3 and a 5x5 convolution of
// one input share a byte count. 0 for another kind or a grouped convolution.
double col_bytes(const OpDesc& d, const Shape4& dst, int lanes = 1);

// True for the classes that run as GEMMs (convolutions, inner products): their flops are
// bounded by the FMA peak and their weights have a bandwidth of their own in the fit.
bool gemm_class(const std::string& cls);

// Every layer of `spec` on one image of `spec`'s input (channels x height x width), in the
// graph's order (ReLUs fused as the trainer fuses them). Errors name the net and the layer.
Result<std::vector<LayerWork>> layer_work(const NetSpec& spec, int lanes = 1);

// One timed layer pass (whole batch), the fit's input: `bytes` all it streams, of which
// `weight_bytes` the weights (and on the backward pass their gradient).
struct LayerSample {
  std::string cls;
  bool backward = false;
  double flops = 0, bytes = 0, seconds = 0, weight_bytes = 0, pixels = 0;
};

// A class's fitted rates for one pass: seconds = flops / (gflops 1e9) + bytes / (gbs 1e9) +
// pixels / (gpixels 1e9), where with weight_gbs the weights' bytes are priced at weight_gbs
// instead (the rest at gbs); a rate of 0 has no term.
struct LayerRate {
  std::string cls;
  bool backward = false;
  double gflops = 0, gbs = 0, gpixels = 0;
  std::optional<double> weight_gbs;
  int samples = 0;
  double seconds(double flops, double bytes, double weight_bytes = 0, double pixels = 0) const;
};

// Fits one LayerRate per class and pass present in `samples` (samples with seconds <= 0 are
// dropped): the least-squares fit of the relative error with every term non-negative (the best
// over which terms are kept). A GEMM class (gemm_class) fits four terms, flops, activations'
// bytes, weights' bytes and pixels, with its flop rate at most `peak_gflops` (when > 0: the FMA
// peak, which no layer beats; a fit above it prices a compute-bound layer too fast); the other
// classes three, flops, all bytes and pixels.
std::vector<LayerRate> fit_layer_rates(const std::vector<LayerSample>& samples,
                                       double peak_gflops = 0);

// The step a set of rates predicts.
struct StepRates {
  std::vector<LayerRate> rates;
  // Classes without a rate fall back to FLOPs at this rate and bytes at this bandwidth.
  double fallback_gflops = 1, fallback_gbs = 1;
  double update_gbs = 0;  // the momentum update's: 20 bytes per arena float; 0: none
  // The momentum update timed by arena size ([[step.update]]: (arena bytes, seconds), one
  // thread's CPU time); when given it prices the update in place of update_gbs.
  std::vector<std::pair<double, double>> update_by_size;
  double other_per_image = 0;  // seconds per image beyond the layers and the update
};
struct StepEstimate {
  double seconds = 0;
  double layer_seconds = 0, update_seconds = 0, other_seconds = 0;
  std::vector<std::string> fallback;      // classes priced by the fallback (no rate), once each
  std::vector<double> forward, backward;  // each layer's, in `layers`' order
};
// y at x from (x, y) points: linear in log(x) -> log(y) between the two around x, proportional
// to x beyond the ends; -1 without points.
double log_log_interpolate(std::vector<std::pair<double, double>> points, double x);
StepEstimate estimate_step(const StepRates& r, const std::vector<LayerWork>& layers,
                           double arena_floats, int64_t batch);

}  // namespace easel::model
