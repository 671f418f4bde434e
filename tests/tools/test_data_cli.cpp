// Streamed data end to end through the easel program (docs/DATA.md): an image folder and its
// packed shards trained with a random-resized crop, the same run at any --data-threads and on
// resume, a bad image (exit 2 naming it, or skipped and counted), `easel data pack` into a
// folder that holds shards, shards that do not split evenly among the groups, `easel bench
// --data-only`, and both on the one core `taskset` leaves the process.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nets/data/image_decode.hpp"
#include "tests/tools/run_easel.hpp"

namespace {

namespace fs = std::filesystem;
using easel_test::Out;
using easel_test::slurp;

Out easel(const std::string& args) {
  return easel_test::run_easel(args, "", "data");
}

void write_jpeg(const fs::path& p, int w, int h, int salt) {
  easel::RgbImage im;
  im.width = w;
  im.height = h;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        im.rgb.push_back(
            static_cast<uint8_t>((x * (3 + c) + y * (5 + salt % 7) + salt * 31) % 256));
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(easel::encode_jpeg(im, 90, &bytes).ok());
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// Every file under dir (relative name -> size and hash of its bytes): what a refused command
// must leave as it was.
std::map<std::string, std::string> listing(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string bytes = e.is_regular_file() ? slurp(e.path()) : "(dir)";
    out[fs::relative(e.path(), dir).string()] =
        std::to_string(bytes.size()) + " " + std::to_string(std::hash<std::string>{}(bytes));
  }
  return out;
}

// `taskset -c C ` for the first cpu this process may use: the command then may use one core.
std::string on_one_core() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpu = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set))
      ++cpu;
  return "taskset -c " + std::to_string(cpu) + " ";
}

// One line on stderr, exit 2, naming `what`.
void expect_refused(const Out& o, const std::string& what) {
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(o.err.rfind("easel: ", 0), 0u) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find(what), std::string::npos) << o.err;
}

class DataCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("easel_data_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    for (int i = 0; i < 24; ++i)
      write_jpeg(
          dir_ / "f" / "train" / ("c" + std::to_string(i % 3)) / (std::to_string(i) + ".jpg"),
          40 + i % 20, 36 + (i * 3) % 25, i);
    for (int i = 0; i < 6; ++i)
      write_jpeg(dir_ / "f" / "val" / ("c" + std::to_string(i % 3)) / (std::to_string(i) + ".jpg"),
                 48, 40, 100 + i);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string train(const std::string& data, const std::string& out, const std::string& more,
                    const std::string& level = "warn") {
    return "train --net cifar10-quick --data " + data +
           " --augment random-resized-crop=32,flip,normalize=imagenet --batch 8 --groups 1"
           " --threads-per-group 1 --oversubscribe --progress none --log-level " +
           level + " --eval-every 3 --out " + (dir_ / out).string() + " " + more;
  }
  double test_loss(const std::string& out) {
    return nlohmann::json::parse(slurp(dir_ / out / "summary.json"))["test_loss"].get<double>();
  }
  fs::path dir_;
};

TEST_F(DataCli, StreamedFolderAndShardsTrainTheSameRun) {
  const std::string folder = (dir_ / "f").string();
  Out o = easel(train(folder, "one", "--iterations 6 --data-threads 1"));
  ASSERT_EQ(o.code, 0) << o.err;
  const double one = test_loss("one");
  o = easel(train(folder, "three", "--iterations 6 --data-threads 3"));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(test_loss("three"), one);
  // Stopped at 3, resumed to 6: the batches of the uninterrupted run.
  o = easel(train(folder, "half", "--iterations 3 --data-threads 2"));
  ASSERT_EQ(o.code, 0) << o.err;
  o = easel("train --resume " + (dir_ / "half").string() + " --iterations 6 --progress none");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(test_loss("half"), one);
  // Packed into shards (several) in list order and read at random (no shuffle buffer), the
  // same images in the same order: the same run.
  o = easel("data pack " + folder + " --out " + (dir_ / "s").string() +
            " --shard-size 16KB --keep-order");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::exists(dir_ / "s" / "train-000001.tar"));
  o = easel(
      train("shards:" + (dir_ / "s").string(), "shards", "--iterations 6 --shuffle-buffer 0"));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(test_loss("shards"), one);
  // A held set cannot take the crop; bad pack flags are one line each.
  o = easel(train(folder + ":32", "held", "--iterations 1"));
  EXPECT_EQ(o.code, 2) << o.err;  // a bad request, found at load (every bad request exits 2)
  EXPECT_NE(o.err.find("takes no :SIDE"), std::string::npos) << o.err;
  o = easel("data pack " + folder + " --out " + (dir_ / "x").string() + " --shard-size 0");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(o.err.rfind("easel: --shard-size", 0), 0u) << o.err;
}

