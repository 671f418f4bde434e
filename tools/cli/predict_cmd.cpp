// `easel predict RUN_DIR INPUT...`: a trained run's model (tools/cli/trained_run.hpp) on images
// (PNG, JPEG: decoded, resized and normalised as the run's data) or .npy batches (N x C x H x
// W float32, already normalised): each row's top classes with their softmax probabilities, or
// one JSON object with every row's logits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nets/data/augment.hpp"
#include "nets/data/dataset.hpp"
#include "nets/data/image_decode.hpp"
#include "nets/data/npy.hpp"
#include "nets/data/stream_source.hpp"
#include "tools/cli/cli.hpp"
#include "tools/cli/trained_run.hpp"

namespace easel::cli {

namespace {

using nlohmann::json;

struct PredictFlags {
  std::string dir, weights = "evaluated";
  std::string net;  // --net FILE.onnx: the file's net and weights, in place of RUN_DIR
  std::vector<std::string> inputs;
  int top = 3;
  bool json = false;
};

// The rows to classify, NCHW floats as the net reads them, each named.
struct Rows {
  std::vector<std::string> names;
  std::vector<float> values;
};

// Largest image file read (a photo is a few MB).
constexpr uintmax_t kMaxImageFile = uintmax_t{256} << 20;

Result<std::vector<uint8_t>> read_file(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  std::ifstream f(path, std::ios::binary);
  if (ec || !f) return not_found(path + ": cannot open");
  if (size > kMaxImageFile)
    return data_error(path + ": " + std::to_string(size) + " bytes, larger than an image read");
  std::vector<uint8_t> bytes(size);
  if (!f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    return io_error(path + ": read failed");
  return bytes;
}

// Whether the run's data was streamed (nets/data/stream_source.hpp: an image folder or shards
// read for a random-resized crop, shards without :SIDE), whose test images are the centre of
// the image resized to side * 256 / 224, not decoded once at the side (DIR:SIDE).
bool streamed(const TrainConfig& cfg) {
  if (cfg.augment.resized_crop > 0) return true;
  if (!cfg.data.starts_with("shards:")) return false;
  const std::string tail = cfg.data.substr(cfg.data.rfind(':') + 1);
  return tail.empty() ||
         !std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An image file as the run's data holds its images: the C x H x W bytes (grey by PIL's "L"
// weights for one channel); one that is not H x W resized and centre-cropped as the run's test
// images are (`stream`: streamed()'s box, else nets/data/image_decode.hpp's resize_center_crop).
Result<std::vector<uint8_t>> image_pixels(const std::string& path, const Shape4& in,
                                          const Augment& augment, bool stream) {
  EASEL_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, read_file(path));
  if (in.c != 1 && in.c != 3)
    return invalid_argument(path + ": the net takes " + std::to_string(in.c) +
                            "-channel images; an image file gives 1 or 3 (pass a .npy)");
  const int64_t hw = in.h * in.w;
  std::vector<uint8_t> chw(static_cast<size_t>(3 * hw));
  if (stream && in.c == 3 && in.h == in.w) {
    BoxDecode how;
    how.side = in.h;
    const int64_t resize =
        augment.resized_crop > 0 ? augment.eval_resize() : (in.h * 256 + 112) / 224;
    how.choose = [resize, &in](int64_t w, int64_t h) { return center_box(w, h, resize, in.h); };
    EASEL_RETURN_IF_ERROR(decode_box(bytes.data(), bytes.size(), path, how, chw.data()));
    return chw;
  }
  RgbImage img;
  EASEL_RETURN_IF_ERROR(decode_image(bytes.data(), bytes.size(), path, 0, &img));
  if (img.width == in.w && img.height == in.h) {
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t c = 0; c < 3; ++c)
        chw[static_cast<size_t>(c * hw + p)] = img.rgb[static_cast<size_t>(p * 3 + c)];
  } else if (in.h == in.w) {
    resize_center_crop(img, in.h, chw.data());
  } else {
    return invalid_argument(path + ": " + std::to_string(img.width) + "x" +
                            std::to_string(img.height) + " pixels, the net takes " +
                            std::to_string(in.w) + "x" + std::to_string(in.h) +
                            " (not square: " + "resize it first)");
  }
  if (in.c == 3) return chw;
  std::vector<uint8_t> grey(static_cast<size_t>(hw));
  for (size_t p = 0; p < grey.size(); ++p)
    grey[p] = static_cast<uint8_t>(
        (chw[p] * 19595u + chw[hw + p] * 38470u + chw[2 * hw + p] * 7471u + 0x8000u) >> 16);
  return grey;
}

// An image's pixels normalised as the run's data is (gather_batch on a set of that one image).
Status add_image(const std::string& path, const Shape4& in, const TrainConfig& cfg, Rows* rows) {
  const Augment& augment = cfg.augment;
  EASEL_ASSIGN_OR_RETURN(const std::vector<uint8_t> pixels,
                         image_pixels(path, in, augment, streamed(cfg)));
  Dataset one;
  one.count = 1, one.channels = in.c, one.height = in.h, one.width = in.w;
  EASEL_ASSIGN_OR_RETURN(one.pixels, Buffer::allocate(pixels.size(), MemKind::dram));
  std::copy(pixels.begin(), pixels.end(), one.pixels.as<uint8_t>());
  one.labels = {0};
  const int64_t idx = 0;
  int32_t label = 0;
  const size_t at = rows->values.size();
  rows->values.resize(at + pixels.size());
  gather_batch(one, &idx, 1, Layout::nchw, rows->values.data() + at, &label, augment, nullptr);
  rows->names.push_back(path);
  return {};
}

Status add_npy(const std::string& path, const Shape4& in, Rows* rows) {
  EASEL_ASSIGN_OR_RETURN(const NpyArray a, read_npy(path, 4));
  if (a.shape[1] != in.c || a.shape[2] != in.h || a.shape[3] != in.w)
    return invalid_argument(
        path + ": shape (" + std::to_string(a.shape[0]) + ", " + std::to_string(a.shape[1]) + ", " +
        std::to_string(a.shape[2]) + ", " + std::to_string(a.shape[3]) + "): the net takes N x " +
        std::to_string(in.c) + " x " + std::to_string(in.h) + " x " + std::to_string(in.w));
  rows->values.insert(rows->values.end(), a.values.begin(), a.values.end());
  for (int64_t i = 0; i < a.shape[0]; ++i)
    rows->names.push_back(path + "[" + std::to_string(i) + "]");
  return {};
}

// The `top` most probable classes of logits z[k], with softmax's probabilities.
json top_classes(const float* z, int64_t k, int top) {
  const double most = *std::max_element(z, z + k);
  double sum = 0;
  for (int64_t c = 0; c < k; ++c)
    sum += std::exp(static_cast<double>(z[c]) - most);
  std::vector<int64_t> order(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c)
    order[static_cast<size_t>(c)] = c;
  std::stable_sort(order.begin(), order.end(), [z](int64_t a, int64_t b) { return z[a] > z[b]; });
  json out = json::array();
  for (int64_t i = 0; i < std::min<int64_t>(top, k); ++i) {
    const int64_t c = order[static_cast<size_t>(i)];
    out.push_back({{"class", c}, {"probability", std::exp(z[c] - most) / sum}});
  }
  return out;
}

// RUN_DIR's model (--weights), or with --net the file's; refused as a line for report().
Result<TrainedRun> open_model(const PredictFlags& f) {
  if (!f.net.empty()) {
    if (f.weights != "evaluated")
      return invalid_argument("--weights " + f.weights +
                              ": takes a run directory's models, not --net's file");
    return open_net_file(f.net);
  }
  EASEL_ASSIGN_OR_RETURN(TrainedRun run, open_trained_run(f.dir, f.weights));
  if (!run.input)
    return not_found(f.dir +
                     "/summary.json: no input shape (a run still going, killed, or from "
                     "an older easel): use easel eval");
  return run;
}

int run_predict(PredictFlags f) {
  const auto fail = [](const Status& st) { return report(st, failure_of(st)); };
  if (f.top < 1) return fail(invalid_argument("--top " + std::to_string(f.top) + ": at least 1"));
  // With --net every positional is an input (CLI11 gives the first to RUN_DIR).
  if (!f.net.empty() && !f.dir.empty()) f.inputs.insert(f.inputs.begin(), f.dir);
  if (f.net.empty() && f.dir.empty())
    return fail(
        invalid_argument("RUN_DIR: give a run directory (easel train --out) or --net "
                         "FILE.onnx"));
  if (f.inputs.empty())
    return fail(invalid_argument("INPUT: give at least one image or .npy file"));
  auto run = open_model(f);
  if (!run.ok()) return fail(run.status());
  const std::string what = f.net.empty() ? f.dir + "/summary.json" : "--net " + f.net;
  auto net = TrainedNet::create(*run, *run->input, what);
  if (!net.ok()) return fail(net.status());
  const Shape4 in = (*net)->input_shape();
  Rows rows;
  for (const std::string& path : f.inputs) {
    const Status st =
        path.ends_with(".npy") ? add_npy(path, in, &rows) : add_image(path, in, run->cfg, &rows);
    if (!st.ok()) return fail(st);
  }
  const std::vector<float> logits =
      (*net)->logits(rows.values.data(), static_cast<int64_t>(rows.names.size()));
  const int64_t k = (*net)->classes();
  json out = f.net.empty()
                 ? json{{"run", run->dir}, {"weights", run->weights_name}, {"step", run->step}}
                 : json{{"net", f.net}, {"weights", run->weights_name}};
  out["inputs"] = rows.names;
  json rows_logits = json::array(), top = json::array();
  for (size_t i = 0; i < rows.names.size(); ++i) {
    const float* z = logits.data() + static_cast<int64_t>(i) * k;
    rows_logits.push_back(std::vector<float>(z, z + k));
    top.push_back(top_classes(z, k, f.top));
  }
  if (f.json) {
    std::printf("%s\n", json_with_rows(out, {{"logits", rows_logits}, {"top", top}}).c_str());
    return 0;
  }
  for (size_t i = 0; i < rows.names.size(); ++i) {
    std::printf("%s:", rows.names[i].c_str());
    for (const json& t : top[i])
      std::printf("  %lld (%.4f)", static_cast<long long>(t["class"].get<int64_t>()),
                  t["probability"].get<double>());
    std::printf("\n");
  }
  return 0;
}

}  // namespace

PredictCommand add_predict_command(CLI::App& app) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* predict = app.add_subcommand(
      "predict",
      "classify images (PNG, JPEG) or .npy batches with a trained run's model, or with an ONNX "
      "file's (--net)");
  predict->add_option("RUN_DIR", f->dir, "the run directory (easel train --out); none with --net");
  predict->add_option("INPUT", f->inputs,
                      "image files (resized and normalised as the run's data; with --net, pixel "
                      "/ 256) or .npy files (N x C x H x W float32, already normalised)");
  predict->add_option("--net", f->net,
                      "an ONNX file: its net and the weights it carries, in place of RUN_DIR");
  predict->add_option("--top", f->top, "how many classes to show per input")->capture_default_str();
  predict->add_option("--weights", f->weights, kWeightsHelp)->capture_default_str();
  predict->add_flag("--json", f->json, "print one JSON object: inputs, logits (a row each), top");
  return [predict, f]() { return predict->parsed() ? run_predict(*f) : -1; };
}

}  // namespace easel::cli
