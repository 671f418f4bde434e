// Reference kernels: direct loops over the OpDesc, written to be read, one section per kind
// (batch norm in ref_batch_norm.cpp, add and concat in ref_join.cpp).
// Every element is reached through offset4(), so the same loops serve both layouts. Buffers an
// op keeps between forward and backward (argmax, LRN scale, dropout mask) are allocated at
// creation. The CPU device's list (devices/cpu/cpu_op_list.cpp) names each factory.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "devices/cpu/ref_ops.hpp"
#include "devices/dropout_hash.hpp"

namespace easel {

namespace {

// The gradient reaching the pre-activation value when ReLU is fused into dst.
inline float relu_masked(float diff, float dst, bool fused_relu) {
  return fused_relu && !(dst > 0.f) ? 0.f : diff;
}

// f(n, c, oh, ow) for every element of the dst shape o, in (n, c, oh, ow) order; the images
// in parallel (each on one thread) when parallel is set.
template <typename F>
void for_each_output(const Shape4& o, bool parallel, F f) {
#pragma omp parallel for if (parallel)
  for (int64_t n = 0; n < o.n; ++n)
    for (int64_t c = 0; c < o.c; ++c)
      for (int64_t oh = 0; oh < o.h; ++oh)
        for (int64_t ow = 0; ow < o.w; ++ow)
          f(n, c, oh, ow);
}

// The base of the reference kernels: their impl() is "ref".
class RefOp : public Op {
 public:
  std::string impl() const override { return "ref"; }

 protected:
  using Op::Op;
};

// ---------------------------------------------------------------------------------------------
// Convolution: weights {oc, ic/group, kh, kw}, bias {oc}; cross-correlation as in Caffe.
class RefConv final : public RefOp {
 public:
  explicit RefConv(const OpDesc& d) : RefOp(d), o_(dst_shape(d)) {}

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    const OpDesc& d = desc_;
    const float* w = weights[0];
    const float* bias = d.bias ? weights[1] : nullptr;
    for_each_output(o_, true, [&](int64_t n, int64_t oc, int64_t oh, int64_t ow) {
      float acc = bias ? bias[oc] : 0.f;
      for_taps(n, oc, oh, ow, [&](int64_t wi, int64_t si) { acc += w[wi] * src[si]; });
      if (d.fused_relu) acc = std::max(acc, 0.f);
      dst[offset4(o_, d.layout, n, oc, oh, ow)] = acc;
    });
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const int64_t icg = s.c / d.group;
    const float* w = weights[0];
    float* dw = diff_weights[0];
    float* db = d.bias ? diff_weights[1] : nullptr;
    std::fill(dw, dw + d.oc * icg * d.kh * d.kw, 0.f);
    if (db) std::fill(db, db + d.oc, 0.f);
    if (diff_src) std::fill(diff_src, diff_src + s.count(), 0.f);

    const auto grad = [&](int64_t n, int64_t oc, int64_t oh, int64_t ow) {
      const int64_t o = offset4(o_, d.layout, n, oc, oh, ow);
      return relu_masked(diff_dst[o], dst[o], d.fused_relu);
    };
    // Weights and bias gradients: a reduction over the batch, kept serial.
    for_each_output(o_, false, [&](int64_t n, int64_t oc, int64_t oh, int64_t ow) {
      const float g = grad(n, oc, oh, ow);
      if (db) db[oc] += g;
      for_taps(n, oc, oh, ow, [&](int64_t wi, int64_t si) { dw[wi] += g * src[si]; });
    });
    if (!diff_src) return;
    // Data gradient: scatter every output's gradient back through the window; images apart.
    for_each_output(o_, true, [&](int64_t n, int64_t oc, int64_t oh, int64_t ow) {
      const float g = grad(n, oc, oh, ow);
      for_taps(n, oc, oh, ow, [&](int64_t wi, int64_t si) { diff_src[si] += g * w[wi]; });
    });
  }

