// easel's own CUDA kernels for the layer ops (devices/cuda/op_kernels.cu), behind plain C++
// launchers that the host code (cuda_ops.cpp, cuda_conv.cpp, ...) calls. Every launcher queues
// its work on `stream` and returns at once; a launch failure aborts (EASEL_CUDA_CHECK). A
// launcher with nothing to do (count 0) launches nothing. Pointers are device memory unless
// said otherwise; activations are dense in the layout given by `nhwc`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace easel::cuda_kernels {

// ---- element-wise --------------------------------------------------------------------------

// p[i] <- value
void fill(cudaStream_t stream, float* p, int64_t count, float value);
// dst[i] <- max(src[i], 0) (dst may be src)
void relu_forward(cudaStream_t stream, const float* src, float* dst, int64_t count);
// diff_src[i] <- dst[i] > 0 ? diff_dst[i] : 0 (diff_src may be diff_dst). Also the mask of a
// fused ReLU: the gradient reaching the pre-activation values.
void relu_backward(cudaStream_t stream, const float* dst, const float* diff_dst, float* diff_src,
                   int64_t count);
// The same on bf16 activations (uint16_t: the bits; act_kernels.cu, as are all overloads
// taking uint16_t activations below).
void relu_forward(cudaStream_t stream, const uint16_t* src, uint16_t* dst, int64_t count);
void relu_backward(cudaStream_t stream, const uint16_t* dst, const uint16_t* diff_dst,
                   uint16_t* diff_src, int64_t count);
// Rows of a [rows, cols] row-major matrix: x[r, c] <- x[r, c] + bias[c] (bias may be nullptr),
// then max(., 0) when relu.
void add_bias_relu_rows(cudaStream_t stream, float* x, const float* bias, int64_t rows,
                        int64_t cols, bool relu);
// out[c] <- sum over r of x[r, c], summed in row order (the reference's order).
void column_sums(cudaStream_t stream, const float* x, int64_t rows, int64_t cols, float* out);
// bfloat16 copies (uint16_t: the upper half of an IEEE float) for the bf16 precision:
// dst[i] <- src[i] rounded to nearest even (NaN stays NaN); and back, exactly.
void to_bf16(cudaStream_t stream, const float* src, uint16_t* dst, int64_t count);
void from_bf16(cudaStream_t stream, const uint16_t* src, float* dst, int64_t count);
// Filter {o, i, kh, kw} <-> {o, kh, kw, i}: to_ohwi converts oihw -> ohwi, else ohwi -> oihw.
void transpose_filter(cudaStream_t stream, const float* src, float* dst, int64_t o, int64_t i,
                      int64_t kh, int64_t kw, bool to_ohwi);

// ---- pooling, Caffe semantics (devices/cpu/ref_ops.cpp) -------------------------------------

struct PoolShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // src
  int64_t oh = 0, ow = 0;              // dst (dst_shape: ceil or floor mode)
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool nhwc = false;
};
// dst <- max over the window clipped to the input; argmax[o] <- h * w_in + w of the first
// maximum in scan order (-1 for an empty window).
void max_pool_forward(cudaStream_t stream, const PoolShape& s, const float* src, float* dst,
                      int32_t* argmax);
// diff_src <- sum of diff_dst over the outputs whose argmax is the element (a gather: no
// atomics, the reference's summation order).
void max_pool_backward(cudaStream_t stream, const PoolShape& s, const float* diff_dst,
                       const int32_t* argmax, float* diff_src);
// Caffe's average: the divisor is the window clipped to the input plus padding.
void avg_pool_forward(cudaStream_t stream, const PoolShape& s, const float* src, float* dst);
void avg_pool_backward(cudaStream_t stream, const PoolShape& s, const float* diff_dst,
                       float* diff_src);
// The same on bf16 activations: compared and summed in f32, each output rounded once.
void max_pool_forward(cudaStream_t stream, const PoolShape& s, const uint16_t* src, uint16_t* dst,
                      int32_t* argmax);
void max_pool_backward(cudaStream_t stream, const PoolShape& s, const uint16_t* diff_dst,
                       const int32_t* argmax, uint16_t* diff_src);
void avg_pool_forward(cudaStream_t stream, const PoolShape& s, const uint16_t* src, uint16_t* dst);
void avg_pool_backward(cudaStream_t stream, const PoolShape& s, const uint16_t* diff_dst,
                       uint16_t* diff_src);

// ---- LRN across channels, Caffe's definition ------------------------------------------------

struct LrnShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t local_size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 1.f;
  bool nhwc = false;
};
// scale <- k + alpha/n * sum_window src^2 (kept for backward), dst <- src * scale^-beta
void lrn_forward(cudaStream_t stream, const LrnShape& s, const float* src, float* dst,
                 float* scale);
void lrn_backward(cudaStream_t stream, const LrnShape& s, const float* src, const float* dst,
                  const float* scale, const float* diff_dst, float* diff_src);

// ---- dropout -------------------------------------------------------------------------------

// mask[i] <- 1 with probability 1-ratio from a counter-based hash of (seed, call, i)
// (devices/dropout_hash.hpp), else 0;
// dst[i] <- mask[i] ? src[i] * scale : 0 (dst may be src).
void dropout_forward(cudaStream_t stream, const float* src, float* dst, uint8_t* mask,
                     int64_t count, float ratio, float scale, uint64_t seed, uint64_t call);
// diff_src[i] <- mask[i] ? diff_dst[i] * scale : 0
void dropout_backward(cudaStream_t stream, const float* diff_dst, const uint8_t* mask,
                      float* diff_src, int64_t count, float scale);

// ---- batch normalization, PyTorch's definition (devices/cpu/ref_batch_norm.cpp) -------------

