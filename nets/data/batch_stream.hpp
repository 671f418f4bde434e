// A worker group's stream of training mini-batches. Group `shard` of `shards` owns the images
// i with i % shards == shard; each of its epochs visits them in a new order shuffled from its
// own RNG. With prefetch, the next batches are prepared on a helper thread while the group
// computes, so training never waits for data (conversion is cheap, so the helper mostly sleeps).
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "nets/data/augment.hpp"
#include "nets/data/dataset.hpp"

namespace easel {

struct Batch {
  Buffer images;  // float [batch, C, H, W] in the stream's layout
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
  // (check_augment).
  static Result<std::unique_ptr<BatchStream>> create(const Dataset& ds, int64_t batch,
                                                     Layout layout, int shard, int shards,
                                                     uint64_t seed, bool prefetch, MemKind kind,
                                                     int64_t rng_stream = -1,
                                                     const Augment& augment = Augment());
  ~BatchStream();

  // The next batch; valid until the following call. Batches wrap across epochs (a batch may
  // span the end of one epoch and the start of the next), so every batch is full.
  const Batch& next();
  int64_t shard_size() const { return static_cast<int64_t>(shard_.size()); }
  StreamState state() const;  // the position of the NEXT batch to be returned
  // Goes on from `st`, a state() of a stream over the same data, batch, shard and seed (a
  // checkpoint's): the next batch is the one that stream returned next. Restarts the helper
  // thread, which takes the caller's cpus: call it on the group's thread.
  Status seek(const StreamState& st);

 private:
  BatchStream() = default;
  void start_epoch();                     // draws epoch_'s order from rng_
  void fill(Batch& b, StreamState* end);  // advances cursor_/epoch_/rng_; *end = position after b
  void producer();

  const Dataset* ds_ = nullptr;
  int64_t batch_ = 0;
  Layout layout_ = Layout::nchw;
  Augment augment_;
  uint64_t seed_ = 0, stream_ = 0;  // the draws' key (with the epoch and the position)
  int64_t shard_id_ = 0, shards_ = 1;
  std::vector<AugmentDraw> draws_;  // of the batch being filled (when augment_.moves())
  // Producer side (the helper thread with prefetch, else the caller): the position.
  std::vector<int64_t> shard_;  // the shard's images, ascending
  std::vector<int64_t> order_;  // this epoch's permutation of shard_
  std::vector<int64_t> idx_;    // indices of the batch being filled
  int64_t cursor_ = 0, epoch_ = 0;
  Rng rng_;
  std::array<uint64_t, 4> epoch_rng_{};  // rng_ before this epoch's shuffle
  // Double buffering: slot_[current_] is the caller's; the producer owns a slot while it is not
  // filled_, and writes end_state_[s] with it.
  bool prefetch_ = false;
  std::array<Batch, 2> slot_;
  std::array<StreamState, 2> end_state_;  // the position after slot s's batch
  StreamState start_state_;               // the position before the first batch
  int current_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool filled_[2] = {false, false};  // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  int next_fill_ = 0;                // guarded by mu_; the slot the producer fills next
  std::thread thread_;
};

}  // namespace easel
