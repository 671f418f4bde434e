// The update rules of engine/span_ops.hpp as CUDA kernels over flat arenas in device memory
// (ArenaKernels for the CUDA device). Every kernel is launched on the device's stream and
// returns at once; Device::synchronize() waits.
//
// Rounding: each rule evaluates the same expression tree as its span op, element by element,
// with explicitly rounded operations (__fmul_rn, __fadd_rn, __fsub_rn), which nvcc never
// contracts into FMAs. So the GPU computes exactly the expression as written in span_ops.cpp;
// the CPU may differ from it by an ulp or two where g++ contracts a*b+c into an FMA
// (-ffp-contract=fast is its C++ default). alpha == 0 takes the plain rule, as on the CPU, so
// that an elastic step with alpha 0 is bit-identical to the plain step on the same device.
//
// Segments: ONE launch covers up to kMaxSegs segments, passed by value in a small table
// (a __grid_constant__ parameter, so that indexing it never copies it to local memory). Every
// segment is cut into tiles of kTile elements; block b finds its segment by a binary search
// over the tiles' prefix sums (uniform across the block), then each thread updates kItems
// elements of its tile. Padding between segments is never touched. Why not one launch per
// segment: nets such as ResNet or GoogLeNet have 100-300 parameter tensors, many of them
// biases of a few hundred floats, and one launch each would cost more host time (~3 us per
// launch) than the whole memory-bound pass over a small arena; one launch per 128 segments
// keeps the step at one or two launches whatever the net. The element-wise ops (axpy, scale,
// elastic_centre_sum) use the same kernel over one segment [0, n); copy is a cudaMemcpyAsync.
#include <climits>
#include <cstdint>
#include <memory>
#include <span>

#include "devices/cuda/cuda_common.hpp"

