// Shared pieces of the oneDNN ops (devices/cpu/dnnl_*.cpp): the engine, per-thread streams,
// memory helpers, Step (a primitive with its arguments, built once) and DnnlOp.
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
#pragma once

#include <dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "devices/cpu/dnnl_ops.hpp"
#include "engine/log.hpp"

namespace easel::dnnl_detail {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Tag = memory::format_tag;
using Dims = memory::dims;
inline constexpr auto kF32 = memory::data_type::f32;
inline constexpr auto kBf16 = memory::data_type::bf16;

inline dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One stream per calling thread: streams are not shared between threads.
inline dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

inline Tag layout_tag(Layout l) {
  return l == Layout::nchw ? Tag::nchw : Tag::nhwc;
}

// Activation [N, C, H, W] dense in the net's layout.
inline memory::desc act_md(const Shape4& s, Layout l, memory::data_type dt = kF32) {
  return memory::desc({s.n, s.c, s.h, s.w}, dt, layout_tag(l));
}

// A memory without a buffer: forward/backward point it at the caller's data.
inline memory user_mem(const memory::desc& md) {
  return memory(md, cpu_engine(), DNNL_MEMORY_NONE);
}
// A memory whose buffer the op owns (allocated by oneDNN, once, at creation).
inline memory owned_mem(const memory::desc& md) {
  return memory(md, cpu_engine());
}

inline void point(const memory& m, const float* p) {
  m.set_data_handle(const_cast<float*>(p));
}

inline dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

inline dnnl::primitive_attr relu_attr(bool fused_relu) {
  dnnl::primitive_attr attr = base_attr();
  if (fused_relu) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  return attr;
}

// "ref:any", "lrn_ref:any", "ref_int8:any", ...
inline bool is_ref(const std::string& impl) {
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
inline Result<Step> make_reorder(const memory& from, const memory& to, const std::string& what) {
  dnnl::reorder::primitive_desc pd(cpu_engine(), from.get_desc(), cpu_engine(), to.get_desc(),
                                   base_attr(), /*allow_empty=*/true);
  if (std::string why = why_not(pd, what); !why.empty()) return unavailable(why);
  return Step{dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, pd.scratchpad_desc()};
}

// `wanted` itself when it equals `user` (no reorder needed), else a new owned memory.
inline memory same_or_owned(const memory& user, const memory::desc& wanted) {
  return user.get_desc() == wanted ? user : owned_mem(wanted);
}

class DnnlOp : public Op {
 public:
  std::string impl() const override { return impl_; }

 protected:
  explicit DnnlOp(const OpDesc& d) : Op(d) {}

  // "conv 64x20x12x12 nhwc", for refusal reasons.
  std::string name() const { return describe_op(desc_); }

  // One scratchpad per op, as large as the largest of its steps (they run one at a time).
  void bind_scratch(std::initializer_list<Step*> steps) {
    bind_scratch(std::span<Step* const>(steps.begin(), steps.size()));
  }
  void bind_scratch(std::span<Step* const> steps) {
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

// The base of an op of one forward and one backward primitive over its four activation tensors
// (ReLU, pooling): forward runs fwd_ from src_ into dst_, run_backward bwd_ from diff_dst_ into
// diff_src_; the primitives are bound to those memories at init.
class FwdBwdOp : public DnnlOp {
 public:
  void forward(const float* src, float* dst, std::span<const float* const>, bool) override {
    point(src_, src);
    point(dst_, dst);
    fwd_.run();
  }

 protected:
  using DnnlOp::DnnlOp;

  // The four tensors as the caller's memory: src and diff_src src_md, dst and diff_dst dst_md.
  void user_tensors(const memory::desc& src_md, const memory::desc& dst_md) {
    src_ = user_mem(src_md);
    dst_ = user_mem(dst_md);
    diff_dst_ = user_mem(dst_md);
    diff_src_ = user_mem(src_md);
  }
  // impl_ "dnnl:" + impl, and one scratchpad for fwd_ and bwd_ (when made).
  void finish(const std::string& impl) {
    impl_ = "dnnl:" + impl;
    bind_scratch({&fwd_, &bwd_});
  }
  void run_backward(const float* diff_dst, float* diff_src) {
    point(diff_dst_, diff_dst);
    point(diff_src_, diff_src);
    bwd_.run();
  }

  memory src_, dst_, diff_dst_, diff_src_;
  Step fwd_, bwd_;
};

// Backward of a fused ReLU: diff_dst masked by dst > 0 into an owned buffer.
inline Result<Step> make_relu_mask(const memory::desc& md, const memory& dst,
                                   const memory& diff_dst, const memory& masked,
                                   const std::string& what) {
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

// diff_dst as the backward primitives of a weighted op (convolution, inner product) read it: the
// caller's (user), masked by the fused ReLU (masked, else user itself), and in bf16 mode a bf16
// copy of that (c, else masked itself).
struct DiffDst {
  memory user, masked, c;
  Step relu_mask, to_c;

  // md: diff_dst as the caller holds it (dst's too); c_md: as the primitives read it; dst: the
  // op's dst memory, which the mask reads.
  Status init(const memory::desc& md, const memory::desc& c_md, bool fused_relu, bool bf16,
              const memory& dst, const std::string& what) {
    user = user_mem(md);
    masked = user;
    if (fused_relu) {
      masked = owned_mem(md);
      EASEL_ASSIGN_OR_RETURN(relu_mask, make_relu_mask(md, dst, user, masked, what));
    }
    c = masked;
    if (bf16) {
      c = owned_mem(c_md);
      EASEL_ASSIGN_OR_RETURN(to_c, make_reorder(masked, c, what + ": diff_dst to bf16"));
    }
    return {};
  }
  // Before a backward: user pointed at diff_dst, then masked (dst_mem pointed at dst) and copied
  // as init set up.
  void prepare(const float* diff_dst, const memory& dst_mem, const float* dst) {
    point(user, diff_dst);
    if (!relu_mask.empty()) {
      point(dst_mem, dst);
      relu_mask.run();
    }
    if (!to_c.empty()) to_c.run();
  }
};

// Creates op T and runs its init().
template <typename T, typename... Args>
Result<std::unique_ptr<Op>> build(const OpDesc& d, Args... args) {
  auto op = std::make_unique<T>(d, args...);
  EASEL_RETURN_IF_ERROR(op->init());
  return std::unique_ptr<Op>(std::move(op));
}

// Runs make() (an op's creation), turning a oneDNN exception into a Status naming the op. Every
// make_dnnl_<kind> factory goes through it.
template <typename F>
Result<std::unique_ptr<Op>> guarded(const OpDesc& d, F make) {
  try {
    return make();
  } catch (const dnnl::error& e) {
    return internal_error(std::string(op_kind_name(d.kind)) + " " + d.src.to_string() +
                          ": oneDNN call failed: " + e.what());
  }
}

// make(options); under bf16, a shape without a bf16 kernel (unavailable) is built fp32 instead,
// said once.
template <typename F>
Result<std::unique_ptr<Op>> with_bf16_fallback(const DnnlOptions& options, F make) {
  if (options.precision != Precision::bf16) return make(options);
  auto op = make(options);
  if (op.ok() || op.status().code() != Code::unavailable) return op;
  log_once(LogLevel::info, "dnnl", "bf16-fallback:" + op.status().message(),
           op.status().message() + "; this layer runs fp32");
  DnnlOptions f32 = options;
  f32.precision = Precision::fp32;
  return make(f32);
}

}  // namespace easel::dnnl_detail
