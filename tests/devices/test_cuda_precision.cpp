// The CUDA device at --precision tf32 and bf16: its convolutions and inner products against
// the reference arithmetic of the precision (devices/ref_precision.hpp: the CPU reference ops on
// inputs rounded to the precision), both layouts. The two differ in the order of the f32 sums,
// in bf16's outputs (the activations are bf16 between layers and cuDNN writes diff_weights in
// bf16, converted back: one
// more rounding, <= u relative) and in how the tensor cores convert f32 to tf32 (round or
// truncate: a second error of <= u per input), so each element is held to 8u relative plus 8u of
// the output's scale. Skips without a GPU; a GPU below compute capability 8.0 refuses both.
#include <gtest/gtest.h>

#include "devices/activations.hpp"
#include "devices/ref_precision.hpp"
#include "tests/devices/cuda_op_test.hpp"
#include "tests/support/op_descs.hpp"

namespace easel::cuda_test {
namespace {

TEST(CudaPrecision, ConvAndInnerProductWithinThePrecision) {
  auto gpus = list_gpus();
  if (!gpus.ok() || gpus->empty()) GTEST_SKIP() << "no GPU";
  auto cpu = make_cpu_device(ImplChoice::ref);
  for (Precision p : {Precision::tf32, Precision::bf16}) {
    SCOPED_TRACE(precision_name(p));
    auto dev = make_cuda_device(0, p);
    if (!dev.ok() && (*gpus)[0].cc_major < 8) {
      EXPECT_EQ(dev.status().code(), Code::invalid_argument);
      continue;
    }
    ASSERT_TRUE(dev.ok()) << dev.status().to_string();
    ASSERT_TRUE(dev.value()->attach().ok());
    const float u = static_cast<float>(unit_roundoff(p));
    const Tol tol{8 * u, 8 * u};
    for (const OpDesc& base :
         {test::conv({4, 20, 12, 12}, 50, 5), test::conv({2, 32, 16, 16}, 32, 5, 1, 2),
          test::ip({4, 50, 4, 4}, 500, /*fused_relu=*/true)}) {
      for (Layout l : kLayouts) {
        OpDesc d = base;
        d.layout = l;
        d.act = dev.value()->activation_type();  // bf16 at bf16
        OpDesc f32 = d;
        f32.act = DType::f32;
        auto fast = must(dev.value()->make_op(d), d);
        auto ref = must(cpu->make_op(f32), f32);
        ASSERT_TRUE(fast && ref);
        EXPECT_NE(fast->impl().find(precision_name(p)), std::string::npos) << fast->impl();
        std::unique_ptr<Op> rounded = with_rounded_inputs(std::move(ref), p);
        if (d.act == DType::bf16) rounded = with_bf16_activations(std::move(rounded));
        expect_same_run(*fast, *dev.value(), *rounded, *cpu, tol, true, true);
      }
    }
  }
}

// --precision bf16 keeps the activations bf16 between layers: every kind of op reads and
// writes them, against the reference on the same bf16 inputs (with_bf16_activations over the
// rounded-input reference). Each output is rounded once more than the reference's f32 sums
// were (8u as above); the ops that run f32 between conversions (LRN, batch norm, dropout, the
// joins) and ReLU and pooling compute in f32 as the reference does.
TEST(CudaPrecision, EveryKindOnBf16Activations) {
  auto gpus = list_gpus();
  if (!gpus.ok() || gpus->empty()) GTEST_SKIP() << "no GPU";
  auto dev = make_cuda_device(0, Precision::bf16);
  if (!dev.ok() && (*gpus)[0].cc_major < 8) GTEST_SKIP() << "bf16 needs compute capability 8.0";
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  ASSERT_TRUE(dev.value()->attach().ok());
  ASSERT_EQ(dev.value()->activation_type(), DType::bf16);
  auto cpu = make_cpu_device(ImplChoice::ref);
  const float u = static_cast<float>(unit_roundoff(Precision::bf16));
  const Tol tol{8 * u, 8 * u};
  std::vector<OpDesc> descs = {test::conv({4, 20, 12, 12}, 50, 5),
                               test::ip({4, 50, 4, 4}, 500, /*fused_relu=*/true),
                               test::pool(OpKind::max_pool, {2, 8, 9, 9}, 3, 2),
                               test::pool(OpKind::avg_pool, {2, 8, 9, 9}, 3, 2, 1),
                               test::lrn({2, 16, 6, 6}, 5, 1e-2f, 0.75f, 1.f)};
  OpDesc relu;
  relu.kind = OpKind::relu;
  relu.src = {4, 8, 6, 6};
  descs.push_back(relu);
  for (const OpDesc& base : descs) {
    for (Layout l : kLayouts) {
      OpDesc d = base;
      d.layout = l;
      d.act = DType::bf16;
      SCOPED_TRACE(describe_op(d));
      auto fast = must(dev.value()->make_op(d), d);
      OpDesc f32 = d;
      f32.act = DType::f32;
      auto ref = must(cpu->make_op(f32), f32);
      ASSERT_TRUE(fast && ref);
      auto reference = with_bf16_activations(with_rounded_inputs(std::move(ref), Precision::bf16));
      expect_same_run(*fast, *dev.value(), *reference, *cpu, tol, true, true);
    }
  }
}

// The batch normalised from bytes on the GPU equals the host's reference bit for bit (f32) and
// rounded once (bf16), in both layouts (Device::normalize_bytes).
TEST(CudaPrecision, NormalizeBytesEqualsTheHost) {
  auto gpus = list_gpus();
  if (!gpus.ok() || gpus->empty()) GTEST_SKIP() << "no GPU";
  auto dev = make_cuda_device(0, Precision::fp32);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  ASSERT_TRUE(dev.value()->attach().ok());
  const Shape4 shape{5, 3, 7, 9};
  const size_t count = static_cast<size_t>(shape.count());
  std::vector<uint8_t> bytes(count);
  for (size_t i = 0; i < count; ++i)
    bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 7);
  std::vector<float> table(3 * 256);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = (static_cast<float>(i % 256) / 255.f - 0.4f - 0.01f * float(i / 256)) / 0.23f;
  const Buffer b = put(bytes, MemKind::device), t = put(table, MemKind::device);
  for (Layout l : kLayouts)
    for (DType to : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(layout_name(l)) + " " + dtype_name(to));
      std::vector<uint8_t> want(count * dtype_bytes(to));
      normalize_bytes_host(bytes.data(), table.data(), shape, l, to, want.data());
      Buffer out = put(std::vector<uint8_t>(want.size(), 0xee), MemKind::device);
      dev.value()->normalize_bytes(b.as<uint8_t>(), t.as<float>(), shape, l, to, out.data());
      dev.value()->synchronize();
      EXPECT_EQ(get<uint8_t>(out, want.size()), want);
    }
}

}  // namespace
}  // namespace easel::cuda_test
