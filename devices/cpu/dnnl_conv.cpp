// oneDNN convolution (see devices/cpu/dnnl_common.hpp for the conventions of all the ops).
#include "devices/cpu/dnnl_common.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#include <algorithm>
#endif

namespace easel::dnnl_detail {

namespace {

// Convolution: activations in the net's layout, weights chosen by oneDNN (`any`) and reordered
// from the user's oihw/goihw each forward (kept for backward), gradients reordered back.
// Backward data: oneDNN's kernel; where that is a reference one, a forward convolution of
// diff_dst with the transposed, flipped weights (stride 1); else blocked layouts with reorders.
class ConvOp final : public DnnlOp {
 public:
  ConvOp(const OpDesc& d, DnnlConvBwdData strategy, bool bf16)
      : DnnlOp(d), strategy_(strategy), bf16_(bf16), cdt_(bf16 ? kBf16 : kF32) {}

  Status init() {
    const ConvMds m = conv_mds();
    EASEL_RETURN_IF_ERROR(init_forward(m));
    EASEL_RETURN_IF_ERROR(dd_.init(m.dst, m.dd_c, desc_.fused_relu, bf16_, dst_, name()));
    EASEL_ASSIGN_OR_RETURN(const std::string bwd_w_impl, init_backward_weights(m));
    diff_src_ = user_mem(m.src);
    std::string bwd_d_impl;
    EASEL_ASSIGN_OR_RETURN(bwd_d_impl,
                           init_backward_data(m.src, m.w_any, m.dd_c, m.strides, m.pad));

    impl_ = std::string(bf16_ ? "dnnl-bf16:" : "dnnl:") + fwd_pd_.impl_info_str() +
            "/bwd_d=" + bwd_d_impl + "/bwd_w=" + bwd_w_impl;
    bind_scratch({&w_to_fwd_, &fwd_, &dd_.relu_mask, &bwd_w_, &dw_to_user_, &w_to_bwd_, &bwd_d_,
                  &flip_to_pd_, &dd_to_blocked_, &ds_from_blocked_, &w_to_ohwi_, &src_to_c_,
                  &dd_.to_c});
    return {};
  }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    point(src_, src);
    point(dst_, dst);
    point(w_user_, weights[0]);
    if (desc_.bias) point(b_, weights[1]);
    if (!src_to_c_.empty()) src_to_c_.run();  // kept for backward-weights
    if (!w_to_fwd_.empty()) w_to_fwd_.run();
    fwd_.run();
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    dd_.prepare(diff_dst, dst_, dst);
    point(src_, src);  // bf16: src_c_ holds forward's copy
    point(dw_user_, diff_weights[0]);
    if (desc_.bias) point(db_, diff_weights[1]);
    bwd_w_.run();
    if (!dw_to_user_.empty()) dw_to_user_.run();
    if (diff_src == nullptr) return;

    point(diff_src_, diff_src);
    point(w_user_, weights[0]);
    if (gemm_chunk_ > 0) {
      gemm_backward_data(diff_src);
      return;
    }
    if (flip_) {
      flip_weights(weights[0]);
      if (!flip_to_pd_.empty()) flip_to_pd_.run();
    } else if (!w_to_bwd_.empty()) {
      w_to_bwd_.run();
    }
    if (!dd_to_blocked_.empty()) dd_to_blocked_.run();
    bwd_d_.run();
    if (!ds_from_blocked_.empty()) ds_from_blocked_.run();
  }

 private:
  // The memory descriptors of the op's primitives.
  struct ConvMds {
    memory::desc src, dst;  // the f32 activations in the net's layout
    memory::desc w_user;    // the user's weights: oihw, or goihw with groups
    memory::desc w_any;     // weights as the forward computes them, format oneDNN's choice
    memory::desc dw_any;    // f32 diff_weights, format oneDNN's choice
    // What the primitives read: the f32 activations themselves, or bf16 copies (bf16 mode).
    memory::desc src_c, dd_c;
    memory::desc b;  // the bias (empty without)
    Dims strides, pad;
  };

