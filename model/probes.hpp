// The calibration's probe nets: fixed nets, not any net a user trains, whose layers span the
// layer classes the model prices (model/layer_rates.hpp) over their shapes in general:
// convolutions on one- and three-channel images (3x3, 5x5 and 7x7, strides 1 and 2), 3x3, 5x5
// and 1x1 ones on maps from 32x32 to 1x1 with 8 to 640 channels, batch norm, ReLU, LRN across
// and within channels, max, average and global average pooling, element-wise add,
// concatenation, dropout, inner products of 88 to 2560 outputs with weights in cache and
// streamed from memory. None of their convolutions or inner products has the shape of one in a
// net the model is checked against (tests/tools/test_layer_rates.cpp).
// `easel bench --calibrate` times their layers (with the --nets nets') and fits the classes'
// rates to them, and times the scaling probes' group layouts for the machine's contention and
// oversubscription.
#pragma once

#include <vector>

#include "nets/net.hpp"

namespace easel::model {

// "probe-narrow" (wide images, few channels) and "probe-wide" (small images, many channels),
// each on 3x32x32 images with 10 classes; about 22 and 40 MFLOP forward per image.
std::vector<NetSpec> probe_nets();

// The layer probes, timed layer by layer only (no group layouts, no co-run: their weights, up to
// 31 MB, would weigh on the contention): "probe-grid-colour" (3x32x32: three stems at once, a
// convolution of each kernel size at every map size from 32x32 to 1x1), "probe-grid-grey"
// (1x28x28: stems on one channel, maps of 28 to 4, an inner product over a 4x4 map whose 31 MB
// of weights stream) and "probe-fc" (inner products of 88 to 2560 outputs, two streamed).
std::vector<NetSpec> layer_probe_nets();

}  // namespace easel::model
