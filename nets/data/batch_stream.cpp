// Mini-batches for one worker group: its shard, reshuffled every epoch, optionally prepared
// ahead by the pipeline. The pipeline's first stage runs draw() and its middle stage convert()
// in the order the caller would without prefetch, and conversion of one image depends on
// nothing but its index and draws, so both modes give the same batches.
#include "nets/data/batch_stream.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "engine/log.hpp"
#include "engine/trace.hpp"
#include "engine/worker.hpp"
#include "nets/data/pipeline.hpp"
#include "nets/data/stream_source.hpp"

namespace easel {

namespace {

// BatchStream::create's checks of its counts, in its order: each error names the argument
// and the range it must be in.
Status check_stream_args(int64_t batch, int shard, int shards, const DataThreads& threads,
                         int64_t shuffle_buffer) {
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
  if (threads.threads < 1 || threads.threads > kMaxDataThreads) {
    return invalid_argument("data threads: " + std::to_string(threads.threads) +
                            " is out of range [1, " + std::to_string(kMaxDataThreads) + "]");
  }
  if (shuffle_buffer < 0 || shuffle_buffer > kMaxShuffleBuffer) {
    return invalid_argument("shuffle buffer: " + std::to_string(shuffle_buffer) +
                            " is out of range [0, " + std::to_string(kMaxShuffleBuffer) + "]");
  }
  return {};
}

// Group `shard` of `shards` reading ds's tar shards through a shuffle buffer: the entries of
// the shard files f with f % shards == shard, in list order, into *images, and each such
// file as [begin, end) of positions in *images (a file's entries are consecutive in the
// list). Refused when the group gets no file with samples.
Status take_tar_shards(const Dataset& ds, int shard, int shards, std::vector<int64_t>* images,
                       std::vector<std::pair<int64_t, int64_t>>* files) {
  const auto& entries = ds.source->entries;
  int64_t with_samples = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const bool first = i == 0 || entries[i].file != entries[i - 1].file;
    with_samples += first;
    if (entries[i].file % shards != shard) continue;
    const auto pos = static_cast<int64_t>(images->size());
    if (first) files->emplace_back(pos, pos);
    images->push_back(static_cast<int64_t>(i));
    ++files->back().second;
  }
  if (images->empty())
    return invalid_argument("--shuffle-buffer: group " + std::to_string(shard) + " of " +
                            std::to_string(shards) + " reads no tar shard of '" + ds.name + "' (" +
                            std::to_string(with_samples) +
                            " with samples; each group reads its own shards): pack smaller "
                            "shards (easel data pack --shard-size) or give --shuffle-buffer 0");
  return {};
}

// Group `shard` of `shards` over ds's images: every shards-th from `shard`, into *images.
// Refused when that is none.
Status take_every_nth(const Dataset& ds, int shard, int shards, std::vector<int64_t>* images) {
  if (ds.count <= shard) {
    return invalid_argument("shard " + std::to_string(shard) + " of " + std::to_string(shards) +
                            " holds no images: data set '" + ds.name + "' has only " +
                            std::to_string(ds.count));
  }
  for (int64_t i = shard; i < ds.count; i += shards)
    images->push_back(i);
  return {};
}

}  // namespace

BatchStream::BatchStream() = default;

Result<std::unique_ptr<BatchStream>> BatchStream::create(const Dataset& ds, int64_t batch,
                                                         Layout layout, int shard, int shards,
                                                         uint64_t seed, bool prefetch, MemKind kind,
                                                         int64_t rng_stream, const Augment& augment,
                                                         const DataThreads& threads,
                                                         int64_t shuffle_buffer, bool bytes) {
  EASEL_RETURN_IF_ERROR(check_stream_args(batch, shard, shards, threads, shuffle_buffer));
  EASEL_RETURN_IF_ERROR(check_augment(augment, ds));
  std::unique_ptr<BatchStream> s(new BatchStream());
  s->ds_ = &ds;
  s->batch_ = batch;
  s->layout_ = layout;
  s->augment_ = augment;
  s->bytes_ = bytes;
  s->seed_ = seed;
  s->stream_ = static_cast<uint64_t>(rng_stream >= 0 ? rng_stream : shard);
  if (shuffle_buffer > 0 && reads_shards(ds)) {
    // The group's own tar files.
    s->buffer_ = shuffle_buffer;
    EASEL_RETURN_IF_ERROR(take_tar_shards(ds, shard, shards, &s->shard_, &s->files_));
  } else {
    EASEL_RETURN_IF_ERROR(take_every_nth(ds, shard, shards, &s->shard_));
  }
  const size_t slots = prefetch ? kPrefetchDepth + 1 : 1;
  const size_t image_bytes =
      static_cast<size_t>(batch * ds.image_bytes()) * (bytes ? sizeof(uint8_t) : sizeof(float));
  s->slot_.resize(slots);
  for (Batch& b : s->slot_) {
    EASEL_ASSIGN_OR_RETURN(b.images, Buffer::allocate(image_bytes, kind));
    b.labels.resize(static_cast<size_t>(batch));
  }
  s->idx_.assign(slots, std::vector<int64_t>(static_cast<size_t>(batch)));
  if (augment.moves())
    s->draws_.assign(slots, std::vector<AugmentDraw>(static_cast<size_t>(batch)));
  s->end_state_.resize(slots);
  s->rng_ = Rng::stream(seed, s->stream_);
  s->start_epoch();
  s->start_state_ = {s->epoch_, s->cursor_, s->epoch_rng_};
  s->prefetch_ = prefetch;
  if (prefetch) {
    // Two chunks per thread, so that a batch keeps every thread busy; one chunk on one thread.
    const int64_t chunks = std::min<int64_t>(batch, threads.threads == 1 ? 1 : 2 * threads.threads);
    s->chunk_images_ = (batch + chunks - 1) / chunks;
    s->runner_ = make_pipeline_runner(threads.threads, threads.cpus);
    s->cpus_ = threads.cpus;
    s->start_driver();
  }
  return s;
}

