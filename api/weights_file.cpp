// The weights file of save_weights/load_weights: a magic line, a count, the floats.
#include <bit>
#include <cstring>
#include <fstream>

#include "easel/run.hpp"

namespace easel::api {

namespace {

constexpr char kMagic[8] = {'E', 'A', 'S', 'E', 'L', 'W', '1', '\n'};
static_assert(std::endian::native == std::endian::little, "the file is little-endian");

}  // namespace

Status save_weights(const std::string& path, const std::vector<float>& weights) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return {Code::io_error, path + ": cannot open for writing"};
  const uint64_t n = weights.size();
  f.write(kMagic, sizeof kMagic);
  f.write(reinterpret_cast<const char*>(&n), sizeof n);
  f.write(reinterpret_cast<const char*>(weights.data()),
          static_cast<std::streamsize>(n * sizeof(float)));
  f.close();
  if (!f) return {Code::io_error, path + ": write failed"};
  return {};
}

Status load_weights(const std::string& path, std::vector<float>* weights) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {Code::not_found, path + ": cannot open"};
  const auto size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  char magic[sizeof kMagic] = {};
  uint64_t n = 0;
  f.read(magic, sizeof magic);
  f.read(reinterpret_cast<char*>(&n), sizeof n);
  if (!f || std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    return {Code::data_error, path + ": not an easel weights file (no EASELW1 header)"};
  if (n > (size - sizeof magic - sizeof n) / sizeof(float) ||
      size != sizeof magic + sizeof n + n * sizeof(float))
    return {Code::data_error, path + ": holds " + std::to_string(size) +
                                  " bytes, its header says " + std::to_string(n) + " floats"};
  std::vector<float> w(n);
  f.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!f) return {Code::io_error, path + ": read failed"};
  *weights = std::move(w);
  return {};
}

}  // namespace easel::api
