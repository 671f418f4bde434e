// available_memory(): every source over a fake /proc and /sys tree, then the live process under
// an address-space limit set in a forked child.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/limits.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(::testing::TempDir()) /
            (std::string("easel_limits_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    // What every fake machine has: 8 GiB available, no rlimit.
    put("proc/meminfo", "MemTotal:       16777216 kB\nMemAvailable:    8388608 kB\n");
    put("proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units\n"
        "Max data size             unlimited            unlimited            bytes\n"
        "Max address space         unlimited            unlimited            bytes\n");
    put("proc/self/status", "VmSize:  1048576 kB\nVmData:   524288 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void put(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  MemoryBound bound() const { return available_memory(root_.string()); }

  fs::path root_;
};

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST_F(FakeRoot, MemAvailableAlone) {
  const MemoryBound b = bound();
  EXPECT_EQ(b.bytes, 8 * kGiB);
  EXPECT_EQ(b.source, "MemAvailable");
}

TEST_F(FakeRoot, NothingReadableBoundsNothing) {
  fs::remove_all(root_);
  EXPECT_EQ(bound().bytes, UINT64_MAX);
}

// cgroup v2: the process's own group is unlimited, its parent holds 5 GiB of which 3 GiB are in
// use, 1 GiB of that reclaimable page cache: 3 GiB are left.
TEST_F(FakeRoot, CgroupV2WalksUpToTheLimitingAncestor) {
  put("proc/self/cgroup", "0::/jobs/run\n");
  put("sys/fs/cgroup/jobs/run/memory.max", "max\n");
  put("sys/fs/cgroup/jobs/run/memory.current", "1000\n");
  put("sys/fs/cgroup/jobs/memory.max", std::to_string(5 * kGiB) + "\n");
  put("sys/fs/cgroup/jobs/memory.current", std::to_string(3 * kGiB) + "\n");
  put("sys/fs/cgroup/jobs/memory.stat",
      "anon 1\nactive_file 7\ninactive_file " + std::to_string(kGiB) + "\n");
  const MemoryBound b = bound();
  EXPECT_EQ(b.bytes, 3 * kGiB);
  EXPECT_EQ(b.source, "cgroup memory.max");
}

// Inside a container the path of /proc/self/cgroup is the host's: the mount's own files are
// the container's group.
TEST_F(FakeRoot, CgroupV2InsideAContainer) {
  put("proc/self/cgroup", "0::/host/only/path\n");
  put("sys/fs/cgroup/memory.max", std::to_string(2 * kGiB) + "\n");
  put("sys/fs/cgroup/memory.current", "0\n");
  EXPECT_EQ(bound().bytes, 2 * kGiB);
}

TEST_F(FakeRoot, CgroupV1) {
  put("proc/self/cgroup", "4:memory:/batch/42\n3:cpuset:/\n0::/\n");
  put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  put("sys/fs/cgroup/memory/batch/42/memory.limit_in_bytes", std::to_string(6 * kGiB) + "\n");
  put("sys/fs/cgroup/memory/batch/42/memory.usage_in_bytes", std::to_string(2 * kGiB) + "\n");
  put("sys/fs/cgroup/memory/batch/42/memory.stat",
      "inactive_file 5\ntotal_inactive_file " + std::to_string(kGiB) + "\n");
  const MemoryBound b = bound();
  EXPECT_EQ(b.bytes, 5 * kGiB);
  EXPECT_EQ(b.source, "cgroup memory.limit_in_bytes");
}

TEST_F(FakeRoot, AddressSpaceAndDataLimitsLessWhatIsInUse) {
  put("proc/self/limits",
      "Limit                     Soft Limit           Hard Limit           Units\n"
      "Max data size             unlimited            unlimited            bytes\n"
      "Max address space         " +
          std::to_string(6 * kGiB) + "           unlimited            bytes\n");
  MemoryBound b = bound();
  EXPECT_EQ(b.bytes, 5 * kGiB);  // 6 GiB less VmSize's 1 GiB
  EXPECT_EQ(b.source, "RLIMIT_AS");
  put("proc/self/limits", "Max data size             " + std::to_string(kGiB) +
                              "           unlimited     bytes\n"
                              "Max address space         " +
                              std::to_string(6 * kGiB) + "           unlimited    bytes\n");
  b = bound();
  EXPECT_EQ(b.bytes, kGiB / 2);  // 1 GiB less VmData's 512 MiB
  EXPECT_EQ(b.source, "RLIMIT_DATA");
  // A process already past its limit has nothing left, not a wrapped-around huge number.
  put("proc/self/status", "VmSize:  8388608 kB\nVmData:   524288 kB\n");
  put("proc/self/limits", "Max address space         " + std::to_string(6 * kGiB) + "  u  b\n");
  EXPECT_EQ(bound().bytes, 0u);
}

// The live process: an address-space limit 256 MiB above what it uses bounds it so.
TEST(AvailableMemory, HonoursTheProcessAddressSpaceLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const MemoryBound unlimited = available_memory();
  EXPECT_GT(unlimited.bytes, 0u);
  EXPECT_LT(unlimited.bytes, UINT64_MAX);  // physical memory at least
  auto run = [] {
    std::ifstream status("/proc/self/status");
    std::string line;
    rlim_t vm = 0;
    while (std::getline(status, line))
      if (line.rfind("VmSize:", 0) == 0) vm = std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
    const rlim_t limit = vm + (rlim_t{256} << 20);
    rlimit rl{limit, limit};
    if (vm == 0 || setrlimit(RLIMIT_AS, &rl) != 0) std::exit(2);
    const MemoryBound b = available_memory();
    std::exit(b.source == "RLIMIT_AS" && b.bytes <= (uint64_t{256} << 20) ? 0 : 1);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace easel