 private:
  // f(weight index, src offset) for every tap of output (n, oc, oh, ow) that lands inside the
  // input (padding contributes nothing), in (ic, y, x) order.
  template <typename F>
  void for_taps(int64_t n, int64_t oc, int64_t oh, int64_t ow, F f) const {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const int64_t icg = s.c / d.group, ocg = d.oc / d.group;
    const int64_t ic0 = oc / ocg * icg;  // first input channel of this group
    for (int64_t ic = 0; ic < icg; ++ic) {
      for (int64_t y = 0; y < d.kh; ++y) {
        const int64_t ih = oh * d.stride_h - d.pad_h + y;
        if (ih < 0 || ih >= s.h) continue;
        for (int64_t x = 0; x < d.kw; ++x) {
          const int64_t iw = ow * d.stride_w - d.pad_w + x;
          if (iw < 0 || iw >= s.w) continue;
          f(((oc * icg + ic) * d.kh + y) * d.kw + x, offset4(s, d.layout, n, ic0 + ic, ih, iw));
        }
      }
    }
  }

  Shape4 o_;  // dst shape
};

// ---------------------------------------------------------------------------------------------
// Max pooling, Caffe semantics: the window is clipped to the input (padding never wins), the
// first maximum in scan order (h, then w) is the one remembered and the one that gets the
// gradient.
class RefMaxPool final : public RefOp {
 public:
  explicit RefMaxPool(const OpDesc& d)
      : RefOp(d), o_(dst_shape(d)), argmax_(static_cast<size_t>(o_.count()), -1) {}

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    for_each_output(o_, true, [&](int64_t n, int64_t c, int64_t oh, int64_t ow) {
      const int64_t h0 = std::max<int64_t>(oh * d.stride_h - d.pad_h, 0);
      const int64_t h1 = std::min(oh * d.stride_h - d.pad_h + d.kh, s.h);
      const int64_t w0 = std::max<int64_t>(ow * d.stride_w - d.pad_w, 0);
      const int64_t w1 = std::min(ow * d.stride_w - d.pad_w + d.kw, s.w);
      float best = -FLT_MAX;
      int64_t at = -1;
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) {
          const int64_t i = offset4(s, d.layout, n, c, h, w);
          if (at < 0 || src[i] > best) {
            best = src[i];
            at = i;
          }
        }
      }
      const int64_t o = offset4(o_, d.layout, n, c, oh, ow);
      dst[o] = best;
      argmax_[static_cast<size_t>(o)] = at;
    });
  }

  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (!diff_src) return;
    std::fill(diff_src, diff_src + desc_.src.count(), 0.f);
    // Windows overlap when stride < kernel, so this scatter stays serial.
    for (int64_t o = 0; o < o_.count(); ++o)
      diff_src[argmax_[static_cast<size_t>(o)]] += diff_dst[o];
  }

 private:
  Shape4 o_;
  std::vector<int64_t> argmax_;  // per dst element: the src offset that won
};