  ConvMds conv_mds() const {
    const OpDesc& d = desc_;
    const Shape4 o = dst_shape(d);
    const int64_t g = d.group, icg = d.src.c / g, ocg = d.oc / g;
    ConvMds m;
    m.src = act_md(d.src, d.layout);
    m.dst = act_md(o, d.layout);
    m.w_user = g == 1 ? memory::desc({d.oc, icg, d.kh, d.kw}, kF32, Tag::oihw)
                      : memory::desc({g, ocg, icg, d.kh, d.kw}, kF32, Tag::goihw);
    m.w_any = memory::desc(m.w_user.dims(), cdt_, Tag::any);
    m.dw_any = memory::desc(m.w_user.dims(), kF32, Tag::any);
    m.src_c = act_md(d.src, d.layout, cdt_);
    m.dd_c = act_md(o, d.layout, cdt_);
    m.b = d.bias ? memory::desc({d.oc}, kF32, Tag::x) : memory::desc();
    m.strides = {d.stride_h, d.stride_w};
    m.pad = {d.pad_h, d.pad_w};
    return m;
  }

  // The forward primitive (fwd_pd_, fwd_), with the bf16 copy of src and the weights' reorder
  // to its format where it needs them.
  Status init_forward(const ConvMds& m) {
    const OpDesc& d = desc_;
    using Fwd = dnnl::convolution_forward;
    fwd_pd_ = Fwd::primitive_desc({prop_kind::forward_training, algorithm::convolution_direct,
                                   m.src_c, m.w_any, m.b, m.dst, m.strides, m.pad, m.pad},
                                  relu_attr(d.fused_relu), cpu_engine(), true);
    if (std::string why = why_not(fwd_pd_, name() + ": forward"); !why.empty())
      return unavailable(why);

    src_ = user_mem(m.src);
    src_c_ = src_;
    if (bf16_) {
      src_c_ = owned_mem(m.src_c);
      EASEL_ASSIGN_OR_RETURN(src_to_c_, make_reorder(src_, src_c_, name() + ": src to bf16"));
    }
    dst_ = user_mem(m.dst);
    w_user_ = user_mem(m.w_user);
    if (d.bias) b_ = user_mem(m.b);
    w_fwd_ = same_or_owned(w_user_, fwd_pd_.weights_desc());
    if (w_fwd_ != w_user_) {
      EASEL_ASSIGN_OR_RETURN(w_to_fwd_,
                             make_reorder(w_user_, w_fwd_, name() + ": weights reorder"));
    }
    std::unordered_map<int, memory> fargs{
        {DNNL_ARG_SRC, src_c_}, {DNNL_ARG_WEIGHTS, w_fwd_}, {DNNL_ARG_DST, dst_}};
    if (d.bias) fargs[DNNL_ARG_BIAS] = b_;
    fwd_ = make_step<dnnl::convolution_forward>(fwd_pd_, std::move(fargs));
    return {};
  }

