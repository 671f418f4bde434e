// easel's own kernels that read or write activations of either element type (float, or bf16 as
// uint16_t bits; op_kernels.hpp for the contracts): ReLU and pooling, templated on the type
// (float computes exactly as it always has), and the pieces that the bf16 convolutions and
// inner products need around cuBLAS and cuDNN (bias and ReLU into bf16, per-channel and
// per-column sums of bf16 gradients), the batch's normalisation from bytes, and the sum of two
// bf16 gradients. bf16 values are widened exactly, computed in f32 and rounded once.
#include <cfloat>
#include <cstdint>

#include "devices/cuda/cuda_common.hpp"
#include "devices/cuda/kernel_util.cuh"
#include "devices/cuda/op_kernels.hpp"

namespace easel::cuda_kernels {

using namespace util;  // NOLINT: the kernel files' shared helpers

namespace {

// ---- ReLU ----------------------------------------------------------------------------------

template <typename T>
__global__ void relu_forward_kernel(const T* src, T* dst, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    dst[i] = ld(src[i]) > 0.f ? src[i] : T(0);
}

template <typename T>
__global__ void relu_backward_kernel(const T* dst, const T* diff_dst, T* diff_src, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    diff_src[i] = ld(dst[i]) > 0.f ? diff_dst[i] : T(0);
}

template <typename T>
void relu_fwd(cudaStream_t stream, const T* src, T* dst, int64_t count) {
  if (count <= 0) return;
  relu_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, dst, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void relu_bwd(cudaStream_t stream, const T* dst, const T* diff_dst, T* diff_src, int64_t count) {
  if (count <= 0) return;
  relu_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dst, diff_dst, diff_src, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

// ---- pooling -------------------------------------------------------------------------------

template <typename T>
__global__ void max_pool_forward_kernel(PoolShape s, const T* src, T* dst, int32_t* argmax,
                                        int64_t count) {
  for (int64_t o = first_index(); o < count; o += grid_stride()) {
    const Coord p = decode(o, s.c, s.oh, s.ow, s.nhwc);
    const int64_t hs = p.h * s.sh - s.ph, ws = p.w * s.sw - s.pw;
    const int64_t h0 = imax(hs, 0), h1 = imin(hs + s.kh, s.h);
    const int64_t w0 = imax(ws, 0), w1 = imin(ws + s.kw, s.w);
    float best = -FLT_MAX;
    int64_t at = -1;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) {
        const float v = ld(src[offset(p.n, p.c, h, w, s.c, s.h, s.w, s.nhwc)]);
        if (at < 0 || v > best) {
          best = v;
          at = h * s.w + w;
        }
      }
    }
    dst[o] = st<T>(best);  // exact: best is one of src's values
    argmax[o] = static_cast<int32_t>(at);
  }
}

// The outputs whose (unclipped) window covers padded coordinate x + pad: [first, last).
__device__ inline int64_t first_window(int64_t xp, int64_t k, int64_t stride) {
  return xp < k ? 0 : (xp - k) / stride + 1;
}

template <typename T>
__global__ void max_pool_backward_kernel(PoolShape s, const T* diff_dst, const int32_t* argmax,
                                         T* diff_src, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const Coord x = decode(i, s.c, s.h, s.w, s.nhwc);
    const int64_t hp = x.h + s.ph, wp = x.w + s.pw;
    const int64_t ph0 = first_window(hp, s.kh, s.sh), ph1 = imin(hp / s.sh + 1, s.oh);
    const int64_t pw0 = first_window(wp, s.kw, s.sw), pw1 = imin(wp / s.sw + 1, s.ow);
    const int32_t me = static_cast<int32_t>(x.h * s.w + x.w);
    float g = 0.f;
    for (int64_t ph = ph0; ph < ph1; ++ph) {
      for (int64_t pw = pw0; pw < pw1; ++pw) {
        const int64_t o = offset(x.n, x.c, ph, pw, s.c, s.oh, s.ow, s.nhwc);
        if (argmax[o] == me) g += ld(diff_dst[o]);
      }
    }
    diff_src[i] = st<T>(g);
  }
}

// Caffe's average window: [h0, h1) x [w0, w1) clipped to the input, divided by its size
// clipped to the input plus padding.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  float size;
};
__device__ inline AvgWindow avg_window(const PoolShape& s, int64_t oh, int64_t ow) {
  int64_t h0 = oh * s.sh - s.ph, w0 = ow * s.sw - s.pw;
  int64_t h1 = imin(h0 + s.kh, s.h + s.ph), w1 = imin(w0 + s.kw, s.w + s.pw);
  AvgWindow win;
  win.size = static_cast<float>((h1 - h0) * (w1 - w0));
  win.h0 = imax(h0, 0);
  win.w0 = imax(w0, 0);
  win.h1 = imin(h1, s.h);
  win.w1 = imin(w1, s.w);
  return win;
}

