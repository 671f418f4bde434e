// A worker group's stream of training mini-batches. Group `shard` of `shards` owns the images
// i with i % shards == shard; each of its epochs visits them in a new order shuffled from its
// own RNG. With prefetch, the next batches are prepared off the group's thread by a pipeline
// (nets/data/pipeline.hpp: oneTBB's where easel has it): a serial stage draws each batch's
// images, augmentation and stream position, a parallel one converts chunks of the batch, a
// serial one hands finished batches over in order to a queue of kPrefetchDepth; the batches
// are those the stream gives without prefetch, bit for bit, whatever the threads.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nets/data/augment.hpp"
#include "nets/data/dataset.hpp"

namespace easel {

struct Batch {
  // float [batch, C, H, W] in the stream's layout; with a stream of bytes (BatchStream::create's
  // `bytes`), uint8 of the same shape: gather_batch_bytes's, pixel_table converts them.
  Buffer images;
  std::vector<int32_t> labels;
  int64_t epoch = 0;  // the shard epoch of the batch's first image
};

// Saveable position of a stream (for checkpoints and tests): the next batch starts at position
// `cursor` of shard epoch `epoch`, whose order is the Fisher-Yates shuffle of the shard drawn
// by an Rng in state `rng` (the state before that epoch's shuffle, so the order can be rebuilt).
struct StreamState {
  int64_t epoch = 0, cursor = 0;
  std::array<uint64_t, 4> rng{};
};

// Batches a prefetching stream holds ready ahead of the one its caller uses.
constexpr int kPrefetchDepth = 2;
// Most threads one stream's pipeline may have (--data-threads).
constexpr int kMaxDataThreads = 256;

// Where a prefetching stream prepares its batches: `threads` threads (>= 1; one is the stream's
// driver thread, the others oneTBB's), pinned to `cpus` (empty: the driver runs where its
// creator may, oneTBB's threads where the OS puts them).
struct DataThreads {
  int threads = 1;
  std::vector<int> cpus;
};

// Samples of a shuffle buffer over tar shards unless told (--shuffle-buffer), and the most.
constexpr int64_t kDefaultShuffleBuffer = 1000;
constexpr int64_t kMaxShuffleBuffer = 1'000'000;

// The shuffle buffer a stream over ds takes for `asked` (--shuffle-buffer; -1: unset):
// kDefaultShuffleBuffer unless asked for tar shards, 0 for any other set.
bool reads_shards(const Dataset& ds);
inline int64_t shuffle_buffer_for(const Dataset& ds, int64_t asked) {
  return !reads_shards(ds) ? 0 : asked < 0 ? kDefaultShuffleBuffer : asked;
}

// Tar shards read through a shuffle buffer by `groups` groups (group g of P takes the shard
// files f with f mod P == g): refused (invalid_argument, one line naming --shuffle-buffer, a
// shard too many and the fixes) unless every group reads as many shards with samples. A group
// that reads fewer has a shorter epoch, so its samples would be drawn more often than the
// others' (twice as often for 3 shards among 2 groups). OK for a set not in shards.
Status check_even_shards(const Dataset& ds, int groups);

// One epoch's order of a group's tar shards read WebDataset's way, as positions: `files`
// (each [begin, end) of consecutive positions) shuffled (Fisher-Yates from rng), their
// positions concatenated in that order, then passed through a buffer of `buffer` (> 0)
// samples: the first `buffer` fill it, each later one replaces the sample drawn uniformly
// from it to go out, and at the end the rest go out in uniformly drawn order. A sample goes
// out at most `buffer` places before it is read.
std::vector<int64_t> shuffle_order(const std::vector<std::pair<int64_t, int64_t>>& files,
                                   int64_t buffer, Rng& rng);

class PipelineRunner;

class BatchStream {
 public:
  // ds must outlive the stream. batch > 0; shards >= 1; 0 <= shard < shards; the shard must
  // hold at least one image.
  // The shuffling RNG is Rng::stream(seed, rng_stream), rng_stream = shard unless given: a
  // rank that keeps only its groups' shards (keep_shards) passes the global group id, so the
  // batches are those of the same group in a single process.
  // `augment` (default none: the bytes scaled by kPixelScale, nothing drawn) crops, flips and
  // normalises each image; an image's draws come from (seed, the RNG stream, its shard epoch,
  // its position in the shard) (draw_augment), so seek() needs no more state. It must fit ds
  // (check_augment). With prefetch, `threads` says where the batches are prepared.
  // shuffle_buffer > 0 over tar shards (ds.source with members) reads them WebDataset's way:
  // the group takes the shard files f with f % shards == shard (not every shards-th image; an
  // error when it gets none), each epoch visits them in a new order, each one's samples in
  // their order, through a shuffle buffer of that many samples (shuffle_order); an image's
  // draws then come from its position in the group's list. 0, or a set not in shards: the
  // images shuffled over the whole shard as above. `bytes`: the batches hold the bytes before
  // their conversion to floats (augment.hpp: gather_batch_bytes), for a device that normalises
  // them itself.
  static Result<std::unique_ptr<BatchStream>> create(
      const Dataset& ds, int64_t batch, Layout layout, int shard, int shards, uint64_t seed,
      bool prefetch, MemKind kind, int64_t rng_stream = -1, const Augment& augment = Augment(),
      const DataThreads& threads = DataThreads(), int64_t shuffle_buffer = 0, bool bytes = false);
  ~BatchStream();

