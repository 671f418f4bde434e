// A GoogleTest binary of planted outcomes for tests/tools/gpu_check_test.py: tools/gpu-check's
// test runner (tools/gpu_check_steps.py gtest) must name each test that fails, crashes, hangs or
// skips, run the tests after a crash or a hang, and keep a failing test's output in its log
// archive although another test printed megabytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

TEST(Planted, Passes) {
  EXPECT_EQ(1 + 1, 2);
}

// 1.2 MB of random letters (about 0.75 MB compressed): more than a small cap holds.
TEST(Planted, Noisy) {
  uint64_t x = 88172645463325252ull;
  std::string line(100, ' ');
  for (int i = 0; i < 12000; ++i) {
    for (char& c : line) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      c = static_cast<char>('a' + x % 26);
    }
    std::printf("%s\n", line.c_str());
  }
}

TEST(Planted, Fails) {
  std::printf("planted-failure-output\n");
  EXPECT_EQ(2 + 2, 5) << "planted failure";
}

TEST(Planted, Skips) {
  GTEST_SKIP() << "planted skip";
}

TEST(Planted, Crashes) {
  std::printf("planted-crash-output\n");
  std::fflush(stdout);
  std::abort();
}

// Sleeps GPU_CHECK_FAKE_HANG seconds (at once without it), its pid first in
// GPU_CHECK_FAKE_PIDFILE so that the test can see it killed.
TEST(Planted, Hangs) {
  const char* secs = std::getenv("GPU_CHECK_FAKE_HANG");
  if (secs == nullptr) return;
  if (const char* pidfile = std::getenv("GPU_CHECK_FAKE_PIDFILE")) {
    std::ofstream(pidfile) << getpid() << "\n";
  }
  std::this_thread::sleep_for(std::chrono::seconds(std::atoi(secs)));
}

TEST(Planted, RunsAfterCrashAndHang) {
  EXPECT_TRUE(true);
}
