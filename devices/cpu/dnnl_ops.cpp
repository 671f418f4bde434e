// oneDNN (2.x API) implementations of the ops (see devices/cpu/dnnl_ops.hpp).
//
// Each op describes its primitives once at creation (describe -> choose), refuses any choice
// that would run a reference (`ref`) kernel on the hot path, and builds the argument maps and
// every buffer it owns (reordered weights, workspaces, masked gradients, scratchpad) up front.
// forward()/backward() only point the user memories at the caller's buffers and execute, on
// a stream owned by the calling thread: one Op is used by one thread at a time, different Ops
// may run concurrently on different threads.
//
// Note: oneDNN (OpenMP runtime) fixes a primitive's thread count when it is created, from
// omp_get_max_threads() of the creating thread; create ops on a thread whose OpenMP team is the
// one that will run them (or with the same max thread count).
#include <dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "devices/cpu/dnnl_ops.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Tag = memory::format_tag;
using Dims = memory::dims;
constexpr auto kF32 = memory::data_type::f32;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One stream per calling thread: streams are not shared between threads.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

Tag layout_tag(Layout l) {
  return l == Layout::nchw ? Tag::nchw : Tag::nhwc;
}

// Activation [N, C, H, W] dense in the net's layout.
memory::desc act_md(const Shape4& s, Layout l) {
  return memory::desc({s.n, s.c, s.h, s.w}, kF32, layout_tag(l));
}

// A memory without a buffer: forward/backward point it at the caller's data.
memory user_mem(const memory::desc& md) {
  return memory(md, cpu_engine(), DNNL_MEMORY_NONE);
}
// A memory whose buffer the op owns (allocated by oneDNN, once, at creation).
memory owned_mem(const memory::desc& md) {
  return memory(md, cpu_engine());
}

void point(const memory& m, const float* p) {
  m.set_data_handle(const_cast<float*>(p));
}

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::primitive_attr relu_attr(bool fused_relu) {
  dnnl::primitive_attr attr = base_attr();
  if (fused_relu) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  return attr;
}

// "ref:any", "lrn_ref:any", "ref_int8:any", ...
bool is_ref(const std::string& impl) {
  return impl.find("ref") != std::string::npos;
}

// Empty when `pd` exists and does not run a reference kernel, else why it cannot be used.
template <typename PD>
std::string why_not(const PD& pd, const std::string& what) {
  if (!pd) return what + ": oneDNN 2.x has no implementation";
  const std::string impl = pd.impl_info_str();
  if (is_ref(impl)) return what + " would run the reference kernel " + impl;
  return {};
}

// A primitive with its arguments, built once. The scratchpad is bound by DnnlOp::bind_scratch.
struct Step {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  memory::desc scratch_md;

  bool empty() const { return !prim; }
  void run() const {
    try {
      prim.execute(thread_stream(), args);
      thread_stream().wait();
    } catch (const dnnl::error& e) {
      check_failed("dnnl primitive execute", __FILE__, __LINE__, e.what());
    }
  }
};

template <typename P, typename PD>
Step make_step(const PD& pd, std::unordered_map<int, memory> args) {
  return Step{P(pd), std::move(args), pd.scratchpad_desc()};
}

// A reorder between two memories, or an empty step when their descriptors are equal (then the
// caller uses one memory for both).
Result<Step> make_reorder(const memory& from, const memory& to, const std::string& what) {
  dnnl::reorder::primitive_desc pd(cpu_engine(), from.get_desc(), cpu_engine(), to.get_desc(),
                                   base_attr(), /*allow_empty=*/true);
  if (std::string why = why_not(pd, what); !why.empty()) return unavailable(why);
  return Step{dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, pd.scratchpad_desc()};
}

// `wanted` itself when it equals `user` (no reorder needed), else a new owned memory.
memory same_or_owned(const memory& user, const memory::desc& wanted) {
  return user.get_desc() == wanted ? user : owned_mem(wanted);
}

class DnnlOp : public Op {
 public:
  std::string impl() const override { return impl_; }

