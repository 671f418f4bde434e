// The precision flag on the CPU device: tf32 refused in one line, bf16 refused where the core's
// bf16 dot product is no faster than its fp32 FMA (with the measured rates in the message), and
// fp32 always accepted. The verdict goes through the device list, as a run builds its devices.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "devices/cpu/cpu_precision.hpp"
#include "devices/cpu/dnnl_ops.hpp"
#include "devices/list.hpp"
#include "devices/op.hpp"

namespace easel {
namespace {

const DeviceEntry& cpu_entry() {
  for (const DeviceEntry& e : device_list())
    if (std::string(e.name) == "cpu") return e;
  std::abort();
}

TEST(Precision, ParsesTheThreeNames) {
  for (const char* n : {"fp32", "tf32", "bf16"}) {
    auto p = parse_precision(n);
    ASSERT_TRUE(p.ok()) << n;
    EXPECT_STREQ(precision_name(p.value()), n);
  }
  auto bad = parse_precision("fp16");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp32, tf32 or bf16"), std::string::npos);
}

TEST(Precision, CpuRefusesTf32InOneLine) {
  auto d = cpu_entry().make_device(0, ImplChoice::fast, Precision::tf32);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::invalid_argument);
  const std::string m = d.status().message();
  EXPECT_EQ(m.rfind("--precision tf32:", 0), 0u) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_TRUE(cpu_entry().make_device(0, ImplChoice::fast, Precision::fp32).ok());
}

// Where the CPU has native bf16, the probe measures both rates; the verdict follows the ratio.
TEST(Precision, CpuBf16VerdictFollowsTheMeasuredRates) {
  unsetenv("EASEL_BF16");
  auto d = cpu_entry().make_device(0, ImplChoice::fast, Precision::bf16);
  if (!dnnl_bf16_available()) {
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("no native bf16"), std::string::npos);
    return;
  }
  const Bf16Rates r = measure_bf16_rates();
  EXPECT_GT(r.bf16_gmacs, 0);
  EXPECT_GT(r.fp32_gmacs, 0);
  if (r.amx || r.ratio() >= kBf16MinRateRatio) {
    EXPECT_TRUE(d.ok()) << d.status().message();
    return;
  }
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::invalid_argument);
  const std::string m = d.status().message();
  EXPECT_EQ(m.rfind("--precision bf16: bf16 cannot pay", 0), 0u) << m;
  EXPECT_NE(m.find("GMAC/s"), std::string::npos) << m;
  // The override runs it (accuracy studies), and the reference kernels never refuse.
  setenv("EASEL_BF16", "force", 1);
  EXPECT_TRUE(cpu_entry().make_device(0, ImplChoice::fast, Precision::bf16).ok());
  unsetenv("EASEL_BF16");
  EXPECT_TRUE(cpu_entry().make_device(0, ImplChoice::ref, Precision::bf16).ok());
}

// bf16 per layer: a convolution whose bf16 kernel is slower than its fp32 one stays fp32. On a
// core whose dot product has under 3/4 of the FMA's multiply-adds (the Intel guest: 0.5x) and no
// AMX tiles the bf16 convolution is about half as fast, so the choice is fp32; elsewhere (AMX's
// tiles run oneDNN's bf16 convolutions whatever the dot product's rate) either is valid.
TEST(Precision, CpuBf16PerLayerKeepsTheFasterKernel) {
  if (!dnnl_bf16_available()) GTEST_SKIP() << "no native bf16 on this CPU";
  OpDesc d;
  d.kind = OpKind::conv;
  d.layout = Layout::nhwc;
  d.src = {16, 32, 16, 16};
  d.oc = 32;
  d.kh = d.kw = 5;
  d.pad_h = d.pad_w = 2;
  DnnlOptions o;
  o.precision = Precision::bf16;
  o.bf16_per_layer = true;
  auto dev = make_cpu_device(ImplChoice::fast, o);
  auto op = dev->make_op(d);
  ASSERT_TRUE(op.ok()) << op.status().message();
  const std::string impl = op.value()->impl();
  EXPECT_TRUE(impl.rfind("dnnl:", 0) == 0 || impl.rfind("dnnl-bf16:", 0) == 0) << impl;
  if (measure_bf16_rates().ratio() < 0.75 && !dnnl_amx_available()) {
    EXPECT_EQ(impl.rfind("dnnl:", 0), 0u) << impl;
  }
  // Without the per-layer choice the bf16 kernel runs whatever its speed.
  o.bf16_per_layer = false;
  auto all = make_cpu_device(ImplChoice::fast, o)->make_op(d);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value()->impl().rfind("dnnl-bf16:", 0), 0u) << all.value()->impl();
}

// The probe's rates are a core's: an x86 core with AVX512_BF16 multiplies at least 16 fp32
// products per ns (one 512-bit FMA per cycle at 1 GHz), and bf16 no slower than half of that.
TEST(Precision, ProbeRatesArePlausible) {
  if (!dnnl_bf16_available()) GTEST_SKIP() << "no native bf16 on this CPU";
  const Bf16Rates r = measure_bf16_rates();
  EXPECT_GT(r.fp32_gmacs, 16);
  EXPECT_GT(r.bf16_gmacs, 8);
  EXPECT_NE(describe_bf16_rates(r).find("GMAC/s"), std::string::npos);
}

}  // namespace
}  // namespace easel
