// The pure parts of `easel bench`: its flags and their validation, the FLOP and byte-count
// models the reported rates are derived from, and the min/median/max summary. Nothing here
// touches the machine or a clock, so tests/tools/test_bench.cpp can check all of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/status.hpp"

namespace easel::bench {

// One group layout: `groups` worker groups of `threads` threads each ("2x1").
struct GroupLayout {
  int groups = 1, threads = 1;
  std::string to_string() const;  // "2x1"
  bool operator==(const GroupLayout&) const = default;
};

// The flags as typed (bound to CLI11 in bench_cmd.cpp).
struct BenchFlags {
  std::string nets = "lenet,cifar10-quick";
  std::string batches = "64";
  std::string layouts;     // empty: default_layouts() of the cores this process may use
  int warmup = 10;         // untimed steps per configuration
  int repeats = 7;         // timed repeats; min/median/max are over these
  double min_time = 0.2;   // seconds each timed repeat lasts at least (steps per repeat derived)
  std::string json;        // output file; empty: none
  bool overwrite = false;  // replace an existing json file
  bool skip_ceilings = false;
  bool skip_layers = false;
  bool skip_exchange = false;
  bool oversubscribe = false;
  std::string layout = "nhwc";  // activation layout
  std::string impl = "fast";
  int64_t triad_mib = 256;  // size of each of the triad's three arrays
  // The data pipeline's section (bench_data.cpp; only with --data): a train --data spec (an image
  // folder DIR[:SIDE]), its --augment and --data-threads (0: one per stream).
  std::string data;
  std::string augment = "none";
  int data_threads = 0;
  bool data_only = false;  // --data-only: only the data section (no ceilings, steps, layers)
  // --calibrate: measure what the performance model needs and write this machine's description
  // (model/machine.hpp) to `out` (empty: the default, ~/.config/easel/machine.toml).
  bool calibrate = false;
  std::string out;
  // --collectives: only the collectives' table (collectives.hpp), over --ranks threads of this
  // process or the MPI world, messages up to --max-mb.
  bool collectives = false;
  int ranks = 2;
  double max_mb = 0;
};

// The flags after validation.
struct BenchConfig {
  std::vector<std::string> nets;
  std::vector<int64_t> batches;
  std::vector<GroupLayout> layouts;
  int warmup = 10, repeats = 7;
  double min_time = 0.2;
  std::string json;
  bool skip_ceilings = false, skip_layers = false, skip_exchange = false, oversubscribe = false;
  std::string layout = "nhwc", impl = "fast";
  int64_t triad_mib = 256;
};

// Checks every flag; the error is one line naming the flag, the bad value and what is accepted.
// Net names are checked against the model list; the group plan itself (cores) is not. `cores`
// (those this process may use, >= 1) gives the layouts when f.layouts is empty.
Result<BenchConfig> validate_flags(const BenchFlags& f, int cores);

// The layouts timed unless --layouts says: 1x1, 1x2 and 2x1, those that fit `cores` (>= 1; 1x1
// always), so that a process bound to fewer cores times what it can run.
std::vector<GroupLayout> default_layouts(int cores);

// "1x1,2x1" -> layouts; the error names the bad token.
Result<std::vector<GroupLayout>> parse_layouts(const std::string& text);
// "64,128" -> batches in [1, 65536]; the error names the bad token.
Result<std::vector<int64_t>> parse_batches(const std::string& text);
// Splits on ',' and drops empty pieces.
std::vector<std::string> split_list(const std::string& text);

// The input shape (channels, height, width) and classes a bench net is fed: LeNet and mlp take
// Fashion-MNIST's 1x28x28, cifar10-quick CIFAR-10's 3x32x32; 10 classes each.
struct BenchInput {
  int64_t channels = 1, height = 28, width = 28, classes = 10;
};
BenchInput bench_input(const std::string& net);

// ---- FLOP model of the FMA peak loop ----
// One iteration of the loop issues `accumulators` FMAs on `lanes`-wide float vectors; an FMA
// is 2 FLOPs per lane.
double fma_loop_flops(int64_t iterations, int accumulators, int lanes);

// ---- byte-count model (STREAM's convention) ----
// Bytes are the float loads and stores the element loops perform, counted once each; the
// write-allocate read of a store's cache line is NOT counted (as STREAM does not). n is the
// number of floats of the arena (or of each triad array).
//   triad           a = b + s*c                       12 n
//   tree reduce     P-1 adds (read 2, write 1)        12 n (P-1)
//   tree broadcast  P-1 copies (read 1, write 1)       8 n (P-1)
//   ring reduce     reduce-scatter 12 n (P-1) + the root's gather of P chunks 8 n
//   ring broadcast  P-1 ranks copy the whole buffer    8 n (P-1)
//   elastic_sgd_step   reads w, g, centre, writes w    16 n (per group)
//   elastic_centre_sum reads centre, sum, writes centre 12 n
//   momentum_step      reads w, g, v, writes w, v      20 n (per group)
//   sync exchange   tree reduce + P elastic_sgd_step + elastic_centre_sum
enum class Traffic {
  triad,
  tree_reduce,
  tree_broadcast,
  ring_reduce,
  ring_broadcast,
  elastic_sgd_step,
  elastic_centre_sum,
  momentum_step,
  sync_exchange,
  sync_exchange_partitioned,
  sync_exchange_mirrored,  // as the bench times it: SGD, P == 2 (loads P + 2, stores 3 arenas)
};
const char* traffic_name(Traffic t);
// Bytes moved by one call (all ranks together; per-group ops counted once per group, P groups).
double traffic_bytes(Traffic t, int64_t n, int p);
// The formula above as text, for the output ("12 n (P-1)").
const char* traffic_formula(Traffic t);

// ---- summaries ----
struct Summary {
  double min = 0, median = 0, max = 0;
};
// Min, median (mean of the middle two for an even count) and max; all zero when empty.
Summary summarize(std::vector<double> v);

}  // namespace easel::bench
