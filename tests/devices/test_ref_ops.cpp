// The reference kernels: descriptor arithmetic, small hand-computed cases, gradient checks of
// every op in both layouts, layout equivalence, dropout statistics, the loss, the CPU device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "devices/cpu/cpu_op_list.hpp"
#include "devices/cpu/ref_ops.hpp"
#include "devices/device.hpp"
#include "devices/ops/op_def.hpp"
#include "tests/support/grad_check.hpp"
#include "tests/support/op_descs.hpp"

namespace easel {
namespace {

using test::check_gradients;
using test::GradCheckOptions;
using test::near_all;
using test::random_vector;
using test::relayout;

constexpr Layout kLayouts[] = {Layout::nchw, Layout::nhwc};

std::unique_ptr<Op> make(const OpDesc& d) {
  auto op = make_ref_op(d);
  EXPECT_TRUE(op.ok()) << op.status().to_string();
  return op.ok() ? std::move(op).value() : nullptr;
}

OpDesc conv(Shape4 src, int64_t oc, int64_t kh, int64_t kw, int64_t stride = 1, int64_t pad = 0) {
  OpDesc d;
  d.kind = OpKind::conv;
  d.src = src;
  d.oc = oc;
  d.kh = kh, d.kw = kw;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  return d;
}

using test::pool;

OpDesc simple(OpKind kind, Shape4 src) {
  OpDesc d;
  d.kind = kind;
  d.src = src;
  return d;
}

OpDesc inner_product(Shape4 src, int64_t oc) {
  OpDesc d = simple(OpKind::inner_product, src);
  d.oc = oc;
  return d;
}

// A kind of several inputs: src is the first, more_src the rest.
OpDesc joined(OpKind kind, std::vector<Shape4> inputs) {
  OpDesc d = simple(kind, inputs.front());
  d.more_src.assign(inputs.begin() + 1, inputs.end());
  return d;
}

OpDesc floor_pool(OpKind kind, Shape4 src, int64_t k, int64_t stride, int64_t pad = 0) {
  OpDesc d = pool(kind, src, k, stride, pad);
  d.ceil_mode = false;
  return d;
}

OpDesc within_lrn(Shape4 src, int64_t local_size, float alpha) {
  OpDesc d = simple(OpKind::lrn, src);
  d.lrn_within_channel = true;
  d.local_size = local_size;
  d.alpha = alpha;
  return d;
}

// Batch norm: parameters positive (running_var must be): scale, shift, mean, var; a smaller
// step, since in training dst is curved in src through the batch statistics.
GradCheckOptions bn_options(bool training = true) {
  GradCheckOptions opt;
  opt.weight_lo = 0.5f, opt.weight_hi = 1.5f;
  opt.step = 1e-3f;
  opt.training = training;
  return opt;
}

// Gradient check of `d` in both layouts.
void expect_gradients(OpDesc d, const GradCheckOptions& opt = {}) {
  for (Layout l : kLayouts) {
    d.layout = l;
    std::unique_ptr<Op> op = make(d);
    ASSERT_NE(op, nullptr);
    EXPECT_TRUE(check_gradients(*op, opt)) << "layout " << layout_name(l);
  }
}

// Runs forward then backward (diff_dst = r) of `d` on logical-order (nchw) inputs, returning
// dst, diff_src (both in nchw order) and diff_weights.
struct LayoutRun {
  std::vector<float> dst, diff_src;
  std::vector<std::vector<float>> diff_weights;
};
LayoutRun run_in_layout(OpDesc d, Layout l, const std::vector<float>& src_nchw,
                        std::vector<std::vector<float>> w, const std::vector<float>& r_nchw) {
  const Shape4 so = dst_shape(d);
  d.layout = l;
  if (d.kind == OpKind::inner_product && l == Layout::nhwc) {
    // weights columns follow the src layout's own order
    const Shape4 img{1, d.src.c, d.src.h, d.src.w};
    const int64_t k = img.per_image();
    for (int64_t o = 0; o < d.oc; ++o) {
      auto row = relayout(w[0].data() + o * k, img, Layout::nchw, Layout::nhwc);
      std::copy(row.begin(), row.end(), w[0].begin() + o * k);
    }
  }
  std::unique_ptr<Op> op = make(d);
  const auto src = relayout(src_nchw.data(), d.src, Layout::nchw, l);
  const auto r = relayout(r_nchw.data(), so, Layout::nchw, l);
  std::vector<float> dst(static_cast<size_t>(so.count())), diff_src(src.size());
  LayoutRun out;
  out.diff_weights = w;
  op->forward(src.data(), dst.data(), test::const_ptrs(w), true);
  op->backward(src.data(), dst.data(), r.data(), diff_src.data(), test::const_ptrs(w),
               test::mut_ptrs(out.diff_weights));
  out.dst = relayout(dst.data(), so, l, Layout::nchw);
  out.diff_src = relayout(diff_src.data(), d.src, l, Layout::nchw);
  if (d.kind == OpKind::inner_product && l == Layout::nhwc) {
    const Shape4 img{1, d.src.c, d.src.h, d.src.w};
    const int64_t k = img.per_image();
    for (int64_t o = 0; o < d.oc; ++o) {
      float* row = out.diff_weights[0].data() + o * k;
      auto back = relayout(row, img, Layout::nhwc, Layout::nchw);
      std::copy(back.begin(), back.end(), row);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Descriptor arithmetic

TEST(OpDesc, KindNames) {
  EXPECT_STREQ(op_kind_name(OpKind::conv), "conv");
  EXPECT_STREQ(op_kind_name(OpKind::max_pool), "max_pool");
  EXPECT_STREQ(op_kind_name(OpKind::avg_pool), "avg_pool");
  EXPECT_STREQ(op_kind_name(OpKind::inner_product), "inner_product");
  EXPECT_STREQ(op_kind_name(OpKind::relu), "relu");
  EXPECT_STREQ(op_kind_name(OpKind::lrn), "lrn");
  EXPECT_STREQ(op_kind_name(OpKind::dropout), "dropout");
  EXPECT_STREQ(op_kind_name(OpKind::batch_norm), "batch_norm");
  EXPECT_STREQ(op_kind_name(OpKind::add), "add");
  EXPECT_STREQ(op_kind_name(OpKind::concat), "concat");
  EXPECT_STREQ(op_kind_name(OpKind::global_avg_pool), "global_avg_pool");
}

TEST(OpDesc, ConvShape) {
  EXPECT_EQ(dst_shape(conv({64, 1, 28, 28}, 20, 5, 5)), (Shape4{64, 20, 24, 24}));
  EXPECT_EQ(dst_shape(conv({2, 3, 7, 6}, 4, 3, 3, 2, 1)), (Shape4{2, 4, 4, 3}));
  EXPECT_EQ(dst_shape(conv({1, 3, 8, 8}, 4, 3, 3, 2, 0)), (Shape4{1, 4, 3, 3}));  // floor
}

TEST(OpDesc, PoolShapeRoundsUpLikeCaffe) {
  EXPECT_EQ(dst_shape(pool(OpKind::max_pool, {1, 1, 7, 7}, 3, 2)), (Shape4{1, 1, 3, 3}));
  EXPECT_EQ(dst_shape(pool(OpKind::max_pool, {1, 1, 6, 6}, 3, 2)), (Shape4{1, 1, 3, 3}));
  EXPECT_EQ(dst_shape(pool(OpKind::max_pool, {1, 1, 24, 24}, 2, 2)), (Shape4{1, 1, 12, 12}));
  EXPECT_EQ(dst_shape(pool(OpKind::avg_pool, {1, 1, 4, 4}, 3, 2, 1)), (Shape4{1, 1, 3, 3}));
  // ceil gives 3, but the third window would start at 6 >= 5 + 1: clipped to 2
  EXPECT_EQ(dst_shape(pool(OpKind::max_pool, {1, 1, 5, 5}, 2, 3, 1)), (Shape4{1, 1, 2, 2}));
}

TEST(OpDesc, PoolShapeFloorMode) {
  // torchvision ResNet's maxpool 3x3/2 pad 1: 112 -> 56 (ceil would give 57)
  EXPECT_EQ(dst_shape(floor_pool(OpKind::max_pool, {1, 64, 112, 112}, 3, 2, 1)),
            (Shape4{1, 64, 56, 56}));
  EXPECT_EQ(dst_shape(pool(OpKind::max_pool, {1, 64, 112, 112}, 3, 2, 1)), (Shape4{1, 64, 57, 57}));
  EXPECT_EQ(dst_shape(floor_pool(OpKind::max_pool, {1, 1, 6, 6}, 3, 2)), (Shape4{1, 1, 2, 2}));
  EXPECT_EQ(dst_shape(floor_pool(OpKind::avg_pool, {1, 1, 7, 7}, 3, 2)), (Shape4{1, 1, 3, 3}));
  EXPECT_EQ(dst_shape(floor_pool(OpKind::max_pool, {1, 1, 5, 5}, 2, 3, 1)), (Shape4{1, 1, 2, 2}));
}

TEST(OpDesc, NewKindsShapesParamsAndInputs) {
  EXPECT_EQ(dst_shape(joined(OpKind::concat, {{2, 3, 4, 5}, {2, 7, 4, 5}, {2, 1, 4, 5}})),
            (Shape4{2, 11, 4, 5}));
  EXPECT_EQ(dst_shape(joined(OpKind::add, {{2, 3, 4, 5}, {2, 3, 4, 5}})), (Shape4{2, 3, 4, 5}));
  EXPECT_EQ(dst_shape(simple(OpKind::global_avg_pool, {2, 3, 7, 5})), (Shape4{2, 3, 1, 1}));
  EXPECT_EQ(input_range(OpKind::add), (std::pair<int, int>{2, 16}));
  EXPECT_EQ(input_range(OpKind::concat), (std::pair<int, int>{2, 16}));
  EXPECT_EQ(input_range(OpKind::batch_norm), (std::pair<int, int>{1, 1}));
  const OpDesc bn = simple(OpKind::batch_norm, {2, 6, 3, 3});
  EXPECT_EQ(param_shapes(bn), (std::vector<std::vector<int64_t>>{{6}, {6}, {6}, {6}}));
  EXPECT_EQ(state_params(bn), 2);
  EXPECT_EQ(param_name(bn, 0), "scale");
  EXPECT_EQ(param_name(bn, 1), "shift");
  EXPECT_EQ(param_name(bn, 2), "running_mean");
  EXPECT_EQ(param_name(bn, 3), "running_var");
  EXPECT_EQ(fans(bn), (std::pair<int64_t, int64_t>{1, 1}));
  for (OpKind k : {OpKind::add, OpKind::concat, OpKind::global_avg_pool}) {
    EXPECT_TRUE(param_shapes(simple(k, {1, 2, 3, 3})).empty()) << op_kind_name(k);
    EXPECT_EQ(state_params(simple(k, {1, 2, 3, 3})), 0) << op_kind_name(k);
  }
  EXPECT_GT(forward_flops(bn), 0.0);
  EXPECT_GT(forward_flops(joined(OpKind::add, {{2, 3, 4, 5}, {2, 3, 4, 5}})), 0.0);
  EXPECT_GT(forward_flops(joined(OpKind::concat, {{2, 3, 4, 5}, {2, 3, 4, 5}})), 0.0);
  EXPECT_GT(forward_flops(simple(OpKind::global_avg_pool, {2, 3, 4, 5})), 0.0);
  EXPECT_GT(forward_flops(within_lrn({2, 3, 4, 5}, 3, 1.f)),
            forward_flops(simple(OpKind::lrn, {2, 3, 4, 5})) / 5 * 3);
}

TEST(OpDesc, ParamShapesAndFans) {
  OpDesc c = conv({1, 1, 28, 28}, 20, 5, 5);
  EXPECT_EQ(param_shapes(c), (std::vector<std::vector<int64_t>>{{20, 1, 5, 5}, {20}}));
  EXPECT_EQ(fans(c), (std::pair<int64_t, int64_t>{25, 500}));
  OpDesc g = conv({1, 4, 5, 5}, 8, 3, 3);
  g.group = 2;
  g.bias = false;
  EXPECT_EQ(param_shapes(g), (std::vector<std::vector<int64_t>>{{8, 2, 3, 3}}));
  EXPECT_EQ(fans(g), (std::pair<int64_t, int64_t>{18, 72}));
  OpDesc ip = inner_product({64, 50, 4, 4}, 500);
  EXPECT_EQ(param_shapes(ip), (std::vector<std::vector<int64_t>>{{500, 800}, {500}}));
  EXPECT_EQ(fans(ip), (std::pair<int64_t, int64_t>{800, 500}));
  EXPECT_TRUE(param_shapes(simple(OpKind::relu, {1, 2, 3, 3})).empty());
  EXPECT_EQ(fans(simple(OpKind::lrn, {1, 2, 3, 3})), (std::pair<int64_t, int64_t>{1, 1}));
}

TEST(OpDesc, LeNetFlops) {
  OpDesc c1 = conv({1, 1, 28, 28}, 20, 5, 5);
  EXPECT_DOUBLE_EQ(forward_flops(c1), 2.0 * 20 * 24 * 24 * 25);
  EXPECT_DOUBLE_EQ(backward_flops(c1), 2 * forward_flops(c1));
  c1.src.n = 64;
  EXPECT_DOUBLE_EQ(forward_flops(c1), 64 * 2.0 * 20 * 24 * 24 * 25);
  OpDesc c2 = conv({1, 20, 12, 12}, 50, 5, 5);  // 50x20x5x5 -> 8x8
  EXPECT_DOUBLE_EQ(forward_flops(c2), 2.0 * 50 * 8 * 8 * 20 * 25);
  OpDesc g = conv({1, 4, 5, 5}, 8, 3, 3);
  g.group = 2;
  EXPECT_DOUBLE_EQ(forward_flops(g), 2.0 * 8 * 3 * 3 * 2 * 9);
  EXPECT_DOUBLE_EQ(forward_flops(inner_product({1, 50, 4, 4}, 500)), 2.0 * 800 * 500);
  EXPECT_GT(forward_flops(pool(OpKind::max_pool, {1, 20, 24, 24}, 2, 2)), 0.0);
  EXPECT_GT(backward_flops(simple(OpKind::relu, {1, 20, 24, 24})), 0.0);
}

// Without the data gradient (a net's first layer) conv and inner product compute only the
// weights gradient, as large as their forward; the other kinds cost their forward either way.
TEST(OpDesc, FirstLayerBackwardFlops) {
  const OpDesc c = conv({2, 3, 8, 8}, 4, 3, 3);
  EXPECT_DOUBLE_EQ(backward_flops(c, /*diff_src=*/false), forward_flops(c));
  const OpDesc ip = inner_product({2, 3, 4, 4}, 5);
  EXPECT_DOUBLE_EQ(backward_flops(ip, false), forward_flops(ip));
  EXPECT_DOUBLE_EQ(backward_flops(ip, true), 2 * forward_flops(ip));
  const OpDesc p = pool(OpKind::avg_pool, {2, 3, 8, 8}, 2, 2);
  EXPECT_DOUBLE_EQ(backward_flops(p, false), forward_flops(p));
  EXPECT_DOUBLE_EQ(backward_flops(p, true), forward_flops(p));
}

TEST(OpDesc, OnlyConvInnerProductAndBatchNormFuseRelu) {
  for (const OpDef* def : op_list())
    EXPECT_EQ(fuses_relu(def->kind), def->kind == OpKind::conv ||
                                         def->kind == OpKind::inner_product ||
                                         def->kind == OpKind::batch_norm)
        << def->name;
}

// devices/ops/list.cpp holds every kind once, in OpKind order; the CPU device's list gives each
// kind its fast rows first and the reference last (so ImplChoice::ref always finds one).
TEST(OpList, EveryKindDefinedInOrderWithTheReferenceLast) {
  const auto defs = op_list();
  ASSERT_EQ(defs.size(), 11u);
  EXPECT_EQ(defs.back()->kind, OpKind::global_avg_pool);
  for (size_t i = 0; i < defs.size(); ++i) {
    const OpDef& def = *defs[i];
    EXPECT_EQ(static_cast<size_t>(def.kind), i) << def.name;
    EXPECT_EQ(&op_def(def.kind), &def);
    EXPECT_STREQ(op_kind_name(def.kind), def.name);
    EXPECT_NE(def.forward_flops, nullptr) << def.name;
    for (size_t j = 0; j < i; ++j)
      EXPECT_STRNE(def.name, defs[j]->name);
    std::vector<const CpuOpImpl*> rows;
    for (const CpuOpImpl& r : cpu_op_list())
      if (r.kind == def.kind) rows.push_back(&r);
    ASSERT_FALSE(rows.empty()) << def.name << " has no CPU implementation";
    EXPECT_STREQ(rows.back()->name, "ref") << def.name;
    EXPECT_FALSE(rows.back()->fast_only) << def.name;
    for (size_t r = 0; r + 1 < rows.size(); ++r)
      EXPECT_TRUE(rows[r]->fast_only) << def.name << ": " << rows[r]->name;
  }
}

// validate() names the kind and the problem.
void expect_invalid(const OpDesc& d, const std::string& part) {
  const std::string why = validate(d);
  EXPECT_NE(why.find(op_kind_name(d.kind)), std::string::npos) << why;
  EXPECT_NE(why.find(part), std::string::npos) << "'" << why << "' lacks '" << part << "'";
  EXPECT_FALSE(make_ref_op(d).ok());
}

TEST(OpDesc, ValidateMessages) {
  EXPECT_EQ(validate(conv({1, 1, 28, 28}, 20, 5, 5)), "");
  EXPECT_EQ(validate(pool(OpKind::max_pool, {1, 1, 7, 7}, 3, 2, 1)), "");
  expect_invalid(conv({1, 1, 3, 3}, 2, 5, 5), "kernel 5x5 larger than padded input 3x3");
  expect_invalid(conv({1, 1, 3, 3}, 0, 1, 1), "output channels");
  expect_invalid(conv({0, 1, 3, 3}, 2, 1, 1), "non-positive");
  expect_invalid(conv({1, 1, 3, 3}, 2, 0, 1), "kernel 0x1");
  expect_invalid(conv({1, 1, 3, 3}, 2, 1, 1, 0), "stride");
  expect_invalid(conv({1, 1, 3, 3}, 2, 1, 1, 1, -1), "pad");
  OpDesc g = conv({1, 3, 5, 5}, 4, 3, 3);
  g.group = 2;
  expect_invalid(g, "input channels 3 not divisible by group 2");
  g.src.c = 4;
  g.oc = 3;
  expect_invalid(g, "output channels 3 not divisible by group 2");
  expect_invalid(pool(OpKind::max_pool, {1, 1, 2, 2}, 3, 1), "larger than padded input");
  expect_invalid(pool(OpKind::avg_pool, {1, 1, 8, 8}, 2, 2, 2), "smaller than kernel");
  expect_invalid(inner_product({1, 3, 2, 2}, 0), "output channels");
  OpDesc lrn = simple(OpKind::lrn, {1, 4, 2, 2});
  lrn.local_size = 4;
  expect_invalid(lrn, "local_size 4");
  lrn.local_size = 0;
  expect_invalid(lrn, "local_size 0");
  OpDesc drop = simple(OpKind::dropout, {1, 4, 2, 2});
  drop.ratio = 1.f;
  expect_invalid(drop, "outside [0, 1)");
  drop.ratio = -0.1f;
  expect_invalid(drop, "ratio");
  expect_invalid(simple(OpKind::relu, {1, 0, 2, 2}), "non-positive");
  expect_invalid(simple(OpKind::add, {1, 2, 2, 2}), "takes 2 to 16 input(s), got 1");
  expect_invalid(joined(OpKind::add, {{1, 2, 2, 2}, {1, 3, 2, 2}}), "input 1 1x3x2x2 differs");
  expect_invalid(joined(OpKind::concat, std::vector<Shape4>(17, {1, 2, 2, 2})), "got 17");
  expect_invalid(joined(OpKind::concat, {{1, 2, 2, 2}, {1, 3, 2, 3}}), "in n, h or w");
  expect_invalid(joined(OpKind::concat, {{1, 2, 2, 2}, {1, 0, 2, 2}}), "non-positive");
  OpDesc two = joined(OpKind::relu, {{1, 2, 2, 2}, {1, 2, 2, 2}});
  expect_invalid(two, "takes 1 input(s), got 2");
  OpDesc bn = simple(OpKind::batch_norm, {1, 2, 2, 2});
  bn.eps = 0.f;
  expect_invalid(bn, "eps");
  bn.eps = 1e-5f;
  bn.bn_momentum = 1.5f;
  expect_invalid(bn, "momentum");
  EXPECT_EQ(validate(joined(OpKind::concat, {{1, 2, 2, 2}, {1, 5, 2, 2}})), "");
}

// ---------------------------------------------------------------------------------------------
// Small hand-computed forward cases

TEST(RefForward, ConvOneChannel) {
  const std::vector<float> src{1, 2, 3, 4, 5, 6, 7, 8, 9};  // 3x3
  const std::vector<float> w{1, 2, 3, 4}, b{1};             // 2x2 kernel
  const std::vector<const float*> wp{w.data(), b.data()};
  std::vector<float> dst(4);
  make(conv({1, 1, 3, 3}, 1, 2, 2))->forward(src.data(), dst.data(), wp, false);
  EXPECT_EQ(dst, (std::vector<float>{38, 48, 68, 78}));
  // pad 1, stride 2: the windows hang over the border; bias off
  OpDesc d = conv({1, 1, 3, 3}, 1, 2, 2, 2, 1);
  d.bias = false;
  make(d)->forward(src.data(), dst.data(), std::vector<const float*>{w.data()}, false);
  EXPECT_EQ(dst, (std::vector<float>{4, 18, 36, 77}));
  // fused ReLU clips the negative output
  const std::vector<float> wn{-1, -2, -3, -4};
  d = conv({1, 1, 3, 3}, 1, 2, 2);
  d.fused_relu = true;
  const std::vector<float> bn{60};
  make(d)->forward(src.data(), dst.data(), std::vector<const float*>{wn.data(), bn.data()}, false);
  EXPECT_EQ(dst, (std::vector<float>{23, 13, 0, 0}));
}

TEST(RefForward, ConvGroupsDoNotMix) {
  OpDesc d = conv({1, 2, 1, 1}, 2, 1, 1);
  d.group = 2;
  d.bias = false;
  const std::vector<float> src{1, 10}, w{2, 3};
  std::vector<float> dst(2);
  make(d)->forward(src.data(), dst.data(), std::vector<const float*>{w.data()}, false);
  EXPECT_EQ(dst, (std::vector<float>{2, 30}));
}

TEST(RefForward, MaxPoolArgmaxAndCeilRemainder) {
  // 3x3, k2 s2 -> 2x2 (ceil): the right and bottom windows are clipped to the input.
  const std::vector<float> src{5,  5,  1,  //
                               2,  3,  9,  //
                               -4, -1, -2};
  OpDesc d = pool(OpKind::max_pool, {1, 1, 3, 3}, 2, 2);
  auto op = make(d);
  std::vector<float> dst(4), diff_src(9);
  op->forward(src.data(), dst.data(), {}, true);
  EXPECT_EQ(dst, (std::vector<float>{5, 9, -1, -2}));
  const std::vector<float> diff_dst{1, 2, 3, 4};
  op->backward(src.data(), dst.data(), diff_dst.data(), diff_src.data(), {}, {});
  // the tie 5/5 sends the gradient to the first in scan order
  EXPECT_EQ(diff_src, (std::vector<float>{1, 0, 0, 0, 0, 2, 0, 3, 4}));
}

TEST(RefForward, MaxPoolOverlappingWindowsAccumulate) {
  const std::vector<float> src{0, 0, 0, 0, 9, 0, 0, 0, 0};  // 3x3, the 9 in every window
  auto op = make(pool(OpKind::max_pool, {1, 1, 3, 3}, 2, 1));
  std::vector<float> dst(4), diff_src(9);
  op->forward(src.data(), dst.data(), {}, true);
  EXPECT_EQ(dst, (std::vector<float>{9, 9, 9, 9}));
  const std::vector<float> diff_dst{1, 2, 3, 4};
  op->backward(src.data(), dst.data(), diff_dst.data(), diff_src.data(), {}, {});
  EXPECT_EQ(diff_src, (std::vector<float>{0, 0, 0, 0, 10, 0, 0, 0, 0}));
}

TEST(RefForward, AvgPoolCountsPaddingButNotTheRemainder) {
  // 4x4 ones, k3 s2 p1 -> 3x3. Rows covered per output row: 2, 3, 1 of divisors 3, 3, 2
  // (the last window is clipped to input + padding).
  const std::vector<float> src(16, 1.f);
  std::vector<float> dst(9);
  make(pool(OpKind::avg_pool, {1, 1, 4, 4}, 3, 2, 1))->forward(src.data(), dst.data(), {}, false);
  const float rows[] = {2, 3, 1}, size[] = {3, 3, 2};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_FLOAT_EQ(dst[i * 3 + j], rows[i] * rows[j] / (size[i] * size[j])) << i << "," << j;
}

TEST(RefForward, InnerProductAndRelu) {
  OpDesc d = inner_product({2, 3, 1, 1}, 2);
  const std::vector<float> src{1, 2, 3, -1, 0, 1}, w{1, 0, -1, 2, 1, 0}, b{0.5f, -1};
  std::vector<float> dst(4);
  make(d)->forward(src.data(), dst.data(), std::vector<const float*>{w.data(), b.data()}, false);
  EXPECT_EQ(dst, (std::vector<float>{-1.5f, 3, -1.5f, -3}));
  std::vector<float> out(4);
  make(simple(OpKind::relu, {1, 4, 1, 1}))->forward(dst.data(), out.data(), {}, false);
  EXPECT_EQ(out, (std::vector<float>{0, 3, 0, 0}));
}

TEST(RefForward, LrnMatchesTheFormula) {
  OpDesc d = simple(OpKind::lrn, {2, 7, 3, 2});
  d.local_size = 5;
  d.alpha = 0.3f;
  d.beta = 0.75f;
  d.k = 2.f;
  const Shape4 s = d.src;
  const auto src = random_vector(s.count(), 7, -2.f, 2.f);
  for (Layout l : kLayouts) {
    d.layout = l;
    std::vector<float> dst(src.size());
    make(d)->forward(src.data(), dst.data(), {}, false);
    std::vector<float> want(src.size());
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t h = 0; h < s.h; ++h)
          for (int64_t w = 0; w < s.w; ++w) {
            double sum = 0;
            for (int64_t j = c - 2; j <= c + 2; ++j) {
              if (j < 0 || j >= s.c) continue;
              const double x = src[offset4(s, l, n, j, h, w)];
              sum += x * x;
            }
            const int64_t i = offset4(s, l, n, c, h, w);
            want[i] = static_cast<float>(src[i] * std::pow(2.0 + 0.3 / 5 * sum, -0.75));
          }
    EXPECT_TRUE(near_all(dst.data(), want.data(), s.count(), 1e-5f, 1e-6f, "lrn dst"))
        << layout_name(l);
  }
}

// LRN within channel, written as Caffe computes it: the squares average-pooled over a
// local_size window, stride 1, padding (local_size - 1)/2 (the divisor local_size^2, padding
// counted), then dst = src * (1 + alpha * pooled)^-beta.
TEST(RefForward, LrnWithinChannelIsCaffesPoolingOfSquares) {
  for (int64_t size : {3, 5}) {
    OpDesc d = within_lrn({2, 3, 6, 5}, size, 0.7f);
    d.beta = 0.75f;
    const Shape4 s = d.src;
    const auto src = random_vector(s.count(), 8, -2.f, 2.f);
    std::vector<float> sq(src.size());
    for (size_t i = 0; i < src.size(); ++i)
      sq[i] = src[i] * src[i];
    for (Layout l : kLayouts) {
      d.layout = l;
      const auto x = relayout(src.data(), s, Layout::nchw, l);
      const auto x2 = relayout(sq.data(), s, Layout::nchw, l);
      OpDesc avg = pool(OpKind::avg_pool, s, size, 1, (size - 1) / 2);
      avg.layout = l;
      ASSERT_EQ(dst_shape(avg), s);
      std::vector<float> pooled(src.size()), dst(src.size()), want(src.size());
      make(avg)->forward(x2.data(), pooled.data(), {}, false);
      for (size_t i = 0; i < src.size(); ++i)
        want[i] = x[i] * std::pow(1.f + 0.7f * pooled[i], -0.75f);
      make(d)->forward(x.data(), dst.data(), {}, false);
      EXPECT_TRUE(near_all(dst.data(), want.data(), s.count(), 1e-5f, 1e-6f, "lrn within dst"))
          << layout_name(l) << " size " << size;
    }
  }
}

// Batch norm, training: per channel the batch mean and biased variance normalise; the running
// statistics move by the momentum, the variance unbiased. Eval: the running statistics.
TEST(RefForward, BatchNormTrainingAndEval) {
  OpDesc d = simple(OpKind::batch_norm, {2, 2, 1, 2});
  d.bn_momentum = 0.25f;
  d.eps = 1e-3f;
  // nchw: channel 0 = {1, 2, 3, 6}, channel 1 = {-1, -1, 1, 1}
  const std::vector<float> src{1, 2, -1, -1, 3, 6, 1, 1};
  const std::vector<float> scale{2, 1}, shift{0.5f, -1};
  std::vector<float> rmean{1, 0}, rvar{1, 2};
  const std::vector<const float*> w{scale.data(), shift.data(), rmean.data(), rvar.data()};
  std::vector<float> dst(8);
  auto op = make(d);
  op->forward(src.data(), dst.data(), w, /*training=*/true);
  // channel 0: mean 3, biased var (4 + 1 + 0 + 9) / 4 = 3.5, unbiased 14/3
  const float inv0 = 1.f / std::sqrt(3.5f + 1e-3f), inv1 = 1.f / std::sqrt(1.f + 1e-3f);
  const std::vector<float> want{
      2 * (1 - 3.f) * inv0 + 0.5f, 2 * (2 - 3.f) * inv0 + 0.5f, -inv1 - 1, -inv1 - 1,
      2 * (3 - 3.f) * inv0 + 0.5f, 2 * (6 - 3.f) * inv0 + 0.5f, inv1 - 1,  inv1 - 1};
  EXPECT_TRUE(near_all(dst.data(), want.data(), 8, 1e-6f, 1e-6f, "bn training dst"));
  EXPECT_FLOAT_EQ(rmean[0], 0.75f * 1 + 0.25f * 3);
  EXPECT_FLOAT_EQ(rmean[1], 0.75f * 0 + 0.25f * 0);
  EXPECT_FLOAT_EQ(rvar[0], 0.75f * 1 + 0.25f * 14.f / 3);
  EXPECT_FLOAT_EQ(rvar[1], 0.75f * 2 + 0.25f * 4.f / 3);
  // eval: the running statistics, which stay
  const std::vector<float> rm = rmean, rv = rvar;
  op->forward(src.data(), dst.data(), w, /*training=*/false);
  EXPECT_EQ(rmean, rm);
  EXPECT_EQ(rvar, rv);
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t n = 0; n < 2; ++n) {
        const int64_t o = offset4(d.src, d.layout, n, c, 0, i);
        EXPECT_NEAR(dst[o], scale[c] * (src[o] - rm[c]) / std::sqrt(rv[c] + 1e-3f) + shift[c],
                    1e-6f)
            << o;
      }
  // fused ReLU
  d.fused_relu = true;
  make(d)->forward(src.data(), dst.data(), w, false);
  for (float v : dst)
    EXPECT_GE(v, 0.f);
}

TEST(RefForward, AddConcatGlobalAvgPool) {
  const std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40}, c{100, 200, 300, 400};
  const std::vector<const float*> abc{a.data(), b.data(), c.data()};
  std::vector<float> dst(4);
  make(joined(OpKind::add, {{1, 1, 2, 2}, {1, 1, 2, 2}, {1, 1, 2, 2}}))
      ->forward_n(abc, dst.data(), {}, true);
  EXPECT_EQ(dst, (std::vector<float>{111, 222, 333, 444}));
  // concat of 1x1x2x2, 1x2x1x2 would be invalid; 2 images x {1, 1} channels x 1x2:
  // nchw a = [n0: 1 2 | n1: 3 4], b = [n0: 10 20 | n1: 30 40]
  std::vector<float> cat(8);
  OpDesc d = joined(OpKind::concat, {{2, 1, 1, 2}, {2, 1, 1, 2}});
  make(d)->forward_n(std::vector<const float*>{a.data(), b.data()}, cat.data(), {}, true);
  EXPECT_EQ(cat, (std::vector<float>{1, 2, 10, 20, 3, 4, 30, 40}));
  d.layout = Layout::nhwc;  // the same bytes read as n, w, c
  make(d)->forward_n(std::vector<const float*>{a.data(), b.data()}, cat.data(), {}, true);
  EXPECT_EQ(cat, (std::vector<float>{1, 10, 2, 20, 3, 30, 4, 40}));
  std::vector<float> g(2);
  make(simple(OpKind::global_avg_pool, {1, 2, 1, 2}))->forward(a.data(), g.data(), {}, true);
  EXPECT_EQ(g, (std::vector<float>{1.5f, 3.5f}));
}

// ---------------------------------------------------------------------------------------------
// Gradient checks, every kind, both layouts

TEST(RefGrad, Conv) {
  expect_gradients(conv({2, 3, 6, 5}, 4, 3, 3));
  expect_gradients(conv({2, 2, 7, 6}, 3, 3, 2, 2, 1));  // stride, pad, non-square
  expect_gradients(conv({1, 3, 5, 5}, 2, 1, 1, 2));     // 1x1, stride 2
  OpDesc nb = conv({2, 2, 5, 4}, 3, 2, 3);
  nb.bias = false;
  expect_gradients(nb);
}

TEST(RefGrad, ConvGroups) {
  OpDesc g = conv({2, 4, 5, 5}, 6, 3, 3, 1, 1);
  g.group = 2;
  expect_gradients(g);
  g.stride_h = 2;
  g.bias = false;
  expect_gradients(g);
}

TEST(RefGrad, ConvFusedRelu) {
  OpDesc d = conv({2, 3, 5, 5}, 4, 3, 3, 1, 1);
  d.fused_relu = true;
  expect_gradients(d);
}

TEST(RefGrad, MaxPool) {
  GradCheckOptions opt;
  opt.src_lo = -5.f, opt.src_hi = 5.f;  // ties within the step are rarer
  expect_gradients(pool(OpKind::max_pool, {2, 3, 7, 7}, 3, 2), opt);  // ceil remainder
  expect_gradients(pool(OpKind::max_pool, {2, 2, 6, 6}, 3, 2), opt);
  expect_gradients(pool(OpKind::max_pool, {1, 2, 5, 5}, 2, 2, 1), opt);
  OpDesc d = pool(OpKind::max_pool, {2, 2, 6, 5}, 3, 2);
  d.kw = 2, d.stride_w = 1;
  expect_gradients(d, opt);
}

TEST(RefGrad, AvgPool) {
  expect_gradients(pool(OpKind::avg_pool, {2, 3, 7, 7}, 3, 2));
  expect_gradients(pool(OpKind::avg_pool, {1, 2, 4, 4}, 3, 2, 1));
  OpDesc d = pool(OpKind::avg_pool, {2, 2, 5, 6}, 2, 1, 1);
  d.kw = 3, d.stride_w = 2;
  expect_gradients(d);
}

TEST(RefGrad, InnerProduct) {
  expect_gradients(inner_product({3, 4, 3, 2}, 5));
  OpDesc d = inner_product({2, 6, 1, 1}, 4);
  d.bias = false;
  expect_gradients(d);
  d = inner_product({3, 2, 3, 3}, 5);
  d.fused_relu = true;
  expect_gradients(d);
}

TEST(RefGrad, Relu) {
  expect_gradients(simple(OpKind::relu, {2, 3, 4, 5}));
}

TEST(RefGrad, Lrn) {
  OpDesc d = simple(OpKind::lrn, {2, 7, 3, 3});
  d.alpha = 0.5f;  // large enough that the cross-channel term matters
  expect_gradients(d);
  d.local_size = 3;
  d.beta = 0.6f;
  d.k = 2.f;
  expect_gradients(d);
  OpDesc narrow = simple(OpKind::lrn, {1, 2, 2, 3});  // fewer channels than the window
  narrow.alpha = 1.f;
  expect_gradients(narrow);
  d = simple(OpKind::lrn, {2, 4, 2, 2});  // Caffe's defaults
  expect_gradients(d);
}

TEST(RefGrad, PoolFloorMode) {
  GradCheckOptions opt;
  opt.src_lo = -5.f, opt.src_hi = 5.f;
  expect_gradients(floor_pool(OpKind::max_pool, {2, 2, 8, 8}, 3, 2, 1), opt);
  expect_gradients(floor_pool(OpKind::max_pool, {2, 2, 6, 6}, 3, 2), opt);
  expect_gradients(floor_pool(OpKind::avg_pool, {2, 2, 8, 7}, 3, 2, 1));
  expect_gradients(floor_pool(OpKind::avg_pool, {2, 2, 6, 6}, 3, 2));
}

TEST(RefGrad, LrnWithinChannel) {
  expect_gradients(within_lrn({2, 3, 5, 4}, 3, 2.f));
  expect_gradients(within_lrn({1, 2, 6, 6}, 5, 1.f));
  OpDesc cifar = within_lrn({2, 3, 4, 4}, 3, 5e-05f);  // cifar10_full's norm1
  expect_gradients(cifar);
}

TEST(RefGrad, BatchNorm) {
  OpDesc d = simple(OpKind::batch_norm, {3, 4, 3, 2});
  expect_gradients(d, bn_options(/*training=*/true));  // through the batch statistics
  expect_gradients(d, bn_options(false));              // the running statistics
  d.fused_relu = true;
  expect_gradients(d, bn_options(false));
  expect_gradients(d, bn_options(true));
  expect_gradients(simple(OpKind::batch_norm, {4, 3, 1, 1}), bn_options());  // after a fc
}

TEST(RefGrad, AddAndConcat) {
  expect_gradients(joined(OpKind::add, {{2, 3, 4, 5}, {2, 3, 4, 5}}));
  expect_gradients(joined(OpKind::add, {{2, 3, 2, 2}, {2, 3, 2, 2}, {2, 3, 2, 2}}));
  expect_gradients(joined(OpKind::concat, {{2, 3, 4, 5}, {2, 2, 4, 5}}));
  expect_gradients(joined(OpKind::concat, {{2, 1, 3, 2}, {2, 4, 3, 2}, {2, 2, 3, 2}}));
}

TEST(RefGrad, GlobalAvgPool) {
  expect_gradients(simple(OpKind::global_avg_pool, {2, 3, 4, 5}));
  expect_gradients(simple(OpKind::global_avg_pool, {3, 2, 1, 1}));
}

TEST(RefGrad, DropoutTrainingAndInference) {
  for (float ratio : {0.5f, 0.2f}) {
    for (Layout l : kLayouts) {
      OpDesc d = simple(OpKind::dropout, {2, 3, 4, 4});
      d.ratio = ratio;
      d.seed = 42;
      d.layout = l;
      EXPECT_TRUE(check_gradients([&] { return make(d); })) << layout_name(l);
      GradCheckOptions inference;
      inference.training = false;
      EXPECT_TRUE(check_gradients([&] { return make(d); }, inference)) << layout_name(l);
    }
  }
}

// The checker itself: a gradient that is slightly off, or a ReLU that forgets its mask, fails
// and names the element.
class Skewed final : public Op {
 public:
  Skewed(std::unique_ptr<Op> inner, float src_factor, float weights_factor)
      : Op(inner->desc()), inner_(std::move(inner)), sf_(src_factor), wf_(weights_factor) {}
  std::string impl() const override { return "skewed"; }
  void forward(const float* src, float* dst, std::span<const float* const> w,
               bool training) override {
    inner_->forward(src, dst, w, training);
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> w, std::span<float* const> dw) override {
    inner_->backward(src, dst, diff_dst, diff_src, w, dw);
    for (int64_t i = 0; i < desc_.src.count(); ++i)
      diff_src[i] *= sf_;
    if (!dw.empty()) dw[0][0] *= wf_;
  }

