// easel's own kernels for the layer ops (see op_kernels.hpp for the contracts). Grid-stride
// loops over int64 indices in memory order; every launch checked. The pooling and LRN kernels
// reproduce devices/cpu/ref_ops.cpp (Caffe's semantics): the gradients are gathers in the
// reference's summation order, so that max pooling matches it bit for bit.
#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "devices/cuda/cuda_common.hpp"
#include "devices/cuda/kernel_util.cuh"
#include "devices/cuda/op_kernels.hpp"
#include "devices/dropout_hash.hpp"

namespace easel::cuda_kernels {

using namespace util;  // NOLINT: the kernel files' shared helpers

namespace {

// ---- element-wise --------------------------------------------------------------------------

__global__ void fill_kernel(float* p, int64_t count, float value) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    p[i] = value;
}

__global__ void to_bf16_kernel(const float* src, uint16_t* dst, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

__global__ void from_bf16_kernel(const uint16_t* src, float* dst, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    dst[i] = __bfloat162float(__ushort_as_bfloat16(src[i]));
}

__global__ void add_bias_relu_rows_kernel(float* x, const float* bias, int64_t rows, int64_t cols,
                                          bool relu) {
  const int64_t count = rows * cols;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    float v = x[i];
    if (bias) v += bias[i % cols];
    if (relu) v = v > 0.f ? v : 0.f;
    x[i] = v;
  }
}

__global__ void column_sums_kernel(const float* x, int64_t rows, int64_t cols, float* out) {
  for (int64_t c = first_index(); c < cols; c += grid_stride()) {
    float s = 0.f;
    for (int64_t r = 0; r < rows; ++r)
      s += x[r * cols + c];
    out[c] = s;
  }
}

// Walks the oihw index; ohwi is the other side.
__global__ void transpose_filter_kernel(const float* src, float* dst, int64_t o, int64_t in,
                                        int64_t kh, int64_t kw, bool to_ohwi) {
  const int64_t count = o * in * kh * kw;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    int64_t r = i;
    const int64_t x = r % kw;
    r /= kw;
    const int64_t y = r % kh;
    r /= kh;
    const int64_t ic = r % in;
    const int64_t oc = r / in;
    const int64_t j = ((oc * kh + y) * kw + x) * in + ic;  // ohwi index
    if (to_ohwi)
      dst[j] = src[i];
    else
      dst[i] = src[j];
  }
}

// ---- LRN -----------------------------------------------------------------------------------

// The channel window of element i: its channel-0 offset, channel stride, and [c0, c1].
struct LrnWindow {
  int64_t base, stride, c, c0, c1;
};
__device__ inline LrnWindow lrn_window(const LrnShape& s, int64_t i) {
  const Coord x = decode(i, s.c, s.h, s.w, s.nhwc);
  const int64_t half = (s.local_size - 1) / 2;
  LrnWindow win;
  win.stride = s.nhwc ? 1 : s.h * s.w;
  win.base = i - x.c * win.stride;
  win.c = x.c;
  win.c0 = imax(x.c - half, 0);
  win.c1 = imin(x.c + half, s.c - 1);
  return win;
}

__global__ void lrn_forward_kernel(LrnShape s, float alpha_n, const float* src, float* dst,
                                   float* scale, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const LrnWindow win = lrn_window(s, i);
    float sum = 0.f;
    for (int64_t j = win.c0; j <= win.c1; ++j) {
      const float v = src[win.base + j * win.stride];
      sum += v * v;
    }
    const float sc = s.k + alpha_n * sum;
    scale[i] = sc;
    dst[i] = src[i] * powf(sc, -s.beta);
  }
}

__global__ void lrn_backward_kernel(LrnShape s, float ratio, const float* src, const float* dst,
                                    const float* scale, const float* diff_dst, float* diff_src,
                                    int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const LrnWindow win = lrn_window(s, i);
    float accum = 0.f;
    for (int64_t j = win.c0; j <= win.c1; ++j) {
      const int64_t e = win.base + j * win.stride;
      accum += diff_dst[e] * dst[e] / scale[e];
    }
    diff_src[i] = diff_dst[i] * powf(scale[i], -s.beta) - ratio * src[i] * accum;
  }
}

// ---- dropout -------------------------------------------------------------------------------

