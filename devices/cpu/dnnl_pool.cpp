// oneDNN pooling (max, average, global average) and the own max-pooling backward (conventions:
// devices/cpu/dnnl_common.hpp).
#include "devices/cpu/dnnl_common.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace easel::dnnl_detail {

namespace {

// What the pooling ops share: their backward primitive, bound at init.
class PoolingOp : public FwdBwdOp {
 protected:
  using FwdBwdOp::FwdBwdOp;
  // bwd_ from bpd on diff_dst_ and diff_src_ (made by the caller), then the impl and the
  // scratchpad.
  void finish_backward(const dnnl::pooling_forward::primitive_desc& fpd,
                       const dnnl::pooling_backward::primitive_desc& bpd) {
    bwd_ = make_step<dnnl::pooling_backward>(
        bpd, {{DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    finish(std::string(fpd.impl_info_str()) + "/bwd=" + bpd.impl_info_str());
  }
};

// Max and average pooling with Caffe's ceil-mode output size, expressed as extra padding on the
// bottom/right; in floor mode (ceil_mode false) the bottom/right padding is the top/left one
// (oneDNN's output size rounds down too, and no window reaches past in + pad). Max pooling:
// oneDNN's forward_inference kernel, and an own backward that sends each gradient to the first
// position (row-major in the window) where src equals dst, the argmax Caffe picks. Measured on this
// machine's kind (oneDNN 2.6.3, one core, LeNet pool1 nhwc): forward_training with its
// workspace 1.17 ms against forward_inference 0.30 ms, and oneDNN's backward 1.17 ms; the own
// backward is a single pass over src. Average pooling: Caffe divides by the window clipped to
// [-pad, in + pad). That is oneDNN's exclude_padding when pad is 0, and its include_padding when no
// window reaches past in + pad (the ceil-mode extra padding is at most pad); other shapes are
// refused (the reference runs).
class PoolOp final : public PoolingOp {
 public:
  explicit PoolOp(const OpDesc& d) : PoolingOp(d) {}

  Status init() {
    const OpDesc& d = desc_;
    const Shape4 o = dst_shape(d);
    const memory::desc src_md = act_md(d.src, d.layout), dst_md = act_md(o, d.layout);
    const int64_t pr_h = d.ceil_mode ? (o.h - 1) * d.stride_h + d.kh - d.src.h - d.pad_h : d.pad_h;
    const int64_t pr_w = d.ceil_mode ? (o.w - 1) * d.stride_w + d.kw - d.src.w - d.pad_w : d.pad_w;
    if (pr_h < 0 || pr_w < 0)
      return unavailable(name() + ": ceil-mode output needs negative bottom/right padding");
    const Dims strides{d.stride_h, d.stride_w}, kernel{d.kh, d.kw}, pad_l{d.pad_h, d.pad_w},
        pad_r{pr_h, pr_w};

    algorithm alg = algorithm::pooling_max;
    if (d.kind == OpKind::avg_pool) {
      if (d.pad_h == 0 && d.pad_w == 0) {
        alg = algorithm::pooling_avg_exclude_padding;
      } else if (pr_h <= d.pad_h && pr_w <= d.pad_w) {
        alg = algorithm::pooling_avg_include_padding;
      } else {
        return unavailable(name() + ": the last window reaches past input + pad (ceil mode, " +
                           "extra padding " + std::to_string(pr_h) + "x" + std::to_string(pr_w) +
                           "); Caffe's divisor there differs from oneDNN's include_padding");
      }
    }
    const prop_kind prop =
        alg == algorithm::pooling_max ? prop_kind::forward_inference : prop_kind::forward_training;
    dnnl::pooling_forward::primitive_desc fpd(
        {prop, alg, src_md, dst_md, strides, kernel, pad_l, pad_r}, base_attr(), cpu_engine(),
        true);
    if (std::string why = why_not(fpd, name() + ": forward"); !why.empty()) return unavailable(why);
    src_ = user_mem(src_md);
    dst_ = user_mem(dst_md);
    fwd_ = make_step<dnnl::pooling_forward>(fpd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    if (alg == algorithm::pooling_max) {
      tiled_ = pick_tiled(d);
      finish(std::string(fpd.impl_info_str()) + "/bwd=own:argmax" + (tiled_ ? "-tiled" : ""));
      return {};
    }
    dnnl::pooling_backward::primitive_desc bpd({alg, src_md, dst_md, strides, kernel, pad_l, pad_r},
                                               base_attr(), cpu_engine(), fpd, true);
    if (std::string why = why_not(bpd, name() + ": backward"); !why.empty())
      return unavailable(why);

    diff_dst_ = user_mem(dst_md);
    diff_src_ = user_mem(src_md);
    finish_backward(fpd, bpd);
    return {};
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    if (diff_src == nullptr) return;
    if (desc_.kind == OpKind::max_pool) {
      max_backward(src, dst, diff_dst, diff_src);
      return;
    }
    run_backward(diff_dst, diff_src);
  }

 private:
  // diff_src <- 0, then diff_src[first argmax of each window] += diff_dst. Branch-free: in
  // nhwc the channels of one window go as a vector, in nchw one window at a time.
  void max_backward(const float* src, const float* dst, const float* diff_dst,
                    float* diff_src) const {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const Shape4 o = dst_shape(d);
    const int64_t in_img = s.per_image(), out_img = o.per_image();
    if (tiled_) {
      const bool covered = o.h * d.kh == s.h && o.w * d.kw == s.w;
#pragma omp parallel for if (s.n > 1)
      for (int64_t n = 0; n < s.n; ++n) {
        float* dx = diff_src + n * in_img;
        if (!covered) std::fill(dx, dx + in_img, 0.f);
        tiled_(src + n * in_img, dst + n * out_img, diff_dst + n * out_img, dx, s.c, s.w, o.h, o.w);
      }
      return;
    }
#pragma omp parallel for
    for (int64_t n = 0; n < s.n; ++n) {
      const float* x = src + n * in_img;
      const float* y = dst + n * out_img;
      const float* dy = diff_dst + n * out_img;
      float* dx = diff_src + n * in_img;
      std::fill(dx, dx + in_img, 0.f);
      for (int64_t a = 0; a < (d.layout == Layout::nhwc ? 1 : s.c); ++a) {
        for (int64_t oh = 0; oh < o.h; ++oh) {
          const int64_t h0 = oh * d.stride_h - d.pad_h;
          const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + d.kh, s.h);
          for (int64_t ow = 0; ow < o.w; ++ow) {
            const int64_t w0 = ow * d.stride_w - d.pad_w;
            const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + d.kw, s.w);
            if (d.layout == Layout::nhwc) {
              window_nhwc(x, y + (oh * o.w + ow) * s.c, dy + (oh * o.w + ow) * s.c, dx, h_lo, h_hi,
                          w_lo, w_hi);
            } else {
              const float* xc = x + a * s.h * s.w;
              const float m = y[(a * o.h + oh) * o.w + ow];
              int64_t best = -1;
              for (int64_t h = h_lo; h < h_hi; ++h)
                for (int64_t w = w_lo; w < w_hi; ++w) {
                  const int64_t i = h * s.w + w;
                  best = (best < 0 && xc[i] == m) ? i : best;
                }
              if (best >= 0) dx[a * s.h * s.w + best] += dy[(a * o.h + oh) * o.w + ow];
            }
          }
        }
      }
    }
  }

  // One nhwc window [h_lo, h_hi) x [w_lo, w_hi) for all channels; y/dy point at its output.
  void window_nhwc(const float* x, const float* y, const float* dy, float* dx, int64_t h_lo,
                   int64_t h_hi, int64_t w_lo, int64_t w_hi) const {
    const int64_t C = desc_.src.c, W = desc_.src.w;
    constexpr int64_t kChunk = 64;
    for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
      const int64_t cn = std::min(kChunk, C - c0);
      alignas(64) float g[kChunk];  // the gradient still to place, 0 once placed
      alignas(64) int32_t open[kChunk];
      for (int64_t c = 0; c < cn; ++c) {
        g[c] = dy[c0 + c];
        open[c] = 1;
      }
      for (int64_t h = h_lo; h < h_hi; ++h)
        for (int64_t w = w_lo; w < w_hi; ++w) {
          const float* __restrict xi = x + (h * W + w) * C + c0;
          const float* __restrict m = y + c0;
          float* __restrict dxi = dx + (h * W + w) * C + c0;
#pragma omp simd
          for (int64_t c = 0; c < cn; ++c) {
            const int32_t hit = (xi[c] == m[c]) & open[c];
            dxi[c] += hit ? g[c] : 0.f;
            open[c] &= hit ^ 1;
          }
        }
    }
  }

  // Windows that tile the input (stride == kernel, no padding, none past the input) in nhwc:
  // every input element is in at most one window, so one pass writes diff_src (no zeroing,
  // no accumulation); the channels go as a vector, the window unrolled.
  using TiledFn = void (*)(const float*, const float*, const float*, float*, int64_t, int64_t,
                           int64_t, int64_t);
  static TiledFn pick_tiled(const OpDesc& d) {
    const Shape4 o = dst_shape(d);
    if (d.kind != OpKind::max_pool || d.layout != Layout::nhwc || d.pad_h != 0 || d.pad_w != 0 ||
        d.stride_h != d.kh || d.stride_w != d.kw || o.h * d.kh > d.src.h || o.w * d.kw > d.src.w)
      return nullptr;
    if (d.kh == 2 && d.kw == 2) return &max_bwd_tiled_nhwc<2, 2>;
    if (d.kh == 3 && d.kw == 3) return &max_bwd_tiled_nhwc<3, 3>;
    return nullptr;
  }

  template <int KH, int KW>
  static void max_bwd_tiled_nhwc(const float* x, const float* y, const float* dy, float* dx,
                                 int64_t C, int64_t W, int64_t OH, int64_t OW) {
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t base = (oh * KH * W + ow * KW) * C;
        const float* xw = x + base;
        float* dxw = dx + base;
        const float* m = y + (oh * OW + ow) * C;
        const float* g = dy + (oh * OW + ow) * C;
#if defined(__AVX512F__)
        // 16 channels at a time, the tail masked.
        for (int64_t c = 0; c < C; c += 16) {
          const __mmask16 k =
              C - c >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (C - c)) - 1u);
          const __m512 mv = _mm512_maskz_loadu_ps(k, m + c);
          const __m512 gv = _mm512_maskz_loadu_ps(k, g + c);
          __mmask16 open = k;
          for (int i = 0; i < KH; ++i)
            for (int j = 0; j < KW; ++j) {
              const int64_t off = (i * W + j) * C + c;
              const __m512 xv = _mm512_maskz_loadu_ps(k, xw + off);
              const __mmask16 hit = _mm512_mask_cmp_ps_mask(open, xv, mv, _CMP_EQ_OQ);
              _mm512_mask_storeu_ps(dxw + off, k, _mm512_maskz_mov_ps(hit, gv));
              open = static_cast<__mmask16>(open & ~hit);
            }
        }
#else
        for (int64_t c = 0; c < C; ++c) {
          bool open = true;
          for (int i = 0; i < KH; ++i)
            for (int j = 0; j < KW; ++j) {
              const int64_t off = (i * W + j) * C + c;
              const bool hit = open && xw[off] == m[c];
              dxw[off] = hit ? g[c] : 0.f;
              open = open && !hit;
            }
        }
#endif
      }
  }

  TiledFn tiled_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Global average pooling: oneDNN's average pooling with one H x W window (no padding, so