BatchStream::~BatchStream() {
  stop_driver();
}

bool reads_shards(const Dataset& ds) {
  return ds.source && !ds.source->members.empty();
}

Status check_even_shards(const Dataset& ds, int groups) {
  if (!reads_shards(ds) || groups < 1) return {};
  const auto& entries = ds.source->entries;
  std::vector<int64_t> group_files(static_cast<size_t>(groups), 0);  // shards with samples
  for (size_t i = 0; i < entries.size(); ++i)
    if (i == 0 || entries[i].file != entries[i - 1].file)
      ++group_files[static_cast<size_t>(entries[i].file % groups)];
  const auto [lo, hi] = std::minmax_element(group_files.begin(), group_files.end());
  if (*lo == *hi) return {};
  int64_t files = 0;
  for (const int64_t n : group_files)
    files += n;
  const std::string fix = "pack them with easel data pack --shards-per-group " +
                          std::to_string(groups) + " (or a multiple), or give --shuffle-buffer 0";
  if (*lo == 0)
    return invalid_argument("--shuffle-buffer: group " + std::to_string(lo - group_files.begin()) +
                            " of " + std::to_string(groups) + " reads no tar shard of '" + ds.name +
                            "' (" + std::to_string(files) +
                            " with samples; each group reads its own shards): " + fix);
  // The last shard of a group that reads more: one too many for an even split.
  auto e = entries.rbegin();
  while (group_files[static_cast<size_t>(e->file % groups)] != *hi)
    ++e;
  return invalid_argument("--shuffle-buffer: the " + std::to_string(files) + " tar shards of '" +
                          ds.name + "' split unevenly among " + std::to_string(groups) +
                          " groups (each reads its own: " + std::to_string(*hi) + " or " +
                          std::to_string(*lo) + ", group " + std::to_string(e->file % groups) +
                          " also " + ds.source->files[static_cast<size_t>(e->file)] + "): " + fix);
}

std::vector<int64_t> shuffle_order(const std::vector<std::pair<int64_t, int64_t>>& files,
                                   int64_t buffer, Rng& rng) {
  EASEL_CHECK(buffer > 0);
  std::vector<std::pair<int64_t, int64_t>> f = files;
  for (size_t i = f.size(); i > 1; --i)
    std::swap(f[i - 1], f[static_cast<size_t>(rng.below(i))]);
  std::vector<int64_t> out, held;
  held.reserve(static_cast<size_t>(buffer));
  for (const auto& [begin, end] : f)
    for (int64_t p = begin; p < end; ++p) {
      if (static_cast<int64_t>(held.size()) < buffer) {
        held.push_back(p);
        continue;
      }
      int64_t& slot = held[static_cast<size_t>(rng.below(held.size()))];
      out.push_back(slot);
      slot = p;
    }
  while (!held.empty()) {
    const size_t j = static_cast<size_t>(rng.below(held.size()));
    out.push_back(held[j]);
    held[j] = held.back();
    held.pop_back();
  }
  return out;
}

void BatchStream::start_epoch() {
  epoch_rng_ = rng_.state();
  if (buffer_ > 0) {
    order_ = shuffle_order(files_, buffer_, rng_);
    return;
  }
  order_.resize(shard_.size());
  for (size_t i = 0; i < order_.size(); ++i)
    order_[i] = static_cast<int64_t>(i);
  for (size_t i = order_.size() - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng_.below(i + 1));
    std::swap(order_[i], order_[j]);
  }
}

void BatchStream::draw(int s) {
  const size_t k0 = static_cast<size_t>(s);
  slot_[k0].epoch = epoch_;
  const int64_t n = static_cast<int64_t>(order_.size());
  const bool moves = augment_.moves();
  std::vector<int64_t>& idx = idx_[k0];
  for (int64_t k = 0; k < batch_; ++k) {
    const int64_t position = order_[static_cast<size_t>(cursor_)];
    idx[static_cast<size_t>(k)] = shard_[static_cast<size_t>(position)];
    if (moves)
      draws_[k0][static_cast<size_t>(k)] = draw_augment(augment_, seed_, stream_, epoch_, position);
    if (++cursor_ == n) {
      cursor_ = 0;
      ++epoch_;
      start_epoch();
    }
  }
  end_state_[k0] = {epoch_, cursor_, epoch_rng_};
}

