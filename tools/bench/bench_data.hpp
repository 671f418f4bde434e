// `easel bench --data SPEC`: the data pipeline alone (BatchStream with prefetch: oneTBB's
// pipeline of --data-threads threads per stream), in batches and images per second, against the
// rate at which the timed nets' groups consume images.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/status.hpp"
#include "nets/data/augment.hpp"
#include "tools/bench/bench_model.hpp"

namespace easel::bench {

struct DataBenchConfig {
  std::string data;  // empty: no data section
  Augment augment;
  int threads = 1;  // per stream
};

// --data, --augment and --data-threads; the errors name the flag. --augment or --data-threads
// without --data is refused (they would measure nothing).
Result<DataBenchConfig> validate_data_flags(const BenchFlags& f);

// Loads the data, then for every batch size and every group count of the layouts, G streams
// (shards 0..G-1 of G) at once, each drained by its own thread as fast as it delivers, for
// cfg.repeats repeats of >= cfg.min_time s. Prints the rates and, for each row of doc["steps"]
// of the same batch and groups whose net takes the data's images, whether the pipeline keeps
// ahead of the groups' consumption or by how much it falls behind; adds doc["data"].
Status data_section(const BenchConfig& cfg, const DataBenchConfig& data, nlohmann::json& doc);

}  // namespace easel::bench
