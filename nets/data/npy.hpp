// A strict reader of NumPy's .npy files of little-endian float32 (`easel predict`'s batches):
// numpy.save's format, versions 1.0, 2.0 and 3.0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/status.hpp"

namespace easel {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> values;  // C order, shape's product of them
};

// Reads `path`: the magic "\x93NUMPY", a version of 1, 2 or 3, the header's length, then the
// header, a Python dict of exactly 'descr' ('<f4'), 'fortran_order' (False) and 'shape' (a
// tuple of `rank` positive integers), then the values, which must fill the rest of the file
// exactly. Every check is made, the file's size compared with what the header promises,
// before the values are allocated, so a hostile header never asks for more than the file holds.
// Errors (data_error; not_found for a file that cannot be opened) are one line naming the file
// and the field: "x.npy: descr '<f8': only little-endian float32 ('<f4') is read"; unavailable
// for values larger than the memory available (engine/limits.hpp).
Result<NpyArray> read_npy(const std::string& path, int rank);

// numpy.save's bytes (version 1.0) for float32 `values` of `shape`: what the tests write.
std::string encode_npy(const std::vector<int64_t>& shape, const std::vector<float>& values);

}  // namespace easel
