// A run directory's trained net, for `easel eval`, `easel predict` and `easel export`
// (tools/cli/eval_cmd.cpp, predict_cmd.cpp, export_cmd.cpp): its settings (config.json), one of
// the models its checkpoint.bin holds, and the net rebuilt on the CPU to run them forward as the
// trainer's evaluations did.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devices/device.hpp"
#include "engine/arena.hpp"
#include "nets/data/dataset.hpp"
#include "nets/models/models.hpp"
#include "nets/net.hpp"
#include "run/train_config.hpp"

namespace easel::cli {

struct TrainedRun {
  std::string dir;
  TrainConfig cfg;  // config.json's settings
  // The model chosen (a whole arena, as the trainer lays it out) and what it is: "centre",
  // "anchor" or "group G", with why when it is the default ("the model the run evaluated").
  std::vector<float> weights;
  std::string weights_name, weights_note;
  std::string file;  // the checkpoint read: "checkpoint.bin", or "best.bin" (--weights best)
  int64_t step = 0;  // the checkpoint's iteration
  // summary.json's "input" and "classes" (the data the run trained on); none in a run without
  // a summary or from before summaries held them.
  std::optional<ModelInput> input;
};

// What --weights takes: "evaluated" (the default: the model the run's evaluations tested, which
// summary.json's test_accuracy is of: the centre for the algorithms that keep one, the anchor of
// the groups' last meeting for local-sgd, slowmo and diloco, else group 0's replica), "best"
// (that model as the evaluation of the best test accuracy left it: best.bin, the checkpoint of
// that evaluation; with --checkpoint-every N or auto, the best of the checkpointed ones),
// "centre", "anchor" or "group:G".
inline constexpr const char* kWeightsHelp =
    "which of the checkpoint's models: evaluated (the one the run's evaluations tested: the "
    "centre, the anchor of local-sgd/slowmo/diloco, else group 0's replica), best (that model "
    "at the evaluation of the best test accuracy: best.bin), centre, anchor or group:G";

// Reads DIR/config.json and DIR/checkpoint.bin (written after every evaluation: the last one
// is the run's final model), or DIR/best.bin for --weights best (invalid_argument without it).
// Errors name the file or --weights: not_found for a directory that is no run's or holds no
// checkpoint (--no-checkpoint), data_error for a malformed file.
Result<TrainedRun> open_trained_run(const std::string& dir, const std::string& weights);

// An ONNX file's net with the weights it carries, as a run of easel train's defaults on the
// file's input would hold them (for `easel predict --net FILE.onnx`; no checkpoint: step 0).
// A net description of easel's own (TOML, a built-in name) carries no weights: refused
// (invalid_argument, naming --net).
Result<TrainedRun> open_net_file(const std::string& path);

// The data set `spec` loaded as the run loaded its own (its crop side, --skip-bad-images);
// errors start with `what`.
Result<DataSplit> load_run_data(const TrainedRun& run, const std::string& spec,
                                const std::string& what);

// The run's net on the CPU (the run's --impl, --precision and --layout, its batch), for images
// of `in`, running `run.weights` forward.
class TrainedNet {
 public:
  // Fails (invalid_argument, starting with `what`: the data set or the input named) when the
  // net built for `in` holds another number of parameters than the run's weights, or when
  // `in` is not the run's input shape and classes (summary.json's, when it says).
  static Result<std::unique_ptr<TrainedNet>> create(const TrainedRun& run, const ModelInput& in,
                                                    const std::string& what);
  int64_t batch() const { return net_->batch(); }
  // The run's layout: an inner product reading a C x H x W tensor holds its weights in its
  // order (devices/op.hpp, param_shapes), which easel export reorders to ONNX's chw.
  Layout layout() const { return net_->layout(); }
  const NetSpec& spec() const { return net_->spec(); }
  const ArenaLayout& params() const { return net_->params(); }
  const float* weights() const { return weights_.data(); }
  int64_t classes() const { return net_->spec().classes; }
  Shape4 input_shape() const { return net_->input_shape(); }
  // The forward pass over images[0, n) (n <= batch(), in layout(), normalised as the run's
  // data; labels: n of them, or null when there are none and the stats mean nothing); appends
  // the n x classes() logits to *logits.
  EvalStats forward(const float* images, const int32_t* labels, int64_t n,
                    std::vector<float>* logits);
  // The logits [n, classes()] of images [n, C, H, W] in NCHW (normalised as the run's data),
  // batch by batch in layout().
  std::vector<float> logits(const float* nchw, int64_t n);

 private:
  TrainedNet() = default;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Net> net_;
  Arena weights_;
  std::vector<int32_t> no_labels_;
};

// `head` as dump(2) prints it, followed by each of `tables` (a name and an array) with one
// compact line per element: a 1000-class confusion matrix or a batch's logits stays one row a
// line instead of one number a line. Requires `head` an object without those names.
std::string json_with_rows(const nlohmann::json& head,
                           const std::vector<std::pair<std::string, nlohmann::json>>& tables);

// The input shape of an image as `layout` orders it: images[n, c, h, w] (NCHW) into `dst`.
void nchw_to_layout(const float* src, const Shape4& shape, Layout layout, float* dst);

// An inner product's weights [oc, c * h * w] read from a C x H x W input whose columns are in
// hwc order (an nhwc run), put in chw order (what PyTorch's and ONNX's flatten give).
std::vector<float> chw_inner_product(const OpDesc& d, const float* src);

}  // namespace easel::cli
