// libFuzzer target: parse_net_description (nets/models/description.cpp), the reader of `--net
// FILE` and of every built-in net: the TOML (engine/config.cpp's parse_toml), every layer's keys,
// the wiring (nets/graph.cpp's resolve_graph) and the shapes; then net_cost (nets/graph.cpp) of
// what it accepts, as `easel list` and the fit check call it. Input: the description.
//
// Besides crashes and sanitizer reports, it traps on a broken promise: an error that is not one
// line or does not name the description, a description the shape check accepts whose cost
// cannot be computed or is negative, more than 64 MiB live at once (the parser builds no net:
// `outputs = 1000000` on a large input costs a number, not memory).
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "nets/graph.hpp"
#include "nets/models/description.hpp"
#include "tests/fuzz/alloc_limit.hpp"

namespace {

const std::string kOrigin = "fuzz.toml";

// An error of the parser: one line that starts with the description's name.
void check_error(const easel::Status& s) {
  const std::string& m = s.message();
  if (m.rfind(kOrigin, 0) != 0 || m.find('\n') != std::string::npos) __builtin_trap();
}

void check_cost(const easel::NetCost& c) {
  if (c.params < 0 || c.state_floats < 0 || c.arena_floats < c.params + c.state_floats ||
      c.activation_floats <= 0)
    __builtin_trap();
  if (!std::isfinite(c.forward_flops) || !std::isfinite(c.train_flops) || c.forward_flops < 0 ||
      c.train_flops < c.forward_flops)
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  easel::fuzz::AllocLimit limit(int64_t{64} << 20);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The input it declares (what check_model and `easel list` take), else the defaults; and a
  // large fixed one (an ImageNet-sized image, 1000 classes).
  easel::ModelInput declared;
  if (auto h = easel::parse_net_header(text, kOrigin); h.ok())
    declared = h->input;
  else
    check_error(h.status());
  for (const easel::ModelInput& in : {declared, easel::ModelInput{3, 224, 224, 1000}}) {
    for (const bool shapes : {false, true}) {
      auto r = easel::parse_net_description(text, kOrigin, in, shapes);
      if (!r.ok()) {
        check_error(r.status());
        continue;
      }
      const easel::NetSpec& spec = r.value();
      if (spec.layers.empty() || spec.channels != in.channels || spec.height != in.height ||
          spec.width != in.width || spec.classes != in.classes)
        __builtin_trap();
      // Accepted with its shapes checked: its cost is known. Without them: a cost or one line.
      auto cost = easel::net_cost(spec);
      if (cost.ok())
        check_cost(cost.value());
      else if (shapes || cost.status().message().find('\n') != std::string::npos)
        __builtin_trap();
    }
  }
  return 0;
}
