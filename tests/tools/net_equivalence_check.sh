#!/bin/sh
# The net equivalence check (tools/net-equivalence) on the two smallest nets, lenet and
# cifar10-full: one easel training step against PyTorch's with the same weights and batch.
# Skips (77) when no python3 imports torch and torchvision.
#   net_equivalence_check.sh BUILD_ROOT SOURCE_ROOT
set -eu
exec "$2/tools/net-equivalence" --build "$1" lenet cifar10-full
