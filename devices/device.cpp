// What every device shares: the host copies of the CPU, and the --device flag (read against
// the device list, devices/list.hpp).
#include "devices/device.hpp"

#include <algorithm>
#include <cstring>

#include "devices/list.hpp"

namespace easel {

void Device::upload(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void Device::download(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

Result<DeviceRequest> parse_device(const std::string& text) {
  return parse_device(text, DeviceRegistry{});
}

Result<DeviceRequest> parse_device(const std::string& text, const DeviceRegistry& devices) {
  const auto bad = [&](const std::string& why) {
    return invalid_argument("--device: '" + text + "' " + why +
                            " (accepted: " + devices.accepted() + ")");
  };
  const size_t colon = text.find(':');
  DeviceRequest r;
  r.kind = devices.find(text.substr(0, colon));
  if (r.kind == nullptr || (colon != std::string::npos && !r.kind->accelerator))
    return bad("is not a device");
  r.gpu = r.kind->accelerator;
  if (colon == std::string::npos) return r;
  const std::string list = text.substr(colon + 1);
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
    r.ordinals.push_back(ordinal);
  }
  return r;
}

}  // namespace easel
