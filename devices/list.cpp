// The explicit list of device kinds. A new kind is its files plus one line here.
#include "devices/list.hpp"

#include <array>

#include "devices/cpu/cpu_precision.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/shared_gpu_comm.hpp"

namespace easel {

namespace {

Result<int> one_unit() {
  return 1;
}

Result<std::unique_ptr<Device>> make_cpu(int /*unit*/, ImplChoice impl, Precision precision) {
  EASEL_RETURN_IF_ERROR(check_cpu_precision(precision, impl));
  return make_cpu_device(impl, precision);
}

Result<int> gpu_count() {
  EASEL_ASSIGN_OR_RETURN(std::vector<GpuInfo> gpus, list_gpus());
  return static_cast<int>(gpus.size());
}

// cuDNN and cuBLAS choose their own kernels: ImplChoice is the CPU's.
Result<std::unique_ptr<Device>> make_gpu(int unit, ImplChoice /*impl*/, Precision precision) {
  return make_cuda_device(unit, precision);
}

// NCCL among distinct GPUs; groups that share a GPU (--device cuda:0,0) exchange by the
// devices' own kernels (NCCL refuses two ranks on one device).
Result<std::unique_ptr<Comm>> make_gpu_comm(std::span<Device* const> devices, CollectiveAlgo algo,
                                            CollectiveAlgo inter) {
  return make_gpu_groups_comm(devices, algo, inter, make_nccl_comm);
}

constexpr std::array kDevices = {
    DeviceEntry{"cpu", "the host's cores: oneDNN and own kernels, one device for every group",
                false, one_unit, make_cpu, nullptr, nullptr, nullptr},
    DeviceEntry{"cuda",
                "NVIDIA GPUs: cuDNN, cuBLAS and own kernels, one group per listed GPU (cuda:0,0: "
                "two groups on GPU 0)",
                true, gpu_count, make_gpu, "NCCL", nccl_built, make_gpu_comm},
};

}  // namespace

std::span<const DeviceEntry> device_list() {
  return kDevices;
}

const DeviceEntry* DeviceRegistry::find(const std::string& name) const {
  for (const DeviceEntry& e : entries)
    if (name == e.name) return &e;
  return nullptr;
}

std::string DeviceRegistry::accepted() const {
  std::string s;
  for (const DeviceEntry& e : entries) {
    const std::string n = e.name;
    s += (s.empty() ? "" : ", ") + n;
    if (e.accelerator) s += ", " + n + ":0, " + n + ":0,1,...";
  }
  return s;
}

namespace {

// A request's kind: the one it names, or for one never parsed the first non-accelerator kind.
const DeviceEntry* kind_or_default(const DeviceRequest& r, const DeviceRegistry& devices) {
  if (r.kind != nullptr) return devices.find(r.kind->name);
  for (const DeviceEntry& e : devices.entries)
    if (!e.accelerator) return &e;
  return nullptr;
}

}  // namespace

Result<DeviceRequest> bind_device(const DeviceRequest& request, const DeviceRegistry& devices) {
  DeviceRequest bound = request;
  bound.kind = kind_or_default(request, devices);
  if (bound.kind == nullptr)
    return invalid_argument("--device: '" + device_text(request) +
                            "' is not a device (accepted: " + devices.accepted() + ")");
  bound.gpu = bound.kind->accelerator;
  return bound;
}

std::string device_text(const DeviceRequest& request) {
  const DeviceEntry* kind = kind_or_default(request, {});
  std::string s = kind != nullptr ? kind->name : "?";
  for (size_t i = 0; i < request.ordinals.size(); ++i)
    s += (i == 0 ? ":" : ",") + std::to_string(request.ordinals[i]);
  return s;
}

}  // namespace easel