  // Backward weights (and bias), diff_weights reordered to the user's format; returns the
  // primitive's impl string.
  Result<std::string> init_backward_weights(const ConvMds& m) {
    const OpDesc& d = desc_;
    using BwdW = dnnl::convolution_backward_weights;
    BwdW::primitive_desc bw_pd(
        {algorithm::convolution_direct, m.src_c, m.dw_any, m.b, m.dd_c, m.strides, m.pad, m.pad},
        base_attr(), cpu_engine(), fwd_pd_, true);
    if (std::string why = why_not(bw_pd, name() + ": backward-weights"); !why.empty())
      return unavailable(why);
    dw_user_ = user_mem(m.w_user);
    if (d.bias) db_ = user_mem(m.b);
    dw_ = same_or_owned(dw_user_, bw_pd.diff_weights_desc());
    if (dw_ != dw_user_) {
      EASEL_ASSIGN_OR_RETURN(dw_to_user_,
                             make_reorder(dw_, dw_user_, name() + ": diff_weights reorder"));
    }
    std::unordered_map<int, memory> wargs{
        {DNNL_ARG_SRC, src_c_}, {DNNL_ARG_DIFF_DST, dd_.c}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
    if (d.bias) wargs[DNNL_ARG_DIFF_BIAS] = db_;
    bwd_w_ = make_step<BwdW>(bw_pd, std::move(wargs));
    return std::string(bw_pd.impl_info_str());
  }

  // Chooses the backward-data strategy; returns its impl string.
  Result<std::string> init_backward_data(const memory::desc& src_md, const memory::desc& w_any,
                                         const memory::desc& dst_md, const Dims& strides,
                                         const Dims& pad) {
    using S = DnnlConvBwdData;
    auto prefixed = [&](Result<std::string> r) -> Result<std::string> {
      if (r.ok()) return r;
      return unavailable(name() + ": " + r.status().message());
    };
    if (bf16_ && (strategy_ == S::forward_flip || strategy_ == S::blocked))
      return unavailable(name() + ": the flip and blocked data gradients are fp32 only");
    switch (strategy_) {
      case S::native:
        return prefixed(try_native(src_md, w_any, dst_md, strides, pad));
      case S::forward_flip:
        return prefixed(try_flip(src_md, dst_md, strides));
      case S::blocked:
        return prefixed(try_blocked(src_md, w_any, dst_md, strides, pad));
      case S::gemm:
        return prefixed(try_gemm());
      case S::automatic:
        break;
    }
    // nhwc, one group: the gemm data gradient (LeNet conv2 on this machine's kind, oneDNN 2.6,
    // one core: conv2 backward 5.96 -> 5.49 ms against oneDNN's jit backward-data kernel).
    if (desc_.layout == Layout::nhwc && desc_.group == 1) {
      auto gemm = try_gemm();
      if (gemm.ok()) return gemm;
    }
    auto native = try_native(src_md, w_any, dst_md, strides, pad);
    if (native.ok()) return native;
    if (bf16_) return prefixed(native);
    auto flip = try_flip(src_md, dst_md, strides);
    if (flip.ok()) {
      log_debug("dnnl", name() + ": " + native.status().message() + "; using " + flip.value());
      return flip;
    }
    auto blocked = try_blocked(src_md, w_any, dst_md, strides, pad);
    if (blocked.ok()) return blocked;
    return unavailable(name() + ": " + native.status().message() + "; " + flip.status().message() +
                       "; " + blocked.status().message());
  }

  // oneDNN's backward-data kernel on the net's layout.
  Result<std::string> try_native(const memory::desc& src_md, const memory::desc& w_any,
                                 const memory::desc& dst_md, const Dims& strides, const Dims& pad) {
    using BwdD = dnnl::convolution_backward_data;
    BwdD::primitive_desc pd(
        {algorithm::convolution_direct, src_md, w_any, dst_md, strides, pad, pad}, base_attr(),
        cpu_engine(), fwd_pd_, true);
    if (std::string why = why_not(pd, "backward-data"); !why.empty()) return unavailable(why);
    EASEL_RETURN_IF_ERROR(bind_bwd_weights(pd.weights_desc()));
    bwd_d_ = make_step<BwdD>(
        pd,
        {{DNNL_ARG_DIFF_DST, dd_.c}, {DNNL_ARG_WEIGHTS, w_bwd_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    return std::string(pd.impl_info_str());
  }

  // diff_src = conv(diff_dst, flip(transpose(weights))) with padding k-1-p: stride 1 only.
  Result<std::string> try_flip(const memory::desc& src_md, const memory::desc& dst_md,
                               const Dims& strides) {
    const OpDesc& d = desc_;
    if (d.stride_h != 1 || d.stride_w != 1)
      return unavailable("forward-convolution data gradient needs stride 1, not " +
                         std::to_string(d.stride_h) + "x" + std::to_string(d.stride_w));
    if (d.pad_h > d.kh - 1 || d.pad_w > d.kw - 1)
      return unavailable("forward-convolution data gradient needs pad < kernel");
    const int64_t g = d.group, icg = d.src.c / g, ocg = d.oc / g;
    const memory::desc wf_user_md = g == 1
                                        ? memory::desc({icg, ocg, d.kh, d.kw}, kF32, Tag::oihw)
                                        : memory::desc({g, icg, ocg, d.kh, d.kw}, kF32, Tag::goihw);
    const Dims fpad{d.kh - 1 - d.pad_h, d.kw - 1 - d.pad_w};
    dnnl::convolution_forward::primitive_desc fpd(
        {prop_kind::forward_training, algorithm::convolution_direct, dst_md,
         memory::desc(wf_user_md.dims(), kF32, Tag::any), src_md, strides, fpad, fpad},
        base_attr(), cpu_engine(), true);
    if (std::string why = why_not(fpd, "forward convolution for the data gradient"); !why.empty())
      return unavailable(why);
    w_flip_user_ = owned_mem(wf_user_md);
    w_bwd_ = same_or_owned(w_flip_user_, fpd.weights_desc());
    if (w_bwd_ != w_flip_user_) {
      EASEL_ASSIGN_OR_RETURN(flip_to_pd_,
                             make_reorder(w_flip_user_, w_bwd_, "flipped weights reorder"));
    }
    bwd_d_ = make_step<dnnl::convolution_forward>(
        fpd, {{DNNL_ARG_SRC, dd_.masked}, {DNNL_ARG_WEIGHTS, w_bwd_}, {DNNL_ARG_DST, diff_src_}});
    flip_ = true;
    return "fwd-flip(" + std::string(fpd.impl_info_str()) + ")";
  }

  // diff_src as a matrix product and a col2im, nhwc and one group only: per chunk of images,
  // col[P, kh*kw*ic] = diff_dst[P, oc] x w_ohwi[oc, kh*kw*ic] (P the chunk's output pixels,
  // a oneDNN matmul), then every column row added into the input pixels its window covers.
  // The chunk's col stays in L2.
  Result<std::string> try_gemm() {
    const OpDesc& d = desc_;
    if (d.layout != Layout::nhwc) return unavailable("gemm data gradient needs nhwc");
    if (d.group != 1) return unavailable("gemm data gradient needs group 1");
    if (d.kh * d.kw > kMaxTaps) return unavailable("gemm data gradient: kernel too large");
    const Shape4 o = dst_shape(d);
    const int64_t k2 = d.kh * d.kw * d.src.c, pix = o.h * o.w;
    constexpr int64_t kColBytes = 512 * 1024;
    int64_t chunk = 1;
    for (int64_t c = 1; c <= d.src.n; ++c)
      if (d.src.n % c == 0 && c * pix * k2 * 4 <= kColBytes) chunk = c;
    const int64_t m = chunk * pix;
    const memory::desc a_md({m, d.oc}, cdt_, Tag::ab), b_md({d.oc, k2}, cdt_, Tag::ab),
        c_md({m, k2}, kF32, Tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), base_attr(), cpu_engine(),
                                    true);
    if (std::string why = why_not(pd, "matmul for the data gradient"); !why.empty())
      return unavailable(why);
    w_ohwi_ = owned_mem(memory::desc({d.oc, d.src.c, d.kh, d.kw}, cdt_, Tag::ohwi));
    EASEL_ASSIGN_OR_RETURN(w_to_ohwi_, make_reorder(w_user_, w_ohwi_, "ohwi weights reorder"));
    gemm_a_ = user_mem(a_md);
    col_ = owned_mem(c_md);
    bwd_d_ = make_step<dnnl::matmul>(
        pd, {{DNNL_ARG_SRC, gemm_a_},
             {DNNL_ARG_WEIGHTS, memory(b_md, cpu_engine(), w_ohwi_.get_data_handle())},
             {DNNL_ARG_DST, col_}});
    gemm_chunk_ = chunk;
    return "gemm(" + std::string(pd.impl_info_str()) + ")+col2im";
  }

  void gemm_backward_data(float* diff_src) {
    const OpDesc& d = desc_;
    const Shape4 o = dst_shape(d);
    const int64_t C = d.src.c, H = d.src.h, W = d.src.w, kw = d.kw, k2 = d.kh * d.kw * C;
    w_to_ohwi_.run();
    const char* dd = static_cast<const char*>(dd_.c.get_data_handle());
    const int64_t dd_bytes = bf16_ ? 2 : 4;
    const float* col = static_cast<const float*>(col_.get_data_handle());
    for (int64_t n0 = 0; n0 < d.src.n; n0 += gemm_chunk_) {
      gemm_a_.set_data_handle(const_cast<char*>(dd + n0 * o.h * o.w * d.oc * dd_bytes));
      bwd_d_.run();
      // col2im as a gather: each input pixel sums the column entries of the windows covering
      // it, so every diff_src element is written once (no zeroing, no read-modify-write).
      for (int64_t n = 0; n < gemm_chunk_; ++n)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            int64_t taps = 0;
            const float* from[kMaxTaps];
            for (int64_t i = 0; i < d.kh; ++i) {
              const int64_t hh = h + d.pad_h - i;
              if (hh < 0 || hh % d.stride_h != 0 || hh / d.stride_h >= o.h) continue;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ww = w + d.pad_w - j;
                if (ww < 0 || ww % d.stride_w != 0 || ww / d.stride_w >= o.w) continue;
                from[taps++] = col + ((n * o.h + hh / d.stride_h) * o.w + ww / d.stride_w) * k2 +
                               (i * kw + j) * C;
              }
            }
            sum_rows(diff_src + (((n0 + n) * H + h) * W + w) * C, from, taps, C);
          }
    }
  }

  static constexpr int64_t kMaxTaps = 121;  // kernels up to 11x11 take the gemm path

  // y[0:n] = sum_t x[t][0:n]
  static void sum_rows(float* __restrict y, const float* const* x, int64_t taps, int64_t n) {
#if defined(__AVX512F__)
    for (int64_t c = 0; c < n; c += 16) {
      const __mmask16 k =
          n - c >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - c)) - 1u);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t t = 0; t < taps; ++t)
        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, x[t] + c));
      _mm512_mask_storeu_ps(y + c, k, acc);
    }