// ---------------------------------------------------------------------------------------------
// Average pooling, Caffe semantics: the divisor is the window clipped to input + padding, so
// padded zeros count, except where the ceil-mode remainder runs past the padding.
class RefAvgPool final : public RefOp {
 public:
  explicit RefAvgPool(const OpDesc& d) : RefOp(d), o_(dst_shape(d)) {}

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    for_each_output(o_, true, [&](int64_t n, int64_t c, int64_t oh, int64_t ow) {
      const Window win = window(oh, ow);
      float sum = 0.f;
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w)
          sum += src[offset4(s, d.layout, n, c, h, w)];
      dst[offset4(o_, d.layout, n, c, oh, ow)] = sum / win.size;
    });
  }

  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (!diff_src) return;
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    std::fill(diff_src, diff_src + s.count(), 0.f);
    for_each_output(o_, true, [&](int64_t n, int64_t c, int64_t oh, int64_t ow) {
      const Window win = window(oh, ow);
      const float g = diff_dst[offset4(o_, d.layout, n, c, oh, ow)] / win.size;
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w)
          diff_src[offset4(s, d.layout, n, c, h, w)] += g;
    });
  }

 private:
  struct Window {
    int64_t h0, h1, w0, w1;  // clipped to the input
    float size;              // clipped to the input plus padding
  };
  Window window(int64_t oh, int64_t ow) const {
    const OpDesc& d = desc_;
    int64_t h0 = oh * d.stride_h - d.pad_h, w0 = ow * d.stride_w - d.pad_w;
    int64_t h1 = std::min(h0 + d.kh, d.src.h + d.pad_h);
    int64_t w1 = std::min(w0 + d.kw, d.src.w + d.pad_w);
    const float size = static_cast<float>((h1 - h0) * (w1 - w0));
    h0 = std::max<int64_t>(h0, 0);
    w0 = std::max<int64_t>(w0, 0);
    h1 = std::min(h1, d.src.h);
    w1 = std::min(w1, d.src.w);
    return {h0, h1, w0, w1, size};
  }
  Shape4 o_;
};