 protected:
  explicit DnnlOp(const OpDesc& d) : Op(d) {}

  // "conv 64x20x12x12 nhwc", for refusal reasons.
  std::string name() const {
    return std::string(op_kind_name(desc_.kind)) + " " + desc_.src.to_string() + " " +
           layout_name(desc_.layout);
  }

  // One scratchpad per op, as large as the largest of its steps (they run one at a time).
  void bind_scratch(std::initializer_list<Step*> steps) {
    size_t bytes = 0;
    for (const Step* s : steps)
      if (!s->empty()) bytes = std::max(bytes, s->scratch_md.get_size());
    if (bytes == 0) return;
    scratch_ =
        owned_mem(memory::desc({static_cast<memory::dim>(bytes)}, memory::data_type::u8, Tag::x));
    for (Step* s : steps) {
      if (s->empty() || s->scratch_md.get_size() == 0) continue;
      s->args[DNNL_ARG_SCRATCHPAD] =
          memory(s->scratch_md, cpu_engine(), scratch_.get_data_handle());
    }
  }

  std::string impl_;
  memory scratch_;
};

// Backward of a fused ReLU: diff_dst masked by dst > 0 into an owned buffer.
Result<Step> make_relu_mask(const memory::desc& md, const memory& dst, const memory& diff_dst,
                            const memory& masked, const std::string& what) {
  dnnl::eltwise_forward::primitive_desc hint(
      {prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, md, 0.f, 0.f},
      cpu_engine(), /*allow_empty=*/true);
  if (!hint) return unavailable(what + ": no relu forward descriptor");
  dnnl::eltwise_backward::primitive_desc pd(
      {algorithm::eltwise_relu_use_dst_for_bwd, md, md, 0.f, 0.f}, base_attr(), cpu_engine(), hint,
      /*allow_empty=*/true);
  if (std::string why = why_not(pd, what + " relu mask"); !why.empty()) return unavailable(why);
  return make_step<dnnl::eltwise_backward>(
      pd, {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, masked}});
}

// ---------------------------------------------------------------------------------------------
// Convolution: activations in the net's layout, weights chosen by oneDNN (`any`) and reordered
// from the user's oihw/goihw each forward (kept for backward), gradients reordered back.
// Backward data: oneDNN's kernel; where that is a reference one, a forward convolution of
// diff_dst with the transposed, flipped weights (stride 1); else blocked layouts with reorders.
class ConvOp final : public DnnlOp {
 public:
  ConvOp(const OpDesc& d, DnnlConvBwdData strategy) : DnnlOp(d), strategy_(strategy) {}