void BatchStream::convert(int s, int64_t begin, int64_t end) {
  const size_t k0 = static_cast<size_t>(s);
  Batch& b = slot_[k0];
  const int64_t* idx = idx_[k0].data() + begin;
  int32_t* labels = b.labels.data() + begin;
  if (bytes_) {
    gather_batch_bytes(*ds_, idx, end - begin, layout_,
                       b.images.as<uint8_t>() + begin * ds_->image_bytes(), labels, augment_,
                       augment_.moves() ? draws_[k0].data() + begin : nullptr);
    return;
  }
  float* images = b.images.as<float>() + begin * ds_->image_bytes();
  if (augment_.none()) {
    gather_batch(*ds_, idx, end - begin, layout_, images, labels);
  } else {
    gather_batch(*ds_, idx, end - begin, layout_, images, labels, augment_,
                 augment_.moves() ? draws_[k0].data() + begin : nullptr);
  }
}

void BatchStream::driver() {
  if (!cpus_.empty() && !pin_current_thread(cpus_)) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      log_warn("data",
               "cannot pin a data pipeline's thread (the OS refused); it runs where the "
               "OS puts it");
  }
  const int64_t slots = static_cast<int64_t>(slot_.size());
  PipelineStages stages;
  // Serial, in order: a new batch only at a batch boundary, into a free slot, when not stopped.
  stages.next = [this, slots](PipelineChunk* c) {
    if (chunk_ == 0) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_ || hold_ || produced_ >= released_ + slots) return false;
      }
      draw(static_cast<int>(produced_ % slots));
      ++produced_;
    }
    const int64_t begin = chunk_ * chunk_images_;
    const int64_t end = std::min(batch_, begin + chunk_images_);
    *c = {static_cast<int>((produced_ - 1) % slots), begin, end, end == batch_};
    chunk_ = c->last ? 0 : chunk_ + 1;
    return true;
  };
  stages.work = [this](const PipelineChunk& c) { convert(c.slot, c.begin, c.end); };
  stages.done = [this](const PipelineChunk& c) {
    if (!c.last) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++published_;
    }
    cv_.notify_all();
  };
  const int chunks = static_cast<int>((batch_ + chunk_images_ - 1) / chunk_images_);
  const int live = std::max(2 * runner_->threads(), chunks + runner_->threads());
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || (!hold_ && produced_ < released_ + slots); });
      if (stop_) return;
    }
    runner_->run(stages, live);
  }
}

void BatchStream::start_driver() {
  stop_ = false;
  thread_ = std::thread(&BatchStream::driver, this);
}

void BatchStream::stop_driver() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

const Batch& BatchStream::next() {
  if (!prefetch_) {
    TraceSpan span("batch", "compute");
    draw(0);
    convert(0, 0, batch_);
    ++consumed_;
    return slot_[0];
  }
  std::unique_lock<std::mutex> lock(mu_);
  released_ = consumed_;  // the batch the caller held goes back to the pipeline
  cv_.notify_all();
  if (published_ <= consumed_) {
    TraceSpan span("prefetch queue", "wait");
    using clock = std::chrono::steady_clock;
    const double limit = stall_timeout_seconds();
    const auto t0 = clock::now();
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100),
                         [this] { return published_ > consumed_; })) {
      throw_if_stalled();
      const double waited = std::chrono::duration<double>(clock::now() - t0).count();
      if (waited >= limit)
        stalled("group " + std::to_string(stream_) + " waited " + std::to_string(waited) +
                " s for its next batch (the data pipeline delivered none; EASEL_STALL_TIMEOUT)");
    }
  }
  const int64_t s = consumed_ % static_cast<int64_t>(slot_.size());
  ++consumed_;
  return slot_[static_cast<size_t>(s)];
}

Status BatchStream::seek(const StreamState& st) {
  if (st.epoch < 0 || st.cursor < 0 || st.cursor >= shard_size())
    return invalid_argument("data position: epoch " + std::to_string(st.epoch) + ", image " +
                            std::to_string(st.cursor) + " of a shard of " +
                            std::to_string(shard_size()));
  stop_driver();
  produced_ = chunk_ = consumed_ = 0;
  published_ = released_ = 0;
  rng_.set_state(st.rng);
  epoch_ = st.epoch;
  start_epoch();  // this epoch's order, drawn from st.rng as the stream drew it
  cursor_ = st.cursor;
  start_state_ = st;
  if (prefetch_) start_driver();
  return {};
}

StreamState BatchStream::state() const {
  if (consumed_ == 0) return start_state_;
  return end_state_[static_cast<size_t>((consumed_ - 1) % static_cast<int64_t>(slot_.size()))];
}

const char* BatchStream::pipeline_name() const {
  return runner_ ? runner_->name() : "none";
}

int BatchStream::pipeline_threads() const {
  return runner_ ? runner_->threads() : 0;
}

void BatchStream::hold_for_test(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = hold;
  }
  cv_.notify_all();
}

}  // namespace easel
