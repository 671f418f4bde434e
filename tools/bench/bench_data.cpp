// The data pipeline's throughput (bench_data.hpp).
#include "tools/bench/bench_data.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "nets/data/batch_stream.hpp"
#include "tools/bench/bench.hpp"

namespace easel::bench {

using nlohmann::json;

namespace {

json summary_json(const Summary& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

// One row: G streams of `batch` at once.
struct DataRow {
  int64_t batch = 0;
  int streams = 0;
  Summary batches_per_second, images_per_second;  // all streams together, over repeats
};

Result<DataRow> time_streams(const BenchConfig& cfg, const DataBenchConfig& data, const Dataset& ds,
                             int64_t batch, int streams) {
  Layout layout = cfg.layout == "nchw" ? Layout::nchw : Layout::nhwc;
  std::vector<std::unique_ptr<BatchStream>> ss;
  DataThreads threads;
  threads.threads = data.threads;
  for (int g = 0; g < streams; ++g) {
    EASEL_ASSIGN_OR_RETURN(
        auto s, BatchStream::create(ds, batch, layout, g, streams, 1, true, MemKind::dram, -1,
                                    data.augment, threads, shuffle_buffer_for(ds, -1)));
    ss.push_back(std::move(s));
  }
  for (int w = 0; w < cfg.warmup; ++w)
    for (auto& s : ss)
      s->next();
  std::vector<double> bps;
  for (int r = 0; r < cfg.repeats; ++r) {
    std::vector<int64_t> taken(static_cast<size_t>(streams), 0);
    std::atomic<bool> go{false};
    std::vector<std::thread> drains;
    double t0 = 0, t1 = 0;
    for (int g = 0; g < streams; ++g) {
      drains.emplace_back([&, g] {
        while (!go.load(std::memory_order_acquire)) {
        }
        const double until = seconds_now() + cfg.min_time;
        int64_t n = 0;
        do {
          ss[static_cast<size_t>(g)]->next();
          ++n;
        } while (seconds_now() < until);
        taken[static_cast<size_t>(g)] = n;
      });
    }
    t0 = seconds_now();
    go.store(true, std::memory_order_release);
    for (auto& d : drains)
      d.join();
    t1 = seconds_now();
    int64_t total = 0;
    for (int64_t n : taken)
      total += n;
    bps.push_back(static_cast<double>(total) / (t1 - t0));
  }
  DataRow row;
  row.batch = batch;
  row.streams = streams;
  row.batches_per_second = summarize(bps);
  for (double& v : bps)
    v *= static_cast<double>(batch);
  row.images_per_second = summarize(bps);
  return row;
}

// The distinct group counts of the layouts, ascending: the stream counts to time (a stream
// feeds a group, whatever its threads).
std::vector<int> distinct_group_counts(const std::vector<GroupLayout>& layouts) {
  std::vector<int> group_counts;
  for (const GroupLayout& gl : layouts)
    if (std::find(group_counts.begin(), group_counts.end(), gl.groups) == group_counts.end())
      group_counts.push_back(gl.groups);
  std::sort(group_counts.begin(), group_counts.end());
  return group_counts;
}

// Which runner a stream of `ds` with `threads` threads gets ("serial" when a probe stream
// cannot be made): the header names it.
const char* pipeline_runner(const Dataset& ds, int threads) {
  DataThreads t;
  t.threads = threads;
  auto probe =
      BatchStream::create(ds, 1, Layout::nchw, 0, 1, 1, true, MemKind::dram, -1, Augment(), t);
  return probe.ok() ? (*probe)->pipeline_name() : "serial";
}

// Prints one row of the table and returns it as JSON.
json report_data_row(const DataRow& row) {
  char b1[96], b2[96];
  std::snprintf(b1, sizeof b1, "%.1f/%.1f/%.1f", row.batches_per_second.min,
                row.batches_per_second.median, row.batches_per_second.max);
  std::snprintf(b2, sizeof b2, "%.0f/%.0f/%.0f", row.images_per_second.min,
                row.images_per_second.median, row.images_per_second.max);
  std::printf("%5lld %7d %23s %23s\n", static_cast<long long>(row.batch), row.streams, b1, b2);
  return {{"batch", row.batch},
          {"streams", row.streams},
          {"batches_per_second", summary_json(row.batches_per_second)},
          {"images_per_second", summary_json(row.images_per_second)}};
}

// Sets `row` against every timed net (doc["steps"]) of the same batch and group count: prints
// whether the pipeline keeps ahead of the groups and adds it to *compared; a net that takes other
// images than ds's goes to *other_shapes once instead (listed after the table).
void compare_with_steps(const json& steps, const DataRow& row, const Dataset& ds, json* compared,
                        std::vector<std::string>* other_shapes) {
  for (const json& s : steps) {
    if (s["batch"] != row.batch || s["groups"] != row.streams) continue;
    const std::string net = s["net"];
    const BenchInput in = bench_input(net);
    if (in.channels != ds.channels || in.height != ds.height || in.width != ds.width) {
      if (std::find(other_shapes->begin(), other_shapes->end(), net) == other_shapes->end())
        other_shapes->push_back(net);
      continue;
    }
    const double made = row.images_per_second.median;
    const double used = s["aggregate_images_per_second"]["median"];
    const std::string layout = s["layout"];
    if (made >= used) {
      std::printf("      keeps ahead of %s %s: makes %.0f img/s, the groups take %.0f (%.2fx)\n",
                  net.c_str(), layout.c_str(), made, used, made / used);
    } else {
      std::printf(
          "      FALLS BEHIND %s %s by %.0f img/s: makes %.0f, the groups take %.0f "
          "(%.0f%% of the step rate; give more --data-threads or leave cores free)\n",
          net.c_str(), layout.c_str(), used - made, made, used, 100 * made / used);
    }
    compared->push_back({{"net", net},
                         {"layout", layout},
                         {"batch", row.batch},
                         {"groups", row.streams},
                         {"made_images_per_second", made},
                         {"used_images_per_second", used},
                         {"keeps_ahead", made >= used},
                         {"behind_images_per_second", std::max(0.0, used - made)}});
  }
}

}  // namespace

Result<DataBenchConfig> validate_data_flags(const BenchFlags& f) {
  DataBenchConfig c;
  c.data = f.data;
  auto a = parse_augment(f.augment);
  if (!a.ok()) return invalid_argument("--" + a.status().message());
  c.augment = std::move(a).value();
  if (f.data_threads < 0 || f.data_threads > kMaxDataThreads)
    return invalid_argument("--data-threads: " + std::to_string(f.data_threads) +
                            " is out of range [0, " + std::to_string(kMaxDataThreads) +
                            "] (0: one thread per stream)");
  c.threads = std::max(1, f.data_threads);
  if (c.data.empty() && (!c.augment.none() || f.data_threads != 0))
    return invalid_argument(
        "--augment and --data-threads time the data pipeline: give --data too (e.g. --data "
        "DIR:224 for an image folder)");
  return c;
}

Status data_section(const BenchConfig& cfg, const DataBenchConfig& data, json& doc) {
  const double l0 = seconds_now();
  DataOptions opt;
  opt.stream_side = data.augment.resized_crop;  // an image folder streams for it
  auto split = load_data(data.data, MemKind::dram, 1, opt);
  if (!split.ok()) return {split.status().code(), "--data: " + split.status().message()};
  const Dataset& ds = split->train;
  if (Status s = check_augment(data.augment, ds); !s.ok())
    return invalid_argument("--" + s.message());  // "augment '...': ..."
  const double load_s = seconds_now() - l0;
  const std::string shape = std::to_string(ds.channels) + "x" + std::to_string(ds.height) + "x" +
                            std::to_string(ds.width);
  const std::vector<int> group_counts = distinct_group_counts(cfg.layouts);
  const char* runner = pipeline_runner(ds, data.threads);
  std::printf(
      "\n== data pipeline: %s (%lld training images %s, loaded in %.1f s), augment %s; each "
      "stream %d thread%s (%s), unpinned, drained as fast as it delivers, all streams at once; "
      "figures min/median/max over the repeats\n",
      ds.name.c_str(), static_cast<long long>(ds.count), shape.c_str(), load_s,
      augment_text(data.augment).c_str(), data.threads, data.threads == 1 ? "" : "s", runner);
  std::printf("%5s %7s %23s %23s\n", "batch", "streams", "batches/s", "images/s");
  json rows = json::array();
  json compared = json::array();
  std::vector<std::string> other_shapes;
  for (int64_t batch : cfg.batches) {
    for (int g : group_counts) {
      auto r = time_streams(cfg, data, ds, batch, g);
      if (!r.ok()) return r.status();
      rows.push_back(report_data_row(r.value()));
      if (doc.contains("steps"))
        compare_with_steps(doc["steps"], r.value(), ds, &compared, &other_shapes);
    }
  }
  for (const std::string& net : other_shapes) {
    const BenchInput in = bench_input(net);
    std::printf("      %s takes %lldx%lldx%lld images, not %s: not compared\n", net.c_str(),
                static_cast<long long>(in.channels), static_cast<long long>(in.height),
                static_cast<long long>(in.width), shape.c_str());
  }
  // The whole pipeline's rate: one stream of the first batch size (the first row).
  const double ips = rows.empty() ? 0.0 : rows[0]["images_per_second"]["median"].get<double>();
  const int row_streams = rows.empty() ? 1 : rows[0]["streams"].get<int>();
  doc["data"] = {{"data", data.data},
                 {"images_per_second", ips},
                 {"images_per_second_per_thread", ips / (row_streams * data.threads)},
                 {"name", ds.name},
                 {"images", ds.count},
                 {"shape", shape},
                 {"load_seconds", load_s},
                 {"augment", augment_text(data.augment)},
                 {"threads_per_stream", data.threads},
                 {"runner", runner},
                 {"rows", rows},
                 {"compared", compared}};
  return Status::ok_status();
}

}  // namespace easel::bench
