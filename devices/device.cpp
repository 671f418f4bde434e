// What every device shares: the host copies of the CPU, and the --device flag.
#include "devices/device.hpp"

#include <algorithm>
#include <cstring>

namespace easel {

void Device::upload(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void Device::download(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

Result<DeviceRequest> parse_device(const std::string& text) {
  DeviceRequest r;
  if (text == "cpu") return r;
  const auto bad = [&](const std::string& why) {
    return invalid_argument("--device: '" + text + "' " + why +
                            " (accepted: cpu, cuda, cuda:0, cuda:0,1,...)");
  };
  if (text == "cuda") {
    r.gpu = true;
    return r;
  }
  if (text.rfind("cuda:", 0) != 0) return bad("is not a device");
  r.gpu = true;
  const std::string list = text.substr(5);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty() || item.size() > 4 ||
        !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return bad("has '" + item + "' where a GPU number belongs");
    const int ordinal = std::stoi(item);
    if (std::find(r.ordinals.begin(), r.ordinals.end(), ordinal) != r.ordinals.end())
      return bad("names GPU " + item + " twice (each GPU is one worker group)");
    r.ordinals.push_back(ordinal);
  }
  return r;
}

}  // namespace easel
