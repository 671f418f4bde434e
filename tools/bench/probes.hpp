// The calibration's probe nets: fixed nets, not any net a user trains, whose layers span the
// layer classes the model prices (tools/model/layer_rates.hpp: convolutions on the images, 3x3,
// 5x5, 7x7 and 1x1 at 32x32 down to 2x2 spatial and 16 to 512 channels, batch norm, ReLU, LRN
// on 16 and 64 channels, max, average and global average pooling, element-wise add,
// concatenation, dropout, inner products with weights in cache and streamed from memory).
// `easel bench --calibrate` times their layers (with the --nets nets') and fits the classes'
// rates to them, and times the scaling probes' group layouts for the machine's contention and
// oversubscription.
#pragma once

#include <vector>

#include "nets/net.hpp"

namespace easel::bench {

// "probe-narrow" (wide images, few channels) and "probe-wide" (small images, many channels),
// each on 3x32x32 images with 10 classes; about 25 MFLOP forward per image each.
std::vector<NetSpec> probe_nets();

// "probe-large": what the two above leave out, timed layer by layer only (no group layouts, no
// co-run: its 67 MB of weights would weigh on the contention): a 7x7 stem, an LRN across 64
// channels and a 4096 x 4096 inner product, whose weights stream from memory.
std::vector<NetSpec> layer_probe_nets();

}  // namespace easel::bench
