// Opening the files the data set readers read (nets/data/cifar.cpp, nets/data/idx.cpp).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/status.hpp"

namespace easel {

// Opens path read-only into *fd (the caller closes it, also when it refuses the file after this
// returns) and sets *regular_size to the file's size, or to -1 when it is not a regular file (the
// caller's refusal). A path that is not there is not_found, any other failure to open io_error;
// both name path.
inline Status open_for_reading(const std::string& path, int* fd, int64_t* regular_size) {
  *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return not_found(path + ": no such file");
    return io_error(path + ": cannot open: " + std::strerror(e));
  }
  struct stat st {};
  *regular_size = ::fstat(*fd, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : -1;
  return {};
}

}  // namespace easel
