// The index of a POSIX tar file (ustar, GNU and pax long names): each regular member's name and
// where its bytes lie, read from the 512-byte headers alone, so that a shard's members can be
// read at random (one pread each). libarchive reads tar as a stream and does not say where a
// member's data lies; the headers are all this needs (tests/fuzz/fuzz_tar.cpp fuzzes it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/status.hpp"

namespace easel {

struct TarMember {
  std::string name;
  int64_t offset = 0, size = 0;  // the member's data: bytes [offset, offset + size) of the file
};

// Reads n bytes at offset into dst; an error names the file.
using TarReadAt = std::function<Status(int64_t offset, uint8_t* dst, size_t n)>;

// The regular members of a tar file of file_size bytes, in order (directories, links and pax
// global headers skipped). Stops at the end-of-archive block (or at the end of the file on a
// block boundary). Errors (data_error, one line starting with `path`): a header whose checksum
// is wrong or whose size field is not a number ("broken header at byte N"), a member whose data
// runs past the end of the file (truncated), a long name over 64 KiB, more than max_members.
Status scan_tar(const TarReadAt& read_at, int64_t file_size, const std::string& path,
                std::vector<TarMember>* out, int64_t max_members = int64_t{1} << 28);

// A ustar header block for a regular member of `size` bytes (mode 0644, mtime 0), its name
// split into prefix and name when longer than 100 bytes. Requires a name that fits (at most 255
// bytes, split at a '/'), which the pack command's names do.
void tar_header(const std::string& name, int64_t size, uint8_t block[512]);

}  // namespace easel
