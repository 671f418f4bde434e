// The memory fit (run/fit.hpp) on described machines (tests/engine/topologies/): LeNet's
// numbers worked by hand, 16 AlexNet-CIFAR replicas against an SNC-4 flat KNL's 4 GiB of
// MCDRAM per cluster (refused, with the numbers), hbw-preferred naming what spills, the
// quadrant-flat chip's 16 GiB, and machines without a high-bandwidth node.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "nets/models/models.hpp"
#include "run/fit.hpp"

namespace easel {
namespace {

using C = BufferClass;

Topology described(const std::string& name) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  auto t = load_topology_xml(std::string(root != nullptr ? root : ".") +
                             "/tests/engine/topologies/" + name + ".xml");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : Topology{};
}

GroupPlan plan_of(const Topology& t, const std::string& groups) {
  PlanRequest r;
  r.groups = parse_group_count(groups).value();
  auto p = make_plan(t, r);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? std::move(p).value() : GroupPlan{};
}

NetCost cost_of(const std::string& net, ModelInput in) {
  auto spec = build_model(net, in);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  auto c = net_cost(*spec);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

Placement placed(const std::string& text) {
  auto p = parse_placement(text);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return *p;
}

Fit fit_on(const FitRequest& req, const std::string& machine, const std::string& groups) {
  const Topology topo = described(machine);
  auto f = compute_fit(req, topo, plan_of(topo, groups));
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? std::move(f).value() : Fit{};
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The paper's case: AlexNet-CIFAR, batch 128, CIFAR-10 (60000 images of 3x32x32 as bytes), every
// group's buffers in MCDRAM and the data set preferred there.
FitRequest alexnet_request() {
  FitRequest r;
  r.cost = cost_of("alexnet-cifar", {3, 32, 32, 10});
  r.input_floats = 3 * 32 * 32;
  r.batch = 128;
  r.algo = "sync-easgd";
  r.placement = placed("weights=hbw,grads=hbw,momentum=hbw,activations=hbw,dataset=hbw-preferred");
  r.dataset_bytes = 60000ull * 3 * 32 * 32;
  return r;
}

// LeNet on 1x28x28, 10 classes: conv1 20x1x5x5+20, conv2 50x20x5x5+50, ip1 500x800+500,
// ip2 10x500+10 = 431,080 parameters; each segment starts on 16 floats: 512+32 | 25008+64 |
// 400000+512 | 5008+16 = 431,152 floats in the arena. Outputs per image: conv1 20x24x24, pool1
// 20x12x12, conv2 50x8x8, pool2 50x4x4, ip1 500, relu1 500, ip2 10 = 18,910 floats. Their
// gradients (a chain: neighbours live at once, every other one shares) take two buffers, the
// largest of the even outputs (conv1 11,520) and of the odd ones below ip2 (pool1 2,880), and
// ip2's own 10: 14,410 floats.
TEST(Fit, LeNetByHand) {
  FitRequest r;
  r.cost = cost_of("lenet", {1, 28, 28, 10});
  EXPECT_EQ(r.cost.params, 431080);
  EXPECT_EQ(r.cost.arena_floats, 431152);
  EXPECT_EQ(r.cost.activation_floats, 18910);
  EXPECT_EQ(r.cost.gradient_floats, 14410);
  r.input_floats = 784;
  r.batch = 64;
  r.algo = "sync-easgd";  // 4 groups: the partitioned exchange (a second weights arena, centre)
  r.dataset_bytes = 70000ull * 784;
  const Fit f = fit_on(r, "knl-snc4-flat", "4");
  ASSERT_TRUE(f.refusal.ok()) << f.refusal.to_string();
  const uint64_t arena = 431152ull * 4;                         // 1,724,608
  const uint64_t acts = 64ull * 4 * (18910 + 14410 + 4 * 784);  // outputs, gradients, 4 batches
  EXPECT_EQ(f[C::weights].arenas, 2);
  EXPECT_EQ(f[C::weights].per_group, 2 * arena);
  EXPECT_EQ(f[C::weights].total, 4 * 2 * arena);
  EXPECT_EQ(f[C::grads].per_group, arena);
  EXPECT_EQ(f[C::momentum].total, 4 * arena);
  EXPECT_EQ(f[C::activations].per_group, acts);
  EXPECT_EQ(f[C::activations].per_group, 9332736u);
  EXPECT_EQ(f[C::centre].per_group, 0u);
  EXPECT_EQ(f[C::centre].total, 2 * arena);
  EXPECT_EQ(f[C::dataset].total, 54880000u);
  EXPECT_EQ(f.classes[kFitCopies].total, 2 * arena);  // initial, final and group 0's weights
  EXPECT_EQ(f.classes[kFitKernels].total, 0u);        // not measured in this request
  const uint64_t group = 4 * arena + acts;            // 16,231,168
  EXPECT_EQ(f.need, 4 * group + 2 * arena + 54880000u + 2 * arena);
  // Everything dram: each group on its cluster's DDR node; the centre, the data set and the
  // run's copies on group 0's.
  ASSERT_NE(f.node(0), nullptr);
  EXPECT_EQ(f.node(0)->need, group + 2 * arena + 54880000u + 2 * arena);
  for (int n = 1; n < 4; ++n)
    EXPECT_EQ(f.node(n)->need, group) << n;
  for (int n = 4; n < 8; ++n)
    EXPECT_EQ(f.node(n)->need, 0u) << n;
  EXPECT_TRUE(f.spills.empty());
  EXPECT_TRUE(has(f.to_string(), "weights      dram           2 x 1.7 MB")) << f.to_string();
}

// sgd: no centre; two groups of sync-easgd: the mirrored exchange (two published weights arenas
// per group, a centre copy on group 1).
TEST(Fit, AlgorithmsKeepTheirArenas) {
  FitRequest r;
  r.cost = cost_of("lenet", {1, 28, 28, 10});
  r.input_floats = 784;
  const uint64_t arena = 431152ull * 4;
  r.algo = "sgd";
  Fit f = fit_on(r, "one-core", "1");
  EXPECT_EQ(f[C::centre].total, 0u);
  EXPECT_EQ(f[C::weights].total, arena);
  r.algo = "sync-easgd";
  f = fit_on(r, "two-socket", "2");
  EXPECT_EQ(f[C::weights].arenas, 3);
  EXPECT_EQ(f[C::centre].total, 2 * arena);
  EXPECT_EQ(f[C::centre].per_group, arena);  // group 1's copy
  r.sync_fast = false;                       // through the Comm: a scratch centre
  f = fit_on(r, "two-socket", "2");
  EXPECT_EQ(f[C::weights].arenas, 1);
  EXPECT_EQ(f[C::centre].total, 2 * arena);
  r.algo = "async-msgd";
  f = fit_on(r, "two-socket", "2");
  EXPECT_EQ(f[C::centre].total, 2 * arena);  // the centre and its momentum
  r.algo = "nope";
  EXPECT_FALSE(compute_fit(r, described("one-core"), plan_of(described("one-core"), "1")).ok());
}

// Issue 19: 16 AlexNet-CIFAR groups on an SNC-4 flat KNL are 4 per cluster, held to the
// cluster's 4 GiB of MCDRAM (not the chip's 16): refused, naming the classes, the node, the
// need and the capacity.
TEST(Fit, SixteenAlexNetsDoNotFitSnc4Mcdram) {
  const FitRequest r = alexnet_request();
  const Fit f = fit_on(r, "knl-snc4-flat", "16");
  ASSERT_FALSE(f.refusal.ok());
  const uint64_t arena = static_cast<uint64_t>(r.cost.arena_floats) * 4;
  const uint64_t group = f[C::activations].per_group + 4 * arena;  // 2 weights, grads, momentum
  EXPECT_EQ(f[C::weights].per_group, 2 * arena);
  const FitNode* n4 = f.node(4);
  ASSERT_NE(n4, nullptr);
  EXPECT_EQ(n4->bound, 4 * group);
  EXPECT_GT(n4->bound, 4 * (uint64_t{1} << 30));
  const std::string m = f.refusal.message();
  EXPECT_TRUE(has(m, "--placement weights=hbw,grads=hbw,momentum=hbw,activations=hbw: ")) << m;
  EXPECT_TRUE(has(m, "4 groups x " + fit_bytes(2 * arena) + " of weights")) << m;
  EXPECT_TRUE(has(m, "need " + fit_bytes(4 * group) + " of hbw on node 4 (4.0 GiB, 4 group(s))"))
      << m;
  EXPECT_TRUE(has(f.to_string(), "does not fit")) << f.to_string();
  // 4 groups, one per cluster, fit there.
  const Fit four = fit_on(r, "knl-snc4-flat", "4");
  EXPECT_TRUE(four.refusal.ok()) << four.refusal.to_string();
  EXPECT_EQ(four.node(5)->need, group);
}

// The same 16 groups with everything hbw-preferred: not refused; the table and the spill line
// say which classes go to DRAM, and each node holds no more than its capacity.
TEST(Fit, HbwPreferredSaysWhatSpills) {
  FitRequest r = alexnet_request();
  r.placement = placed("hbw-preferred");
  const Fit f = fit_on(r, "knl-snc4-flat", "16");
  ASSERT_TRUE(f.refusal.ok()) << f.refusal.to_string();
  ASSERT_FALSE(f.spills.empty());
  EXPECT_TRUE(has(f.spills[0], "hbw-preferred: node 4 (4.0 GiB) is full; ")) << f.spills[0];
  EXPECT_TRUE(has(f.spills[0], "spill to DRAM node 0")) << f.spills[0];
  for (int n = 4; n < 8; ++n)
    EXPECT_EQ(f.node(n)->need, f.node(n)->capacity) << n;  // filled to the brim
  uint64_t spilled = 0;
  for (int c = 0; c < kBufferClassCount; ++c)
    spilled += f.classes[c].spilled;
  uint64_t in_dram = 0;
  for (int n = 0; n < 4; ++n)
    in_dram += f.node(n)->need;
  EXPECT_EQ(spilled + f.classes[kFitCopies].total, in_dram);  // the copies are DRAM's own
  EXPECT_EQ(f.need, in_dram + 4 * f.node(4)->capacity);
  // The data set is allocated first: it stays in MCDRAM; the last groups' momentum spills.
  EXPECT_EQ(f[C::dataset].spilled, 0u);
  EXPECT_GT(f[C::momentum].spilled, 0u);
  EXPECT_TRUE(has(f.spills[0], "momentum ")) << f.spills[0];
}

// Quadrant flat: one locality, one MCDRAM node of 16 GiB shared by all 16 groups.
TEST(Fit, QuadrantFlatCountsTheChipsSixteenGiB) {
  FitRequest r = alexnet_request();
  r.placement = placed("weights=hbw,dataset=hbw-preferred");
  const Fit f = fit_on(r, "knl-quadrant-flat", "16");
  ASSERT_TRUE(f.refusal.ok()) << f.refusal.to_string();
  const uint64_t arena = static_cast<uint64_t>(r.cost.arena_floats) * 4;
  EXPECT_EQ(f.node(1)->bound, 16 * 2 * arena);
  EXPECT_EQ(f.node(1)->need, 16 * 2 * arena + r.dataset_bytes);
  EXPECT_EQ(f.node(1)->groups.size(), 16u);
  EXPECT_TRUE(f.spills.empty());
  // Everything hbw: 16 x (4 arenas + activations) is more than 16 GiB.
  r.placement = placed("weights=hbw,grads=hbw,momentum=hbw,activations=hbw");
  const Fit all = fit_on(r, "knl-quadrant-flat", "16");
  ASSERT_FALSE(all.refusal.ok());
  EXPECT_TRUE(has(all.refusal.message(), "of hbw on node 1 (16.0 GiB, 16 group(s))"))
      << all.refusal.message();
}

// No high-bandwidth node: hbw-preferred stays in DRAM (said once); more than the machine's
// memory is refused.
TEST(Fit, MachineWithoutHbw) {
  FitRequest r = alexnet_request();
  r.placement = placed("hbw-preferred");
  const Fit f = fit_on(r, "two-socket", "2");
  ASSERT_TRUE(f.refusal.ok()) << f.refusal.to_string();
  ASSERT_EQ(f.spills.size(), 1u);
  EXPECT_TRUE(has(f.spills[0], "no high-bandwidth node")) << f.spills[0];
  EXPECT_EQ(f[C::weights].spilled, f[C::weights].total);
  // one-core has 8 GiB: 16 AlexNet groups (on one core, oversubscribed) do not fit.
  r.placement = placed("dram");
  const Topology one = described("one-core");
  PlanRequest pr;
  pr.groups = GroupCount::of(16);
  pr.oversubscribe = true;
  auto plan = make_plan(one, pr);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto big = compute_fit(r, one, *plan);
  ASSERT_TRUE(big.ok());
  ASSERT_FALSE(big->refusal.ok());
  EXPECT_TRUE(has(big->refusal.message(), "16 group(s) need ")) << big->refusal.message();
  EXPECT_TRUE(has(big->refusal.message(), "more than this machine's 8.0 GiB of memory"))
      << big->refusal.message();
}

// The kernels' own buffers (measured, here given) sit in each group's DRAM node whatever the
// placement: the C++ heap's, not memkind's. The table and the summary name them.
TEST(Fit, KernelsGoToEachGroupsDram) {
  FitRequest r = alexnet_request();
  r.placement = placed("hbw");
  r.kernel_bytes = 100'000'000;
  const Fit f = fit_on(r, "knl-snc4-flat", "4");
  ASSERT_TRUE(f.refusal.ok()) << f.refusal.to_string();
  EXPECT_EQ(f.classes[kFitKernels].per_group, r.kernel_bytes);
  EXPECT_EQ(f.classes[kFitKernels].total, 4 * r.kernel_bytes);
  for (int n = 0; n < 4; ++n)
    EXPECT_EQ(f.node(n)->bytes[kFitKernels], r.kernel_bytes) << n;
  for (int n = 4; n < 8; ++n)
    EXPECT_EQ(f.node(n)->bytes[kFitKernels], 0u) << n;
  EXPECT_TRUE(has(f.to_string(), "  kernels      dram           100.0 MB")) << f.to_string();
  EXPECT_TRUE(has(f.summary_lines()[0], "kernels 100.0 MB dram")) << f.summary_lines()[0];
}

// A run that writes checkpoints holds one snapshot in host memory: the centre and each group's
// weights and momentum; across ranks rank 0 gathers every rank's groups beside their encoding.
TEST(Fit, OneCheckpointIsCounted) {
  FitRequest r = alexnet_request();
  r.algo = "async-easgd";
  r.checkpoints = true;
  const uint64_t arena = r.cost.arena_floats * sizeof(float);
  EXPECT_EQ(fit_on(r, "two-socket", "4").classes[kFitCheckpoint].total, (1 + 2 * 4) * arena);
  r.ranks = 3;
  EXPECT_EQ(fit_on(r, "two-socket", "4").classes[kFitCheckpoint].total,
            (1 + 2 * 2 * 4 * 3) * arena);
  r.root = false;
  EXPECT_EQ(fit_on(r, "two-socket", "4").classes[kFitCheckpoint].total, (1 + 2 * 2 * 4) * arena);
  r.checkpoints = false;
  EXPECT_EQ(fit_on(r, "two-socket", "4").classes[kFitCheckpoint].total, 0u);
}

// GPU groups: only the data set and the run's copies of the weights are counted on the host.
TEST(Fit, GpuGroupsCountOnlyTheDataSetAndTheCopies) {
  FitRequest r = alexnet_request();
  r.gpu = true;
  r.placement = Placement{};
  r.kernel_bytes = 1000;  // a host group's: not these groups'
  const Fit f = fit_on(r, "two-socket", "2");
  EXPECT_EQ(f.need, r.dataset_bytes + 2 * r.cost.arena_floats * sizeof(float));
  EXPECT_EQ(f[C::weights].total, 0u);
  ASSERT_FALSE(f.notes.empty());
}

}  // namespace
}  // namespace easel
