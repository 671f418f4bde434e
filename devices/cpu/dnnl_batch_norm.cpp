// oneDNN batch normalization (conventions: devices/cpu/dnnl_common.hpp). oneDNN 2.6 picks its jit
// kernel for nhwc with channels a multiple of 16, else its plain C++ kernels for nchw (ncsp_bnorm)
// and nhwc (nspc_bnorm), which are not reference kernels.
#include <cmath>
#include <vector>

#include "devices/cpu/dnnl_common.hpp"

namespace easel::dnnl_detail {

namespace {

using dnnl::normalization_flags;

// Forward: oneDNN's training kernel (batch statistics; biased variance into owned buffers, then
// the running-statistics update here, with the variance made unbiased), or its inference kernel
// on the running statistics (use_global_stats). A fused ReLU is oneDNN's fuse_norm_relu (its
// workspace owned). Backward: diff_dst masked by dst > 0 when the ReLU is fused (an eltwise
// step, which serves after either forward) into the caller's diff_src, then oneDNN's backward
// on the statistics the last forward used (the global-stats variant after an inference
// forward), in place there (oneDNN's batch normalization takes diff_dst == diff_src): no
// activation-sized buffer of its own. Without diff_src (a net's
// first layer) the two parameter gradients come from an own per-channel loop, since oneDNN's
// backward always writes diff_src.
class BatchNormOp final : public DnnlOp {
 public:
  explicit BatchNormOp(const OpDesc& d) : DnnlOp(d) {}

  Status init() {
    const OpDesc& d = desc_;
    const memory::desc md = act_md(d.src, d.layout);
    EASEL_ASSIGN_OR_RETURN(const BnPds pds, make_pds(md));
    const memory::desc c_md({d.src.c}, kF32, Tag::x);
    init_forward(pds, md, c_md);
    EASEL_RETURN_IF_ERROR(init_backward(pds, md, c_md));
    impl_ = std::string("dnnl:") + pds.train.impl_info_str() + "/bwd=" + pds.bwd.impl_info_str();
    bind_scratch({&train_, &infer_, &relu_mask_, &bwd_, &global_bwd_});
    return {};
  }

  // A training forward updates weights[2] and weights[3] (running mean and variance) in place:
  // state parameters, writable by contract (state_params() in devices/op.hpp).
  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool training) override {
    point_tensors(src, dst, weights);
    last_training_ = training;
    if (!training) {
      infer_.run();
      return;
    }
    train_.run();
    const OpDesc& d = desc_;
    const double m = static_cast<double>(d.src.n * d.src.h * d.src.w);
    const float mom = d.bn_momentum, unbias = static_cast<float>(m / std::max(m - 1, 1.0));
    const float* mean = static_cast<const float*>(mean_.get_data_handle());
    const float* var = static_cast<const float*>(var_.get_data_handle());
    float* running_mean = const_cast<float*>(weights[2]);
    float* running_var = const_cast<float*>(weights[3]);
    for (int64_t c = 0; c < d.src.c; ++c) {
      running_mean[c] = (1 - mom) * running_mean[c] + mom * mean[c];
      running_var[c] = (1 - mom) * running_var[c] + mom * var[c] * unbias;
    }
  }

  // After forward() on the same src/dst; diff_weights[2] and [3] (the state) become 0.
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const int64_t channels = desc_.src.c;
    std::fill(diff_weights[2], diff_weights[2] + channels, 0.f);
    std::fill(diff_weights[3], diff_weights[3] + channels, 0.f);
    point_tensors(src, dst, weights);
    point(diff_dst_user_, diff_dst);
    if (diff_src == nullptr && desc_.fused_relu && masked_.empty())
      masked_.resize(static_cast<size_t>(desc_.src.count()));
    point(diff_src_, diff_src != nullptr ? diff_src : masked_.data());
    if (desc_.fused_relu) relu_mask_.run();
    if (diff_src == nullptr) {
      param_gradients(src, diff_weights[0], diff_weights[1]);
      return;
    }
    point(diff_scale_, diff_weights[0]);
    point(diff_shift_, diff_weights[1]);
    (last_training_ ? bwd_ : global_bwd_).run();
  }

