// The flat parameter arena: a replica's weights (and, separately, its gradients, momentum, or
// the centre) are each ONE contiguous float buffer; each layer parameter is a segment (view)
// of it. Every exchange between groups is one span operation over the whole arena.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/memory.hpp"

namespace easel {

// How a parameter is initialised (Caffe's fillers).
struct Filler {
  enum class Kind { constant, xavier, gaussian, uniform, msra };
  Kind kind = Kind::constant;
  float value = 0.f;           // constant
  float std = 0.01f;           // gaussian
  float min = 0.f, max = 1.f;  // uniform
};

// One parameter tensor inside the arena.
struct Segment {
  std::string name;                 // "conv1.weights"
  std::vector<int64_t> dims;        // e.g. {20, 1, 5, 5} (oihw) or {20} (bias)
  int64_t offset = 0;               // in floats from the arena start; multiple of kArenaAlign
  int64_t count = 0;                // product of dims
  int64_t fan_in = 1, fan_out = 1;  // for xavier/msra
  Filler filler;
  float lr_mult = 1.f, decay_mult = 1.f;
  // State, not a trained parameter (batch norm's running mean and variance): the training
  // forward pass writes it in place, its gradient is 0, its multipliers are 0, and the
  // parameter-server algorithms copy it from the group into the centre (devices/op.hpp,
  // state_params()).
  bool state = false;
  // The index of the layer that owns it in its net (a layer's segments are consecutive in the
  // arena): --pack per-layer sends one message per layer over them. -1: a message of its own.
  int layer = -1;
};

constexpr int64_t kArenaAlign = 16;  // floats: each segment starts on a 64-byte boundary

// The layout of an arena: its segments in order and its padded total size.
class ArenaLayout {
 public:
  // Appends a segment and returns its index; offset is assigned here.
  int add(Segment s);
  const std::vector<Segment>& segments() const { return segments_; }
  const Segment& segment(int i) const { return segments_[static_cast<size_t>(i)]; }
  int64_t total_floats() const { return total_; }  // padded; the arena's length
  int64_t param_count() const { return params_; }  // sum of counts (no padding)
  // The trained parameters: param_count() less the state segments (what published counts
  // give; batch norm's running statistics are not counted).
  int64_t trained_count() const { return params_ - state_; }

 private:
  std::vector<Segment> segments_;
  int64_t total_ = 0, params_ = 0, state_ = 0;
};

// An owned float arena of a layout's length, zero-filled, placed in a memory kind.
class Arena {
 public:
  Arena() = default;
  static Result<Arena> create(int64_t floats, MemKind kind);
  float* data() const { return buf_.as<float>(); }
  int64_t size() const { return floats_; }
  std::span<float> span() const { return {data(), static_cast<size_t>(floats_)}; }
  MemKind kind() const { return buf_.kind(); }

 private:
  Buffer buf_;
  int64_t floats_ = 0;
};

}  // namespace easel
