// What every device shares: the host copies of the CPU, and the --device flag (read against
// the device list, devices/list.hpp).
#include "devices/device.hpp"

#include <algorithm>
#include <cstring>

#include "devices/activations.hpp"
#include "devices/list.hpp"

namespace easel {

void Device::upload(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void Device::download(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void Device::normalize_bytes(const uint8_t* bytes, const float* table, const Shape4& shape,
                             Layout layout, DType to, void* dst) {
  EASEL_CHECK_MSG(to == DType::f32, "a host device writes f32 activations");
  normalize_bytes_host(bytes, table, shape, layout, to, dst);
}

void Device::to_activations(const float* src, DType to, void* dst, int64_t count) {
  EASEL_CHECK_MSG(to == DType::f32 && is_host(), "this device keeps no bf16 activations");
  if (dst != src) std::memmove(dst, src, static_cast<size_t>(count) * sizeof(float));
}

void Device::add_activations(void* y, const void* x, DType t, int64_t count) {
  EASEL_CHECK_MSG(t == DType::f32, "this device keeps no bf16 activations");
  kernels().axpy(static_cast<float*>(y), 1.f, static_cast<const float*>(x), count);
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
