// `easel eval RUN_DIR [--data SPEC]`: a trained run's model (tools/cli/trained_run.hpp) over a
// data set's test (or training) split, as the trainer's evaluations run it: accuracy, top-5
// accuracy (more than 5 classes), mean loss and the confusion matrix, as text or one JSON
// object, and the matrix as a PNG picture.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nets/data/augment.hpp"
#include "nets/data/dataset.hpp"
#include "nets/data/image_decode.hpp"
#include "tools/cli/cli.hpp"
#include "tools/cli/trained_run.hpp"

namespace easel::cli {

namespace {

using nlohmann::json;

struct EvalFlags {
  std::string dir, data, split = "test", weights = "evaluated", confusion;
  bool json = false;
};

// Most classes whose confusion matrix the text shows.
constexpr size_t kTextClasses = 20;

struct EvalResult {
  int64_t images = 0, correct = 0, top5 = 0;
  double loss_sum = 0;
  std::vector<std::vector<int64_t>> confusion;  // [true class][predicted class]
};

// The first largest logit's class (the loss op's choice: ties go to the lower class).
int64_t argmax(const float* logits, int64_t k) {
  return std::max_element(logits, logits + k) - logits;
}

// Tallies one batch's logits [n, k] against its labels.
void tally(const std::vector<float>& logits, const int32_t* labels, int64_t n, int64_t k,
           EvalResult* r) {
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits.data() + i * k;
    const float mine = z[labels[i]];
    const int64_t above = std::count_if(z, z + k, [mine](float v) { return v > mine; });
    r->top5 += above < 5 ? 1 : 0;
    ++r->confusion[static_cast<size_t>(labels[i])][static_cast<size_t>(argmax(z, k))];
  }
}

// Every image of `ds` through the net, batch by batch, normalised as the run's test batches
// are (its --augment's normalisation, never cropped or flipped).
EvalResult evaluate_all(TrainedNet& net, const Dataset& ds, const Augment& augment) {
  const int64_t batch = net.batch(), k = net.classes();
  EvalResult r;
  r.confusion.assign(static_cast<size_t>(k), std::vector<int64_t>(static_cast<size_t>(k), 0));
  std::vector<float> images(static_cast<size_t>(net.input_shape().count()));
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<int64_t> idx(static_cast<size_t>(batch));
  std::vector<float> logits;
  for (int64_t b = 0; b < ds.count; b += batch) {
    const int64_t n = std::min(batch, ds.count - b);
    for (int64_t i = 0; i < n; ++i)
      idx[static_cast<size_t>(i)] = b + i;
    gather_batch(ds, idx.data(), n, net.layout(), images.data(), labels.data(), augment, nullptr);
    logits.clear();
    const EvalStats s = net.forward(images.data(), labels.data(), n, &logits);
    r.images += s.count;
    r.correct += s.correct;
    r.loss_sum += s.loss_sum;
    tally(logits, labels.data(), n, k, &r);
  }
  return r;
}

// The matrix as a picture: one square of `cell` pixels per entry, dark as its share of its
// row (the true class's images), white for none; a grey line between the cells.
RgbImage confusion_picture(const std::vector<std::vector<int64_t>>& m) {
  const int64_t k = static_cast<int64_t>(m.size());
  const int64_t cell = std::clamp<int64_t>(512 / std::max<int64_t>(k, 1), 2, 32);
  RgbImage img;
  img.width = img.height = k * cell;
  img.rgb.assign(static_cast<size_t>(img.width * img.height * 3), 160);
  for (int64_t t = 0; t < k; ++t) {
    int64_t row = 0;
    for (int64_t v : m[static_cast<size_t>(t)])
      row += v;
    for (int64_t p = 0; p < k; ++p) {
      const double share =
          row > 0 ? static_cast<double>(m[static_cast<size_t>(t)][static_cast<size_t>(p)]) / row
                  : 0;
      const auto shade = static_cast<uint8_t>(255 - static_cast<int>(share * 255 + 0.5));
      for (int64_t y = t * cell; y < (t + 1) * cell - 1; ++y)
        for (int64_t x = p * cell; x < (p + 1) * cell - 1; ++x)
          for (int c = 0; c < 3; ++c)
            img.rgb[static_cast<size_t>((y * img.width + x) * 3 + c)] = shade;
    }
  }
  return img;
}

Status write_confusion(const std::string& path, const std::vector<std::vector<int64_t>>& m) {
  std::vector<uint8_t> png;
  EASEL_RETURN_IF_ERROR(encode_png(confusion_picture(m), &png));
  if (!write_atomic(path, std::string(png.begin(), png.end())))
    return io_error("--confusion " + path + ": cannot write");
  return {};
}

std::string weights_text(const TrainedRun& run) {
  return run.weights_name + (run.weights_note.empty() ? "" : " (" + run.weights_note + ")") +
         " of " + run.file + " at step " + std::to_string(run.step);
}

void print_result(const EvalFlags& f, const TrainedRun& run, const std::string& spec,
                  const EvalResult& r) {
  const double n = static_cast<double>(std::max<int64_t>(r.images, 1));
  const size_t k = r.confusion.size();
  std::printf("run        %s (net %s)\nweights    %s\ndata       %s, %s split, %lld images\n",
              run.dir.c_str(), run.cfg.net.c_str(), weights_text(run).c_str(), spec.c_str(),
              f.split.c_str(), static_cast<long long>(r.images));
  std::printf("accuracy   %.4f (%lld correct)\n", static_cast<double>(r.correct) / n,
              static_cast<long long>(r.correct));
  if (k > 5) std::printf("top-5      %.4f\n", static_cast<double>(r.top5) / n);
  std::printf("loss       %.4f (mean cross-entropy)\n", r.loss_sum / n);
  if (k > kTextClasses) {
    std::printf("confusion  %zu x %zu: see --json or --confusion FILE.png\n", k, k);
    return;
  }
  std::printf("confusion  rows: true class, columns: predicted\n      ");
  for (size_t p = 0; p < k; ++p)
    std::printf(" %6zu", p);
  std::printf("\n");
  for (size_t t = 0; t < k; ++t) {
    std::printf("  %4zu", t);
    for (int64_t v : r.confusion[t])
      std::printf(" %6lld", static_cast<long long>(v));
    std::printf("\n");
  }
}

json result_json(const EvalFlags& f, const TrainedRun& run, const std::string& spec,
                 const EvalResult& r) {
  const double n = static_cast<double>(std::max<int64_t>(r.images, 1));
  return {{"run", run.dir},
          {"net", run.cfg.net},
          {"weights", run.weights_name},
          {"step", run.step},
          {"data", spec},
          {"split", f.split},
          {"images", r.images},
          {"correct", r.correct},
          {"accuracy", static_cast<double>(r.correct) / n},
          {"top5_accuracy",
           r.confusion.size() > 5 ? json(static_cast<double>(r.top5) / n) : json(nullptr)},
          {"loss", r.loss_sum / n}};
}

int run_eval(const EvalFlags& f) {
  const auto fail = [](const Status& st) { return report(st, failure_of(st)); };
  if (f.split != "test" && f.split != "train")
    return fail(invalid_argument("--split '" + f.split + "': test or train"));
  if (!f.confusion.empty() && !f.confusion.ends_with(".png"))
    return fail(invalid_argument("--confusion " + f.confusion + ": a .png file expected"));
  auto run = open_trained_run(f.dir, f.weights);
  if (!run.ok()) return fail(run.status());
  const std::string spec = f.data.empty() ? run->cfg.data : f.data;
  auto data = load_run_data(*run, spec, "--data " + spec);
  if (!data.ok()) return fail(data.status());
  const Dataset& ds = f.split == "test" ? data->test : data->train;
  auto net =
      TrainedNet::create(*run, {ds.channels, ds.height, ds.width, ds.classes}, "--data " + spec);
  if (!net.ok()) return fail(net.status());
  const EvalResult r = evaluate_all(**net, ds, run->cfg.augment);
  if (!f.confusion.empty())
    if (Status st = write_confusion(f.confusion, r.confusion); !st.ok()) return fail(st);
  if (f.json)
    std::printf(
        "%s\n",
        json_with_rows(result_json(f, *run, spec, r), {{"confusion", r.confusion}}).c_str());
  else
    print_result(f, *run, spec, r);
  return 0;
}

}  // namespace

EvalCommand add_eval_command(CLI::App& app) {
  auto f = std::make_shared<EvalFlags>();
  CLI::App* eval = app.add_subcommand(
      "eval",
      "evaluate a trained run's model on a data set: accuracy, top-5, loss, confusion matrix");
  eval->add_option("RUN_DIR", f->dir, "the run directory (easel train --out)")->required();
  eval->add_option("--data", f->data,
                   "the data set, as easel train --data takes it (default: the run's own)");
  eval->add_option("--split", f->split, "which split: test or train")->capture_default_str();
  eval->add_option("--weights", f->weights, kWeightsHelp)->capture_default_str();
  eval->add_flag("--json", f->json, "print one JSON object (confusion: rows of counts)");
  eval->add_option("--confusion", f->confusion,
                   "also write the confusion matrix as a PNG picture (rows: true class)");
  return [eval, f]() { return eval->parsed() ? run_eval(*f) : -1; };
}

}  // namespace easel::cli
