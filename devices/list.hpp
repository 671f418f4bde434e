// The device kinds a worker group can run on, as an explicit list (list.cpp) like the
// algorithms': "cpu" and "cuda", each a name, a description and its factories. --device names
// one of them; the trainer asks the entry, never a literal, what the kind can do.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "devices/device.hpp"
#include "engine/comm/comm.hpp"

namespace easel {

struct DeviceEntry {
  const char* name;         // the --device word: "cpu", "cuda"
  const char* description;  // one line for help texts
  // An accelerator group: each unit (a GPU) is one worker group with its own memory and its
  // own Device, picked by number ("cuda:0,2"). Otherwise one Device serves every group.
  bool accelerator;
  // How many units this machine has, or why there are none (not built, no driver, no device).
  Result<int> (*unit_count)();
  // The Device of unit `unit` (0 for a kind that is not an accelerator).
  Result<std::unique_ptr<Device>> (*make_device)(int unit, ImplChoice impl, Precision precision);
  // The kind's own Comm among P of its devices, already attached (rank i on devices[i]; two
  // ranks may share a unit), and its name for messages; null for a kind without one (the CPU's
  // groups share host memory). comm_built says whether this build has it. algo (and inter for
  // hierarchical) is the run's collective where the Comm runs the algorithms of
  // engine/comm/collectives/ (groups sharing a GPU); NCCL picks its own.
  const char* comm_name;
  bool (*comm_built)();
  Result<std::unique_ptr<Comm>> (*make_comm)(std::span<Device* const> devices, CollectiveAlgo algo,
                                             CollectiveAlgo inter);

  bool has_comm() const { return comm_built != nullptr && comm_built(); }
};

// The built-in entries, in the order help texts list them.
std::span<const DeviceEntry> device_list();

// The kinds a run chooses from: the built-in list unless a test substitutes its own (a stand-in
// GPU whose "device" memory is host memory). The entries must outlive the run.
struct DeviceRegistry {
  std::span<const DeviceEntry> entries = device_list();

  // The entry called `name`, or null.
  const DeviceEntry* find(const std::string& name) const;
  // "cpu, cuda, cuda:0, cuda:0,1,...": what --device accepts, for messages.
  std::string accepted() const;
};

// --device against `devices`: a kind's name, or an accelerator's name and its units
// ("cuda:0,2"). Errors name the flag and the bad part ("--device: 'cuda:x' ...").
Result<DeviceRequest> parse_device(const std::string& text, const DeviceRegistry& devices);

// `request` (parsed against the built-in list, or never parsed: the CPU) with its kind taken
// from `devices` by name, as a run that was handed another list (a test's stand-in GPU) needs
// it. A request never parsed has the first kind that is not an accelerator. Fails, naming
// --device, when `devices` has no kind of that name.
Result<DeviceRequest> bind_device(const DeviceRequest& request, const DeviceRegistry& devices);

// --device's text for `request`: the kind's name, and an accelerator's units ("cuda:0,2").
std::string device_text(const DeviceRequest& request);

}  // namespace easel
