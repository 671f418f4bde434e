// oneDNN versions of the kinds of several inputs (conventions: devices/cpu/dnnl_common.hpp):
// element-wise add (oneDNN's sum) and channel concatenation (oneDNN's concat, backward as
// reorders out of diff_dst's channel ranges). They implement forward_n/backward_n; forward and
// backward, which see one input only, must not be called on them.
#include <cstring>

#include "devices/cpu/dnnl_common.hpp"

namespace easel::dnnl_detail {

namespace {

// The base of add and concat: one oneDNN primitive (join_) from the inputs srcs_ into dst_.
class JoinOp : public MultiInputOp<DnnlOp> {
 public:
  void forward_n(std::span<const float* const> srcs, float* dst, std::span<const float* const>,
                 bool) override {
    for (size_t i = 0; i < inputs(); ++i)
      point(srcs_[i], srcs[i]);
    point(dst_, dst);
    join_.run();
  }

 protected:
  using MultiInputOp::MultiInputOp;

  // join_ from pd, reading srcs_ (the caller's memory, input i described by mds[i]) and writing
  // dst_ (dst_md).
  template <class Primitive>
  void make_join(const typename Primitive::primitive_desc& pd, const std::vector<memory::desc>& mds,
                 const memory::desc& dst_md) {
    std::unordered_map<int, memory> args;
    for (size_t i = 0; i < inputs(); ++i) {
      srcs_.push_back(user_mem(mds[i]));
      args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = srcs_.back();
    }
    dst_ = user_mem(dst_md);
    args[DNNL_ARG_DST] = dst_;
    join_ = make_step<Primitive>(pd, std::move(args));
  }

  std::vector<memory> srcs_;
  memory dst_;
  Step join_;
};

// ---------------------------------------------------------------------------------------------
// dst = sum_i srcs[i]: oneDNN's sum (scales 1). Backward copies diff_dst into every diff_src
// (an OpenMP copy; oneDNN has no primitive that would do less).
class AddOp final : public JoinOp {
 public:
  explicit AddOp(const OpDesc& d) : JoinOp(d) {}

  Status init() {
    const memory::desc md = act_md(desc_.src, desc_.layout);
    const std::vector<memory::desc> mds(inputs(), md);
    dnnl::sum::primitive_desc pd;
    try {
      pd = dnnl::sum::primitive_desc(md, std::vector<float>(inputs(), 1.f), mds, cpu_engine(),
                                     base_attr());
    } catch (const dnnl::error& e) {
      return unavailable(name() + ": no oneDNN sum (" + e.what() + ")");
    }
    if (std::string why = why_not(pd, name() + ": sum"); !why.empty()) return unavailable(why);
    make_join<dnnl::sum>(pd, mds, md);
    impl_ = std::string("dnnl:") + pd.impl_info_str() + "/bwd=own:copy";
    bind_scratch({&join_});
    return {};
  }

  void backward_n(std::span<const float* const>, const float*, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const>,
                  std::span<float* const>) override {
    const int64_t count = desc_.src.count();
    constexpr int64_t kChunk = int64_t{1} << 16;
    for (size_t i = 0; i < inputs(); ++i) {
      float* ds = diff_srcs[i];
      if (ds == nullptr || ds == diff_dst) continue;
#pragma omp parallel for if (count > kChunk)
      for (int64_t at = 0; at < count; at += kChunk)
        std::memcpy(ds + at, diff_dst + at,
                    static_cast<size_t>(std::min(kChunk, count - at)) * sizeof(float));
    }
  }
};

// ---------------------------------------------------------------------------------------------
// dst = the inputs' channels in order: oneDNN's concat. Backward: input i's diff_src is the
// channel range [c0(i), c0(i) + c_i) of diff_dst, copied by a reorder from that sub-memory.
class ConcatOp final : public JoinOp {
 public:
  explicit ConcatOp(const OpDesc& d) : JoinOp(d) {}

  Status init() {
    const OpDesc& d = desc_;
    const Shape4 o = dst_shape(d);
    const memory::desc dst_md = act_md(o, d.layout);
    std::vector<memory::desc> mds;
    for (size_t i = 0; i < inputs(); ++i)
      mds.push_back(act_md(src_shape(i), d.layout));
    dnnl::concat::primitive_desc pd;
    try {
      pd = dnnl::concat::primitive_desc(dst_md, 1, mds, cpu_engine(), base_attr());
    } catch (const dnnl::error& e) {
      return unavailable(name() + ": no oneDNN concat (" + e.what() + ")");
    }
    if (std::string why = why_not(pd, name() + ": concat"); !why.empty()) return unavailable(why);
    make_join<dnnl::concat>(pd, mds, dst_md);

    int64_t c0 = 0;
    for (size_t i = 0; i < inputs(); ++i) {
      const Shape4& s = src_shape(i);
      // diff_dst's channels of input i, a view of the whole diff_dst buffer
      const memory::desc part = dst_md.submemory_desc({s.n, s.c, s.h, s.w}, {0, c0, 0, 0});
      diff_dst_parts_.push_back(user_mem(part));
      diff_srcs_.push_back(user_mem(mds[i]));
      EASEL_ASSIGN_OR_RETURN(Step r, make_reorder(diff_dst_parts_.back(), diff_srcs_.back(),
                                                  name() + ": diff_dst split"));
      split_.push_back(std::move(r));
      c0 += s.c;
    }
    impl_ = std::string("dnnl:") + pd.impl_info_str() + "/bwd=reorders";
    std::vector<Step*> steps{&join_};
    for (Step& s : split_)
      steps.push_back(&s);
    bind_scratch(steps);
    return {};
  }

  void backward_n(std::span<const float* const>, const float*, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const>,
                  std::span<float* const>) override {
    for (size_t i = 0; i < inputs(); ++i) {
      if (diff_srcs[i] == nullptr) continue;
      point(diff_dst_parts_[i], diff_dst);  // the sub-memory's offset is in its descriptor
      point(diff_srcs_[i], diff_srcs[i]);
      split_[i].run();
    }
  }

 private:
  std::vector<memory> diff_dst_parts_, diff_srcs_;
  std::vector<Step> split_;
};

}  // namespace

}  // namespace easel::dnnl_detail

namespace easel {

Result<std::unique_ptr<Op>> make_dnnl_add(const OpDesc& d, const DnnlOptions& /*options*/) {
  return dnnl_detail::guarded(d, [&] { return dnnl_detail::build<dnnl_detail::AddOp>(d); });
}

Result<std::unique_ptr<Op>> make_dnnl_concat(const OpDesc& d, const DnnlOptions& /*options*/) {
  return dnnl_detail::guarded(d, [&] { return dnnl_detail::build<dnnl_detail::ConcatOp>(d); });
}

}  // namespace easel
