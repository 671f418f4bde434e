// The SimGrid platform files of tools/platforms/ say what they model in their header comments
// (docs/SIMULATION.md); these tests load each file into SimGrid and check that it does: hosts,
// cores and speeds, the links a message crosses, and which transfers share a link. SimGrid
// allows one platform per process: each meson test runs this program on one file with the
// matching filter (tests/mpi/meson.build).
//   test_platforms --gtest_filter=GpuPcieIb.* tools/platforms/gpu-pcie-ib.xml
#include <gtest/gtest.h>
#include <simgrid/s4u.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

std::string platform_file;

sg4::Engine& engine() {
  static sg4::Engine* e = [] {
    static int argc = 2;
    static char arg0[] = "test_platforms";
    static char arg1[] = "--log=root.thres:critical";
    static char* argv[] = {arg0, arg1, nullptr};
    auto* eng = new sg4::Engine(&argc, argv);
    eng->load_platform(platform_file);
    return eng;
  }();
  return *e;
}

sg4::Host* host(const std::string& name) {
  sg4::Host* h = engine().host_by_name_or_null(name);
  EXPECT_NE(h, nullptr) << name << " is not a host of " << platform_file;
  return h;
}

struct Route {
  size_t links = 0;
  double latency = 0;
};

Route route(const std::string& from, const std::string& to) {
  std::vector<sg4::Link*> links;
  Route r;
  host(from)->route_to(host(to), links, &r.latency);
  r.links = links.size();
  return r;
}

// Simulated seconds for each set of transfers (from, to) of `bytes` each, started together;
// the sets run one after the other. One simulation: SimGrid runs once per process.
std::vector<double> transfer_times(const std::vector<std::vector<std::pair<int, int>>>& sets,
                                   const std::string& prefix, double bytes) {
  std::vector<double> out;
  sg4::Actor::create("driver", host(prefix + "0"), [&] {
    for (const auto& set : sets) {
      const double start = sg4::Engine::get_clock();
      std::vector<sg4::CommPtr> comms;
      for (auto [a, b] : set)
        comms.push_back(sg4::Comm::sendto_async(host(prefix + std::to_string(a)),
                                                host(prefix + std::to_string(b)), bytes));
      for (auto& c : comms)
        c->wait();
      out.push_back(sg4::Engine::get_clock() - start);
    }
  });
  engine().run();
  return out;
}

// gpu-pcie-ib.xml: one host per GPU, 4 GPUs per PCIe switch, 2 switches per node, nodes on one
// InfiniBand switch; every link 24 GBps and 1 us.
TEST(GpuPcieIb, OneHostPerGpuOfTheA100sSpeed) {
  EXPECT_EQ(engine().get_host_count(), 1024u);
  EXPECT_EQ(host("gpu-0")->get_core_count(), 1);
  EXPECT_DOUBLE_EQ(host("gpu-1023")->get_speed(), 19.5e12);
}

TEST(GpuPcieIb, MessagesCrossTheTreesLevels) {
  const Route same_switch = route("gpu-0", "gpu-3");
  const Route same_node = route("gpu-0", "gpu-4");
  const Route other_node = route("gpu-0", "gpu-8");
  const Route far_node = route("gpu-7", "gpu-1016");
  EXPECT_EQ(same_switch.links, 2u);  // the two GPUs' own PCIe links
  EXPECT_EQ(same_node.links, 4u);    // and both switches' uplinks
  EXPECT_EQ(other_node.links, 6u);   // and both nodes' InfiniBand ports
  EXPECT_EQ(far_node.links, 6u);
  EXPECT_NEAR(same_switch.latency, 2e-6, 1e-12);
  EXPECT_NEAR(same_node.latency, 4e-6, 1e-12);
  EXPECT_NEAR(other_node.latency, 6e-6, 1e-12);
}

// The sharing the header promises: a PCIe switch is non-blocking between its ports, its uplink
// is shared by its GPUs, a node's InfiniBand port by its 8 GPUs. Transfers are large enough
// that latency is negligible: times are multiples of one transfer alone.
TEST(GpuPcieIb, SwitchUplinksAndInfiniBandPortsAreShared) {
  const auto t = transfer_times({{{0, 1}},
                                 {{0, 1}, {2, 3}},
                                 {{0, 4}, {1, 5}},
                                 {{0, 4}, {2, 6}, {1, 7}, {3, 5}},
                                 {{0, 8}, {4, 9}},
                                 {{0, 8}, {1, 16}, {2, 24}},
                                 {{0, 8}, {16, 24}}},
                                "gpu-", 240e6);
  ASSERT_EQ(t.size(), 7u);
  const double one = t[0];
  EXPECT_NEAR(one, 240e6 / 24e9, 0.05 * one);  // about the link's rate (SimGrid's TCP factor)
  EXPECT_NEAR(t[1] / one, 1.0, 0.01) << "two pairs under one switch";
  EXPECT_NEAR(t[2] / one, 2.0, 0.01) << "two transfers over one switch's uplink";
  EXPECT_NEAR(t[3] / one, 4.0, 0.01) << "four transfers over one switch's uplink";
  EXPECT_NEAR(t[4] / one, 2.0, 0.01) << "two GPUs of one node sending to another node";
  EXPECT_NEAR(t[5] / one, 3.0, 0.01) << "three transfers leaving one node's port";
  EXPECT_NEAR(t[6] / one, 1.0, 0.01) << "two transfers between different pairs of nodes";
}

// cori-knl.xml: 768 68-core KNL nodes on an Aries-like dragonfly, 10 GBps and 0.4 us a link.
TEST(CoriKnl, NodesOfSixtyEightCores) {
  EXPECT_EQ(engine().get_host_count(), 768u);
  EXPECT_EQ(host("knl-0")->get_core_count(), 68);
  EXPECT_DOUBLE_EQ(host("knl-767")->get_speed(), 89.6e9);
}

TEST(CoriKnl, RanksOfOneNodeShareNoLinkAndNodesShareTheirNic) {
  // Two nodes of one router: the two nodes' links (1.2 us is the three links' of a chassis).
  EXPECT_LE(route("knl-0", "knl-1").links, 3u);
  EXPECT_GT(route("knl-0", "knl-767").links, route("knl-0", "knl-1").links);
  // SimGrid makes a cluster's loopback a fat pipe: each of a node's transfers gets the whole
  // 40 GBps (docs/SIMULATION.md says so). Two nodes' transfers share the sender's NIC.
  const auto t =
      transfer_times({{{0, 0}}, {{0, 0}, {0, 0}}, {{0, 1}}, {{0, 1}, {0, 2}}}, "knl-", 400e6);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_NEAR(t[1] / t[0], 1.0, 0.01) << "the loopback is a fat pipe";
  EXPECT_NEAR(t[3] / t[2], 2.0, 0.01) << "one node's NIC is shared by its transfers";
  EXPECT_NEAR(t[2] / t[0], 4.0, 0.05) << "10 GBps between nodes against 40 GBps inside";
}

TEST(ThisMachine, OneHostOfTwoCores) {
  EXPECT_EQ(engine().get_host_count(), 1u);
  EXPECT_EQ(host("this-machine")->get_core_count(), 2);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: test_platforms [gtest flags] PLATFORM.xml\n");
    return 2;
  }
  platform_file = argv[1];
  return RUN_ALL_TESTS();
}