// Shards read through a shuffle buffer, each group its own: the same run at any --data-threads
// and when stopped and resumed; a bad --shuffle-buffer, one on a folder, or more groups than
// shards: exit 2 in one line naming the flag.
TEST_F(DataCli, ShardsThroughAShuffleBuffer) {
  const std::string folder = (dir_ / "f").string();
  Out o = easel("data pack " + folder + " --out " + (dir_ / "s").string() +
                " --shard-size 16KB --shards-per-group 2");
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string shards = "shards:" + (dir_ / "s").string();
  const auto groups = [](std::string cmd, const std::string& n) {  // train()'s one group -> n
    return cmd.replace(cmd.find("--groups 1"), 10, "--groups " + n + " --algo sync-easgd");
  };
  const std::string two = "--iterations 6 --shuffle-buffer 4 ";
  o = easel(groups(train(shards, "one", two + "--data-threads 1"), "2"));
  ASSERT_EQ(o.code, 0) << o.err;
  const double one = test_loss("one");
  o = easel(groups(train(shards, "three", two + "--data-threads 3"), "2"));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(test_loss("three"), one);
  o = easel(groups(train(shards, "half", "--iterations 3 --shuffle-buffer 4"), "2"));
  ASSERT_EQ(o.code, 0) << o.err;
  o = easel("train --resume " + (dir_ / "half").string() + " --iterations 6 --progress none");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(test_loss("half"), one);
  o = easel(groups(train(shards, "zero", "--iterations 6 --shuffle-buffer 0"), "2"));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(test_loss("zero"), one);
  for (const std::string& bad :
       {train(shards, "bad1", "--iterations 1 --shuffle-buffer -5"),
        train(folder, "bad2", "--iterations 1 --shuffle-buffer 10"),
        groups(train(shards, "bad3", "--iterations 1 --shuffle-buffer 4"), "12")}) {
    o = easel(bad);
    EXPECT_EQ(o.code, 2) << bad << "\n" << o.err;
    EXPECT_NE(o.err.find("--shuffle-buffer"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
  for (const char* out : {"bad1", "bad2", "bad3"})
    EXPECT_FALSE(fs::exists(dir_ / out)) << out;
}

// shards:DIR:SIDE holds the images decoded at SIDE, as the folder's DIR:SIDE: packed in list
// order, the same run. A random-resized crop or a shuffle buffer with it, or a side that is not
// a number, is refused in one line naming the spec or the flag, and nothing is written.
TEST_F(DataCli, ShardsAtASideTrainAsTheFolder) {
  const std::string folder = (dir_ / "f").string();
  Out o = easel("data pack " + folder + " --out " + (dir_ / "s").string() +
                " --shard-size 16KB --keep-order");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto held = [&](const std::string& data, const std::string& out, const std::string& more) {
    return "train --net cifar10-quick --data " + data +
           " --augment flip,crop-pad=4 --batch 8 --groups 1 --threads-per-group 1 --oversubscribe"
           " --progress none --log-level warn --iterations 6 --eval-every 3 --out " +
           (dir_ / out).string() + " " + more;
  };
  o = easel(held(folder + ":32", "folder", ""));
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string shards = "shards:" + (dir_ / "s").string();
  o = easel(held(shards + ":32", "shards", ""));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(test_loss("shards"), test_loss("folder"));
  o = easel(train(shards + ":32", "crop", "--iterations 1"));
  expect_refused(o, "data set '" + shards +
                        ":32': shards streamed for random-resized-crop take "
                        "no :SIDE");
  o = easel(held(shards + ":32", "buffer", "--shuffle-buffer 4"));
  expect_refused(o, "--shuffle-buffer: only streamed tar shards");
  o = easel(held(shards + ":3x", "side", ""));
  expect_refused(o, "shards:" + (dir_ / "s").string() + ":3x: no training shards (");
  EXPECT_NE(o.err.find(":SIDE to decode them once at SIDE"), std::string::npos) << o.err;
  for (const char* out : {"crop", "buffer", "side"})
    EXPECT_FALSE(fs::exists(dir_ / out)) << out;
}

// A pack into a folder that holds anything is refused unless --overwrite, which replaces only an
// earlier pack's shards; a refused or failed pack leaves --out as it was (or absent).
TEST_F(DataCli, PackReplacesOnlyAnEarlierPackAndOnlyWhenTold) {
  const std::string folder = (dir_ / "f").string();
  const fs::path s = dir_ / "s";
  const std::string pack = "data pack " + folder + " --out " + s.string();
  Out o = easel(pack + " --shard-size 16KB");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto first = listing(s);
  ASSERT_GT(first.size(), 2u);
  o = easel(pack + " --shard-size 1GB");
  expect_refused(o, "--out: " + s.string() + " already holds " + std::to_string(first.size()) +
                        " files of an earlier pack (" + (s / "train-000000.tar").string() +
                        "): give --overwrite");
  EXPECT_EQ(listing(s), first);
  std::ofstream(s / "notes.txt") << "mine";
  for (const char* more : {"", " --overwrite"}) {
    o = easel(pack + " --shard-size 1GB" + more);
    expect_refused(o, "--out: " + s.string() + " holds " + (s / "notes.txt").string());
  }
  fs::remove(s / "notes.txt");
  EXPECT_EQ(listing(s), first);
  // A pack that fails (an image --max-side cannot decode) keeps the earlier shards.
  const fs::path bad = dir_ / "f" / "train" / "c1" / "zz.jpg";
  std::ofstream(bad) << "not an image";
  o = easel(pack + " --shard-size 1GB --overwrite --max-side 16");
  expect_refused(o, bad.string());
  EXPECT_EQ(listing(s), first);
  o = easel("data pack " + folder + " --out " + (dir_ / "new" / "x").string() + " --max-side 16");
  expect_refused(o, bad.string());
  EXPECT_FALSE(fs::exists(dir_ / "new"));
  fs::remove(bad);
  o = easel(pack + " --shard-size 1GB --overwrite");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("replacing " + std::to_string(first.size()) + " files"), std::string::npos)
      << o.out;
  EXPECT_EQ(listing(s).size(), 2u);  // train-000000.tar and val-000000.tar, the old ones gone
  EXPECT_TRUE(fs::exists(s / "train-000000.tar"));
  std::ofstream(dir_ / "file") << "x";
  expect_refused(easel("data pack " + folder + " --out " + (dir_ / "file").string()),
                 "--out: " + (dir_ / "file").string() + " exists and is not a directory");
  for (const std::string n : {"-1", "25"}) {  // 24 training images
    o = easel("data pack " + folder + " --out " + (dir_ / "g").string() + " --shards-per-group " +
              n);
    expect_refused(o, "--shards-per-group: " + n);
    EXPECT_FALSE(fs::exists(dir_ / "g"));
  }
}

// Training refuses a glob that takes validation shards, and shards that do not split evenly
// among the groups that read them through a shuffle buffer (3 among 2: one group's samples
// drawn twice as often); --shards-per-group packs them evenly, --shuffle-buffer 0 shares out
// samples one by one.
TEST_F(DataCli, ShardsOfTheWrongSplitOrUnevenlySplitAreRefused) {
  const std::string folder = (dir_ / "f").string();
  const fs::path s = dir_ / "s";
  Out o = easel("data pack " + folder + " --out " + s.string() +
                " --shard-size 1GB --shards-per-group 3");
  ASSERT_EQ(o.code, 0) << o.err;
  ASSERT_TRUE(fs::exists(s / "train-000002.tar"));
  ASSERT_FALSE(fs::exists(s / "train-000003.tar"));
  o = easel(train("shards:" + (s / "*.tar").string(), "val", "--iterations 1"));
  expect_refused(o, "matches the validation shard " + (s / "val-000000.tar").string());
  const auto two = [&](const std::string& out, const std::string& more) {
    std::string cmd = train("shards:" + s.string(), out, "--iterations 2 " + more);
    return cmd.replace(cmd.find("--groups 1"), 10, "--groups 2 --algo sync-easgd");
  };
  EXPECT_FALSE(fs::exists(dir_ / "val"));
  o = easel(two("uneven", ""));
  expect_refused(o,
                 "--shuffle-buffer: the 3 tar shards of 's/train' split unevenly among 2 "
                 "groups (each reads its own: 2 or 1, group 0 also " +
                     (s / "train-000002.tar").string() +
                     "): pack them with easel data pack --shards-per-group 2");
  EXPECT_FALSE(fs::exists(dir_ / "uneven"));  // refused before the run's files are written
  o = easel(two("zero", "--shuffle-buffer 0"));
  EXPECT_EQ(o.code, 0) << o.err;
  o = easel("data pack " + folder + " --out " + s.string() +
            " --shard-size 1GB --shards-per-group 2 --overwrite");
  ASSERT_EQ(o.code, 0) << o.err;
  o = easel(two("even", ""));
  EXPECT_EQ(o.code, 0) << o.err;
}

TEST_F(DataCli, BadImageExitsTwoOrIsSkipped) {
  const fs::path bad = dir_ / "f" / "train" / "c1" / "1.jpg";
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << "not an image";
  const std::string folder = (dir_ / "f").string();
  Out o = easel(train(folder, "bad", "--iterations 6"));
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find(bad.string() + ": neither a JPEG nor a PNG"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  o = easel(train(folder, "skip", "--iterations 6 --skip-bad-images"));
  ASSERT_EQ(o.code, 0) << o.err;
  const auto s = nlohmann::json::parse(slurp(dir_ / "skip" / "summary.json"));
  EXPECT_EQ(s["skipped_images"], 1);
  EXPECT_NE(o.err.find("skipped a bad image: " + bad.string()), std::string::npos) << o.err;
}

// The memory fit counts a held folder's images and not a streamed one's (only its list).
TEST_F(DataCli, FitCountsNoImagesOfAStreamedSet) {
  const std::string folder = (dir_ / "f").string();
  Out o = easel(train(folder, "streamed", "--iterations 1", "info"));
  ASSERT_EQ(o.code, 0) << o.err;
  const size_t fit = o.err.find("fit: one group");
  ASSERT_NE(fit, std::string::npos) << o.err;
  EXPECT_EQ(o.err.substr(fit, o.err.find('\n', fit) - fit).find("dataset"), std::string::npos)
      << o.err;
  o = easel("train --net cifar10-quick --data " + folder +
            ":32 --batch 8 --groups 1 --threads-per-group 1 --oversubscribe --progress none"
            " --iterations 1 --log-level info --out " +
            (dir_ / "held").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("dataset"), std::string::npos) << o.err;
}

TEST_F(DataCli, BenchDataOnly) {
  const fs::path json = dir_ / "bench.json";
  Out o = easel("bench --data " + (dir_ / "f").string() +
                " --augment random-resized-crop=32,flip --data-threads 2 --data-only --batches 8"
                " --layouts 1x1 --repeats 1 --warmup 1 --min-time 0.2 --json " +
                json.string());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto d = nlohmann::json::parse(slurp(json))["data"];
  EXPECT_GT(d["images_per_second"].get<double>(), 0);
  EXPECT_NEAR(d["images_per_second_per_thread"].get<double>(),
              d["images_per_second"].get<double>() / 2, 1e-9);
  EXPECT_FALSE(nlohmann::json::parse(slurp(json)).contains("steps"));
  o = easel("bench --data-only");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(o.err.rfind("easel: --data-only", 0), 0u) << o.err;
}

// On the one core `taskset -c C` leaves it, bench's default layouts are those that fit it (1x1),
// --data-only plans no layout (its streams are unpinned: 1x2 and 2x1 only count the streams),
// and train's defaults (one group per core) plan one group on that core.
TEST_F(DataCli, DefaultsFollowTheCoresTheProcessMayUse) {
  const fs::path json = dir_ / "bench.json";
  const std::string bench = "bench --data " + (dir_ / "f").string() +
                            " --data-only --batches 8 --repeats 1 --warmup 1 --min-time 0.05";
  Out o = easel_test::run_easel(bench + " --json " + json.string(), on_one_core(), "data");
  ASSERT_EQ(o.code, 0) << o.err;
  auto doc = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(doc["flags"]["layouts"], "1x1");
  EXPECT_EQ(doc["data"]["rows"].size(), 1u);
  o = easel_test::run_easel(bench + " --layouts 1x2,2x1 --overwrite --json " + json.string(),
                            on_one_core(), "data");
  ASSERT_EQ(o.code, 0) << o.err;
  doc = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(doc["data"]["rows"].size(), 2u);  // 1 and 2 streams
  o = easel_test::run_easel("train --net cifar10-quick --data " + (dir_ / "f").string() +
                                " --augment random-resized-crop=32 --batch 8 --iterations 2"
                                " --progress none --out " +
                                (dir_ / "one").string(),
                            on_one_core(), "data");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto sum = nlohmann::json::parse(slurp(dir_ / "one" / "summary.json"));
  EXPECT_EQ(sum["groups"], 1);
  EXPECT_EQ(sum["threads_per_group"], 1);
  EXPECT_EQ(sum["group_times"][0]["cpus"].size(), 1u);
}

}  // namespace