  Status init() {
    const OpDesc& d = desc_;
    const Shape4 o = dst_shape(d);
    const int64_t g = d.group, icg = d.src.c / g, ocg = d.oc / g;
    const memory::desc src_md = act_md(d.src, d.layout), dst_md = act_md(o, d.layout);
    const memory::desc w_user_md = g == 1
                                       ? memory::desc({d.oc, icg, d.kh, d.kw}, kF32, Tag::oihw)
                                       : memory::desc({g, ocg, icg, d.kh, d.kw}, kF32, Tag::goihw);
    const memory::desc w_any(w_user_md.dims(), kF32, Tag::any);
    const memory::desc b_md = d.bias ? memory::desc({d.oc}, kF32, Tag::x) : memory::desc();
    const Dims strides{d.stride_h, d.stride_w}, pad{d.pad_h, d.pad_w};

    using Fwd = dnnl::convolution_forward;
    fwd_pd_ = Fwd::primitive_desc({prop_kind::forward_training, algorithm::convolution_direct,
                                   src_md, w_any, b_md, dst_md, strides, pad, pad},
                                  relu_attr(d.fused_relu), cpu_engine(), true);
    if (std::string why = why_not(fwd_pd_, name() + ": forward"); !why.empty())
      return unavailable(why);

    src_ = user_mem(src_md);
    dst_ = user_mem(dst_md);
    w_user_ = user_mem(w_user_md);
    if (d.bias) b_ = user_mem(b_md);
    w_fwd_ = same_or_owned(w_user_, fwd_pd_.weights_desc());
    if (w_fwd_ != w_user_) {
      EASEL_ASSIGN_OR_RETURN(w_to_fwd_,
                             make_reorder(w_user_, w_fwd_, name() + ": weights reorder"));
    }
    std::unordered_map<int, memory> fargs{
        {DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, w_fwd_}, {DNNL_ARG_DST, dst_}};
    if (d.bias) fargs[DNNL_ARG_BIAS] = b_;
    fwd_ = make_step<dnnl::convolution_forward>(fwd_pd_, std::move(fargs));

    // diff_dst as the backward primitives read it: the caller's, or masked by the fused ReLU.
    diff_dst_user_ = user_mem(dst_md);
    diff_dst_ = diff_dst_user_;
    if (d.fused_relu) {
      diff_dst_ = owned_mem(dst_md);
      EASEL_ASSIGN_OR_RETURN(relu_mask_,
                             make_relu_mask(dst_md, dst_, diff_dst_user_, diff_dst_, name()));
    }

    // Backward weights (and bias), diff_weights reordered to the user's format.
    using BwdW = dnnl::convolution_backward_weights;
    BwdW::primitive_desc bw_pd(
        {algorithm::convolution_direct, src_md, w_any, b_md, dst_md, strides, pad, pad},
        base_attr(), cpu_engine(), fwd_pd_, true);
    if (std::string why = why_not(bw_pd, name() + ": backward-weights"); !why.empty())
      return unavailable(why);
    dw_user_ = user_mem(w_user_md);
    if (d.bias) db_ = user_mem(b_md);
    dw_ = same_or_owned(dw_user_, bw_pd.diff_weights_desc());
    if (dw_ != dw_user_) {
      EASEL_ASSIGN_OR_RETURN(dw_to_user_,
                             make_reorder(dw_, dw_user_, name() + ": diff_weights reorder"));
    }
    std::unordered_map<int, memory> wargs{
        {DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
    if (d.bias) wargs[DNNL_ARG_DIFF_BIAS] = db_;
    bwd_w_ = make_step<BwdW>(bw_pd, std::move(wargs));

    diff_src_ = user_mem(src_md);
    std::string bwd_d_impl;
    EASEL_ASSIGN_OR_RETURN(bwd_d_impl, init_backward_data(src_md, w_any, dst_md, strides, pad));

    impl_ = std::string("dnnl:") + fwd_pd_.impl_info_str() + "/bwd_d=" + bwd_d_impl +
            "/bwd_w=" + bw_pd.impl_info_str();
    bind_scratch({&w_to_fwd_, &fwd_, &relu_mask_, &bwd_w_, &dw_to_user_, &w_to_bwd_, &bwd_d_,
                  &flip_to_pd_, &dd_to_blocked_, &ds_from_blocked_});
    return {};
  }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    point(src_, src);
    point(dst_, dst);
    point(w_user_, weights[0]);
    if (desc_.bias) point(b_, weights[1]);
    if (!w_to_fwd_.empty()) w_to_fwd_.run();
    fwd_.run();
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    point(diff_dst_user_, diff_dst);
    if (desc_.fused_relu) {
      point(dst_, dst);
      relu_mask_.run();
    }
    point(src_, src);
    point(dw_user_, diff_weights[0]);
    if (desc_.bias) point(db_, diff_weights[1]);
    bwd_w_.run();
    if (!dw_to_user_.empty()) dw_to_user_.run();
    if (diff_src == nullptr) return;

    point(diff_src_, diff_src);
    point(w_user_, weights[0]);
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
  // Chooses the backward-data strategy; returns its impl string.
  Result<std::string> init_backward_data(const memory::desc& src_md, const memory::desc& w_any,
                                         const memory::desc& dst_md, const Dims& strides,
                                         const Dims& pad) {
    using S = DnnlConvBwdData;
    auto prefixed = [&](Result<std::string> r) -> Result<std::string> {
      if (r.ok()) return r;
      return unavailable(name() + ": " + r.status().message());
    };
    switch (strategy_) {
      case S::native:
        return prefixed(try_native(src_md, w_any, dst_md, strides, pad));
      case S::forward_flip:
        return prefixed(try_flip(src_md, dst_md, strides));
      case S::blocked:
        return prefixed(try_blocked(src_md, w_any, dst_md, strides, pad));
      case S::automatic:
        break;
    }
    auto native = try_native(src_md, w_any, dst_md, strides, pad);
    if (native.ok()) return native;
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
    bwd_d_ = make_step<BwdD>(pd, {{DNNL_ARG_DIFF_DST, diff_dst_},
                                  {DNNL_ARG_WEIGHTS, w_bwd_},
                                  {DNNL_ARG_DIFF_SRC, diff_src_}});
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
        fpd, {{DNNL_ARG_SRC, diff_dst_}, {DNNL_ARG_WEIGHTS, w_bwd_}, {DNNL_ARG_DST, diff_src_}});
    flip_ = true;
    return "fwd-flip(" + std::string(fpd.impl_info_str()) + ")";
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
    memory dd = same_or_owned(diff_dst_, bpd.diff_dst_desc());
    memory ds = same_or_owned(diff_src_, bpd.diff_src_desc());
    if (dd != diff_dst_) {
      EASEL_ASSIGN_OR_RETURN(dd_to_blocked_, make_reorder(diff_dst_, dd, "diff_dst reorder"));
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
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  memory src_, dst_, w_user_, b_, w_fwd_;
  memory diff_dst_user_, diff_dst_, dw_user_, db_, dw_, diff_src_, w_bwd_, w_flip_user_;
  bool flip_ = false;
  Step w_to_fwd_, fwd_, relu_mask_, bwd_w_, dw_to_user_, w_to_bwd_, bwd_d_, flip_to_pd_;
  Step dd_to_blocked_, ds_from_blocked_;
};

// ---------------------------------------------------------------------------------------------
// Inner product: the src's per-image block is one row of ic_total values in its own memory
// order, so src {N, ic_total} nc and weights {oc, ic_total} oi describe both layouts exactly.
class InnerProductOp final : public DnnlOp {
 public:
  explicit InnerProductOp(const OpDesc& d) : DnnlOp(d) {}

  Status init() {
    const OpDesc& d = desc_;
    const int64_t n = d.src.n, ic = d.src.per_image();
    const memory::desc src_md({n, ic}, kF32, Tag::nc), dst_md({n, d.oc}, kF32, Tag::nc);
    const memory::desc w_md({d.oc, ic}, kF32, Tag::oi);
    const memory::desc b_md = d.bias ? memory::desc({d.oc}, kF32, Tag::x) : memory::desc();

    using Fwd = dnnl::inner_product_forward;
    Fwd::primitive_desc fpd({prop_kind::forward_training, src_md, w_md, b_md, dst_md},
                            relu_attr(d.fused_relu), cpu_engine(), true);
    if (std::string why = why_not(fpd, name() + ": forward"); !why.empty()) return unavailable(why);
    dnnl::inner_product_backward_data::primitive_desc dpd({src_md, w_md, dst_md}, base_attr(),
                                                          cpu_engine(), fpd, true);
    if (std::string why = why_not(dpd, name() + ": backward-data"); !why.empty())
      return unavailable(why);
    dnnl::inner_product_backward_weights::primitive_desc wpd({src_md, w_md, b_md, dst_md},
                                                             base_attr(), cpu_engine(), fpd, true);
    if (std::string why = why_not(wpd, name() + ": backward-weights"); !why.empty())
      return unavailable(why);

    src_ = user_mem(src_md);
    dst_ = user_mem(dst_md);
    w_ = user_mem(w_md);
    if (d.bias) b_ = user_mem(b_md);
    std::unordered_map<int, memory> fargs{
        {DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, dst_}};
    if (d.bias) fargs[DNNL_ARG_BIAS] = b_;
    fwd_ = make_step<Fwd>(fpd, std::move(fargs));

    diff_dst_user_ = user_mem(dst_md);
    diff_dst_ = diff_dst_user_;
    if (d.fused_relu) {
      diff_dst_ = owned_mem(dst_md);
      EASEL_ASSIGN_OR_RETURN(relu_mask_,
                             make_relu_mask(dst_md, dst_, diff_dst_user_, diff_dst_, name()));
    }
    diff_src_ = user_mem(src_md);
    bwd_d_ = make_step<dnnl::inner_product_backward_data>(
        dpd,
        {{DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    dw_ = user_mem(w_md);
    if (d.bias) db_ = user_mem(b_md);
    std::unordered_map<int, memory> wargs{
        {DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
    if (d.bias) wargs[DNNL_ARG_DIFF_BIAS] = db_;
    bwd_w_ = make_step<dnnl::inner_product_backward_weights>(wpd, std::move(wargs));

    impl_ = std::string("dnnl:") + fpd.impl_info_str() + "/bwd_d=" + dpd.impl_info_str() +
            "/bwd_w=" + wpd.impl_info_str();
    bind_scratch({&fwd_, &relu_mask_, &bwd_d_, &bwd_w_});
    return {};
  }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    point(src_, src);
    point(dst_, dst);
    point(w_, weights[0]);
    if (desc_.bias) point(b_, weights[1]);
    fwd_.run();
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    point(diff_dst_user_, diff_dst);
    if (desc_.fused_relu) {
      point(dst_, dst);
      relu_mask_.run();
    }
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
  memory src_, dst_, w_, b_, diff_dst_user_, diff_dst_, diff_src_, dw_, db_;
  Step fwd_, relu_mask_, bwd_d_, bwd_w_;
};

// ---------------------------------------------------------------------------------------------
// Max and average pooling with Caffe's ceil-mode output size, expressed as extra padding on the
// bottom/right. Max pooling: oneDNN's forward_inference kernel, and an own backward that sends
// each gradient to the first position (row-major in the window) where src equals dst, the
// argmax Caffe picks. Measured on this machine's kind (oneDNN 2.6.3, one core, LeNet pool1
// nhwc): forward_training with its workspace 1.17 ms against forward_inference 0.30 ms, and
// oneDNN's backward 1.17 ms; the own backward is a single pass over src.
// Average pooling: Caffe divides by the window clipped to [-pad, in + pad). That is oneDNN's
// exclude_padding when pad is 0, and its include_padding when no window reaches past in + pad
// (the ceil-mode extra padding is at most pad); other shapes are refused (the reference runs).
class PoolOp final : public DnnlOp {
 public:
  explicit PoolOp(const OpDesc& d) : DnnlOp(d) {}

  Status init() {
    const OpDesc& d = desc_;
    const Shape4 o = dst_shape(d);
    const memory::desc src_md = act_md(d.src, d.layout), dst_md = act_md(o, d.layout);
    const int64_t pr_h = (o.h - 1) * d.stride_h + d.kh - d.src.h - d.pad_h;
    const int64_t pr_w = (o.w - 1) * d.stride_w + d.kw - d.src.w - d.pad_w;
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
      impl_ = std::string("dnnl:") + fpd.impl_info_str() + "/bwd=own:argmax";
      bind_scratch({&fwd_});
      return {};
    }
    dnnl::pooling_backward::primitive_desc bpd({alg, src_md, dst_md, strides, kernel, pad_l, pad_r},
                                               base_attr(), cpu_engine(), fpd, true);
    if (std::string why = why_not(bpd, name() + ": backward"); !why.empty())
      return unavailable(why);

    diff_dst_ = user_mem(dst_md);
    diff_src_ = user_mem(src_md);
    bwd_ = make_step<dnnl::pooling_backward>(
        bpd, {{DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    impl_ = std::string("dnnl:") + fpd.impl_info_str() + "/bwd=" + bpd.impl_info_str();
    bind_scratch({&fwd_, &bwd_});
    return {};
  }

  void forward(const float* src, float* dst, std::span<const float* const>, bool) override {
    point(src_, src);
    point(dst_, dst);
    fwd_.run();
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    if (diff_src == nullptr) return;
    if (desc_.kind == OpKind::max_pool) {
      max_backward(src, dst, diff_dst, diff_src);
      return;
    }
    point(diff_dst_, diff_dst);
    point(diff_src_, diff_src);
    bwd_.run();
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

  memory src_, dst_, diff_dst_, diff_src_;
  Step fwd_, bwd_;
};

// ---------------------------------------------------------------------------------------------
// ReLU (negative slope 0), backward from dst (dst > 0 exactly where src > 0); in place works.
class ReluOp final : public DnnlOp {
 public:
  explicit ReluOp(const OpDesc& d) : DnnlOp(d) {}

  Status init() {
    const memory::desc md = act_md(desc_.src, desc_.layout);
    const algorithm alg = algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc fpd({prop_kind::forward_training, alg, md, 0.f, 0.f},
                                              base_attr(), cpu_engine(), true);
    if (std::string why = why_not(fpd, name() + ": forward"); !why.empty()) return unavailable(why);
    src_ = user_mem(md);
    dst_ = user_mem(md);
    diff_dst_ = user_mem(md);
    diff_src_ = user_mem(md);
    EASEL_ASSIGN_OR_RETURN(bwd_, make_relu_mask(md, dst_, diff_dst_, diff_src_, name()));
    fwd_ = make_step<dnnl::eltwise_forward>(fpd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    impl_ = std::string("dnnl:") + fpd.impl_info_str();
    bind_scratch({&fwd_, &bwd_});
    return {};
  }

  void forward(const float* src, float* dst, std::span<const float* const>, bool) override {
    point(src_, src);
    point(dst_, dst);
    fwd_.run();
  }

  void backward(const float*, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    if (diff_src == nullptr) return;
    point(dst_, dst);
    point(diff_dst_, diff_dst);
    point(diff_src_, diff_src);
    bwd_.run();
  }

 private:
  memory src_, dst_, diff_dst_, diff_src_;
  Step fwd_, bwd_;
};

// ---------------------------------------------------------------------------------------------
// LRN across channels: Caffe's dst = src / (k + alpha/n * sum src^2)^beta is oneDNN's
// definition too. The forward's workspace is kept for backward. oneDNN 2.6 has no jit kernel
// for some nchw cases (local size 3, backward); those run in nhwc between reorders, the
// reordered src kept from forward for backward.
class LrnOp final : public DnnlOp {
 public:
  explicit LrnOp(const OpDesc& d) : DnnlOp(d) {}

  Status init() {
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
    const algorithm alg = algorithm::lrn_across_channels;
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

template <typename T, typename... Args>
Result<std::unique_ptr<Op>> build(const OpDesc& d, Args... args) {
  auto op = std::make_unique<T>(d, args...);
  EASEL_RETURN_IF_ERROR(op->init());
  return std::unique_ptr<Op>(std::move(op));
}

}  // namespace

bool dnnl_available() {
  return true;
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc) {
  return make_dnnl_op(desc, DnnlConvBwdData::automatic);
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc, DnnlConvBwdData conv_bwd_data) {
  if (std::string why = validate(desc); !why.empty()) return invalid_argument(why);
  try {
    switch (desc.kind) {
      case OpKind::conv:
        return build<ConvOp>(desc, conv_bwd_data);
      case OpKind::inner_product:
        return build<InnerProductOp>(desc);
      case OpKind::max_pool:
      case OpKind::avg_pool:
        return build<PoolOp>(desc);
      case OpKind::relu:
        return build<ReluOp>(desc);
      case OpKind::lrn:
        return build<LrnOp>(desc);
      case OpKind::dropout:
        return unavailable("dropout: no oneDNN primitive (it needs the op's own RNG stream)");
    }
  } catch (const dnnl::error& e) {
    return internal_error(std::string(op_kind_name(desc.kind)) + " " + desc.src.to_string() +
                          ": oneDNN call failed: " + e.what());
  }
  return invalid_argument("unknown op kind");
}

}  // namespace easel