// A dense [n, c, h, w] tensor whose channels are reduced over their m = n*h*w values.
struct ChannelShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  bool nhwc = false;
};
// training: mean[c] and inv_std[c] = 1/sqrt(var + eps) of the batch (var biased, sums in double,
// a fixed order), and the running statistics moved by momentum toward mean and var*m/(m-1)
// (m = 1 counts as 1). Otherwise mean = running_mean, inv_std from running_var, which stay.
void batch_norm_stats(cudaStream_t stream, const ChannelShape& s, const float* src, float eps,
                      float momentum, bool training, float* running_mean, float* running_var,
                      float* mean, float* inv_std);
// dst <- a*src + b with a = scale*inv_std, b = shift - a*mean per channel (float, the
// reference's steps), then max(., 0) when relu.
void batch_norm_apply(cudaStream_t stream, const ChannelShape& s, const float* src, float* dst,
                      const float* scale, const float* shift, const float* mean,
                      const float* inv_std, bool relu);
// g = diff_dst, masked by dst > 0 when relu: diff_shift <- sum g, diff_scale <- sum g*xhat (in
// double); diff_src (skipped when nullptr) <- scale*inv_std * (g - (diff_shift +
// xhat*diff_scale)/m) after a training forward, scale*inv_std * g otherwise. mean and inv_std:
// those of the forward.
void batch_norm_backward(cudaStream_t stream, const ChannelShape& s, const float* src,
                         const float* dst, const float* diff_dst, const float* scale,
                         const float* mean, const float* inv_std, bool training, bool relu,
                         float* diff_scale, float* diff_shift, float* diff_src);

// ---- joins and global pooling --------------------------------------------------------------

constexpr int kMaxJoinInputs = 16;  // OpDef::max_inputs of add and concat
// dst[i] <- srcs[0][i] + srcs[1][i] + ... in input order (the reference's), 1 <= inputs <= 16;
// `srcs` is a host array of device pointers.
void add_n(cudaStream_t stream, const float* const* srcs, int inputs, float* dst, int64_t count);
// One input's channels [c0, c0 + part_c) of a concatenation with whole_c channels, both dense in
// the same layout with the same n and h*w = hw: to_whole copies part into whole, else whole's
// channels back into part.
void copy_channels(cudaStream_t stream, const float* from, float* to, int64_t n, int64_t part_c,
                   int64_t whole_c, int64_t c0, int64_t hw, bool nhwc, bool to_whole);
// dst[n*c + ch] <- the mean of src's plane (n, ch), summed in (h, w) order; dst {n, c, 1, 1} has
// one memory order in both layouts.
void global_avg_pool_forward(cudaStream_t stream, const ChannelShape& s, const float* src,
                             float* dst);
// diff_src[n, ch, h, w] <- diff_dst[n*c + ch] / (h*w)
void global_avg_pool_backward(cudaStream_t stream, const ChannelShape& s, const float* diff_dst,
                              float* diff_src);

// ---- softmax cross-entropy -----------------------------------------------------------------

// What the loss reduces on the device and copies back to the host.
struct LossTotals {
  double loss = 0;         // sum over the rows of -log max(prob[label], FLT_MIN)
  int64_t hits = 0;        // rows whose first maximum is the label
  int64_t bad_labels = 0;  // rows whose label lies outside [0, classes)
};
// For the first n rows of [*, classes] logits: prob <- softmax (max subtracted), then the
// per-row loss and state (0 miss, 1 hit, 2 bad label) reduced in a fixed order into *totals
// (device memory). row_loss and row_state hold n entries (scratch).
void softmax_xent_forward(cudaStream_t stream, const float* logits, const int32_t* labels,
                          float* prob, int64_t n, int64_t classes, float* row_loss,
                          int32_t* row_state, LossTotals* totals);
// diff[r, j] <- (prob[r, j] - (j == label[r])) * scale for r < n, 0 for n <= r < batch.
void softmax_xent_backward(cudaStream_t stream, const float* prob, const int32_t* labels,
                           float* diff, int64_t n, int64_t batch, int64_t classes, float scale);

// ---- bf16 activations (act_kernels.cu) -----------------------------------------------------

// out[r, c] <- bf16(x[r, c] + bias[c], then max(., 0) when relu); bias may be nullptr. x is a
// product's f32 result (an inner product's), rounded once into the bf16 dst.
void bias_relu_rows_to_bf16(cudaStream_t stream, const float* x, const float* bias, int64_t rows,
                            int64_t cols, bool relu, uint16_t* out);
// out[c] <- sum over r of x[r, c] (bf16 widened), summed in f32 in row order.
void column_sums(cudaStream_t stream, const uint16_t* x, int64_t rows, int64_t cols, float* out);
// x[n, c, h, w] <- bf16(x + bias[c], then max(., 0) when relu), in place (a convolution's bias).
void channel_bias_relu(cudaStream_t stream, const ChannelShape& s, uint16_t* x, const float* bias,
                       bool relu);
// out[c] <- the sum of g over channel c's n*h*w values (summed in double, a fixed order): a
// convolution's bias gradient.
void channel_sums(cudaStream_t stream, const ChannelShape& s, const uint16_t* g, float* out);
// Device::normalize_bytes: dst[i] <- table[channel(i) * 256 + bytes[i]] for the n*c*hw elements
// of a dense tensor (nhwc or nchw), as f32 or (bf16) rounded to nearest even.
void normalize_bytes(cudaStream_t stream, const uint8_t* bytes, const float* table, int64_t n,
                     int64_t c, int64_t hw, bool nhwc, bool bf16, void* dst);
// y[i] <- bf16(y[i] + x[i]) (widened, summed in f32, rounded once).
void add_bf16(cudaStream_t stream, uint16_t* y, const uint16_t* x, int64_t count);

}  // namespace easel::cuda_kernels