template <typename T>
__global__ void avg_pool_forward_kernel(PoolShape s, const T* src, T* dst, int64_t count) {
  for (int64_t o = first_index(); o < count; o += grid_stride()) {
    const Coord p = decode(o, s.c, s.oh, s.ow, s.nhwc);
    const AvgWindow win = avg_window(s, p.h, p.w);
    float sum = 0.f;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w)
        sum += ld(src[offset(p.n, p.c, h, w, s.c, s.h, s.w, s.nhwc)]);
    dst[o] = st<T>(sum / win.size);
  }
}

template <typename T>
__global__ void avg_pool_backward_kernel(PoolShape s, const T* diff_dst, T* diff_src,
                                         int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const Coord x = decode(i, s.c, s.h, s.w, s.nhwc);
    const int64_t hp = x.h + s.ph, wp = x.w + s.pw;
    const int64_t ph0 = first_window(hp, s.kh, s.sh), ph1 = imin(hp / s.sh + 1, s.oh);
    const int64_t pw0 = first_window(wp, s.kw, s.sw), pw1 = imin(wp / s.sw + 1, s.ow);
    float g = 0.f;
    for (int64_t ph = ph0; ph < ph1; ++ph) {
      for (int64_t pw = pw0; pw < pw1; ++pw) {
        const AvgWindow win = avg_window(s, ph, pw);
        g += ld(diff_dst[offset(x.n, x.c, ph, pw, s.c, s.oh, s.ow, s.nhwc)]) / win.size;
      }
    }
    diff_src[i] = st<T>(g);
  }
}

template <typename T>
void max_pool_fwd(cudaStream_t stream, const PoolShape& s, const T* src, T* dst, int32_t* argmax) {
  const int64_t count = s.n * s.c * s.oh * s.ow;
  if (count <= 0) return;
  max_pool_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, src, dst, argmax, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void max_pool_bwd(cudaStream_t stream, const PoolShape& s, const T* diff_dst, const int32_t* argmax,
                  T* diff_src) {
  const int64_t count = s.n * s.c * s.h * s.w;
  if (count <= 0) return;
  max_pool_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, diff_dst, argmax,
                                                                       diff_src, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void avg_pool_fwd(cudaStream_t stream, const PoolShape& s, const T* src, T* dst) {
  const int64_t count = s.n * s.c * s.oh * s.ow;
  if (count <= 0) return;
  avg_pool_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, src, dst, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void avg_pool_bwd(cudaStream_t stream, const PoolShape& s, const T* diff_dst, T* diff_src) {
  const int64_t count = s.n * s.c * s.h * s.w;
  if (count <= 0) return;
  avg_pool_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, diff_dst, diff_src,
                                                                       count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

// ---- around the bf16 convolutions and inner products ---------------------------------------

__global__ void bias_relu_rows_to_bf16_kernel(const float* x, const float* bias, int64_t rows,
                                              int64_t cols, bool relu, uint16_t* out) {
  const int64_t count = rows * cols;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    float v = x[i];
    if (bias) v += bias[i % cols];
    if (relu) v = v > 0.f ? v : 0.f;
    out[i] = st<uint16_t>(v);
  }
}

__global__ void column_sums_bf16_kernel(const uint16_t* x, int64_t rows, int64_t cols, float* out) {
  for (int64_t c = first_index(); c < cols; c += grid_stride()) {
    float s = 0.f;
    for (int64_t r = 0; r < rows; ++r)
      s += ld(x[r * cols + c]);
    out[c] = s;
  }
}

__global__ void channel_bias_relu_bf16_kernel(ChannelShape s, uint16_t* x, const float* bias,
                                              bool relu, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const Coord p = decode(i, s.c, s.h, s.w, s.nhwc);
    float v = ld(x[i]);
    if (bias) v += bias[p.c];
    if (relu) v = v > 0.f ? v : 0.f;
    x[i] = st<uint16_t>(v);
  }
}

// One block per channel (grid-stride over channels), summed in double in a fixed order.
__global__ void channel_sums_bf16_kernel(ChannelShape s, const uint16_t* g, float* out) {
  __shared__ double shared[32];
  const int64_t hw = s.h * s.w, m = s.n * hw;
  for (int64_t c = blockIdx.x; c < s.c; c += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
      const int64_t n = j / hw, p = j - n * hw;
      sum += ld(g[s.nhwc ? (n * hw + p) * s.c + c : (n * s.c + c) * hw + p]);
    }
    // block sum through shared memory (warp shuffles, then the warps' partials)
    for (int off = 16; off > 0; off >>= 1)
      sum += __shfl_down_sync(0xffffffffu, sum, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = static_cast<int>((blockDim.x + 31) >> 5);
    __syncthreads();
    if (lane == 0) shared[warp] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      double t = 0;
      for (int w = 0; w < warps; ++w)
        t += shared[w];
      out[c] = static_cast<float>(t);
    }
  }
}

// ---- the batch, and gradients added up -----------------------------------------------------

template <typename T>
__global__ void normalize_bytes_kernel(const uint8_t* bytes, const float* table, int64_t c,
                                       int64_t hw, bool nhwc, T* dst, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t ch = nhwc ? i % c : (i / hw) % c;
    dst[i] = st<T>(table[ch * 256 + bytes[i]]);
  }
}

