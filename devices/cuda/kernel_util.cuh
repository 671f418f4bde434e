// What easel's CUDA kernel files (op_kernels.cu, act_kernels.cu) share: grid-stride loops over
// int64 indices, the coordinates of a dense [N, C, H, W] tensor in either layout, and the
// loads and stores of an activation element of either type (float, or bf16 as its uint16_t
// bits: widened exactly, stored rounded to nearest even). For .cu files only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace easel::cuda_kernels::util {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

inline unsigned blocks_for(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

__device__ inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_stride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}
__device__ inline int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}
__device__ inline int64_t imax(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// Logical coordinates of the element at memory index i of a dense [N, C, H, W] tensor.
struct Coord {
  int64_t n, c, h, w;
};
__device__ inline Coord decode(int64_t i, int64_t C, int64_t H, int64_t W, bool nhwc) {
  Coord x;
  if (nhwc) {
    x.c = i % C;
    i /= C;
    x.w = i % W;
    i /= W;
    x.h = i % H;
    x.n = i / H;
  } else {
    x.w = i % W;
    i /= W;
    x.h = i % H;
    i /= H;
    x.c = i % C;
    x.n = i / C;
  }
  return x;
}
__device__ inline int64_t offset(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H,
                                 int64_t W, bool nhwc) {
  return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

// An activation element as f32 (bf16: exact), and f32 stored as T (bf16: nearest even).
__device__ inline float ld(float v) {
  return v;
}
__device__ inline float ld(uint16_t v) {
  return __uint_as_float(static_cast<uint32_t>(v) << 16);
}
template <typename T>
__device__ inline T st(float v);
template <>
__device__ inline float st<float>(float v) {
  return v;
}
template <>
__device__ inline uint16_t st<uint16_t>(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

}  // namespace easel::cuda_kernels::util
