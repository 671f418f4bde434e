// oneDNN (2.x API) implementations of the ops (see devices/cpu/dnnl_ops.hpp): inner product,
// ReLU and LRN, one section each, and dropout's refusal; convolution in dnnl_conv.cpp, pooling in
// dnnl_pool.cpp, the shared helpers and conventions in dnnl_common.hpp. The CPU device picks
// them from devices/cpu/cpu_op_list.cpp.
#include "devices/cpu/dnnl_common.hpp"

namespace easel {

namespace {

using namespace dnnl_detail;  // dnnl::memory, Tag, Dims, ... (dnnl_common.hpp)

// ---------------------------------------------------------------------------------------------
// Inner product: the src's per-image block is one row of ic_total values in its own memory
// order, so src {N, ic_total} nc and weights {oc, ic_total} oi describe both layouts exactly.
class InnerProductOp final : public DnnlOp {
 public:
  InnerProductOp(const OpDesc& d, bool bf16) : DnnlOp(d), bf16_(bf16) {}

  Status init() {
    const OpDesc& d = desc_;
    const int64_t n = d.src.n, ic = d.src.per_image();
    const memory::desc src_md({n, ic}, kF32, Tag::nc), dst_md({n, d.oc}, kF32, Tag::nc);
    const memory::desc w_md({d.oc, ic}, kF32, Tag::oi);
    const memory::desc b_md = d.bias ? memory::desc({d.oc}, kF32, Tag::x) : memory::desc();
    // bf16: src, weights and diff_dst as bf16 copies (weights in the layout oneDNN picks),
    // dst, diff_src and the gradients f32.
    const auto cdt = bf16_ ? kBf16 : kF32;
    const memory::desc src_c_md({n, ic}, cdt, Tag::nc), dd_c_md({n, d.oc}, cdt, Tag::nc);
    const memory::desc w_c_md = bf16_ ? memory::desc({d.oc, ic}, kBf16, Tag::any) : w_md;

    using Fwd = dnnl::inner_product_forward;
    Fwd::primitive_desc fpd({prop_kind::forward_training, src_c_md, w_c_md, b_md, dst_md},
                            relu_attr(d.fused_relu), cpu_engine(), true);
    if (std::string why = why_not(fpd, name() + ": forward"); !why.empty()) return unavailable(why);
    dnnl::inner_product_backward_data::primitive_desc dpd(
        {src_md, bf16_ ? fpd.weights_desc() : w_md, dd_c_md}, base_attr(), cpu_engine(), fpd, true);
    if (std::string why = why_not(dpd, name() + ": backward-data"); !why.empty())
      return unavailable(why);
    dnnl::inner_product_backward_weights::primitive_desc wpd({src_c_md, w_md, b_md, dd_c_md},
                                                             base_attr(), cpu_engine(), fpd, true);
    if (std::string why = why_not(wpd, name() + ": backward-weights"); !why.empty())
      return unavailable(why);

    src_ = user_mem(src_md);
    dst_ = user_mem(dst_md);
    w_ = user_mem(w_md);
    src_c_ = src_;
    w_c_ = w_;
    if (bf16_) {
      src_c_ = owned_mem(src_c_md);
      w_c_ = owned_mem(fpd.weights_desc());
      EASEL_ASSIGN_OR_RETURN(src_to_c_, make_reorder(src_, src_c_, name() + ": src to bf16"));
      EASEL_ASSIGN_OR_RETURN(w_to_c_, make_reorder(w_, w_c_, name() + ": weights to bf16"));
    }
    if (d.bias) b_ = user_mem(b_md);
    std::unordered_map<int, memory> fargs{
        {DNNL_ARG_SRC, src_c_}, {DNNL_ARG_WEIGHTS, w_c_}, {DNNL_ARG_DST, dst_}};
    if (d.bias) fargs[DNNL_ARG_BIAS] = b_;
    fwd_ = make_step<Fwd>(fpd, std::move(fargs));

    EASEL_RETURN_IF_ERROR(dd_.init(dst_md, dd_c_md, d.fused_relu, bf16_, dst_, name()));
    diff_src_ = user_mem(src_md);
    bwd_d_ = make_step<dnnl::inner_product_backward_data>(
        dpd,
        {{DNNL_ARG_DIFF_DST, dd_.c}, {DNNL_ARG_WEIGHTS, w_c_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    dw_ = user_mem(w_md);
    if (d.bias) db_ = user_mem(b_md);
    std::unordered_map<int, memory> wargs{
        {DNNL_ARG_SRC, src_c_}, {DNNL_ARG_DIFF_DST, dd_.c}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
    if (d.bias) wargs[DNNL_ARG_DIFF_BIAS] = db_;
    bwd_w_ = make_step<dnnl::inner_product_backward_weights>(wpd, std::move(wargs));

    impl_ = std::string(bf16_ ? "dnnl-bf16:" : "dnnl:") + fpd.impl_info_str() +
            "/bwd_d=" + dpd.impl_info_str() + "/bwd_w=" + wpd.impl_info_str();
    bind_scratch({&fwd_, &dd_.relu_mask, &bwd_d_, &bwd_w_, &src_to_c_, &w_to_c_, &dd_.to_c});
    return {};
  }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    point(src_, src);
    point(dst_, dst);
    point(w_, weights[0]);
    if (desc_.bias) point(b_, weights[1]);
    if (bf16_) {
      src_to_c_.run();  // kept for backward-weights
      w_to_c_.run();    // kept for backward-data
    }
    fwd_.run();
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    dd_.prepare(diff_dst, dst_, dst);
    point(src_, src);
    point(dw_, diff_weights[0]);
    if (desc_.bias) point(db_, diff_weights[1]);
    bwd_w_.run();
    if (diff_src == nullptr) return;
    point(w_, weights[0]);
    point(diff_src_, diff_src);
    bwd_d_.run();
  }

 private:
  bool bf16_;
  memory src_, dst_, w_, b_, diff_src_, dw_, db_;
  memory src_c_, w_c_;  // what the primitives read (bf16 copies in bf16 mode)
  DiffDst dd_;
  Step fwd_, bwd_d_, bwd_w_, src_to_c_, w_to_c_;
};

// ---------------------------------------------------------------------------------------------
// ReLU (negative slope 0), backward from dst (dst > 0 exactly where src > 0); in place works.
class ReluOp final : public FwdBwdOp {
 public:
  explicit ReluOp(const OpDesc& d) : FwdBwdOp(d) {}

  Status init() {
    const memory::desc md = act_md(desc_.src, desc_.layout);
    const algorithm alg = algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc fpd({prop_kind::forward_training, alg, md, 0.f, 0.f},
                                              base_attr(), cpu_engine(), true);
    if (std::string why = why_not(fpd, name() + ": forward"); !why.empty()) return unavailable(why);
    user_tensors(md, md);
    EASEL_ASSIGN_OR_RETURN(bwd_, make_relu_mask(md, dst_, diff_dst_, diff_src_, name()));
    fwd_ = make_step<dnnl::eltwise_forward>(fpd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    finish(fpd.impl_info_str());
    return {};
  }

  void backward(const float*, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    if (diff_src == nullptr) return;
    point(dst_, dst);
    run_backward(diff_dst, diff_src);
  }
};

// ---------------------------------------------------------------------------------------------
// LRN across channels: Caffe's dst = src / (k + alpha/n * sum src^2)^beta is oneDNN's
// definition too; within channel, Caffe's alpha/n^2 over the zero-padded n x n window is
// oneDNN's lrn_within_channel (its kernels divide by n^2 as well, whatever the documentation's
// formula says; tests/devices/test_dnnl_ops.cpp checks it against the reference). The forward's
// workspace is kept for backward. oneDNN 2.6 has no jit kernel for some nchw cases (local size
// 3, backward; every within-channel one); those run in nhwc between reorders, the reordered src
// kept from forward for backward. Its within-channel jit kernels need channels a multiple of 8
// (avx2) or 16 (avx512); other channel counts are refused (its reference kernel would run).
class LrnOp final : public DnnlOp {
 public:
  explicit LrnOp(const OpDesc& d) : DnnlOp(d) {}

  Status init() {
    if (desc_.lrn_within_channel)
      return unavailable(name() +
                         ": oneDNN 2.6's within-channel backward kernel (lrn_jit:avx512_core) "
                         "misses Caffe's gradient by up to 1% (tests/devices/test_dnnl_ops.cpp, "
                         "DnnlLrn.WithinChannel)");
    const Layout own = desc_.layout;
    const Layout other = own == Layout::nchw ? Layout::nhwc : Layout::nchw;
    const md_t md = act_md(desc_.src, own);
    src_ = user_mem(md);
    dst_ = user_mem(md);
    diff_dst_ = user_mem(md);
    diff_src_ = user_mem(md);
    const std::string why = try_layout(own);
    if (why.empty()) return {};
    const std::string why_other = try_layout(other);
    if (why_other.empty()) {
      log_debug("dnnl", name() + ": " + why + "; runs in " + layout_name(other));
      return {};
    }
    return unavailable(name() + ": " + why + "; in " + layout_name(other) + ": " + why_other);
  }

  void forward(const float* src, float* dst, std::span<const float* const>, bool) override {
    point(src_, src);
    point(dst_, dst);
    if (!src_in_.empty()) src_in_.run();
    fwd_.run();
    if (!dst_out_.empty()) dst_out_.run();
  }

  void backward(const float* src, const float*, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    if (diff_src == nullptr) return;
    point(src_, src);  // the reordered copy from forward serves when the layout differs
    point(diff_dst_, diff_dst);
    point(diff_src_, diff_src);
    if (!dd_in_.empty()) dd_in_.run();
    bwd_.run();
    if (!ds_out_.empty()) ds_out_.run();
  }

 private:
  using md_t = memory::desc;

  // Builds the op computing in layout `inner` (reorders around it when it is not the net's);
  // empty on success, else why not.
  std::string try_layout(Layout inner) {
    const OpDesc& d = desc_;
    const md_t md = act_md(d.src, inner);
    const algorithm alg =
        d.lrn_within_channel ? algorithm::lrn_within_channel : algorithm::lrn_across_channels;
    dnnl::lrn_forward::primitive_desc fpd(
        {prop_kind::forward_training, alg, md, d.local_size, d.alpha, d.beta, d.k}, base_attr(),
        cpu_engine(), true);
    if (std::string why = why_not(fpd, "forward"); !why.empty()) return why;
    dnnl::lrn_backward::primitive_desc bpd({alg, md, md, d.local_size, d.alpha, d.beta, d.k},
                                           base_attr(), cpu_engine(), fpd, true);
    if (std::string why = why_not(bpd, "backward"); !why.empty()) return why;

    memory src = src_, dst = dst_, diff_dst = diff_dst_, diff_src = diff_src_;
    std::string via;
    if (inner != d.layout) {
      // dst is dead once reordered out: its buffer serves diff_dst in backward.
      src = owned_mem(md);
      dst = owned_mem(md);
      diff_dst = dst;
      diff_src = owned_mem(md);
      auto r1 = make_reorder(src_, src, "src reorder");
      auto r2 = make_reorder(dst, dst_, "dst reorder");
      auto r3 = make_reorder(diff_dst_, diff_dst, "diff_dst reorder");
      auto r4 = make_reorder(diff_src, diff_src_, "diff_src reorder");
      for (const auto* r : {&r1, &r2, &r3, &r4})
        if (!r->ok()) return r->status().message();
      src_in_ = std::move(r1).value();
      dst_out_ = std::move(r2).value();
      dd_in_ = std::move(r3).value();
      ds_out_ = std::move(r4).value();
      via = std::string("via-") + layout_name(inner) + ":";
    }
    std::unordered_map<int, memory> fargs{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    std::unordered_map<int, memory> bargs{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}};
    if (fpd.workspace_desc().get_size() != 0) {
      workspace_ = owned_mem(fpd.workspace_desc());
      fargs[DNNL_ARG_WORKSPACE] = workspace_;
      bargs[DNNL_ARG_WORKSPACE] = workspace_;
    }
    fwd_ = make_step<dnnl::lrn_forward>(fpd, std::move(fargs));
    bwd_ = make_step<dnnl::lrn_backward>(bpd, std::move(bargs));
    impl_ = "dnnl:" + via + fpd.impl_info_str() + "/bwd=" + bpd.impl_info_str();
    bind_scratch({&src_in_, &fwd_, &dst_out_, &dd_in_, &bwd_, &ds_out_});
    return {};
  }

  memory src_, dst_, diff_dst_, diff_src_, workspace_;
  Step src_in_, fwd_, dst_out_, dd_in_, bwd_, ds_out_;
};

}  // namespace

bool dnnl_available() {
  return true;
}

bool dnnl_bf16_available() {
  static const bool yes = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx:
        return true;
      default:
        return false;
    }
  }();
  return yes;
}

bool dnnl_amx_available() {
  return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
}

std::string dnnl_version_line() {
  const dnnl_version_t* v = dnnl_version();
  std::string isa = "an ISA this build does not name";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      isa = "sse41";
      break;
    case dnnl::cpu_isa::avx:
      isa = "avx";
      break;
    case dnnl::cpu_isa::avx2:
      isa = "avx2";
      break;
    case dnnl::cpu_isa::avx2_vnni:
      isa = "avx2_vnni";
      break;
    case dnnl::cpu_isa::avx512_core:
      isa = "avx512_core";
      break;
    case dnnl::cpu_isa::avx512_core_vnni:
      isa = "avx512_core_vnni";
      break;
    case dnnl::cpu_isa::avx512_core_bf16:
      isa = "avx512_core_bf16";
      break;
    case dnnl::cpu_isa::avx512_core_amx:
      isa = "avx512_core_amx";
      break;
    default:
      break;
  }
  const std::string hash = v->hash;  // "N/A" in Debian's build
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + (hash == "N/A" ? "" : " (commit " + hash + ")") +
         ", its kernels for " + isa + " on this CPU";
}

bool dnnl_avx512_available() {
  return dnnl_vector_floats() == 16;
}

int dnnl_vector_floats() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return 4;
    case dnnl::cpu_isa::avx:
    case dnnl::cpu_isa::avx2:
    case dnnl::cpu_isa::avx2_vnni:
      return 8;
    default:  // the avx512 ISAs (AMX's tiles aside)
      return 16;
  }
}

Result<std::unique_ptr<Op>> make_dnnl_inner_product(const OpDesc& d, const DnnlOptions& options) {
  return guarded(d, [&] {
    return with_bf16_fallback(options, [&](const DnnlOptions& o) {
      return build<InnerProductOp>(d, o.precision == Precision::bf16);
    });
  });
}

Result<std::unique_ptr<Op>> make_dnnl_relu(const OpDesc& d, const DnnlOptions& /*options*/) {
  return guarded(d, [&] { return build<ReluOp>(d); });
}

Result<std::unique_ptr<Op>> make_dnnl_lrn(const OpDesc& d, const DnnlOptions& /*options*/) {
  return guarded(d, [&] { return build<LrnOp>(d); });
}

Result<std::unique_ptr<Op>> refuse_dnnl_dropout(const OpDesc& /*d*/,
                                                const DnnlOptions& /*options*/) {
  return unavailable("dropout: no oneDNN primitive (it needs the op's own RNG stream)");
}

}  // namespace easel