// exclude_padding divides by H*W).
class GlobalAvgPoolOp final : public PoolingOp {
 public:
  explicit GlobalAvgPoolOp(const OpDesc& d) : PoolingOp(d) {}

  Status init() {
    const OpDesc& d = desc_;
    const memory::desc src_md = act_md(d.src, d.layout), dst_md = act_md(dst_shape(d), d.layout);
    const Dims strides{1, 1}, kernel{d.src.h, d.src.w}, pad{0, 0};
    const algorithm alg = algorithm::pooling_avg_exclude_padding;
    dnnl::pooling_forward::primitive_desc fpd(
        {prop_kind::forward_training, alg, src_md, dst_md, strides, kernel, pad, pad}, base_attr(),
        cpu_engine(), true);
    if (std::string why = why_not(fpd, name() + ": forward"); !why.empty()) return unavailable(why);
    dnnl::pooling_backward::primitive_desc bpd({alg, src_md, dst_md, strides, kernel, pad, pad},
                                               base_attr(), cpu_engine(), fpd, true);
    if (std::string why = why_not(bpd, name() + ": backward"); !why.empty())
      return unavailable(why);
    user_tensors(src_md, dst_md);
    fwd_ = make_step<dnnl::pooling_forward>(fpd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    finish_backward(fpd, bpd);
    return {};
  }

  void backward(const float*, const float*, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    if (diff_src == nullptr) return;
    run_backward(diff_dst, diff_src);
  }
};

}  // namespace

}  // namespace easel::dnnl_detail

namespace easel {

Result<std::unique_ptr<Op>> make_dnnl_pool(const OpDesc& d, const DnnlOptions& /*options*/) {
  return dnnl_detail::guarded(d, [&] { return dnnl_detail::build<dnnl_detail::PoolOp>(d); });
}

Result<std::unique_ptr<Op>> make_dnnl_global_avg_pool(const OpDesc& d,
                                                      const DnnlOptions& /*options*/) {
  return dnnl_detail::guarded(d,
                              [&] { return dnnl_detail::build<dnnl_detail::GlobalAvgPoolOp>(d); });
}

}  // namespace easel
