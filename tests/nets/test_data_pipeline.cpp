// The batch pipeline (nets/data/pipeline.hpp, BatchStream with prefetch): the same batches as
// the plain stream for any thread count, with and without augmentation, across seeks; a stall
// when nothing is delivered; the runner's threads and their pinning.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "easel_config.h"
#include "engine/worker.hpp"
#include "nets/data/batch_stream.hpp"
#include "nets/data/pipeline.hpp"

namespace easel {
namespace {

// 3x6x5 images (not square, so a flip or a crop moves pixels visibly), 103 of them.
const Dataset& images() {
  static const Dataset ds = make_synthetic(103, 3, 6, 5, 10, 42, "pipeline");
  return ds;
}

Augment parse(const char* text) {
  auto a = parse_augment(text);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  return a.ok() ? a.value() : Augment();
}

std::unique_ptr<BatchStream> make(bool prefetch, int threads, const Augment& a,
                                  Layout layout = Layout::nchw, int64_t batch = 9) {
  DataThreads t;
  t.threads = threads;
  auto s = BatchStream::create(images(), batch, layout, 1, 3, 5, prefetch, MemKind::dram, 11, a, t);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

// One batch as bytes (images, labels, epoch) and the position after it.
struct Taken {
  std::vector<float> images;
  std::vector<int32_t> labels;
  int64_t epoch = 0;
  StreamState after;
};

std::vector<Taken> take(BatchStream& s, int n) {
  std::vector<Taken> out;
  for (int i = 0; i < n; ++i) {
    const Batch& b = s.next();
    Taken t;
    t.images.assign(b.images.as<float>(), b.images.as<float>() + b.images.bytes() / sizeof(float));
    t.labels = b.labels;
    t.epoch = b.epoch;
    t.after = s.state();
    out.push_back(std::move(t));
  }
  return out;
}

void expect_same(const std::vector<Taken>& a, const std::vector<Taken>& b,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].images.size(), b[i].images.size()) << what;
    EXPECT_EQ(std::memcmp(a[i].images.data(), b[i].images.data(), a[i].images.size() * 4), 0)
        << what << ", batch " << i;
    EXPECT_EQ(a[i].labels, b[i].labels) << what << ", batch " << i;
    EXPECT_EQ(a[i].epoch, b[i].epoch) << what << ", batch " << i;
    EXPECT_EQ(a[i].after.epoch, b[i].after.epoch) << what << ", batch " << i;
    EXPECT_EQ(a[i].after.cursor, b[i].after.cursor) << what << ", batch " << i;
    EXPECT_EQ(a[i].after.rng, b[i].after.rng) << what << ", batch " << i;
  }
}

const char* const kAugments[] = {"none", "crop-pad=2,flip,normalize=cifar10", "normalize=cifar10"};

// 20 batches of 9 from a shard of 34 images: five epochs, batches that straddle them.
TEST(DataPipeline, SameBatchesAsThePlainStreamForEveryThreadCount) {
  for (const char* text : kAugments) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      auto plain = make(false, 1, parse(text), layout);
      const std::vector<Taken> want = take(*plain, 20);
      for (int threads : {1, 2, 4}) {
        auto piped = make(true, threads, parse(text), layout);
        ASSERT_TRUE(piped);
        EXPECT_EQ(piped->pipeline_threads(), EASEL_HAVE_TBB ? threads : 1);
        expect_same(take(*piped, 20), want,
                    std::string(text) + (layout == Layout::nhwc ? " nhwc" : " nchw") + ", " +
                        std::to_string(threads) + " threads");
      }
    }
  }
}

// A batch of one image (one chunk) and a batch larger than the shard.
TEST(DataPipeline, OddBatchSizes) {
  for (int64_t batch : {1, 50}) {
    auto plain = make(false, 1, parse("crop-pad=1,flip"), Layout::nchw, batch);
    auto piped = make(true, 4, parse("crop-pad=1,flip"), Layout::nchw, batch);
    expect_same(take(*piped, 7), take(*plain, 7), "batch " + std::to_string(batch));
  }
}

// Mid-epoch, a stream of other threads seeks to where another stood and goes on as it did; the
// state before the first batch is the seeked one.
TEST(DataPipeline, SeekMidEpochGoesOnAsTheOtherStream) {
  for (const char* text : kAugments) {
    auto a = make(true, 4, parse(text));
    take(*a, 2);  // 18 of 34 images: mid-epoch
    const StreamState st = a->state();
    EXPECT_EQ(st.epoch, 0);
    EXPECT_EQ(st.cursor, 18);
    for (int threads : {1, 2}) {
      auto b = make(true, threads, parse(text));
      take(*b, 5);  // it had run ahead elsewhere, its queue full
      ASSERT_TRUE(b->seek(st).ok());
      EXPECT_EQ(b->state().cursor, st.cursor);
      auto plain = make(false, 1, parse(text));
      ASSERT_TRUE(plain->seek(st).ok());
      const std::vector<Taken> want = take(*plain, 12);
      expect_same(take(*b, 12), want, std::string(text) + ", " + std::to_string(threads));
    }
    // The stream that was read from goes on undisturbed.
    auto p = make(false, 1, parse(text));
    const std::vector<Taken> all = take(*p, 14);
    expect_same(take(*a, 12), std::vector<Taken>(all.begin() + 2, all.end()), text);
  }
}