// Element i (the memory index: in nchw, and wherever h = w = 1, the logical index the CPU's
// own kernel draws) of stream `key` (devices/dropout_hash.hpp).
__global__ void dropout_forward_kernel(const float* src, float* dst, uint8_t* mask, int64_t count,
                                       uint64_t threshold, float scale, uint64_t key) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const bool keep = dropout_hash::keep(key, static_cast<uint64_t>(i), threshold);
    mask[i] = keep ? 1 : 0;
    dst[i] = keep ? src[i] * scale : 0.f;
  }
}

__global__ void dropout_backward_kernel(const float* diff_dst, const uint8_t* mask, float* diff_src,
                                        int64_t count, float scale) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    diff_src[i] = mask[i] ? diff_dst[i] * scale : 0.f;
}

// ---- softmax cross-entropy -----------------------------------------------------------------

template <typename T>
__device__ inline T warp_sum(T v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the block, returned to every thread. `shared` holds 32 entries.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = static_cast<int>((blockDim.x + 31) >> 5);
  v = warp_sum(v);
  __syncthreads();  // a previous call may still read shared[0]
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : T(0);
    v = warp_sum(v);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

// The largest value, the first index among equals (index < 0: nothing yet).
struct Best {
  float v;
  int i;
};
__device__ inline Best better(Best a, Best b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}
__device__ inline Best warp_best(Best b) {
  for (int off = 16; off > 0; off >>= 1) {
    Best o;
    o.v = __shfl_down_sync(0xffffffffu, b.v, off);
    o.i = __shfl_down_sync(0xffffffffu, b.i, off);
    b = better(b, o);
  }
  return b;
}

// One block per row.
__global__ void softmax_xent_rows_kernel(const float* logits, const int32_t* labels, float* prob,
                                         int64_t classes, float* row_loss, int32_t* row_state) {
  __shared__ float s_val[32];
  __shared__ int s_idx[32];
  const int64_t r = blockIdx.x;
  const float* x = logits + r * classes;
  float* p = prob + r * classes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = static_cast<int>((blockDim.x + 31) >> 5);

  Best b{-FLT_MAX, -1};
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    b = better(b, Best{x[j], static_cast<int>(j)});
  b = warp_best(b);
  if (lane == 0) {
    s_val[warp] = b.v;
    s_idx[warp] = b.i;
  }
  __syncthreads();
  if (warp == 0) {
    b = lane < warps ? Best{s_val[lane], s_idx[lane]} : Best{-FLT_MAX, -1};
    b = warp_best(b);
    if (lane == 0) {
      s_val[0] = b.v;
      s_idx[0] = b.i;
    }
  }
  __syncthreads();
  const float shift = s_val[0];
  const int best = s_idx[0];

  float part = 0.f;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    part += expf(x[j] - shift);
  const float sum = block_sum(part, s_val);  // s_val reused: shift is read above
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    p[j] = expf(x[j] - shift) / sum;
  if (threadIdx.x == 0) {
    const int32_t label = labels[r];
    if (label < 0 || label >= classes) {
      row_loss[r] = 0.f;
      row_state[r] = 2;
    } else {
      const float pl = expf(x[label] - shift) / sum;
      row_loss[r] = -logf(fmaxf(pl, FLT_MIN));
      row_state[r] = best == label ? 1 : 0;
    }
  }
}

// One block: the row results reduced in a fixed order (deterministic).
__global__ void loss_totals_kernel(const float* row_loss, const int32_t* row_state, int64_t n,
                                   LossTotals* totals) {
  __shared__ double s_loss[32];
  __shared__ long long s_count[32];
  double loss = 0.0;
  long long hits = 0, bad = 0;
  for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
    loss += static_cast<double>(row_loss[r]);
    hits += row_state[r] == 1 ? 1 : 0;
    bad += row_state[r] == 2 ? 1 : 0;
  }
  loss = block_sum(loss, s_loss);
  hits = block_sum(hits, s_count);
  bad = block_sum(bad, s_count);
  if (threadIdx.x == 0) {
    totals->loss = loss;
    totals->hits = hits;
    totals->bad_labels = bad;
  }
}

__global__ void softmax_xent_backward_kernel(const float* prob, const int32_t* labels, float* diff,
                                             int64_t n, int64_t count, int64_t classes,
                                             float scale) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t r = i / classes;
    if (r >= n) {
      diff[i] = 0.f;
      continue;
    }
    float g = prob[i] * scale;
    if (i - r * classes == labels[r]) g -= scale;
    diff[i] = g;
  }
}

// ---- batch normalization -------------------------------------------------------------------

