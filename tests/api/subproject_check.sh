#!/bin/sh
# Uses easel as a Meson subproject of a tiny project (subprojects/easel a symlink to this source
# tree), which gets it with dependency('easel') through meson.override_dependency, builds
# examples/train_lenet.cpp against it and runs it for a few iterations on synthetic data.
# easel compiles again inside it (-Deasel:tests=false -Deasel:cuda=disabled): minutes on two
# cores, so the test 'subproject' runs it only with EASEL_SUBPROJECT_CHECK=1 (CI sets it) and
# skips otherwise; the script may also be run by hand.
#   subproject_check.sh [--if-enabled] SOURCE_ROOT [WORK_DIR]
# --if-enabled: skip (exit 77) unless EASEL_SUBPROJECT_CHECK=1. WORK_DIR (default: a temporary
# directory, removed afterwards) keeps the tiny project's build, so that a second run only
# rebuilds what changed.
set -eu
if [ "${1:-}" = --if-enabled ]; then
  shift
  if [ "${EASEL_SUBPROJECT_CHECK:-0}" != 1 ]; then
    echo "subproject_check: skipped (set EASEL_SUBPROJECT_CHECK=1: it compiles easel again)"
    exit 77
  fi
fi
src=$1
if [ $# -ge 2 ]; then
  work=$2
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
fail() { echo "subproject_check: $*" >&2; exit 1; }

proj="$work/proj"
mkdir -p "$proj/subprojects"
ln -sfn "$src" "$proj/subprojects/easel"
cp "$src/examples/train_lenet.cpp" "$proj/"
cat > "$proj/meson.build" <<'MESON'
project('uses-easel', 'cpp', default_options: ['cpp_std=c++20', 'buildtype=release'])
# No easel installed: dependency('easel') falls back to subprojects/easel, whose
# meson.override_dependency('easel', ...) provides it.
executable('train_lenet', 'train_lenet.cpp', dependencies: dependency('easel'))
MESON
if [ ! -f "$proj/b/build.ninja" ]; then
  meson setup "$proj/b" "$proj" -Deasel:tests=false -Deasel:cuda=disabled > "$work/setup.log" 2>&1 ||
    { cat "$work/setup.log" >&2; fail "meson setup failed"; }
fi
ninja -C "$proj/b" train_lenet > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; fail "build failed"; }
cd "$work"
"$proj/b/train_lenet" 10 centre.bin synthetic:512 > out.txt 2>&1 || { cat out.txt >&2; fail "the example failed"; }
grep -q '^step 10  epoch ' out.txt || { cat out.txt >&2; fail "no evaluation at step 10"; }
grep -q '^done: sync-easgd on lenet, 2 groups, 10 steps' out.txt || { cat out.txt >&2; fail "no summary"; }
[ "$(head -c 8 centre.bin)" = "EASELW1" ] || fail "centre.bin has no EASELW1 header"
echo "subproject_check: ok"
