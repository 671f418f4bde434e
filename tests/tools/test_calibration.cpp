// The calibration's model side (model/calibration.hpp): the fits from measured figures to the
// model's rates, and the machine description written from them read back by parse_machine with
// every figure where the model looks for it. No measuring: the figures are made up.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/calibration.hpp"
#include "model/layer_rates.hpp"
#include "model/machine.hpp"
#include "nets/graph.hpp"
#include "nets/models/models.hpp"

namespace easel::model {
namespace {

NetSpec lenet() {
  return build_model("lenet", {1, 28, 28, 10}).value();
}

// Oversubscription's overhead: the co-run primitive's 2C-copy rounds over its C-copy rounds (the
// medians), not over the step alone: the contention the C copies share is not a switching cost.
TEST(Calibration, OversubscriptionFromTheCoRunRounds) {
  EXPECT_NEAR(fit_oversubscription({1.00, 1.02, 1.04}, {1.50, 1.10, 1.122}), 1.122 / 1.02 - 1,
              1e-12);
  EXPECT_DOUBLE_EQ(fit_oversubscription({1.10, 1.10}, {1.00, 1.02}), 0);  // never below 0
  EXPECT_DOUBLE_EQ(fit_oversubscription({}, {1.2}), 0);
  EXPECT_DOUBLE_EQ(fit_oversubscription({1.0}, {}), 0);
}

// The MPI ping-pong through latency + bytes / bandwidth: 4 MiB less 4 B in 1 ms more than 4 B.
TEST(Calibration, MpiTransportThroughTheTwoMessages) {
  const Transport t = fit_mpi({2, 5e-6, 5e-6 + 1e-3});
  const double bytes = 4.0 * (kMpiLargeFloats - kMpiSmallFloats);
  EXPECT_TRUE(t.present);
  EXPECT_NEAR(t.bandwidth_gbs, bytes / 1e-3 / 1e9, 1e-9);
  EXPECT_NEAR(t.latency_us, 5 - 4.0 / (bytes / 1e-3) * 1e6, 1e-9);
  EXPECT_NEAR(t.seconds(4), 5e-6, 1e-12);
}

// Shared memory: half the fastest round trip, and the momentum update's 20 bytes per arena float.
TEST(Calibration, SharedMemoryFromTheRoundTripAndTheUpdate) {
  NetFigures f;
  f.spec = lenet();
  f.update = 1e-3;
  const double floats = static_cast<double>(net_cost(f.spec).value().arena_floats);
  const Transport t = fit_shared_memory(1e-6, {f});
  EXPECT_NEAR(t.latency_us, 0.5, 1e-12);
  EXPECT_NEAR(t.bandwidth_gbs, 20 * floats / 1e-3 / 1e9, 1e-9);
  EXPECT_DOUBLE_EQ(fit_shared_memory(0, {}).bandwidth_gbs, 1);  // no update timed
  EXPECT_DOUBLE_EQ(fit_shared_memory(0, {}).latency_us, 0.01);  // at least 0.01 us
}

// A calibration of LeNet alone: every layer timed at 1 ms a pass.
Calibration lenet_calibration() {
  Calibration c;
  c.host = {"a test cpu",
            "2026-01-01T00:00:00Z",
            "test",
            4,
            32e6,
            64e9,
            1,
            0,
            64e9,
            "avx2+fma",
            50,
            10,
            30,
            256,
            8};
  NetFigures f;
  f.name = "lenet";
  f.spec = lenet();
  f.batch = 32;
  f.step = 0.02;
  f.update = 1e-3;
  f.step_layers = 0.02;
  const std::vector<LayerWork> work = layer_work(f.spec).value();
  for (const LayerWork& w : work)
    f.layers.push_back({w.name, w.cls, 1e-3, 2e-3, 1e-3, 2e-3});
  c.nets = {f};
  c.exchange.round_trip_seconds = 1e-6;
  c.exchange.points = {{4, 1e6, 2e-4}};
  c.exchange.comm_points = {{2, 1e6, 3e-4, 4e-4, 5e-4, 6e-4}};
  c.exchange.centre_points = {{1, 1e6, 1e-4, 2e-4}};
  c.exchange.update_points = {{1, 1e6, 5e-5, 6e-5}};
  c.exchange.elastic_points = {{1, 1e6, 7e-5, 8e-5}};
  return c;
}

// c with every fit done (MPI's only when c.mpi has ranks), as `easel bench --calibrate` does.
Calibration fitted(Calibration c) {
  c.scaling = fit_scaling(c.nets, c.host).value();
  c.shared_memory = fit_shared_memory(c.exchange.round_trip_seconds, c.nets);
  if (c.mpi.ranks > 1) c.mpi_transport = fit_mpi(c.mpi);
  c.step = fit_step(c.nets, {}, c.host.fma_core_gflops, c.host.vector_floats).value();
  return c;
}

// parse_machine of what describe_machine writes, either failure in the test's message.
Machine read_back(const Calibration& c) {
  Result<std::string> text = describe_machine(c, "test.toml");
  EXPECT_TRUE(text.ok()) << text.status().message();
  Result<Machine> m = parse_machine(text.ok() ? *text : "", "test.toml");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : Machine{};
}

// What describe_machine writes, parse_machine reads back: each fitted figure where the model
// looks for it.
TEST(Calibration, DescriptionReadsBack) {
  Calibration c = lenet_calibration();
  c.mpi = {2, 5e-6, 5e-6 + 1e-3};
  c = fitted(c);
  const Machine m = read_back(c);
  EXPECT_EQ(m.name, "this machine: a test cpu");
  EXPECT_EQ(m.cores, 4);
  EXPECT_DOUBLE_EQ(m.peak_gflops, 50);
  EXPECT_NEAR(m.efficiency, c.scaling.efficiency, 1e-6 * c.scaling.efficiency);
  EXPECT_EQ(m.vector_floats, 8);
  EXPECT_DOUBLE_EQ(m.cache_mb, 32);
  EXPECT_DOUBLE_EQ(m.dram.bandwidth_gbs, 30);
  EXPECT_DOUBLE_EQ(m.dram.core_bandwidth_gbs, 10);
  EXPECT_DOUBLE_EQ(m.dram.capacity_gb, 64);
  EXPECT_NEAR(m.shared_memory.latency_us, 0.5, 1e-9);
  EXPECT_TRUE(m.mpi.present);
  EXPECT_NEAR(m.mpi.bandwidth_gbs, c.mpi_transport.bandwidth_gbs, 1e-5);
  ASSERT_EQ(m.shm_exchange.size(), 1u);
  EXPECT_EQ(m.shm_exchange[0].groups, 4);
  ASSERT_EQ(m.shm_comm_exchange.size(), 1u);
  EXPECT_DOUBLE_EQ(m.shm_comm_exchange[0].slowest_cold_seconds, 6e-4);
  ASSERT_EQ(m.shm_centre_exchange.size(), 1u);
  EXPECT_DOUBLE_EQ(m.shm_centre_exchange[0].cold_seconds, 2e-4);
  ASSERT_EQ(m.update_passes.size(), 1u);
  ASSERT_EQ(m.elastic_passes.size(), 1u);
  EXPECT_DOUBLE_EQ(m.elastic_passes[0].seconds, 7e-5);
  ASSERT_EQ(m.nets.size(), 1u);
  EXPECT_EQ(m.nets[0].net, "lenet");
  EXPECT_EQ(m.nets[0].batch, 32);
  EXPECT_EQ(m.nets[0].layers.size(), c.nets[0].layers.size());
  EXPECT_EQ(m.step.rates.size(), c.step.rates.size());
  EXPECT_FALSE(m.step.rates.empty());
  ASSERT_EQ(m.modes.size(), 1u);
  EXPECT_DOUBLE_EQ(m.modes[0].dram_gb, 64);
}

// Without MPI figures the description has no [transport.mpi]; the rest of the step (layer view
// less layers and update, per image) is what fit_step says.
TEST(Calibration, NoMpiWithoutRanksAndTheStepsRest) {
  Calibration c = lenet_calibration();
  c.nets[0].step_layers = timed_layer_seconds(c.nets[0]) + c.nets[0].update + 32e-6;
  c = fitted(c);
  EXPECT_NEAR(c.step.other_per_image, 1e-6, 1e-12);
  const Machine m = read_back(c);
  EXPECT_FALSE(m.mpi.present);
  EXPECT_NEAR(m.step.other_per_image, 1e-6, 1e-12);
}

}  // namespace
}  // namespace easel::model