// One block per channel, at most kMaxBlocks (the kernels stride over the rest).
unsigned channel_blocks(int64_t c) {
  return static_cast<unsigned>(c < kMaxBlocks ? c : kMaxBlocks);
}

// Element j in [0, m) of channel c (m = n*h*w): its memory offset.
__device__ inline int64_t channel_offset(const ChannelShape& s, int64_t c, int64_t j) {
  const int64_t hw = s.h * s.w;
  const int64_t n = j / hw, p = j - n * hw;
  return s.nhwc ? (n * hw + p) * s.c + c : (n * s.c + c) * hw + p;
}

// One block per channel (grid-stride over channels); sums in double through block_sum, so the
// order is fixed for a given launch shape.
__global__ void batch_norm_stats_kernel(ChannelShape s, const float* src, float eps, float momentum,
                                        bool training, float* running_mean, float* running_var,
                                        float* mean_out, float* inv_std_out) {
  __shared__ double shared[32];
  const int64_t m = s.n * s.h * s.w;
  const double md = static_cast<double>(m);
  for (int64_t c = blockIdx.x; c < s.c; c += gridDim.x) {
    double mean = running_mean[c], var = running_var[c];
    if (training) {
      double sum = 0;
      for (int64_t j = threadIdx.x; j < m; j += blockDim.x)
        sum += src[channel_offset(s, c, j)];
      mean = block_sum(sum, shared) / md;
      double sq = 0;
      for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
        const double d = src[channel_offset(s, c, j)] - mean;
        sq += d * d;
      }
      var = block_sum(sq, shared) / md;
      if (threadIdx.x == 0) {  // every thread read running_* before block_sum's barriers
        const double mom = momentum;
        running_mean[c] = static_cast<float>((1 - mom) * running_mean[c] + mom * mean);
        running_var[c] = static_cast<float>((1 - mom) * running_var[c] +
                                            mom * var * md / (md - 1 > 1 ? md - 1 : 1.0));
      }
    }
    if (threadIdx.x == 0) {
      mean_out[c] = static_cast<float>(mean);
      inv_std_out[c] = static_cast<float>(1 / sqrt(var + static_cast<double>(eps)));
    }
  }
}

__global__ void batch_norm_apply_kernel(ChannelShape s, const float* src, float* dst,
                                        const float* scale, const float* shift, const float* mean,
                                        const float* inv_std, bool relu, int64_t count) {
  const int64_t hw = s.h * s.w;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t c = s.nhwc ? i % s.c : (i / hw) % s.c;
    const float a = scale[c] * inv_std[c], b = shift[c] - a * mean[c];
    const float y = a * src[i] + b;
    dst[i] = relu ? (y > 0.f ? y : 0.f) : y;
  }
}

__global__ void batch_norm_backward_kernel(ChannelShape s, const float* src, const float* dst,
                                           const float* diff_dst, const float* scale,
                                           const float* mean_in, const float* inv_std_in,
                                           bool training, bool relu, float* diff_scale,
                                           float* diff_shift, float* diff_src) {
  __shared__ double shared[32];
  const int64_t m = s.n * s.h * s.w;
  for (int64_t c = blockIdx.x; c < s.c; c += gridDim.x) {
    const double mean = mean_in[c], inv_std = inv_std_in[c];
    double dshift = 0, dscale = 0;
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
      const int64_t i = channel_offset(s, c, j);
      const float g = relu && !(dst[i] > 0.f) ? 0.f : diff_dst[i];
      dshift += g;
      dscale += g * (src[i] - mean) * inv_std;
    }
    dshift = block_sum(dshift, shared);
    dscale = block_sum(dscale, shared);
    if (threadIdx.x == 0) {
      diff_scale[c] = static_cast<float>(dscale);
      diff_shift[c] = static_cast<float>(dshift);
    }
    if (diff_src == nullptr) continue;
    const double k = scale[c] * inv_std, md = static_cast<double>(m);
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
      const int64_t i = channel_offset(s, c, j);
      const float g = relu && !(dst[i] > 0.f) ? 0.f : diff_dst[i];
      const double xhat = (src[i] - mean) * inv_std;
      diff_src[i] = static_cast<float>(training ? k * (g - (dshift + xhat * dscale) / md) : k * g);
    }
  }
}

// ---- joins and global pooling --------------------------------------------------------------

struct JoinInputs {
  const float* p[kMaxJoinInputs];
  int n;
};

