// A Net: a directed acyclic graph of layers (each an Op built by a Device) whose last listed
// layer feeds softmax cross-entropy. A layer reads the outputs of the layers it names (or the
// input, "data"); a chain need name none. The Net owns activations and workspaces, NOT
// parameters: weights and gradients are flat arenas (engine/arena.hpp) owned by whoever trains,
// passed in on every call, so the same Net can run a group's replica or the centre model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "devices/device.hpp"
#include "engine/arena.hpp"
#include "engine/memory.hpp"

namespace easel {

struct LayerSpec {
  std::string name;
  OpDesc op;  // kind and hyper-parameters; layout and src shapes are filled by Net::create
  // The layers whose outputs it reads, in order ("data": the input images). Empty: the layer
  // listed just before it (the input for the first layer).
  std::vector<std::string> inputs;
  std::vector<Filler> fillers;  // one per param_shapes(op) entry
  std::vector<float> lr_mult;   // one per param (Caffe: weights 1, bias 2 in LeNet)
  std::vector<float> decay_mult;
};

// What a model builder returns: the input it expects and its layers. The last layer's output
// channels are the class scores fed to softmax cross-entropy. Layers may be listed in any order
// that names existing layers; Net::create sorts them, and refuses a cycle, a name used twice,
// an input that names no layer and a layer whose output nothing reads.
struct NetSpec {
  std::string name;
  int64_t channels = 1, height = 28, width = 28, classes = 10;
  std::vector<LayerSpec> layers;
};

struct StepStats {
  double loss = 0;      // mean cross-entropy over the batch
  int64_t correct = 0;  // training-batch hits
};

struct EvalStats {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t count = 0;
};

struct LayerInfo {
  std::string name, kind, impl;
  std::vector<std::string> inputs;  // the layers it reads ("data": the input)
  Shape4 dst;
  int64_t params = 0;
  double forward_flops = 0, backward_flops = 0;
};

class Net {
 public:
  // Fills in shapes for `batch` images in `layout`, validates every layer (errors name the
  // layer), builds each Op on `device` (which must outlive the net) and allocates activations
  // in `activations`; a failed allocation names the class ("activations: ..."). Refuses,
  // before allocating any, a net whose host activations (and their gradients), times the
  // `replicas` of it the process will hold, exceed the machine's physical memory.
  static Result<std::unique_ptr<Net>> create(const NetSpec& spec, int64_t batch, Layout layout,
                                             Device& device, MemKind activations, int replicas = 1);

  const NetSpec& spec() const { return spec_; }
  const ArenaLayout& params() const { return params_; }
  int64_t batch() const { return batch_; }
  Layout layout() const { return layout_; }
  Shape4 input_shape() const;

  // Writes initial parameters into `weights` (params().total_floats()) with Caffe's fillers,
  // deterministically from seed.
  void init_params(float* weights, uint64_t seed) const;

  // Every drawing layer's next training forward is draw n of stream `stream` (Op::set_draw).
  void set_draw(uint64_t stream, uint64_t n);
  // The element type of the activations (the device's Device::activation_type()): the images
  // that train_step and evaluate read are of this type too (a bf16 net's `images` points to
  // bf16 elements: Device::normalize_bytes writes them), and so are output(i)'s.
  DType activation_type() const { return act_; }
  // One training pass on a full batch: images [batch, C, H, W] in layout(), labels[batch].
  // diff (params().total_floats()) is overwritten with d mean_loss / d weights. The state
  // segments of `weights` (batch norm's running statistics) are updated in place.
  StepStats train_step(const float* images, const int32_t* labels, float* weights, float* diff);
  // Layer i's output (describe()'s order; dst shape) from the latest train_step or evaluate, in
  // the device's memory; output() is the last layer's, the logits [batch, classes].
  // tools/bench/net_dump.cpp compares them with PyTorch's.
  const float* output(size_t i) const { return acts_[i].as<float>(); }
  const float* output() const { return acts_.back().as<float>(); }
  // Layer i's output (the last layer's past the end) as f32 on the host, downloaded from the
  // device's memory and widened from bf16 where it is kept so (exact).
  std::vector<float> output_values(size_t i) const;
  // Forward only over the first n <= batch images (the rest of the buffer is ignored).
  EvalStats evaluate(const float* images, const int32_t* labels, int64_t n, const float* weights);

  std::vector<LayerInfo> describe() const;
  double flops_per_image_train() const;  // forward + backward, per image
  // Runs only layer i (in describe()'s order, a topological one) forward / backward on the
  // current activations (for per-layer timing). Backward must visit the layers in reverse
  // order, as train_step does: a gradient that several readers add up is written by the last
  // reader first and added to by the others.
  void forward_layer(size_t i, const float* weights, bool training);
  void backward_layer(size_t i, const float* weights, float* diff);
  size_t layer_count() const { return layers_.size(); }
  // Bytes of the layers' output gradients as allocated (shared among outputs whose gradients
  // are never live at once), against one buffer per output.
  size_t gradient_bytes() const;
  size_t unshared_gradient_bytes() const;

  ~Net();

 private:
  Net() = default;
  struct Layer;
  NetSpec spec_;
  int64_t batch_ = 0;
  Layout layout_ = Layout::nchw;
  Device* device_ = nullptr;  // the ops' device (outlives the net); its kernels add fan-in
  DType act_ = DType::f32;    // the activations' element type (the device's)
  ArenaLayout params_;
  std::vector<std::unique_ptr<Layer>> layers_;  // in topological order
  std::unique_ptr<LossOp> loss_;
  // One tensor per layer output: acts_[i] is layer i's dst, diffs_[i] its gradient (the last
  // layer's gradient is diff_logits_), all of act_'s type, in one of diff_pool_'s buffers,
  // which outputs whose gradients are never live at once share (share_diffs in net.cpp); prob_
  // is f32. scratch_[j]: where input j of a layer writes its data gradient when another reader
  // has written that tensor's gradient already.
  std::vector<Buffer> acts_, diff_pool_, scratch_;
  std::vector<float*> diffs_;
  Buffer prob_, diff_logits_;
  const float* input_ = nullptr;
};

}  // namespace easel
