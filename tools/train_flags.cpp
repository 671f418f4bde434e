#include "tools/cli.hpp"

namespace easel::cli {

std::vector<std::string> add_train_flags(CLI::App& app, TrainConfig& c) {
  auto opt = [&](const char* name, auto& field, const char* help) {
    app.add_option(name, field, help)->capture_default_str();
  };
  opt("--net", c.net, "model: lenet, cifar10-quick (easel list)");
  opt("--data", c.data,
      "fashion-mnist, mnist, a directory of IDX files, or synthetic[:N[:CxHxW[:K]]]");
  opt("--algo", c.algo, "algorithm (easel list)");
  opt("--epochs", c.epochs, "epochs to train (ignored when --iterations > 0)");
  opt("--iterations", c.iterations, "iterations to train (each group steps once per iteration)");
  opt("--batch", c.batch, "mini-batch size per group");
  opt("--lr", c.lr, "base learning rate eta");
  opt("--lr-policy", c.lr_policy, "fixed, step, inv, exp, poly (Caffe's definitions)");
  opt("--lr-gamma", c.lr_gamma, "gamma of the step, inv and exp policies");
  opt("--lr-power", c.lr_power, "power of the inv and poly policies");
  opt("--lr-stepsize", c.lr_stepsize, "iterations per step of the step policy");
  opt("--momentum", c.momentum,
      "momentum mu (msgd, sync-sgd, async-msgd) or the groups' delta (async-measgd, sync-easgd)");
  opt("--weight-decay", c.weight_decay, "L2 weight decay");
  app.add_option("--seed", c.seed, "seed of the initial weights, shuffling and dropout")
      ->capture_default_str()
      ->check(
          [](const std::string& v) -> std::string {  // no sign, no wrap-around past 2^64 - 1
            const bool digits = !v.empty() && v.size() <= 19 &&
                                v.find_first_not_of("0123456789") == std::string::npos;
            return digits ? "" : "'" + v + "' is not a whole number from 0 to 10^19 - 1";
          },
          "SEED");
  opt("--groups", c.plan.groups, "worker groups: a count, 'auto' (one per core) or 'numa'");
  opt("--threads-per-group", c.plan.threads_per_group, "threads in each group (0: derive)");
  opt("--threads", c.plan.threads,
      "total threads (0: all cores; with --groups or --cpus it must agree)");
  opt("--cpus", c.plan.cpu_lists,
      "explicit cpu list per group, e.g. '0-3;4-7' (sets the groups and their threads)");
  app.add_flag("--oversubscribe", c.plan.oversubscribe, "allow more threads than cores");
  opt("--placement", c.placement,
      "memory kind per buffer class: KIND or CLASS=KIND,... (classes: all, centre, weights, grads, "
      "momentum, activations, dataset; kinds: dram, hbw, hbw-preferred, interleave, and with "
      "--device cuda pinned-host for the data set)");
  opt("--target-accuracy", c.target_accuracy, "stop when the test accuracy reaches it (0: never)");
  opt("--eval-every", c.eval_every, "iterations between test evaluations (0: once per epoch)");
  opt("--out", c.out, "output directory (default runs/DATE-TIME-ALGO)");
  app.add_flag("--overwrite", c.overwrite, "allow --out to hold the results of an earlier run");
  opt("--layout", c.layout,
      "activation layout: auto (nhwc on the CPU, nchw on GPUs), nhwc or nchw");
  opt("--impl", c.impl, "kernels: fast (oneDNN, reference fallback) or ref");
  opt("--precision", c.precision,
      "fast-kernel arithmetic: fp32 or bf16 (bf16 compute; f32 master weights, gradients, "
      "momentum)");
  opt("--device", c.device,
      "where the groups run: cpu, cuda (one worker group per GPU; sgd and msgd: the first) or "
      "cuda:0,1,... (those GPUs)");
  opt("--rho", c.rho, "EASGD elastic coefficient rho: alpha = lr * rho (-1: unset)");
  opt("--alpha", c.alpha,
      "fixed EASGD moving rate alpha (-1: unset; both unset: alpha = 0.9 / groups)");
  opt("--tau", c.tau, "EASGD communication period (steps between exchanges)");
  opt("--momentum-form", c.momentum_form,
      "group momentum of async-measgd and sync-easgd: nesterov or heavy-ball");
  opt("--reduce", c.reduce, "sync-easgd exchange: tree (collective) or serial (P exchanges)");
  opt("--pack", c.pack, "exchange: single (one message over the arena) or per-layer");
  opt("--overlap", c.overlap,
      "sync-easgd: overlap the centre exchange with the next step (on/off)");
  opt("--collective", c.collective, "shared-memory collective: tree or ring");
  opt("--progress", c.progress, "auto, bar, lines or none");
  app.add_flag("--prefetch,!--no-prefetch", c.prefetch, "prepare batches ahead on a helper thread");
  app.add_flag("--checkpoint,!--no-checkpoint", c.checkpoint,
               "write checkpoint.bin to --out after every evaluation (for --resume)");
  opt("--resume", c.resume,
      "continue the run in this directory (an earlier --out) from its checkpoint.bin, with its "
      "config.json; only --iterations, --epochs, --target-accuracy, --eval-every, --progress, "
      "--log-level, --prefetch and --checkpoint may change");
  opt("--log-level", c.log_level, "debug, info, warn, error (default: EASEL_LOG or info)");
  return {"oversubscribe", "overwrite", "prefetch", "checkpoint"};
}

std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames())
      out.push_back(n);
  }
  return out;
}

}  // namespace easel::cli
