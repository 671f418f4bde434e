// The definition of one op kind: everything about it that no device decides (its name, output
// shape, checks, parameters, operation counts), in one place per kind. Each kind's OpDef lives in
// devices/ops/<kind>.cpp and has one row in devices/ops/list.cpp; devices/op.hpp's functions
// (dst_shape, validate, param_shapes, ...) read it. Devices choose implementations in their own
// lists (devices/cpu/cpu_op_list.cpp, devices/cuda/cuda_op_list.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "devices/op.hpp"

namespace easel {

struct OpDef {
  OpKind kind;
  const char* name;  // op_kind_name(): in logs, refusals, summary.json's layer kinds
  // Has a window (kernel kh x kw, stride, padding): check_window() runs before `validate`.
  bool windowed = false;
  // A ReLU that directly follows may be fused into dst as a post-op (Net does so).
  bool fuses_relu = false;
  // How many inputs it takes (Net wires them; validate() checks 1 + more_src.size()).
  int min_inputs = 1, max_inputs = 1;
  // The trailing parameters that are state (see state_params() in devices/op.hpp).
  int state_params = 0;
  // Names of the parameters in order; nullptr: "weights", "bias".
  const char* const* param_names = nullptr;
  // The kind's own checks, after the shared ones (positive src, then the window when
  // `windowed`): empty when consistent, else "name: what is wrong". nullptr: none.
  std::string (*validate)(const OpDesc& d) = nullptr;
  // Output shape of a valid descriptor. nullptr: the src shape.
  Shape4 (*dst_shape)(const OpDesc& d) = nullptr;
  // Parameter shapes in user format (see param_shapes() in devices/op.hpp). nullptr: none.
  std::vector<std::vector<int64_t>> (*param_shapes)(const OpDesc& d) = nullptr;
  // Multiply-adds x2 of forward, whole batch (every kind has one).
  double (*forward_flops)(const OpDesc& d) = nullptr;
  // Of backward; `diff_src` false when the data gradient is skipped (the first layer).
  // nullptr: as many as forward.
  double (*backward_flops)(const OpDesc& d, bool diff_src) = nullptr;
};

// Every kind's definition, in OpKind order.
std::span<const OpDef* const> op_list();
// The definition of `k`; aborts when devices/ops/list.cpp has no row for it.
const OpDef& op_def(OpKind k);

// Shared by the definitions: "5x3" (height x width).
std::string hxw(int64_t a, int64_t b);
// Checks shared by the windowed ops: kernel, stride and padding against the input.
std::string check_window(const OpDesc& d, const std::string& name);
// One operation per element of dst (the ops without multiply-adds to speak of).
double dst_count_flops(const OpDesc& d);

// The definitions (one file each under devices/ops/).
extern const OpDef kConvDef;
extern const OpDef kMaxPoolDef;
extern const OpDef kAvgPoolDef;
extern const OpDef kInnerProductDef;
extern const OpDef kReluDef;
extern const OpDef kLrnDef;
extern const OpDef kDropoutDef;
extern const OpDef kBatchNormDef;
extern const OpDef kAddDef;
extern const OpDef kConcatDef;
extern const OpDef kGlobalAvgPoolDef;

}  // namespace easel