// ---------------------------------------------------------------------------------------------
// Inner product: weights {oc, K} with K = C*H*W; each image's contiguous block of src is its
// input vector, in the layout's own order. dst is [N, oc, 1, 1], the same in both layouts.
class RefInnerProduct final : public RefOp {
 public:
  explicit RefInnerProduct(const OpDesc& d) : RefOp(d) {}

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    const OpDesc& d = desc_;
    const int64_t k = d.src.per_image();
    const float* w = weights[0];
    const float* bias = d.bias ? weights[1] : nullptr;
#pragma omp parallel for
    for (int64_t n = 0; n < d.src.n; ++n) {
      for (int64_t o = 0; o < d.oc; ++o) {
        float acc = bias ? bias[o] : 0.f;
        for (int64_t i = 0; i < k; ++i)
          acc += w[o * k + i] * src[n * k + i];
        dst[n * d.oc + o] = d.fused_relu ? std::max(acc, 0.f) : acc;
      }
    }
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const OpDesc& d = desc_;
    const int64_t k = d.src.per_image();
    const float* w = weights[0];
    float* dw = diff_weights[0];
    float* db = d.bias ? diff_weights[1] : nullptr;
    // diff_weights[o, i] = sum_n g[n, o] * src[n, i]; diff_bias[o] = sum_n g[n, o]
#pragma omp parallel for
    for (int64_t o = 0; o < d.oc; ++o) {
      float* row = dw + o * k;
      std::fill(row, row + k, 0.f);
      float bsum = 0.f;
      for (int64_t n = 0; n < d.src.n; ++n) {
        const float g = relu_masked(diff_dst[n * d.oc + o], dst[n * d.oc + o], d.fused_relu);
        bsum += g;
        for (int64_t i = 0; i < k; ++i)
          row[i] += g * src[n * k + i];
      }
      if (db) db[o] = bsum;
    }
    if (!diff_src) return;
      // diff_src[n, i] = sum_o g[n, o] * w[o, i]
#pragma omp parallel for
    for (int64_t n = 0; n < d.src.n; ++n) {
      float* ds = diff_src + n * k;
      std::fill(ds, ds + k, 0.f);
      for (int64_t o = 0; o < d.oc; ++o) {
        const float g = relu_masked(diff_dst[n * d.oc + o], dst[n * d.oc + o], d.fused_relu);
        for (int64_t i = 0; i < k; ++i)
          ds[i] += g * w[o * k + i];
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// ReLU (negative slope 0). Backward tests dst > 0, which equals Caffe's src > 0 and also works
// when the op runs in place.
class RefRelu final : public RefOp {
 public:
  explicit RefRelu(const OpDesc& d) : RefOp(d) {}

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    const int64_t count = desc_.src.count();
    for (int64_t i = 0; i < count; ++i)
      dst[i] = src[i] > 0.f ? src[i] : 0.f;
  }
  void backward(const float* /*src*/, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (!diff_src) return;
    const int64_t count = desc_.src.count();
    for (int64_t i = 0; i < count; ++i)
      diff_src[i] = dst[i] > 0.f ? diff_dst[i] : 0.f;
  }
};

// ---------------------------------------------------------------------------------------------
// LRN, Caffe's definitions. Each element's window W(i): across channels, the local_size channels
// centred on its own (at its h, w); within channel, the local_size x local_size positions
// centred on its own (in its channel); both clipped to the tensor (zero padding) and symmetric
// (j in W(i) exactly when i in W(j)). With m = local_size (across) or local_size^2 (within):
//   scale[i] = k + alpha/m * sum_{j in W(i)} src[j]^2,  dst[i] = src[i] * scale[i]^-beta
//   diff_src[i] = diff_dst[i] * scale[i]^-beta
//               - 2 alpha beta / m * src[i] * sum_{j in W(i)} diff_dst[j] dst[j] / scale[j]
class RefLrn final : public RefOp {
 public:
  explicit RefLrn(const OpDesc& d) : RefOp(d), scale_(static_cast<size_t>(d.src.count())) {}

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const float alpha_m = d.alpha / summands();
#pragma omp parallel for
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t h = 0; h < s.h; ++h) {
        for (int64_t w = 0; w < s.w; ++w) {
          for (int64_t c = 0; c < s.c; ++c) {
            float sum = 0.f;
            for_window(n, c, h, w, [&](int64_t j) { sum += src[j] * src[j]; });
            const int64_t i = offset4(s, d.layout, n, c, h, w);
            const float scale = d.k + alpha_m * sum;
            scale_[static_cast<size_t>(i)] = scale;
            dst[i] = src[i] * std::pow(scale, -d.beta);
          }
        }
      }
    }
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (!diff_src) return;
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const float ratio = 2.f * d.alpha * d.beta / summands();
#pragma omp parallel for
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t h = 0; h < s.h; ++h) {
        for (int64_t w = 0; w < s.w; ++w) {
          for (int64_t c = 0; c < s.c; ++c) {
            float accum = 0.f;
            for_window(n, c, h, w, [&](int64_t j) {
              accum += diff_dst[j] * dst[j] / scale_[static_cast<size_t>(j)];
            });
            const int64_t i = offset4(s, d.layout, n, c, h, w);
            diff_src[i] = diff_dst[i] * std::pow(scale_[static_cast<size_t>(i)], -d.beta) -
                          ratio * src[i] * accum;
          }
        }
      }
    }
  }

 private:
  float summands() const {
    const int64_t m = desc_.local_size;
    return static_cast<float>(desc_.lrn_within_channel ? m * m : m);
  }
  // f(offset of j) for every j in the window of element (n, c, h, w).
  template <typename F>
  void for_window(int64_t n, int64_t c, int64_t h, int64_t w, F f) const {
    const Shape4& s = desc_.src;
    const int64_t half = (desc_.local_size - 1) / 2;
    if (!desc_.lrn_within_channel) {
      for (int64_t j = std::max<int64_t>(c - half, 0); j <= std::min(c + half, s.c - 1); ++j)
        f(offset4(s, desc_.layout, n, j, h, w));
      return;
    }
    for (int64_t y = std::max<int64_t>(h - half, 0); y <= std::min(h + half, s.h - 1); ++y)
      for (int64_t x = std::max<int64_t>(w - half, 0); x <= std::min(w + half, s.w - 1); ++x)
        f(offset4(s, desc_.layout, n, c, y, x));
  }

  std::vector<float> scale_;  // per src element, kept from forward for backward
};

