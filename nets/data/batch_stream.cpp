// Mini-batches for one worker group: its shard, reshuffled every epoch, optionally prepared one
// batch ahead on a helper thread. The helper runs exactly the code the caller would run without
// prefetch, in the same order, so both modes give the same batches.
#include "nets/data/batch_stream.hpp"

#include <utility>

namespace easel {

Result<std::unique_ptr<BatchStream>> BatchStream::create(const Dataset& ds, int64_t batch,
                                                         Layout layout, int shard, int shards,
                                                         uint64_t seed, bool prefetch, MemKind kind,
                                                         int64_t rng_stream,
                                                         const Augment& augment) {
  if (batch <= 0) {
    return invalid_argument("batch size must be positive, got " + std::to_string(batch));
  }
  if (shards < 1) {
    return invalid_argument("the number of shards must be at least 1, got " +
                            std::to_string(shards));
  }
  if (shard < 0 || shard >= shards) {
    return invalid_argument("shard " + std::to_string(shard) + " is out of range [0, " +
                            std::to_string(shards) + ")");
  }
  if (ds.count <= shard) {
    return invalid_argument("shard " + std::to_string(shard) + " of " + std::to_string(shards) +
                            " holds no images: data set '" + ds.name + "' has only " +
                            std::to_string(ds.count));
  }
  EASEL_RETURN_IF_ERROR(check_augment(augment, ds));
  std::unique_ptr<BatchStream> s(new BatchStream());
  s->ds_ = &ds;
  s->batch_ = batch;
  s->layout_ = layout;
  s->augment_ = augment;
  s->seed_ = seed;
  s->stream_ = static_cast<uint64_t>(rng_stream >= 0 ? rng_stream : shard);
  s->shard_id_ = shard;
  s->shards_ = shards;
  if (augment.moves()) s->draws_.resize(static_cast<size_t>(batch));
  for (int64_t i = shard; i < ds.count; i += shards)
    s->shard_.push_back(i);
  s->idx_.resize(static_cast<size_t>(batch));
  const size_t bytes = static_cast<size_t>(batch * ds.image_bytes()) * sizeof(float);
  for (Batch& b : s->slot_) {
    EASEL_ASSIGN_OR_RETURN(b.images, Buffer::allocate(bytes, kind));
    b.labels.resize(static_cast<size_t>(batch));
  }
  s->rng_ = Rng::stream(seed, s->stream_);
  s->start_epoch();
  s->start_state_ = {s->epoch_, s->cursor_, s->epoch_rng_};
  s->prefetch_ = prefetch;
  if (prefetch) s->thread_ = std::thread(&BatchStream::producer, s.get());
  return s;
}

BatchStream::~BatchStream() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BatchStream::start_epoch() {
  epoch_rng_ = rng_.state();
  order_ = shard_;
  for (size_t i = order_.size() - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng_.below(i + 1));
    std::swap(order_[i], order_[j]);
  }
}

void BatchStream::fill(Batch& b, StreamState* end) {
  b.epoch = epoch_;
  const int64_t n = static_cast<int64_t>(order_.size());
  const bool moves = augment_.moves();
  for (int64_t k = 0; k < batch_; ++k) {
    const int64_t image = order_[static_cast<size_t>(cursor_)];
    idx_[static_cast<size_t>(k)] = image;
    if (moves) {
      draws_[static_cast<size_t>(k)] =
          draw_augment(augment_, seed_, stream_, epoch_, (image - shard_id_) / shards_);
    }
    if (++cursor_ == n) {
      cursor_ = 0;
      ++epoch_;
      start_epoch();
    }
  }
  if (augment_.none()) {
    gather_batch(*ds_, idx_.data(), batch_, layout_, b.images.as<float>(), b.labels.data());
  } else {
    gather_batch(*ds_, idx_.data(), batch_, layout_, b.images.as<float>(), b.labels.data(),
                 augment_, moves ? draws_.data() : nullptr);
  }
  *end = {epoch_, cursor_, epoch_rng_};
}

void BatchStream::producer() {
  for (;;) {
    int s = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !filled_[next_fill_]; });
      if (stop_) return;
      s = next_fill_;
    }
    fill(slot_[static_cast<size_t>(s)], &end_state_[static_cast<size_t>(s)]);
    {
      std::lock_guard<std::mutex> lock(mu_);
      filled_[s] = true;
      next_fill_ = 1 - s;
    }
    cv_.notify_all();
  }
}

const Batch& BatchStream::next() {
  if (!prefetch_) {
    fill(slot_[0], &end_state_[0]);
    current_ = 0;
    return slot_[0];
  }
  const int want = current_ < 0 ? 0 : 1 - current_;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (current_ >= 0) {
      filled_[current_] = false;  // hand the batch just used back to the producer
      cv_.notify_all();
    }
    cv_.wait(lock, [this, want] { return filled_[want]; });
  }
  current_ = want;
  return slot_[static_cast<size_t>(current_)];
}

Status BatchStream::seek(const StreamState& st) {
  if (st.epoch < 0 || st.cursor < 0 || st.cursor >= shard_size())
    return invalid_argument("data position: epoch " + std::to_string(st.epoch) + ", image " +
                            std::to_string(st.cursor) + " of a shard of " +
                            std::to_string(shard_size()));
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  stop_ = false;
  filled_[0] = filled_[1] = false;
  next_fill_ = 0;
  current_ = -1;
  rng_.set_state(st.rng);
  epoch_ = st.epoch;
  start_epoch();  // this epoch's order, drawn from st.rng as the stream drew it
  cursor_ = st.cursor;
  start_state_ = st;
  if (prefetch_) thread_ = std::thread(&BatchStream::producer, this);
  return {};
}

StreamState BatchStream::state() const {
  return current_ < 0 ? start_state_ : end_state_[static_cast<size_t>(current_)];
}

}  // namespace easel