namespace easel {

namespace {

constexpr int kThreads = 256;                          // threads per block
constexpr int kItems = 4;                              // elements per thread in a tile
constexpr int64_t kTile = int64_t{kThreads} * kItems;  // elements per block
constexpr int kMaxSegs = 128;                          // segments per launch

// The segments of one launch, with their effective multipliers (lr*lr_mult, wd*decay_mult,
// computed on the host in float exactly as span_ops.cpp's range_of does). Only segments with
// count > 0 are listed, so first_tile is strictly increasing.
struct SegTable {
  int count = 0;                      // segments listed
  int first_tile[kMaxSegs + 1] = {};  // first_tile[s]: the first block of segment s; [count]: total
  int64_t begin[kMaxSegs] = {};       // arena offsets, floats
  int64_t end[kMaxSegs] = {};
  float lr[kMaxSegs] = {};
  float wd[kMaxSegs] = {};
};
// Kernel parameters are limited to 4 KiB on older toolkits (32 KiB since CUDA 12.1); stay
// well under the old limit, leaving room for a rule's pointers and scalars.
static_assert(sizeof(SegTable) <= 3840, "segment table too large for a kernel parameter");

// Explicitly rounded arithmetic (never contracted into FMAs).
__device__ __forceinline__ float mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ float add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ float sub(float a, float b) {
  return __fsub_rn(a, b);
}

// The per-element rules. A tile first loads every input of its kItems elements (load), then
// computes and stores them (store): the loads of a thread are all in flight at once, which a
// single load-compute-store per element would forbid (w, g, v may alias as far as the compiler
// knows). store(i, x, lr, wd) gets the segment's effective lr and wd; each body is the loop
// body of its span op in engine/span_ops.cpp, operation for operation.

// y <- y + a*x (lr, wd unused)
struct AxpyRule {
  float* y;
  const float* x;
  float a;
  struct In {
    float y, x;
  };
  __device__ In load(int64_t i) const { return {y[i], x[i]}; }
  __device__ void store(int64_t i, In e, float, float) const { y[i] = add(e.y, mul(a, e.x)); }
};

// y <- a*y (lr, wd unused)
struct ScaleRule {
  float* y;
  float a;
  struct In {
    float y;
  };
  __device__ In load(int64_t i) const { return {y[i]}; }
  __device__ void store(int64_t i, In e, float, float) const { y[i] = mul(e.y, a); }
};

// centre <- centre + alpha*(sum_w - p*centre) (lr, wd unused)
struct CentreSumRule {
  float* centre;
  const float* sum_w;
  float alpha, pf;
  struct In {
    float c, s;
  };
  __device__ In load(int64_t i) const { return {centre[i], sum_w[i]}; }
  __device__ void store(int64_t i, In e, float, float) const {
    centre[i] = add(e.c, mul(alpha, sub(e.s, mul(pf, e.c))));
  }
};

// w <- w - lr*(g + wd*w)
struct SgdRule {
  float* w;
  const float* g;
  struct In {
    float w, g;
  };
  __device__ In load(int64_t i) const { return {w[i], g[i]}; }
  __device__ void store(int64_t i, In e, float lr, float wd) const {
    w[i] = sub(e.w, mul(lr, add(e.g, mul(wd, e.w))));
  }
};

// v' <- mu*v - lr*(g + wd*w); v <- v'; w <- w + v' (heavy ball) or w + (1+mu)*v' - mu*v
// (kNesterov)
template <bool kNesterov>
struct MomentumRule {
  float* w;
  const float* g;
  float* v;
  float mu;
  struct In {
    float w, g, v;
  };
  __device__ In load(int64_t i) const { return {w[i], g[i], v[i]}; }
  __device__ void store(int64_t i, In e, float lr, float wd) const {
    const float vn = sub(mul(mu, e.v), mul(lr, add(e.g, mul(wd, e.w))));
    v[i] = vn;
    if constexpr (kNesterov)
      w[i] = sub(add(e.w, mul(add(1.f, mu), vn)), mul(mu, e.v));
    else
      w[i] = add(e.w, vn);
  }
};

// u <- w - lr*(g + wd*w); w <- u - alpha*(w_old - centre)
struct ElasticSgdRule {
  float* w;
  const float* g;
  const float* centre;
  float alpha;
  struct In {
    float w, g, c;
  };
  __device__ In load(int64_t i) const { return {w[i], g[i], centre[i]}; }
  __device__ void store(int64_t i, In e, float lr, float wd) const {
    const float u = sub(e.w, mul(lr, add(e.g, mul(wd, e.w))));
    w[i] = sub(u, mul(alpha, sub(e.w, e.c)));
  }
};

// v' <- d*v - lr*(g + wd*w); u <- w + v' (heavy ball) or w + (1+d)*v' - d*v (kNesterov);
// w <- u - alpha*(w_old - centre); v <- v'
template <bool kNesterov>
struct ElasticMomentumRule {
  float* w;
  const float* g;
  float* v;
  const float* centre;
  float delta, alpha;
  struct In {
    float w, g, v, c;
  };
  __device__ In load(int64_t i) const { return {w[i], g[i], v[i], centre[i]}; }
  __device__ void store(int64_t i, In e, float lr, float wd) const {
    const float vn = sub(mul(delta, e.v), mul(lr, add(e.g, mul(wd, e.w))));
    v[i] = vn;
    float u;
    if constexpr (kNesterov)
      u = sub(add(e.w, mul(add(1.f, delta), vn)), mul(delta, e.v));
    else
      u = add(e.w, vn);
    w[i] = sub(u, mul(alpha, sub(e.w, e.c)));
  }
};

// Block b updates tile (b - first_tile[s]) of segment s, where first_tile[s] <= b <
// first_tile[s+1]: kItems elements per thread, kThreads apart (coalesced). Grid:
// first_tile[count] blocks of kThreads.
template <class Rule>
__global__ void __launch_bounds__(kThreads)
    segment_kernel(const __grid_constant__ SegTable t, const Rule rule) {
  const int tile = static_cast<int>(blockIdx.x);
  int lo = 0, hi = t.count - 1;  // the last s with first_tile[s] <= tile
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (t.first_tile[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int64_t base = t.begin[lo] + static_cast<int64_t>(tile - t.first_tile[lo]) * kTile +
                       static_cast<int64_t>(threadIdx.x);
  const int64_t end = t.end[lo];
  const float lr = t.lr[lo], wd = t.wd[lo];
  typename Rule::In in[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t i = base + k * kThreads;
    if (i < end) in[k] = rule.load(i);
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t i = base + k * kThreads;
    if (i < end) rule.store(i, in[k], lr, wd);
  }
}

class CudaArenaKernels final : public ArenaKernels {
 public:
  explicit CudaArenaKernels(CudaContext& ctx) : ctx_(ctx) {}

  void copy(float* y, const float* x, int64_t n) override {
    EASEL_CHECK(n >= 0);
    if (n == 0 || y == x) return;
    EASEL_CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * sizeof(float),
                                     cudaMemcpyDefault, ctx_.stream));
  }

  void axpy(float* y, float a, const float* x, int64_t n) override {
    launch_range(n, AxpyRule{y, x, a});
  }

  void scale(float* y, float a, int64_t n) override { launch_range(n, ScaleRule{y, a}); }

  void sgd_step(std::span<const Segment> segs, float* w, const float* g, float lr,
                float wd) override {
    launch_segments(segs, lr, wd, SgdRule{w, g});
  }

  void momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    launch_segments(segs, lr, wd, MomentumRule<false>{w, g, v, mu});
  }