// ---------------------------------------------------------------------------------------------
// Dropout: in training, keep each element with probability 1-ratio and scale it by 1/(1-ratio);
// identity otherwise. The mask is drawn in logical (n, c, h, w) order, so both layouts drop the
// same elements; the generator is seeded once by desc.seed and advances every training forward,
// and set_draw (a group's stream and step, from the trainer) seeds it from the pair.
class RefDropout final : public RefOp {
 public:
  explicit RefDropout(const OpDesc& d)
      : RefOp(d), rng_(d.seed), mask_(static_cast<size_t>(d.src.count()), 1.f) {}

  void set_draw(uint64_t stream, uint64_t n) override {
    rng_.reseed(dropout_hash::key(dropout_hash::stream_seed(desc_.seed, stream), n));
  }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool training) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    last_training_ = training;
    if (!training) {
      if (dst != src) std::memcpy(dst, src, static_cast<size_t>(s.count()) * sizeof(float));
      return;
    }
    const float scale = 1.f / (1.f - d.ratio);
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t h = 0; h < s.h; ++h)
          for (int64_t w = 0; w < s.w; ++w) {
            const int64_t i = offset4(s, d.layout, n, c, h, w);
            const float m = rng_.uniform() >= d.ratio ? scale : 0.f;
            mask_[static_cast<size_t>(i)] = m;
            dst[i] = src[i] * m;
          }
  }

  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (!diff_src) return;
    const int64_t count = desc_.src.count();
    if (!last_training_) {
      if (diff_src != diff_dst)
        std::memcpy(diff_src, diff_dst, static_cast<size_t>(count) * sizeof(float));
      return;
    }
    for (int64_t i = 0; i < count; ++i)
      diff_src[i] = diff_dst[i] * mask_[static_cast<size_t>(i)];
  }

 private:
  Rng rng_;
  std::vector<float> mask_;  // 0 or 1/(1-ratio) per element, from the last training forward
  bool last_training_ = false;
};

// ---------------------------------------------------------------------------------------------
// Global average pooling: dst[n, c] = the mean of src[n, c, :, :]; each src element gets
// diff_dst[n, c] / (H*W). dst {N, C, 1, 1} has one memory order in both layouts.
class RefGlobalAvgPool final : public RefOp {
 public:
  explicit RefGlobalAvgPool(const OpDesc& d) : RefOp(d) {}

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const float area = static_cast<float>(s.h * s.w);
#pragma omp parallel for
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t c = 0; c < s.c; ++c) {
        float sum = 0.f;
        for (int64_t h = 0; h < s.h; ++h)
          for (int64_t w = 0; w < s.w; ++w)
            sum += src[offset4(s, d.layout, n, c, h, w)];
        dst[n * s.c + c] = sum / area;
      }
    }
  }

  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (!diff_src) return;
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const float area = static_cast<float>(s.h * s.w);
#pragma omp parallel for
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t h = 0; h < s.h; ++h)
          for (int64_t w = 0; w < s.w; ++w)
            diff_src[offset4(s, d.layout, n, c, h, w)] = diff_dst[n * s.c + c] / area;
  }
};

}  // namespace

// The factories the CPU device's list names (devices/cpu/cpu_op_list.cpp), one per kind.
Result<std::unique_ptr<Op>> make_ref_conv(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefConv(d));
}
Result<std::unique_ptr<Op>> make_ref_max_pool(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefMaxPool(d));
}
Result<std::unique_ptr<Op>> make_ref_avg_pool(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefAvgPool(d));
}
Result<std::unique_ptr<Op>> make_ref_inner_product(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefInnerProduct(d));
}
Result<std::unique_ptr<Op>> make_ref_relu(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefRelu(d));
}
Result<std::unique_ptr<Op>> make_ref_lrn(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefLrn(d));
}
Result<std::unique_ptr<Op>> make_ref_dropout(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefDropout(d));
}
Result<std::unique_ptr<Op>> make_ref_global_avg_pool(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefGlobalAvgPool(d));
}

}  // namespace easel
