// The kernels' own bytes, measured (run/fit_probe.hpp).
#include "run/fit_probe.hpp"

#include <malloc.h>

#include "engine/log.hpp"
#include "engine/memory.hpp"

namespace easel {

namespace {

// What the C++ heap has handed out and not taken back: its arenas' chunks in use and its
// mmap'd blocks, less the Buffers allocated from it (counted by the fit as their classes).
uint64_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  const uint64_t held = static_cast<uint64_t>(m.uordblks) + static_cast<uint64_t>(m.hblkhd);
  const uint64_t buffers = plain_buffer_bytes();
  return held > buffers ? held - buffers : 0;
}

}  // namespace

Result<uint64_t> kernel_bytes(const NetSpec& spec, int64_t batch, Layout layout, ImplChoice impl,
                              Precision precision) {
  // The probe's kernel picks are the first group's, which logs them: quiet here.
  const LogLevel level = log_level();
  set_log_level(LogLevel::error);
  std::unique_ptr<Device> dev = make_cpu_device(impl, precision);
  const uint64_t before = heap_in_use();
  Result<std::unique_ptr<Net>> net = Net::create(spec, batch, layout, *dev, MemKind::dram);
  const uint64_t after = heap_in_use();
  set_log_level(level);
  EASEL_RETURN_IF_ERROR(net.status());
  std::move(net).value().reset();
  malloc_trim(0);  // the probe's pages back to the system before the groups take theirs
  return after > before ? after - before : 0;
}

}  // namespace easel