  void nesterov_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    launch_segments(segs, lr, wd, MomentumRule<true>{w, g, v, mu});
  }

  void elastic_sgd_step(std::span<const Segment> segs, float* w, const float* g,
                        const float* centre, float lr, float wd, float alpha) override {
    if (alpha == 0.f) {
      sgd_step(segs, w, g, lr, wd);
      return;
    }
    launch_segments(segs, lr, wd, ElasticSgdRule{w, g, centre, alpha});
  }

  void elastic_momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v,
                             const float* centre, float lr, float delta, float wd, float alpha,
                             bool nesterov) override {
    if (alpha == 0.f) {
      if (nesterov) {
        nesterov_step(segs, w, g, v, lr, delta, wd);
      } else {
        momentum_step(segs, w, g, v, lr, delta, wd);
      }
      return;
    }
    if (nesterov) {
      launch_segments(segs, lr, wd, ElasticMomentumRule<true>{w, g, v, centre, delta, alpha});
    } else {
      launch_segments(segs, lr, wd, ElasticMomentumRule<false>{w, g, v, centre, delta, alpha});
    }
  }

  void elastic_centre_sum(float* centre, const float* sum_w, float alpha, int p,
                          int64_t n) override {
    if (alpha == 0.f) return;  // as span_ops.cpp: centre stays bit-identical
    launch_range(n, CentreSumRule{centre, sum_w, alpha, static_cast<float>(p)});
  }

 private:
  // One launch per kMaxSegs segments (see the header comment); segments with count 0 are
  // skipped, and nothing is launched when no segment has elements.
  template <class Rule>
  void launch_segments(std::span<const Segment> segs, float lr, float wd, const Rule& rule) {
    SegTable t;
    int tiles = 0;
    for (const Segment& s : segs) {
      EASEL_CHECK(s.offset >= 0 && s.count >= 0);
      if (s.count == 0) continue;
      const int64_t seg_tiles = (s.count + kTile - 1) / kTile;
      EASEL_CHECK_MSG(seg_tiles < INT_MAX, "arena segment too large for one launch");
      if (t.count == kMaxSegs || seg_tiles > INT_MAX - tiles) {
        launch(t, tiles, rule);
        t = SegTable{};
        tiles = 0;
      }
      t.first_tile[t.count] = tiles;
      t.begin[t.count] = s.offset;
      t.end[t.count] = s.offset + s.count;
      t.lr[t.count] = lr * s.lr_mult;  // as range_of() in engine/span_ops.cpp
      t.wd[t.count] = wd * s.decay_mult;
      ++t.count;
      tiles += static_cast<int>(seg_tiles);
    }
    launch(t, tiles, rule);
  }

  // The element-wise ops: one segment [0, n) (lr and wd unused).
  template <class Rule>
  void launch_range(int64_t n, const Rule& rule) {
    EASEL_CHECK(n >= 0);
    Segment whole;  // offset 0, multipliers 1
    whole.count = n;
    launch_segments(std::span<const Segment>(&whole, 1), 1.f, 0.f, rule);
  }

  template <class Rule>
  void launch(SegTable& t, int tiles, const Rule& rule) {
    if (t.count == 0) return;
    t.first_tile[t.count] = tiles;
    segment_kernel<Rule><<<static_cast<unsigned>(tiles), kThreads, 0, ctx_.stream>>>(t, rule);
    EASEL_CUDA_CHECK(cudaGetLastError());
  }

  CudaContext& ctx_;
};

}  // namespace

std::unique_ptr<ArenaKernels> make_cuda_arena_kernels(CudaContext& ctx) {
  return std::make_unique<CudaArenaKernels>(ctx);
}

}  // namespace easel
