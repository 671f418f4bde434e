// The batch pipeline's runner (internal to nets/data): three stages over chunks of batches, the
// first and last serial and in order, the middle one parallel. BatchStream says what each stage
// does; the runner says on which threads. oneTBB's runner (pipeline_tbb.cpp, the only file that
// includes oneTBB) is a parallel_pipeline in a task_arena of its own; the serial runner
// (pipeline.cpp) runs the three stages in turn on the calling thread, as the helper thread did
// before oneTBB was used, and stands in where easel is built without oneTBB.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace easel {

// Images [begin, end) of the batch in slot `slot`; `last`: the batch's final chunk.
struct PipelineChunk {
  int slot = 0;
  int64_t begin = 0, end = 0;
  bool last = false;
};

struct PipelineStages {
  // Serial, in order: the next chunk, or false to end this run (it is then not called again
  // until the next run).
  std::function<bool(PipelineChunk*)> next;
  // Parallel: prepares a chunk, on any of the runner's threads, several chunks at once.
  std::function<void(const PipelineChunk&)> work;
  // Serial, in next's order: the chunk is prepared.
  std::function<void(const PipelineChunk&)> done;
};

class PipelineRunner {
 public:
  virtual ~PipelineRunner() = default;
  // Runs the stages until next() returns false, with at most `live` chunks between next() and
  // done(); returns when every chunk next() gave is done. Called from one thread at a time
  // (the stream's driver), which works in the run too.
  virtual void run(const PipelineStages& stages, int live) = 0;
  virtual int threads() const = 0;
  virtual const char* name() const = 0;  // "oneTBB", "serial"
};

// The runner of `threads` threads (>= 1; the calling thread of run() counts as one), whose other
// threads are pinned to `cpus` while they work in it (empty: left where they are). oneTBB's when
// easel has it, else the serial one (one thread whatever `threads` says; logged once).
std::unique_ptr<PipelineRunner> make_pipeline_runner(int threads, const std::vector<int>& cpus);
// The serial runner (also the reference the tests compare oneTBB's with).
std::unique_ptr<PipelineRunner> make_serial_pipeline_runner();
// oneTBB's, or null where easel is built without it.
std::unique_ptr<PipelineRunner> make_tbb_pipeline_runner(int threads, const std::vector<int>& cpus);

}  // namespace easel