#else
    // Any other ISA (AVX2): blocks of kBlock accumulators, each tap's row added in vector loops,
    // the same order of additions as above (so the same bits on every ISA).
    constexpr int64_t kBlock = 64;  // 8 AVX2 vectors of accumulators
    int64_t c0 = 0;
    for (; c0 + kBlock <= n; c0 += kBlock)
      sum_block<kBlock>(y + c0, x, c0, taps, kBlock);
    if (c0 < n) sum_block<kBlock>(y + c0, x, c0, taps, n - c0);
#endif
  }

  // y[0:m] = sum_t x[t][c0:c0 + m], m <= M (a full block has a constant trip count).
  template <int64_t M>
  static void sum_block(float* __restrict y, const float* const* x, int64_t c0, int64_t taps,
                        int64_t m) {
    float acc[M] = {};
    for (int64_t t = 0; t < taps; ++t) {
      const float* xt = x[t] + c0;
      if (m == M) {
#pragma omp simd
        for (int64_t c = 0; c < M; ++c)
          acc[c] += xt[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < m; ++c)
          acc[c] += xt[c];
      }
    }
    std::copy(acc, acc + m, y);
  }

  // oneDNN's backward-data kernel on layouts of its choice, diff_dst and diff_src reordered.
  Result<std::string> try_blocked(const memory::desc& src_md, const memory::desc& w_any,
                                  const memory::desc& dst_md, const Dims& strides,
                                  const Dims& pad) {
    using BwdD = dnnl::convolution_backward_data;
    const memory::desc src_any(src_md.dims(), kF32, Tag::any);
    const memory::desc dst_any(dst_md.dims(), kF32, Tag::any);
    BwdD::primitive_desc bpd(
        {algorithm::convolution_direct, src_any, w_any, dst_any, strides, pad, pad}, base_attr(),
        cpu_engine(), fwd_pd_, true);
    if (std::string why = why_not(bpd, "blocked backward-data"); !why.empty())
      return unavailable(why);
    EASEL_RETURN_IF_ERROR(bind_bwd_weights(bpd.weights_desc()));
    memory dd = same_or_owned(dd_.masked, bpd.diff_dst_desc());
    memory ds = same_or_owned(diff_src_, bpd.diff_src_desc());
    if (dd != dd_.masked) {
      EASEL_ASSIGN_OR_RETURN(dd_to_blocked_, make_reorder(dd_.masked, dd, "diff_dst reorder"));
    }
    if (ds != diff_src_) {
      EASEL_ASSIGN_OR_RETURN(ds_from_blocked_, make_reorder(ds, diff_src_, "diff_src reorder"));
    }
    bwd_d_ = make_step<BwdD>(
        bpd, {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, w_bwd_}, {DNNL_ARG_DIFF_SRC, ds}});
    return "blocked(" + std::string(bpd.impl_info_str()) + ")";
  }

  // Weights for backward-data: the forward's reordered copy when the formats agree, else a
  // reorder of the user's weights of its own.
  Status bind_bwd_weights(const memory::desc& wanted) {
    if (wanted == w_fwd_.get_desc()) {
      w_bwd_ = w_fwd_;
      return {};
    }
    w_bwd_ = same_or_owned(w_user_, wanted);
    if (w_bwd_ != w_user_) {
      EASEL_ASSIGN_OR_RETURN(w_to_bwd_,
                             make_reorder(w_user_, w_bwd_, name() + ": backward weights reorder"));
    }
    return {};
  }

  // w_flip_user_[g][i][o][y][x] = w[g][o][i][kh-1-y][kw-1-x].
  void flip_weights(const float* w) {
    const OpDesc& d = desc_;
    const int64_t g = d.group, icg = d.src.c / g, ocg = d.oc / g, kh = d.kh, kw = d.kw;
    auto* wf = static_cast<float*>(w_flip_user_.get_data_handle());
    for (int64_t gi = 0; gi < g; ++gi)
      for (int64_t o = 0; o < ocg; ++o)
        for (int64_t i = 0; i < icg; ++i) {
          const float* from = w + ((gi * ocg + o) * icg + i) * kh * kw;
          float* to = wf + ((gi * icg + i) * ocg + o) * kh * kw;
          for (int64_t k = 0; k < kh * kw; ++k)
            to[kh * kw - 1 - k] = from[k];
        }
  }

  DnnlConvBwdData strategy_;
  bool bf16_;
  memory::data_type cdt_;  // what the convolution computes in
  memory src_c_;           // what the primitives read of src (a bf16 copy in bf16 mode)
  Step src_to_c_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  memory src_, dst_, w_user_, b_, w_fwd_;
  DiffDst dd_;
  memory dw_user_, db_, dw_, diff_src_, w_bwd_, w_flip_user_;
  bool flip_ = false;
  int64_t gemm_chunk_ = 0;  // > 0: the gemm data gradient, images per matmul
  memory w_ohwi_, gemm_a_, col_;
  Step w_to_ohwi_;
  Step w_to_fwd_, fwd_, bwd_w_, dw_to_user_, w_to_bwd_, bwd_d_, flip_to_pd_;
  Step dd_to_blocked_, ds_from_blocked_;
};

}  // namespace

}  // namespace easel::dnnl_detail

namespace easel {

Result<std::unique_ptr<Op>> make_dnnl_conv(const OpDesc& d, const DnnlOptions& options) {
  using namespace dnnl_detail;
  return guarded(d, [&] {
    return with_bf16_fallback(options, [&](const DnnlOptions& o) {
      return build<ConvOp>(d, o.conv_bwd_data, o.precision == Precision::bf16);
    });
  });
}

}  // namespace easel
