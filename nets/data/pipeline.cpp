// The serial pipeline runner, and the choice between it and oneTBB's.
#include "nets/data/pipeline.hpp"

#include <atomic>

#include "easel_config.h"
#include "engine/log.hpp"

namespace easel {
namespace {

class SerialRunner final : public PipelineRunner {
 public:
  void run(const PipelineStages& s, int /*live*/) override {
    PipelineChunk c;
    while (s.next(&c)) {
      s.work(c);
      s.done(c);
    }
  }
  int threads() const override { return 1; }
  const char* name() const override { return "serial"; }
};

}  // namespace

std::unique_ptr<PipelineRunner> make_serial_pipeline_runner() {
  return std::make_unique<SerialRunner>();
}

#if !EASEL_HAVE_TBB
std::unique_ptr<PipelineRunner> make_tbb_pipeline_runner(int, const std::vector<int>&) {
  return nullptr;
}
#endif

std::unique_ptr<PipelineRunner> make_pipeline_runner(int threads, const std::vector<int>& cpus) {
  if (auto r = make_tbb_pipeline_runner(threads, cpus)) return r;
  static std::atomic<bool> said{false};
  if (threads > 1 && !said.exchange(true))
    log_info("data",
             "easel was built without oneTBB: each group's batches are prepared on one "
             "helper thread, not " +
                 std::to_string(threads) + " (install libtbb-dev and rebuild)");
  return make_serial_pipeline_runner();
}

}  // namespace easel