 private:
  std::unique_ptr<Op> inner_;
  float sf_, wf_;
};

class MasklessRelu final : public Op {
 public:
  explicit MasklessRelu(const OpDesc& d) : Op(d) {}
  std::string impl() const override { return "maskless"; }
  void forward(const float* src, float* dst, std::span<const float* const>, bool) override {
    for (int64_t i = 0; i < desc_.src.count(); ++i)
      dst[i] = src[i] > 0 ? src[i] : 0;
  }
  void backward(const float*, const float*, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    for (int64_t i = 0; i < desc_.src.count(); ++i)
      diff_src[i] = diff_dst[i];
  }
};

TEST(RefGradCheck, CatchesWrongGradients) {
  const OpDesc d = conv({2, 3, 5, 5}, 4, 3, 3, 1, 1);
  Skewed src_off(make(d), 1.05f, 1.f);
  const auto r1 = check_gradients(src_off);
  EXPECT_FALSE(r1);
  EXPECT_NE(std::string(r1.message()).find("diff_src["), std::string::npos) << r1.message();
  EXPECT_NE(std::string(r1.message()).find("n="), std::string::npos) << r1.message();
  Skewed weight_off(make(d), 1.f, 1.1f);
  GradCheckOptions all;
  all.max_checks = 1000;  // make sure element 0 is among those checked
  const auto r2 = check_gradients(weight_off, all);
  EXPECT_FALSE(r2);
  EXPECT_NE(std::string(r2.message()).find("diff_weights[0][0]"), std::string::npos)
      << r2.message();
  MasklessRelu relu(simple(OpKind::relu, {2, 3, 4, 4}));
  EXPECT_FALSE(check_gradients(relu));
}

// ---------------------------------------------------------------------------------------------
// nchw and nhwc give the same numbers once transposed

TEST(RefLayout, SameNumbersInBothLayouts) {
  OpDesc g = conv({2, 4, 6, 5}, 6, 3, 2, 2, 1);
  g.group = 2;
  g.fused_relu = true;
  OpDesc lrn = simple(OpKind::lrn, {2, 7, 3, 2});
  lrn.alpha = 0.5f;
  OpDesc drop = simple(OpKind::dropout, {2, 3, 4, 3});
  drop.seed = 9;
  OpDesc bn = simple(OpKind::batch_norm, {2, 3, 4, 3});
  bn.fused_relu = true;
  const std::vector<OpDesc> descs{
      conv({2, 3, 6, 5}, 4, 3, 3, 1, 1),
      g,
      pool(OpKind::max_pool, {2, 3, 7, 7}, 3, 2),
      pool(OpKind::avg_pool, {2, 3, 7, 6}, 3, 2, 1),
      inner_product({3, 4, 3, 2}, 5),
      simple(OpKind::relu, {2, 3, 4, 5}),
      lrn,
      drop,
      bn,
      simple(OpKind::global_avg_pool, {2, 3, 4, 5}),
      within_lrn({2, 3, 5, 4}, 3, 2.f),
      floor_pool(OpKind::avg_pool, {2, 3, 8, 7}, 3, 2, 1),
  };
  for (const OpDesc& d : descs) {
    SCOPED_TRACE(op_kind_name(d.kind));
    const auto src = random_vector(d.src.count(), 1, -2.f, 2.f);
    const auto r = random_vector(dst_shape(d).count(), 2);
    const auto w = test::random_params(d, 3, 0.5f, 1.5f);  // batch norm's var positive
    const LayoutRun a = run_in_layout(d, Layout::nchw, src, w, r);
    const LayoutRun b = run_in_layout(d, Layout::nhwc, src, w, r);
    EXPECT_TRUE(near_all(a.dst.data(), b.dst.data(), a.dst.size(), 1e-5f, 1e-6f, "dst"));
    EXPECT_TRUE(near_all(a.diff_src.data(), b.diff_src.data(), a.diff_src.size(), 1e-5f, 1e-6f,
                         "diff_src"));
    for (size_t p = 0; p < w.size(); ++p)
      EXPECT_TRUE(near_all(a.diff_weights[p].data(), b.diff_weights[p].data(),
                           a.diff_weights[p].size(), 1e-5f, 1e-5f, "diff_weights"));
  }
}

// ---------------------------------------------------------------------------------------------
// Dropout statistics and determinism

TEST(RefDropout, KeepsOneMinusRatioAndScales) {
  OpDesc d = simple(OpKind::dropout, {4, 8, 16, 16});  // 8192 elements
  d.ratio = 0.3f;
  d.seed = 5;
  const auto src = random_vector(d.src.count(), 11, 0.5f, 1.5f);
  std::vector<float> dst(src.size());
  auto op = make(d);
  op->forward(src.data(), dst.data(), {}, true);
  int64_t dropped = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    if (dst[i] == 0.f) {
      ++dropped;
    } else {
      ASSERT_FLOAT_EQ(dst[i], src[i] / 0.7f) << i;
    }
  }
  const double frac = static_cast<double>(dropped) / static_cast<double>(src.size());
  EXPECT_NEAR(frac, 0.3, 4 * std::sqrt(0.3 * 0.7 / 8192));  // 4 sigma
}

TEST(RefDropout, DeterministicPerSeedAndAdvancing) {
  OpDesc d = simple(OpKind::dropout, {2, 4, 8, 8});
  d.seed = 77;
  const auto src = random_vector(d.src.count(), 3, 0.5f, 1.5f);
  std::vector<float> a1(src.size()), a2(src.size()), b1(src.size()), c1(src.size());
  auto a = make(d), b = make(d);
  a->forward(src.data(), a1.data(), {}, true);
  a->forward(src.data(), a2.data(), {}, true);
  b->forward(src.data(), b1.data(), {}, true);
  EXPECT_EQ(a1, b1);  // same seed, same first mask
  EXPECT_NE(a1, a2);  // the generator advances every training forward
  d.seed = 78;
  make(d)->forward(src.data(), c1.data(), {}, true);
  EXPECT_NE(a1, c1);
  // inference is the identity, forward and backward
  std::vector<float> id(src.size()), diff(src.size());
  a->forward(src.data(), id.data(), {}, false);
  EXPECT_EQ(id, src);
  a->backward(src.data(), id.data(), src.data(), diff.data(), {}, {});
  EXPECT_EQ(diff, src);
}

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy

TEST(RefLoss, Gradients) {
  auto loss = make_cpu_loss(5, 7);
  EXPECT_TRUE(test::check_loss_gradients(*loss, 5, 7, 5));
  EXPECT_TRUE(test::check_loss_gradients(*loss, 5, 7, 3));  // rows past n zeroed
}

TEST(RefLoss, ValueAndCorrectCount) {
  auto loss = make_cpu_loss(4, 3);
  // row 0: uniform -> log 3; row 1: tie 3/3, first max (class 1) is the prediction;
  // row 2: same tie, label 2 not counted; row 3: huge logits stay finite.
  const std::vector<float> logits{0, 0, 0, 1, 3, 3, 1, 3, 3, 1000, 0, 999};
  const std::vector<int32_t> labels{0, 1, 2, 0};
  std::vector<float> prob(12);
  int64_t correct = 10;  // accumulated into
  const double l = loss->forward(logits.data(), labels.data(), prob.data(), 4, &correct);
  EXPECT_EQ(correct, 10 + 1 + 1 + 0 + 1);  // row 0's tie resolves to class 0 = label
  const double tie = -std::log(1.0 / (2.0 + std::exp(-2.0)));
  const double big = -std::log(1.0 / (1.0 + std::exp(-1000.0) + std::exp(-1.0)));
  EXPECT_NEAR(l, std::log(3.0) + 2 * tie + big, 1e-5);
  for (int r = 0; r < 4; ++r) {
    double sum = 0;
    for (int j = 0; j < 3; ++j)
      sum += prob[r * 3 + j];
    EXPECT_NEAR(sum, 1.0, 1e-6) << r;
  }
  // only the first n rows count
  correct = 0;
  EXPECT_NEAR(loss->forward(logits.data(), labels.data(), prob.data(), 1, &correct), std::log(3.0),
              1e-6);
  EXPECT_EQ(correct, 1);
}

TEST(RefLoss, ZeroProbabilityIsClamped) {
  auto loss = make_cpu_loss(1, 2);
  const std::vector<float> logits{0, -200};
  const std::vector<int32_t> labels{1};
  std::vector<float> prob(2);
  int64_t correct = 0;
  const double l = loss->forward(logits.data(), labels.data(), prob.data(), 1, &correct);
  EXPECT_TRUE(std::isfinite(l));
  EXPECT_NEAR(l, -std::log(static_cast<double>(FLT_MIN)), 1e-3);
  EXPECT_EQ(correct, 0);
  std::vector<float> diff(2);
  loss->backward(prob.data(), labels.data(), diff.data(), 1, 0.5f);
  EXPECT_FLOAT_EQ(diff[0], 0.5f);
  EXPECT_FLOAT_EQ(diff[1], -0.5f);
}

// ---------------------------------------------------------------------------------------------
// The CPU device

TEST(RefCpuDevice, RefChoiceBuildsReferenceOps) {
  auto dev = make_cpu_device(ImplChoice::ref);
  EXPECT_EQ(dev->name(), "cpu");
  auto op = dev->make_op(conv({1, 1, 8, 8}, 2, 3, 3));
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  EXPECT_EQ(op.value()->impl(), "ref");
  auto bad = dev->make_op(conv({1, 1, 3, 3}, 2, 5, 5));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::invalid_argument);
  EXPECT_NE(bad.status().message().find("conv"), std::string::npos);
  auto loss = dev->make_loss(4, 10);
  ASSERT_TRUE(loss.ok());
  EXPECT_FALSE(dev->make_loss(0, 10).ok());
}

TEST(RefCpuDevice, FastChoiceAlwaysBuildsSomething) {
  auto dev = make_cpu_device(ImplChoice::fast);
  OpDesc d = simple(OpKind::dropout, {2, 3, 4, 4});  // oneDNN has no dropout: falls back
  for (const OpDesc& desc : {conv({2, 3, 8, 8}, 4, 3, 3), d}) {
    auto op = dev->make_op(desc);
    ASSERT_TRUE(op.ok()) << op.status().to_string();
    EXPECT_FALSE(op.value()->impl().empty());
  }
}

TEST(RefCpuDevice, ParseImplChoice) {
  auto fast = parse_impl_choice("fast");
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast.value(), ImplChoice::fast);
  auto ref = parse_impl_choice("ref");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref.value(), ImplChoice::ref);
  auto bad = parse_impl_choice("fastest");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::invalid_argument);
  EXPECT_NE(bad.status().message().find("fastest"), std::string::npos);
}

}  // namespace
}  // namespace easel
