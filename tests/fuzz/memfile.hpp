// Fuzz support: bytes as a file that path-taking readers can open, without touching the disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace easel::fuzz {

// An anonymous in-memory file (memfd) holding `size` bytes of `data`, opened by path through
// /proc/self/fd: a regular file as far as open(2) and stat(2) can tell. Closed on destruction.
class MemFile {
 public:
  MemFile(const char* name, const uint8_t* data, size_t size) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) std::abort();  // the fuzzer's environment, not the input
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  ~MemFile() { ::close(fd_); }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace easel::fuzz