// A producer that never delivers: the caller's wait ends as a stall that names the group (its
// RNG stream, 11) within the stall timeout; released, the stream goes on with the right batch.
TEST(DataPipeline, StallWhenNothingIsDelivered) {
  clear_stall();
  set_stall_timeout_seconds(0.3);
  auto plain = make(false, 1, Augment());
  const std::vector<Taken> want = take(*plain, 6);
  auto s = make(true, 2, Augment());
  s->hold_for_test(true);
  std::vector<Taken> got;
  std::string message;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kPrefetchDepth + 3 && message.empty(); ++i) {
    try {
      auto one = take(*s, 1);
      got.push_back(one[0]);
    } catch (const Stalled& e) {
      message = e.what();
    }
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(message.find("group 11 waited"), std::string::npos) << message;
  EXPECT_NE(message.find("next batch"), std::string::npos) << message;
  EXPECT_NE(message.find("EASEL_STALL_TIMEOUT"), std::string::npos) << message;
  EXPECT_TRUE(stall_declared());
  EXPECT_EQ(first_stall(), message);
  EXPECT_LT(waited, 5.0);
  EXPECT_LE(got.size(), static_cast<size_t>(kPrefetchDepth + 1));  // what was ready before
  // Once a stall is declared, a waiting stream gives up at once.
  if (got.size() < want.size()) {
    EXPECT_THROW(s->next(), Stalled);
  }
  clear_stall();
  set_stall_timeout_seconds(0);  // read EASEL_STALL_TIMEOUT again
  s->hold_for_test(false);
  while (got.size() < want.size())
    got.push_back(take(*s, 1)[0]);
  expect_same(got, want, "after the stall");
}

TEST(DataPipeline, ThreadCountIsChecked) {
  for (int threads : {0, -1, kMaxDataThreads + 1}) {
    DataThreads t;
    t.threads = threads;
    auto s = BatchStream::create(images(), 4, Layout::nchw, 0, 1, 1, true, MemKind::dram, -1,
                                 Augment(), t);
    ASSERT_FALSE(s.ok()) << threads;
    EXPECT_NE(s.status().message().find("data threads: " + std::to_string(threads)),
              std::string::npos)
        << s.status().message();
  }
  auto off = make(false, 1, Augment());
  EXPECT_STREQ(off->pipeline_name(), "none");
  EXPECT_EQ(off->pipeline_threads(), 0);
  auto on = make(true, 3, Augment());
  EXPECT_STREQ(on->pipeline_name(), EASEL_HAVE_TBB ? "oneTBB" : "serial");
}

// The runner's stages: next and done in order on one thread at a time, work on several threads
// at once (oneTBB), each pinned to the runner's cpus.
TEST(DataPipeline, RunnerWorksOnItsThreadsPinned) {
  if (!EASEL_HAVE_TBB) GTEST_SKIP() << "built without oneTBB";
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int first = 0;
  while (!CPU_ISSET(first, &mine))
    ++first;
  auto runner = make_pipeline_runner(4, {first});
  ASSERT_STREQ(runner->name(), "oneTBB");
  EXPECT_EQ(runner->threads(), 4);
  std::mutex mu;
  std::set<std::thread::id> workers;
  std::vector<int64_t> done_order;
  bool pinned = true;
  int64_t made = 0;
  std::atomic<int> in_next{0};
  PipelineStages st;
  st.next = [&](PipelineChunk* c) {
    EXPECT_EQ(in_next.fetch_add(1), 0);
    const bool more = made < 60;
    if (more) *c = {0, made, made + 1, true}, ++made;
    in_next.fetch_sub(1);
    return more;
  };
  const std::thread::id caller = std::this_thread::get_id();  // run()'s: not the runner's to pin
  st.work = [&](const PipelineChunk&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    std::lock_guard lock(mu);
    workers.insert(std::this_thread::get_id());
    if (std::this_thread::get_id() != caller)
      pinned = pinned && CPU_COUNT(&set) == 1 && CPU_ISSET(first, &set);
  };
  st.done = [&](const PipelineChunk& c) {
    std::lock_guard lock(mu);
    done_order.push_back(c.begin);
  };
  runner->run(st, 8);
  ASSERT_EQ(done_order.size(), 60u);
  for (size_t i = 0; i < done_order.size(); ++i)
    EXPECT_EQ(done_order[i], static_cast<int64_t>(i));
  // Four threads even on a machine of fewer cores (oneTBB's pool is raised for them).
  EXPECT_GE(workers.size(), 3u) << "the parallel stage ran on too few threads";
  EXPECT_TRUE(pinned) << "a worker of the runner ran off its cpus";
}

// The serial runner (the stand-in without oneTBB): each chunk through the three stages in turn,
// on the calling thread.
TEST(DataPipeline, SerialRunnerRunsTheStagesInTurn) {
  auto runner = make_serial_pipeline_runner();
  EXPECT_STREQ(runner->name(), "serial");
  EXPECT_EQ(runner->threads(), 1);
  std::vector<std::string> log;
  int64_t made = 0;
  bool on_caller = true;
  const std::thread::id caller = std::this_thread::get_id();
  PipelineStages st;
  st.next = [&](PipelineChunk* c) {
    if (made == 3) return false;
    *c = {1, made, made + 1, made == 2};
    ++made;
    log.push_back("next" + std::to_string(c->begin));
    return true;
  };
  st.work = [&](const PipelineChunk& c) {
    on_caller = on_caller && std::this_thread::get_id() == caller;
    log.push_back("work" + std::to_string(c.begin));
  };
  st.done = [&](const PipelineChunk& c) { log.push_back("done" + std::to_string(c.begin)); };
  runner->run(st, 4);
  EXPECT_EQ(log, (std::vector<std::string>{"next0", "work0", "done0", "next1", "work1", "done1",
                                           "next2", "work2", "done2"}));
  EXPECT_TRUE(on_caller);
}

}  // namespace
}  // namespace easel