__global__ void add_n_kernel(JoinInputs in, float* dst, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    float sum = 0.f;
    for (int k = 0; k < in.n; ++k)
      sum += in.p[k][i];
    dst[i] = sum;
  }
}

// Walks the part's elements in its memory order.
__global__ void copy_channels_kernel(const float* from, float* to, int64_t part_c, int64_t whole_c,
                                     int64_t c0, int64_t hw, bool nhwc, bool to_whole,
                                     int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    int64_t w;  // the whole's offset of part element i
    if (nhwc) {
      const int64_t pixel = i / part_c;  // n * hw + position
      w = pixel * whole_c + c0 + (i - pixel * part_c);
    } else {
      const int64_t p = i % hw, r = i / hw;  // r = n * part_c + c
      const int64_t n = r / part_c, c = r - n * part_c;
      w = (n * whole_c + c0 + c) * hw + p;
    }
    if (to_whole)
      to[w] = from[i];
    else
      to[i] = from[w];
  }
}

// One thread per (n, c) plane.
__global__ void global_avg_pool_forward_kernel(ChannelShape s, const float* src, float* dst,
                                               int64_t planes) {
  const float area = static_cast<float>(s.h * s.w);
  for (int64_t o = first_index(); o < planes; o += grid_stride()) {
    const int64_t n = o / s.c, c = o - n * s.c;
    float sum = 0.f;
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t w = 0; w < s.w; ++w)
        sum += src[offset(n, c, h, w, s.c, s.h, s.w, s.nhwc)];
    dst[o] = sum / area;
  }
}

__global__ void global_avg_pool_backward_kernel(ChannelShape s, const float* diff_dst,
                                                float* diff_src, int64_t count) {
  const float area = static_cast<float>(s.h * s.w);
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const Coord x = decode(i, s.c, s.h, s.w, s.nhwc);
    diff_src[i] = diff_dst[x.n * s.c + x.c] / area;
  }
}

}  // namespace

// ---- launchers -----------------------------------------------------------------------------

