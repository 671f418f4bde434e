// The calibration's probe nets: two fixed nets, not any net a user trains, whose layers span the
// layer classes the model prices (tools/model/layer_rates.hpp: convolutions on the images, 3x3,
// 5x5 and 1x1 at 32x32 down to 2x2 spatial and 16 to 512 channels, batch norm, ReLU, LRN, max,
// average and global average pooling, element-wise add, concatenation, dropout, inner products).
// `easel bench --calibrate` times their layers (with the --nets nets') and fits the classes'
// rates to them, and times their group layouts for the machine's contention and oversubscription.
#pragma once

#include <vector>

#include "nets/net.hpp"

namespace easel::bench {

// "probe-narrow" (wide images, few channels) and "probe-wide" (small images, many channels),
// each on 3x32x32 images with 10 classes; about 25 MFLOP forward per image each.
std::vector<NetSpec> probe_nets();

}  // namespace easel::bench