 private:
  // The memories forward and backward share: src, dst and the four parameters.
  void point_tensors(const float* src, const float* dst, std::span<const float* const> weights) {
    point(src_, src);
    point(dst_, dst);
    point(scale_, weights[0]);
    point(shift_, weights[1]);
    point(running_mean_, weights[2]);
    point(running_var_, weights[3]);
  }

  using Fwd = dnnl::batch_normalization_forward;
  using Bwd = dnnl::batch_normalization_backward;

  // The op's primitive descriptors: training and inference forwards, backward after each.
  struct BnPds {
    Fwd::primitive_desc train, infer;
    Bwd::primitive_desc bwd, global_bwd;
  };

  // All four descriptors on activations md, checked before any memory is bound; an error says
  // which one oneDNN refused.
  Result<BnPds> make_pds(const memory::desc& md) const {
    const OpDesc& d = desc_;
    const auto base = normalization_flags::use_scale | normalization_flags::use_shift;
    const auto global = base | normalization_flags::use_global_stats;
    const auto relu =
        d.fused_relu ? normalization_flags::fuse_norm_relu : normalization_flags::none;
    BnPds p;
    p.train = Fwd::primitive_desc({prop_kind::forward_training, md, d.eps, base | relu},
                                  base_attr(), cpu_engine(), true);
    if (std::string why = why_not(p.train, name() + ": forward"); !why.empty())
      return unavailable(why);
    p.infer = Fwd::primitive_desc({prop_kind::forward_inference, md, d.eps, global | relu},
                                  base_attr(), cpu_engine(), true);
    if (std::string why = why_not(p.infer, name() + ": inference forward"); !why.empty())
      return unavailable(why);
    // The backward hints: the forwards without the ReLU (it is masked before backward).
    Fwd::primitive_desc train_hint({prop_kind::forward_training, md, d.eps, base}, cpu_engine(),
                                   true);
    Fwd::primitive_desc global_hint({prop_kind::forward_training, md, d.eps, global}, cpu_engine(),
                                    true);
    if (!train_hint || !global_hint) return unavailable(name() + ": no forward to hint backward");
    p.bwd = Bwd::primitive_desc({prop_kind::backward, md, md, d.eps, base}, base_attr(),
                                cpu_engine(), train_hint, true);
    if (std::string why = why_not(p.bwd, name() + ": backward"); !why.empty())
      return unavailable(why);
    p.global_bwd = Bwd::primitive_desc({prop_kind::backward, md, md, d.eps, global}, base_attr(),
                                       cpu_engine(), global_hint, true);
    if (std::string why = why_not(p.global_bwd, name() + ": backward on running statistics");
        !why.empty())
      return unavailable(why);
    return p;
  }

  // The training forward (batch statistics into owned mean_ and var_, the workspace it asks
  // for) and the inference one (on the running statistics); md the activations, c_md a
  // per-channel vector.
  void init_forward(const BnPds& p, const memory::desc& md, const memory::desc& c_md) {
    src_ = user_mem(md);
    dst_ = user_mem(md);
    scale_ = user_mem(c_md);
    shift_ = user_mem(c_md);
    running_mean_ = user_mem(c_md);
    running_var_ = user_mem(c_md);
    mean_ = owned_mem(p.train.mean_desc());
    var_ = owned_mem(p.train.variance_desc());
    std::unordered_map<int, memory> fargs{{DNNL_ARG_SRC, src_},     {DNNL_ARG_DST, dst_},
                                          {DNNL_ARG_SCALE, scale_}, {DNNL_ARG_SHIFT, shift_},
                                          {DNNL_ARG_MEAN, mean_},   {DNNL_ARG_VARIANCE, var_}};
    if (p.train.workspace_desc().get_size() != 0) {
      workspace_ = owned_mem(p.train.workspace_desc());
      fargs[DNNL_ARG_WORKSPACE] = workspace_;
    }
    train_ = make_step<Fwd>(p.train, fargs);
    fargs.erase(DNNL_ARG_WORKSPACE);
    fargs[DNNL_ARG_MEAN] = running_mean_;
    fargs[DNNL_ARG_VARIANCE] = running_var_;
    infer_ = make_step<Fwd>(p.infer, std::move(fargs));
  }