  // The next batch; valid until the following call. Batches wrap across epochs (a batch may
  // span the end of one epoch and the start of the next), so every batch is full.
  // With prefetch, a wait for it longer than the stall timeout (engine/worker.hpp) is a stall
  // naming the group (the RNG stream): it throws Stalled, as does any wait once a stall is
  // declared.
  const Batch& next();
  int64_t shard_size() const { return static_cast<int64_t>(shard_.size()); }
  // The images of the group's shard, in the order its positions count them.
  const std::vector<int64_t>& shard_images() const { return shard_; }
  StreamState state() const;  // the position of the NEXT batch to be returned
  // Goes on from `st`, a state() of a stream over the same data, batch, shard and seed (a
  // checkpoint's): the next batch is the one that stream returned next. Restarts the pipeline.
  Status seek(const StreamState& st);
  const Augment& augment() const { return augment_; }
  // The pipeline's runner ("oneTBB", "serial") and threads; "none" and 0 without prefetch.
  const char* pipeline_name() const;
  int pipeline_threads() const;
  // Test hook: while held, the pipeline starts no batch (a producer that never delivers).
  void hold_for_test(bool hold);

 private:
  BatchStream();
  void start_epoch();  // draws epoch_'s order from rng_
  // The serial part of the next batch: its images and draws into slot s, advancing
  // cursor_/epoch_/rng_; end_state_[s] = the position after it.
  void draw(int s);
  // Converts images [begin, end) of slot s's batch.
  void convert(int s, int64_t begin, int64_t end);
  void driver();  // runs the pipeline whenever a slot is free, until stop_
  void start_driver();
  void stop_driver();

  const Dataset* ds_ = nullptr;
  int64_t batch_ = 0;
  Layout layout_ = Layout::nchw;
  Augment augment_;
  bool bytes_ = false;              // the batches hold bytes (gather_batch_bytes), not floats
  uint64_t seed_ = 0, stream_ = 0;  // the draws' key (with the epoch and the position)
  // Producer side (the pipeline's serial first stage with prefetch, else the caller).
  std::vector<int64_t> shard_;  // the shard's images, ascending
  std::vector<int64_t> order_;  // this epoch's permutation of positions in shard_
  // With a shuffle buffer: its size, and the group's tar files as [begin, end) of positions.
  int64_t buffer_ = 0;
  std::vector<std::pair<int64_t, int64_t>> files_;
  int64_t cursor_ = 0, epoch_ = 0;
  Rng rng_;
  std::array<uint64_t, 4> epoch_rng_{};  // rng_ before this epoch's shuffle
  int64_t produced_ = 0;                 // batches drawn (their slots taken)
  int64_t chunk_ = 0;                    // the next chunk of batch produced_ - 1 (0: none open)
  // Slots: batch k lives in slot k % slots. A slot holds its batch, its images' indices and
  // draws, and the stream position after it.
  bool prefetch_ = false;
  int64_t chunk_images_ = 0;  // images per chunk of the pipeline
  std::vector<Batch> slot_;
  std::vector<std::vector<int64_t>> idx_;
  std::vector<std::vector<AugmentDraw>> draws_;  // empty unless augment_.moves()
  std::vector<StreamState> end_state_;
  StreamState start_state_;  // the position before the first batch
  // Consumer side: the caller has been given batches 0 .. consumed_ - 1 and holds the last.
  int64_t consumed_ = 0;
  std::unique_ptr<PipelineRunner> runner_;
  std::vector<int> cpus_;  // the driver's (empty: not pinned)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t published_ = 0;  // guarded by mu_; batches finished, in order
  int64_t released_ = 0;   // guarded by mu_; batches the caller no longer holds
  bool stop_ = false;      // guarded by mu_
  bool hold_ = false;      // guarded by mu_ (hold_for_test)
  std::thread thread_;     // the driver
};

}  // namespace easel