void fill(cudaStream_t stream, float* p, int64_t count, float value) {
  if (count <= 0) return;
  fill_kernel<<<blocks_for(count), kThreads, 0, stream>>>(p, count, value);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void to_bf16(cudaStream_t stream, const float* src, uint16_t* dst, int64_t count) {
  if (count <= 0) return;
  to_bf16_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, dst, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void from_bf16(cudaStream_t stream, const uint16_t* src, float* dst, int64_t count) {
  if (count <= 0) return;
  from_bf16_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, dst, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void add_bias_relu_rows(cudaStream_t stream, float* x, const float* bias, int64_t rows,
                        int64_t cols, bool relu) {
  if (rows <= 0 || cols <= 0 || (!bias && !relu)) return;
  add_bias_relu_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, bias, rows, cols,
                                                                              relu);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void column_sums(cudaStream_t stream, const float* x, int64_t rows, int64_t cols, float* out) {
  if (cols <= 0) return;
  column_sums_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(x, rows, cols, out);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void transpose_filter(cudaStream_t stream, const float* src, float* dst, int64_t o, int64_t i,
                      int64_t kh, int64_t kw, bool to_ohwi) {
  const int64_t count = o * i * kh * kw;
  if (count <= 0) return;
  transpose_filter_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, dst, o, i, kh, kw,
                                                                      to_ohwi);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void lrn_forward(cudaStream_t stream, const LrnShape& s, const float* src, float* dst,
                 float* scale) {
  const int64_t count = s.n * s.c * s.h * s.w;
  if (count <= 0) return;
  const float alpha_n = s.alpha / static_cast<float>(s.local_size);  // as the reference
  lrn_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, alpha_n, src, dst, scale,
                                                                 count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void lrn_backward(cudaStream_t stream, const LrnShape& s, const float* src, const float* dst,
                  const float* scale, const float* diff_dst, float* diff_src) {
  const int64_t count = s.n * s.c * s.h * s.w;
  if (count <= 0) return;
  const float ratio = 2.f * s.alpha * s.beta / static_cast<float>(s.local_size);
  lrn_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, ratio, src, dst, scale,
                                                                  diff_dst, diff_src, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void dropout_forward(cudaStream_t stream, const float* src, float* dst, uint8_t* mask,
                     int64_t count, float ratio, float scale, uint64_t seed, uint64_t call) {
  if (count <= 0) return;
  dropout_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      src, dst, mask, count, dropout_hash::threshold(ratio), scale, dropout_hash::key(seed, call));
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void dropout_backward(cudaStream_t stream, const float* diff_dst, const uint8_t* mask,
                      float* diff_src, int64_t count, float scale) {
  if (count <= 0) return;
  dropout_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(diff_dst, mask, diff_src,
                                                                      count, scale);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void softmax_xent_forward(cudaStream_t stream, const float* logits, const int32_t* labels,
                          float* prob, int64_t n, int64_t classes, float* row_loss,
                          int32_t* row_state, LossTotals* totals) {
  if (n <= 0 || classes <= 0) {
    EASEL_CUDA_CHECK(cudaMemsetAsync(totals, 0, sizeof(LossTotals), stream));
    return;
  }
  unsigned threads = 32;  // one warp for a few classes, up to 256 threads for many
  while (threads < 256 && static_cast<int64_t>(threads) < classes)
    threads *= 2;
  softmax_xent_rows_kernel<<<static_cast<unsigned>(n), threads, 0, stream>>>(
      logits, labels, prob, classes, row_loss, row_state);
  EASEL_CUDA_CHECK(cudaGetLastError());
  loss_totals_kernel<<<1, kThreads, 0, stream>>>(row_loss, row_state, n, totals);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void softmax_xent_backward(cudaStream_t stream, const float* prob, const int32_t* labels,
                           float* diff, int64_t n, int64_t batch, int64_t classes, float scale) {
  const int64_t count = batch * classes;
  if (count <= 0) return;
  softmax_xent_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(prob, labels, diff, n,
                                                                           count, classes, scale);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void batch_norm_stats(cudaStream_t stream, const ChannelShape& s, const float* src, float eps,
                      float momentum, bool training, float* running_mean, float* running_var,
                      float* mean, float* inv_std) {
  if (s.c <= 0) return;
  batch_norm_stats_kernel<<<channel_blocks(s.c), kThreads, 0, stream>>>(
      s, src, eps, momentum, training, running_mean, running_var, mean, inv_std);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void batch_norm_apply(cudaStream_t stream, const ChannelShape& s, const float* src, float* dst,
                      const float* scale, const float* shift, const float* mean,
                      const float* inv_std, bool relu) {
  const int64_t count = s.n * s.c * s.h * s.w;
  if (count <= 0) return;
  batch_norm_apply_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, src, dst, scale, shift,
                                                                      mean, inv_std, relu, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void batch_norm_backward(cudaStream_t stream, const ChannelShape& s, const float* src,
                         const float* dst, const float* diff_dst, const float* scale,
                         const float* mean, const float* inv_std, bool training, bool relu,
                         float* diff_scale, float* diff_shift, float* diff_src) {
  if (s.c <= 0) return;
  batch_norm_backward_kernel<<<channel_blocks(s.c), kThreads, 0, stream>>>(
      s, src, dst, diff_dst, scale, mean, inv_std, training, relu, diff_scale, diff_shift,
      diff_src);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void add_n(cudaStream_t stream, const float* const* srcs, int inputs, float* dst, int64_t count) {
  EASEL_CHECK(inputs >= 1 && inputs <= kMaxJoinInputs);
  if (count <= 0) return;
  JoinInputs in{};
  for (int k = 0; k < inputs; ++k)
    in.p[k] = srcs[k];
  in.n = inputs;
  add_n_kernel<<<blocks_for(count), kThreads, 0, stream>>>(in, dst, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void copy_channels(cudaStream_t stream, const float* from, float* to, int64_t n, int64_t part_c,
                   int64_t whole_c, int64_t c0, int64_t hw, bool nhwc, bool to_whole) {
  const int64_t count = n * part_c * hw;
  if (count <= 0) return;
  copy_channels_kernel<<<blocks_for(count), kThreads, 0, stream>>>(from, to, part_c, whole_c, c0,
                                                                   hw, nhwc, to_whole, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void global_avg_pool_forward(cudaStream_t stream, const ChannelShape& s, const float* src,
                             float* dst) {
  const int64_t planes = s.n * s.c;
  if (planes <= 0) return;
  global_avg_pool_forward_kernel<<<blocks_for(planes), kThreads, 0, stream>>>(s, src, dst, planes);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void global_avg_pool_backward(cudaStream_t stream, const ChannelShape& s, const float* diff_dst,
                              float* diff_src) {
  const int64_t count = s.n * s.c * s.h * s.w;
  if (count <= 0) return;
  global_avg_pool_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, diff_dst, diff_src,
                                                                              count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace easel::cuda_kernels