  // The fused ReLU's mask and the two backwards (after a training forward, and on the running
  // statistics after an inference one), in place on diff_src.
  Status init_backward(const BnPds& p, const memory::desc& md, const memory::desc& c_md) {
    diff_dst_user_ = user_mem(md);
    diff_dst_ = diff_dst_user_;
    diff_src_ = user_mem(md);
    if (desc_.fused_relu) {  // masked into diff_src (or masked_, without one)
      diff_dst_ = diff_src_;
      EASEL_ASSIGN_OR_RETURN(relu_mask_,
                             make_relu_mask(md, dst_, diff_dst_user_, diff_dst_, name()));
    }
    diff_scale_ = user_mem(c_md);
    diff_shift_ = user_mem(c_md);
    std::unordered_map<int, memory> bargs{{DNNL_ARG_SRC, src_},
                                          {DNNL_ARG_MEAN, mean_},
                                          {DNNL_ARG_VARIANCE, var_},
                                          {DNNL_ARG_DIFF_DST, diff_dst_},
                                          {DNNL_ARG_SCALE, scale_},
                                          {DNNL_ARG_SHIFT, shift_},  // use_shift wants it
                                          {DNNL_ARG_DIFF_SRC, diff_src_},
                                          {DNNL_ARG_DIFF_SCALE, diff_scale_},
                                          {DNNL_ARG_DIFF_SHIFT, diff_shift_}};
    bwd_ = make_step<Bwd>(p.bwd, bargs);
    bargs[DNNL_ARG_MEAN] = running_mean_;
    bargs[DNNL_ARG_VARIANCE] = running_var_;
    global_bwd_ = make_step<Bwd>(p.global_bwd, std::move(bargs));
    return {};
  }

  // diff_shift[c] = sum g, diff_scale[c] = sum g * (x - mean[c]) / sqrt(var[c] + eps) over the
  // channel, g the (masked) diff_dst, mean and var those of the last forward.
  void param_gradients(const float* src, float* diff_scale, float* diff_shift) const {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const float* g = static_cast<const float*>(diff_dst_.get_data_handle());
    const float* mean =
        static_cast<const float*>((last_training_ ? mean_ : running_mean_).get_data_handle());
    const float* var =
        static_cast<const float*>((last_training_ ? var_ : running_var_).get_data_handle());
    std::fill(diff_scale, diff_scale + s.c, 0.f);
    std::fill(diff_shift, diff_shift + s.c, 0.f);
    const int64_t hw = s.h * s.w;
    for (int64_t n = 0; n < s.n; ++n) {
      const int64_t base = n * s.per_image();
      if (d.layout == Layout::nchw) {
        for (int64_t c = 0; c < s.c; ++c) {
          float ds = 0.f, dsh = 0.f;
          const int64_t off = base + c * hw;
#pragma omp simd reduction(+ : ds, dsh)
          for (int64_t i = 0; i < hw; ++i) {
            dsh += g[off + i];
            ds += g[off + i] * (src[off + i] - mean[c]);
          }
          diff_shift[c] += dsh;
          diff_scale[c] += ds;
        }
      } else {
        for (int64_t i = 0; i < hw; ++i) {
          const int64_t off = base + i * s.c;
#pragma omp simd
          for (int64_t c = 0; c < s.c; ++c) {
            diff_shift[c] += g[off + c];
            diff_scale[c] += g[off + c] * (src[off + c] - mean[c]);
          }
        }
      }
    }
    for (int64_t c = 0; c < s.c; ++c)
      diff_scale[c] /= std::sqrt(var[c] + d.eps);
  }

  memory src_, dst_, scale_, shift_, running_mean_, running_var_, mean_, var_, workspace_;
  memory diff_dst_user_, diff_dst_, diff_src_, diff_scale_, diff_shift_;
  Step train_, infer_, relu_mask_, bwd_, global_bwd_;
  std::vector<float> masked_;  // the masked diff_dst of a fused ReLU without diff_src
  bool last_training_ = false;
};

}  // namespace

}  // namespace easel::dnnl_detail

namespace easel {

Result<std::unique_ptr<Op>> make_dnnl_batch_norm(const OpDesc& d, const DnnlOptions& /*options*/) {
  return dnnl_detail::guarded(d, [&] { return dnnl_detail::build<dnnl_detail::BatchNormOp>(d); });
}

}  // namespace easel
