// The trainer's group-level pieces (run/groups.hpp).
#include "run/groups.hpp"

#include "devices/dropout_hash.hpp"
#include "engine/span_ops.hpp"
#include "run/trainer.hpp"

#include <algorithm>
#include <atomic>

namespace easel {

namespace {

// A failed allocation names its buffer class ("weights: cannot allocate ... (out of memory)").
template <class T>
Result<T> of_class(BufferClass c, Result<T> r) {
  if (r.ok()) return r;
  return Status(r.status().code(), std::string(buffer_class_name(c)) + ": " + r.status().message());
}

}  // namespace

Status build_group(Group& g, const NetSpec& spec, const TrainConfig& cfg, Layout layout,
                   const Placement& placement,
                   const std::function<MemKind(BufferClass)>& arena_kind, const Dataset& train,
                   int local, int total, const std::vector<int>& data_cpus) {
  Device& dev = *g.device;
  EASEL_RETURN_IF_ERROR(dev.attach());
  const bool gpu = !dev.is_host();
  const MemKind acts = gpu ? MemKind::device : placement[BufferClass::activations];
  // What the host side of a GPU group fills and the device reads: pinned, so copies are async.
  const MemKind host_io = gpu ? MemKind::pinned_host : placement[BufferClass::activations];
  EASEL_ASSIGN_OR_RETURN(g.net, Net::create(spec, cfg.batch, layout, dev, acts, local));
  g.draw_stream =
      dropout_hash::mix64(cfg.seed ^ dropout_hash::mix64(static_cast<uint64_t>(g.global_id) + 1));
  const int64_t n = g.net->params().total_floats();
  EASEL_ASSIGN_OR_RETURN(g.weights, of_class(BufferClass::weights,
                                             Arena::create(n, arena_kind(BufferClass::weights))));
  EASEL_ASSIGN_OR_RETURN(
      g.diff, of_class(BufferClass::grads, Arena::create(n, arena_kind(BufferClass::grads))));
  EASEL_ASSIGN_OR_RETURN(g.momentum, of_class(BufferClass::momentum,
                                              Arena::create(n, arena_kind(BufferClass::momentum))));
  if (gpu && is_host_kind(g.weights.kind())) {  // staged: the net's copies on the device
    EASEL_ASSIGN_OR_RETURN(g.dev_weights,
                           of_class(BufferClass::weights, Arena::create(n, MemKind::device)));
    EASEL_ASSIGN_OR_RETURN(g.dev_diff,
                           of_class(BufferClass::grads, Arena::create(n, MemKind::device)));
  }
  if (gpu && !is_host_kind(g.weights.kind())) g.kernels = &dev.kernels();
  if (Status s = check_augment(cfg.augment, train); !s.ok())
    return invalid_argument("--" + s.message());  // "augment '...': ..."
  DataThreads threads;
  threads.threads = std::max(1, cfg.data_threads);
  threads.cpus = data_cpus.empty() ? g.worker->spec().cpus : data_cpus;
  // A GPU's batches cross the host link as bytes and are normalised on the device.
  g.batch_bytes = gpu;
  const int64_t buffer = shuffle_buffer_for(train, cfg.shuffle_buffer);
  EASEL_ASSIGN_OR_RETURN(
      g.data, BatchStream::create(train, cfg.batch, layout, buffer > 0 ? g.global_id : g.id,
                                  buffer > 0 ? total : local, cfg.seed, cfg.prefetch, host_io,
                                  g.global_id, cfg.augment, threads, buffer, g.batch_bytes));
  const int64_t input_count = g.net->input_shape().count();
  const size_t image_bytes =
      static_cast<size_t>(input_count) * (g.batch_bytes ? sizeof(uint8_t) : sizeof(float));
  EASEL_ASSIGN_OR_RETURN(g.eval_images, Buffer::allocate(image_bytes, host_io));
  g.eval_labels.resize(static_cast<size_t>(cfg.batch));
  if (gpu) {
    EASEL_ASSIGN_OR_RETURN(g.dev_images, of_class(BufferClass::dataset,
                                                  Buffer::allocate(image_bytes, MemKind::device)));
    const DType act = g.net->activation_type();
    if (g.batch_bytes || act != DType::f32) {
      EASEL_ASSIGN_OR_RETURN(
          g.dev_input,
          of_class(BufferClass::activations,
                   Buffer::allocate(static_cast<size_t>(input_count) * dtype_bytes(act),
                                    MemKind::device)));
    }
    if (g.batch_bytes) {
      const std::vector<float> table = pixel_table(train, cfg.augment);
      EASEL_ASSIGN_OR_RETURN(
          g.dev_table, of_class(BufferClass::dataset,
                                Buffer::allocate(table.size() * sizeof(float), MemKind::device)));
      dev.upload(g.dev_table.data(), table.data(), table.size() * sizeof(float));
      dev.synchronize();  // the table's host copy goes now
    }
    EASEL_ASSIGN_OR_RETURN(
        g.dev_labels, of_class(BufferClass::dataset,
                               Buffer::allocate(static_cast<size_t>(cfg.batch) * sizeof(int32_t),
                                                MemKind::device)));
    EASEL_ASSIGN_OR_RETURN(g.eval_weights,
                           of_class(BufferClass::weights, Arena::create(n, MemKind::device)));
  }
  return {};
}

std::vector<EvalStats> evaluate_groups(Run& run, const Dataset& ds, const float* weights,
                                       int64_t images, const EvalTick& tick) {
  int p = run.total_groups();
  std::vector<EvalStats> part(static_cast<size_t>(run.size()));
  const int64_t batch = run.groups[0]->net->batch();
  // Group g evaluates batches first[g], first[g] + p, ...: by global id, or in one process
  // without a group given up (run_on_groups) by its place among the others.
  std::vector<int64_t> first(static_cast<size_t>(run.size()));
  int live = 0;
  for (auto& g : run.groups) {
    int64_t& f = first[static_cast<size_t>(g->id)];
    f = given_up(*g) ? INT64_MAX : run.ranks == 1 ? live : g->global_id;
    live += given_up(*g) ? 0 : 1;
  }
  if (run.ranks == 1) p = live;
  // GPU groups evaluate a copy of `weights` (host memory) on their own device.
  for (auto& g : run.groups)
    if (!g->device->is_host() && !given_up(*g))
      copy_bytes(g->eval_weights.data(), MemKind::device, weights, MemKind::dram,
                 static_cast<size_t>(run.arena_floats()) * sizeof(float));
  const int64_t count = images > 0 ? std::min(images, ds.count) : ds.count;
  // The j-th image evaluated (in long double: j * ds.count may pass 2^63).
  const auto image = [&](int64_t j) {
    if (count == ds.count) return j;
    const long double at = static_cast<long double>(j) * static_cast<long double>(ds.count) /
                           static_cast<long double>(count);
    return std::min(ds.count - 1, static_cast<int64_t>(at));
  };
  const int64_t nb = (count + batch - 1) / batch;
  int64_t mine = 0;  // this process's groups' images: batches g, g + P, ...
  for (const auto& g : run.groups)
    for (int64_t b = first[static_cast<size_t>(g->id)]; b < nb; b += p)
      mine += std::min(batch, count - b * batch);
  std::atomic<int64_t> done{0};
  run_on_groups(
      run,
      [&](Group& g) {
        std::vector<int64_t> idx(static_cast<size_t>(batch));
        EvalStats acc;
        for (int64_t b = first[static_cast<size_t>(g.id)]; b < nb; b += p) {
          const int64_t n = std::min(batch, count - b * batch);
          done.fetch_add(n, std::memory_order_relaxed);  // about to be: a tick is a glance
          if (values_ignored()) {  // simulated, compute injected: no forward pass (loss 0, acc 0)
            acc.count += n;
            continue;
          }
          for (int64_t i = 0; i < n; ++i)
            idx[static_cast<size_t>(i)] = image(b * batch + i);
          // Normalised as the training batches are, never cropped or flipped.
          if (g.batch_bytes)
            gather_batch_bytes(ds, idx.data(), n, g.net->layout(), g.eval_images.as<uint8_t>(),
                               g.eval_labels.data(), g.data->augment(), nullptr);
          else
            gather_batch(ds, idx.data(), n, g.net->layout(), g.eval_images.as<float>(),
                         g.eval_labels.data(), g.data->augment(), nullptr);
          EvalStats s;
          if (g.device->is_host()) {
            s = g.net->evaluate(g.eval_images.as<float>(), g.eval_labels.data(), n, weights);
          } else {
            // The batch's unused rows are never read (n <= batch), so only n rows are copied.
            const float* input = stage_batch(g, g.eval_images.data(), g.eval_labels.data(), n);
            s = g.net->evaluate(input, g.dev_labels.as<int32_t>(), n, g.eval_weights.data());
          }
          acc.loss_sum += s.loss_sum;
          acc.correct += s.correct;
          acc.count += s.count;
        }
        part[static_cast<size_t>(g.id)] = acc;
      },
      [&] {
        if (tick) tick(done.load(std::memory_order_relaxed), mine);
      });
  return part;
}

}  // namespace easel