__global__ void add_bf16_kernel(uint16_t* y, const uint16_t* x, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    y[i] = st<uint16_t>(ld(y[i]) + ld(x[i]));
}

}  // namespace

// ---- launchers -----------------------------------------------------------------------------

void relu_forward(cudaStream_t stream, const float* src, float* dst, int64_t count) {
  relu_fwd(stream, src, dst, count);
}
void relu_forward(cudaStream_t stream, const uint16_t* src, uint16_t* dst, int64_t count) {
  relu_fwd(stream, src, dst, count);
}
void relu_backward(cudaStream_t stream, const float* dst, const float* diff_dst, float* diff_src,
                   int64_t count) {
  relu_bwd(stream, dst, diff_dst, diff_src, count);
}
void relu_backward(cudaStream_t stream, const uint16_t* dst, const uint16_t* diff_dst,
                   uint16_t* diff_src, int64_t count) {
  relu_bwd(stream, dst, diff_dst, diff_src, count);
}

void max_pool_forward(cudaStream_t stream, const PoolShape& s, const float* src, float* dst,
                      int32_t* argmax) {
  max_pool_fwd(stream, s, src, dst, argmax);
}
void max_pool_forward(cudaStream_t stream, const PoolShape& s, const uint16_t* src, uint16_t* dst,
                      int32_t* argmax) {
  max_pool_fwd(stream, s, src, dst, argmax);
}
void max_pool_backward(cudaStream_t stream, const PoolShape& s, const float* diff_dst,
                       const int32_t* argmax, float* diff_src) {
  max_pool_bwd(stream, s, diff_dst, argmax, diff_src);
}
void max_pool_backward(cudaStream_t stream, const PoolShape& s, const uint16_t* diff_dst,
                       const int32_t* argmax, uint16_t* diff_src) {
  max_pool_bwd(stream, s, diff_dst, argmax, diff_src);
}
void avg_pool_forward(cudaStream_t stream, const PoolShape& s, const float* src, float* dst) {
  avg_pool_fwd(stream, s, src, dst);
}
void avg_pool_forward(cudaStream_t stream, const PoolShape& s, const uint16_t* src, uint16_t* dst) {
  avg_pool_fwd(stream, s, src, dst);
}
void avg_pool_backward(cudaStream_t stream, const PoolShape& s, const float* diff_dst,
                       float* diff_src) {
  avg_pool_bwd(stream, s, diff_dst, diff_src);
}
void avg_pool_backward(cudaStream_t stream, const PoolShape& s, const uint16_t* diff_dst,
                       uint16_t* diff_src) {
  avg_pool_bwd(stream, s, diff_dst, diff_src);
}

void bias_relu_rows_to_bf16(cudaStream_t stream, const float* x, const float* bias, int64_t rows,
                            int64_t cols, bool relu, uint16_t* out) {
  if (rows <= 0 || cols <= 0) return;
  bias_relu_rows_to_bf16_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, bias, rows,
                                                                                  cols, relu, out);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void column_sums(cudaStream_t stream, const uint16_t* x, int64_t rows, int64_t cols, float* out) {
  if (cols <= 0) return;
  column_sums_bf16_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(x, rows, cols, out);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void channel_bias_relu(cudaStream_t stream, const ChannelShape& s, uint16_t* x, const float* bias,
                       bool relu) {
  const int64_t count = s.n * s.c * s.h * s.w;
  if (count <= 0 || (!bias && !relu)) return;
  channel_bias_relu_bf16_kernel<<<blocks_for(count), kThreads, 0, stream>>>(s, x, bias, relu,
                                                                            count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void channel_sums(cudaStream_t stream, const ChannelShape& s, const uint16_t* g, float* out) {
  if (s.c <= 0) return;
  const unsigned blocks = static_cast<unsigned>(s.c < kMaxBlocks ? s.c : kMaxBlocks);
  channel_sums_bf16_kernel<<<blocks, kThreads, 0, stream>>>(s, g, out);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void normalize_bytes(cudaStream_t stream, const uint8_t* bytes, const float* table, int64_t n,
                     int64_t c, int64_t hw, bool nhwc, bool bf16, void* dst) {
  const int64_t count = n * c * hw;
  if (count <= 0) return;
  if (bf16)
    normalize_bytes_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
        bytes, table, c, hw, nhwc, static_cast<uint16_t*>(dst), count);
  else
    normalize_bytes_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
        bytes, table, c, hw, nhwc, static_cast<float*>(dst), count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

void add_bf16(cudaStream_t stream, uint16_t* y, const uint16_t* x, int64_t count) {
  if (count <= 0) return;
  add_bf16_kernel<<<blocks_for(count), kThreads, 0, stream>>>(y, x, count);
  EASEL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace easel::cuda_kernels
