// The CUDA device at --precision tf32 and bf16: its convolutions and inner products against
// the reference arithmetic of the precision (devices/ref_precision.hpp: the CPU reference ops on
// inputs rounded to the precision), both layouts. The two differ in the order of the f32 sums,
// in bf16's outputs (cuDNN writes dst, diff_src and diff_weights in bf16, converted back: one
// more rounding, <= u relative) and in how the tensor cores convert f32 to tf32 (round or
// truncate: a second error of <= u per input), so each element is held to 8u relative plus 8u of
// the output's scale. Skips without a GPU; a GPU below compute capability 8.0 refuses both.
#include <gtest/gtest.h>

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
        auto fast = must(dev.value()->make_op(d), d);
        auto ref = must(cpu->make_op(d), d);
        ASSERT_TRUE(fast && ref);
        EXPECT_NE(fast->impl().find(precision_name(p)), std::string::npos) << fast->impl();
        auto rounded = with_rounded_inputs(std::move(ref), p);
        expect_same_run(*fast, *dev.value(), *rounded, *cpu, tol, true, true);
      }
    }
  }
}

}  // namespace
}  // namespace easel::cuda_test
