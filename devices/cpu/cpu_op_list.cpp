// The CPU device's ordered list of op implementations (see cpu_op_list.hpp), and the walks over
// it: the device's (make_cpu_op) and one family's (make_dnnl_op, make_ref_op).
#include "devices/cpu/cpu_op_list.hpp"

#include <string>

#include "devices/cpu/own_ops.hpp"
#include "devices/cpu/ref_ops.hpp"
#include "easel_config.h"
#include "engine/log.hpp"

namespace easel {

namespace {

// The reference kernels take no oneDNN options.
template <Result<std::unique_ptr<Op>> (*Make)(const OpDesc&)>
Result<std::unique_ptr<Op>> ref(const OpDesc& d, const DnnlOptions& /*options*/) {
  return Make(d);
}

// In order of preference for each kind: every oneDNN row before every reference row. Adding an
// implementation: its factory (one file, or one section of ref_ops.cpp / dnnl_ops.cpp) and
// one row here.
constexpr CpuOpImpl kCpuOps[] = {
#if EASEL_HAVE_DNNL
    // oneDNN (devices/cpu/dnnl_*.cpp): refuses what would run a oneDNN reference kernel.
    {OpKind::conv, "dnnl", true, make_dnnl_conv},
    {OpKind::max_pool, "dnnl", true, make_dnnl_pool},
    {OpKind::avg_pool, "dnnl", true, make_dnnl_pool},
    {OpKind::inner_product, "dnnl", true, make_dnnl_inner_product},
    {OpKind::relu, "dnnl", true, make_dnnl_relu},
    {OpKind::lrn, "dnnl", true, make_dnnl_lrn},
    {OpKind::dropout, "dnnl", true, refuse_dnnl_dropout},
    {OpKind::batch_norm, "dnnl", true, make_dnnl_batch_norm},
    {OpKind::add, "dnnl", true, make_dnnl_add},
    {OpKind::concat, "dnnl", true, make_dnnl_concat},
    {OpKind::global_avg_pool, "dnnl", true, make_dnnl_global_avg_pool},
#endif
    // easel's own fast kernels (devices/cpu/own_*.cpp): what oneDNN refuses or lacks.
    {OpKind::lrn, "own", true, make_own_lrn},
    {OpKind::dropout, "own", true, make_own_dropout},
    // The reference kernels (devices/cpu/ref_ops.cpp), last: they accept every valid descriptor.
    {OpKind::conv, "ref", false, ref<make_ref_conv>},
    {OpKind::max_pool, "ref", false, ref<make_ref_max_pool>},
    {OpKind::avg_pool, "ref", false, ref<make_ref_avg_pool>},
    {OpKind::inner_product, "ref", false, ref<make_ref_inner_product>},
    {OpKind::relu, "ref", false, ref<make_ref_relu>},
    {OpKind::lrn, "ref", false, ref<make_ref_lrn>},
    {OpKind::dropout, "ref", false, ref<make_ref_dropout>},
    {OpKind::batch_norm, "ref", false, ref<make_ref_batch_norm>},
    {OpKind::add, "ref", false, ref<make_ref_add>},
    {OpKind::concat, "ref", false, ref<make_ref_concat>},
    {OpKind::global_avg_pool, "ref", false, ref<make_ref_global_avg_pool>},
};

// Why oneDNN has no row for a kind.
Status no_dnnl_row(OpKind k) {
  if (!dnnl_available()) return unavailable("easel was built without oneDNN");
  return unavailable(std::string(op_kind_name(k)) + ": no oneDNN primitive");
}

void log_refusal(const OpDesc& desc, const char* impl, const Status& why) {
  const std::string msg = describe_op(desc) + ": " + impl + " refused (" + why.to_string() +
                          "), trying the next implementation";
  const LogLevel level = why.code() == Code::unavailable ? LogLevel::info : LogLevel::warn;
  log_once(level, "cpu", std::string(impl) + ":" + why.message(), msg);
}

// The rows of one family for desc.kind, in order: the first op built, else the last refusal
// (`none` when the family has no row for the kind).
Result<std::unique_ptr<Op>> make_from(const std::string& family, const OpDesc& desc,
                                      const DnnlOptions& options, const Status& none) {
  if (std::string why = validate(desc); !why.empty()) return invalid_argument(why);
  Status last = none;
  for (const CpuOpImpl& impl : kCpuOps) {
    if (impl.kind != desc.kind || family != impl.name) continue;
    Result<std::unique_ptr<Op>> op = impl.make(desc, options);
    if (op.ok()) return op;
    last = op.status();
  }
  return last;
}

}  // namespace

std::span<const CpuOpImpl> cpu_op_list() {
  return kCpuOps;
}

Result<std::unique_ptr<Op>> make_cpu_op(const OpDesc& desc, ImplChoice choice,
                                        const DnnlOptions& options) {
  if (std::string why = validate(desc); !why.empty()) return invalid_argument(why);
  Status last = internal_error("cpu: no implementation tried for " + describe_op(desc));
  bool fast_listed = choice == ImplChoice::ref;  // under ref, no fast row is wanted
  for (const CpuOpImpl& impl : kCpuOps) {
    if (impl.kind != desc.kind) continue;
    if (impl.fast_only && choice == ImplChoice::ref) continue;
    if (!impl.fast_only && !fast_listed) {
      // No fast row for this kind: said as oneDNN's refusal before the reference runs.
      last = no_dnnl_row(desc.kind);
      log_refusal(desc, "dnnl", last);
    }
    fast_listed = true;
    Result<std::unique_ptr<Op>> op = impl.make(desc, options);
    if (op.ok()) return op;
    last = op.status();
    log_refusal(desc, impl.name, last);
  }
  return last;
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc, const DnnlOptions& options) {
  return make_from("dnnl", desc, options, no_dnnl_row(desc.kind));
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc) {
  return make_dnnl_op(desc, DnnlOptions{});
}

Result<std::unique_ptr<Op>> make_dnnl_op(const OpDesc& desc, DnnlConvBwdData conv_bwd_data) {
  DnnlOptions o;
  o.conv_bwd_data = conv_bwd_data;
  return make_dnnl_op(desc, o);
}

Result<std::unique_ptr<Op>> make_ref_op(const OpDesc& desc) {
  return make_from(
      "ref", desc, DnnlOptions{},
      internal_error(std::string("ref: no kernel for op kind ") + op_kind_name(desc.kind)));
}

}  // namespace easel
