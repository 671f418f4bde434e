// Fuzz support: a directory of files for readers that take a directory (CIFAR batches, image
// folders). One per process, under $TMPDIR (or /tmp), emptied before each input and removed at
// exit.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace easel::fuzz {

class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/easel-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();  // the environment, not the input
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

  // Removes everything in it.
  void clear() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path_, ec))
      std::filesystem::remove_all(e.path(), ec);
  }
  // Writes `size` bytes of `data` to path()/name, creating the folders on the way.
  void write(const std::string& name, const uint8_t* data, size_t size) const {
    const std::filesystem::path p = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(p.parent_path());
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  // Makes path()/name a directory (where a reader expects a file).
  void mkdir(const std::string& name) const {
    std::filesystem::create_directories(std::filesystem::path(path_) / name);
  }

 private:
  std::string path_;
};

}  // namespace easel::fuzz
