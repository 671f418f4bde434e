// `easel data pack IMAGE_FOLDER --out DIR [--shard-size 256MB] [--max-side 512] [--keep-order]
// [--shards-per-group G] [--overwrite]` (nets/data/pack.hpp; docs/DATA.md).
#include <cstdio>
#include <memory>
#include <string>

#include "nets/data/pack.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {
namespace {

struct PackFlags {
  std::string folder, out, shard_size = "256MB";
  int64_t max_side = 0, groups = 0;
  bool keep_order = false, overwrite = false;
};

int run_pack(const PackFlags& f) {
  PackOptions opt;
  opt.shard_bytes = parse_byte_size(f.shard_size);
  if (opt.shard_bytes < 0)
    return report(invalid_argument("--shard-size: '" + f.shard_size +
                                   "' is not a positive size (e.g. 256MB, 1GB, 65536)"),
                  Failure::request);
  if (f.max_side < 0 || f.max_side > 65535)
    return report(invalid_argument("--max-side: " + std::to_string(f.max_side) +
                                   " is out of range [0, 65535] (0: images copied as they are)"),
                  Failure::request);
  if (f.groups < 0 || f.groups > 65536)
    return report(invalid_argument("--shards-per-group: " + std::to_string(f.groups) +
                                   " is out of range [0, 65536] (the groups that will read "
                                   "the shards; 0: shards filled to --shard-size)"),
                  Failure::request);
  if (f.out.empty())
    return report(invalid_argument("--out: give the shards' directory"), Failure::request);
  opt.max_side = f.max_side;
  opt.shuffle = !f.keep_order;
  opt.groups = f.groups;
  opt.overwrite = f.overwrite;
  PackStats stats;
  const Status st = pack_image_folder(f.folder, f.out, opt, &stats);
  if (!st.ok()) return report(st, failure_of(st));  // bad data is a bad request, as train's
  const std::string replaced =
      stats.replaced > 0
          ? " (replacing " + std::to_string(stats.replaced) + " files of an earlier pack)"
          : "";
  std::printf(
      "packed %lld images (%lld resized to a longer side of %lld) into %lld shards, %.1f MB, "
      "in %s%s\n",
      static_cast<long long>(stats.images), static_cast<long long>(stats.resized),
      static_cast<long long>(f.max_side), static_cast<long long>(stats.shards),
      static_cast<double>(stats.bytes) / 1e6, f.out.c_str(), replaced.c_str());
  return 0;
}

}  // namespace

DataCommands add_data_commands(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "prepare data sets (easel data pack)");
  data->require_subcommand(1);
  CLI::App* pack = data->add_subcommand(
      "pack",
      "write an image folder (train/CLASS/*, val/CLASS/*) as tar shards that --data "
      "shards:DIR reads (KEY.jpg + KEY.cls; docs/DATA.md)");
  auto f = std::make_shared<PackFlags>();
  pack->add_option("IMAGE_FOLDER", f->folder, "the image folder")->required();
  pack->add_option("--out", f->out,
                   "the shards' directory (train-NNNNNN.tar, val-NNNNNN.tar): new or empty, or "
                   "with --overwrite holding an earlier pack's shards")
      ->required();
  pack->add_flag("--overwrite", f->overwrite,
                 "replace the shards an earlier pack wrote in --out (only those: anything else "
                 "there is refused); the old ones go once the new ones are all written");
  pack->add_option("--shard-size", f->shard_size, "bytes per shard (K/M/G: powers of 1024)")
      ->capture_default_str();
  pack->add_option("--max-side", f->max_side,
                   "re-encode images whose longer side is larger to this side (JPEG quality "
                   "90); 0: copy every image as it is")
      ->capture_default_str();
  pack->add_flag("--keep-order", f->keep_order,
                 "write the training images in the folder's list order (class by class), not "
                 "shuffled across the shards");
  pack->add_option("--shards-per-group", f->groups,
                   "G: the training shards split evenly among G groups (or any number dividing "
                   "G) that read them through a shuffle buffer: a multiple of G shards, their "
                   "samples within one of each other, --shard-size their mean; 0: each shard "
                   "filled to --shard-size")
      ->capture_default_str();
  return [pack, f]() { return pack->parsed() ? run_pack(*f) : -1; };
}

}  // namespace easel::cli
