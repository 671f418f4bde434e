// The op kinds, in one explicit list (no static self-registration), in OpKind order. Adding a
// kind: its enumerator in devices/op.hpp, its OpDef in devices/ops/<kind>.cpp, its row here.
#include <iterator>

#include "devices/ops/op_def.hpp"
#include "engine/status.hpp"

namespace easel {

namespace {
constexpr const OpDef* kOps[] = {
    &kConvDef,    &kMaxPoolDef,   &kAvgPoolDef, &kInnerProductDef, &kReluDef,          &kLrnDef,
    &kDropoutDef, &kBatchNormDef, &kAddDef,     &kConcatDef,       &kGlobalAvgPoolDef,
};
}  // namespace

std::span<const OpDef* const> op_list() {
  return kOps;
}

const OpDef& op_def(OpKind k) {
  const auto i = static_cast<size_t>(k);
  EASEL_CHECK_MSG(i < std::size(kOps) && kOps[i]->kind == k,
                  "op kind without its row in devices/ops/list.cpp (rows in OpKind order)");
  return *kOps[i];
}

}  // namespace easel
