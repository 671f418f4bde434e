#!/bin/sh
# Installs this build into a temporary DESTDIR, builds examples/train_lenet.cpp against the
# installed package with `pkg-config --cflags --libs easel` only, runs it for a few iterations
# on Fashion-MNIST and checks what it printed and the weights file it saved; then builds and runs
# it against the build tree (meson-uninstalled/easel-uninstalled.pc), as a user of an uninstalled
# build would.
#   install_check.sh BUILD_ROOT SOURCE_ROOT [PYTHON]
# With PYTHON (the one the Python module was built for), the installed module is checked too.
set -eu
build=$1
src=$2
python=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_check: $*" >&2; [ -f "$tmp/out.txt" ] && cat "$tmp/out.txt" >&2; exit 1; }

meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "meson install failed"; }
pc=$(find "$tmp/root" -name easel.pc | head -n 1)
[ -n "$pc" ] || fail "no easel.pc was installed"
for h in easel.hpp status.hpp config.hpp data.hpp run.hpp; do
  [ -n "$(find "$tmp/root" -path "*/include/easel/$h")" ] || fail "include/easel/$h was not installed"
done

# The installed package only: its .pc, relocated into the DESTDIR by the sysroot.
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
flags=$(pkg-config --cflags --libs easel)
case "$flags" in *"$src"*|*"$build"*) fail "pkg-config points into the source or build tree: $flags" ;; esac
# A build under the sanitizers (tools/sanitize) installs a sanitized libeasel: the program that
# links it takes the same runtimes (the user's own flags, not the package's).
san=$(meson introspect "$build" --buildoptions 2>/dev/null | tr '{' '\n' |
  sed -n 's/.*"name": "b_sanitize", "value": "\([^"]*\)".*/\1/p' | head -n 1)
extra=""
[ -n "$san" ] && [ "$san" != none ] && extra="-fsanitize=$san"
${CXX:-c++} -std=c++20 -O1 $extra "$src/examples/train_lenet.cpp" $flags -o "$tmp/train_lenet" ||
  fail "the example does not build with: $flags"
export LD_LIBRARY_PATH="$(dirname "$(dirname "$pc")")"  # the .pc is in LIBDIR/pkgconfig
ldd "$tmp/train_lenet" | grep -q "libeasel.so.* => $tmp/root" || fail "the example does not run on the installed libeasel"

cd "$tmp"
./train_lenet 20 centre.bin fashion-mnist > out.txt 2>&1 || fail "the example failed"
grep -q '^data: 60000 training and 10000 test images$' out.txt || fail "no data line"
grep -q '^step 10  epoch ' out.txt || fail "no evaluation at step 10"
grep -q '^step 20  epoch ' out.txt || fail "no evaluation at step 20"
grep -q '^done: sync-easgd on lenet, 2 groups, 20 steps, test accuracy ' out.txt || fail "no summary"
n=$(sed -n 's/^saved \([0-9]*\) weights to centre.bin$/\1/p' out.txt)
[ -n "$n" ] || fail "no saved line"
[ "$(head -c 8 centre.bin)" = "EASELW1" ] || fail "centre.bin has no EASELW1 header"
size=$(wc -c < centre.bin)
[ "$size" -eq $((16 + 4 * n)) ] || fail "centre.bin holds $size bytes, expected $((16 + 4 * n))"

# The Python module (-Dpython, docs/API.md "Python"), when this build has it: installed in the
# prefix's dist-packages, it imports from there, trains on the installed libeasel and runs the
# installed easel program's commands.
pymod=$(find "$tmp/root" -name '_easel*.so' | head -n 1)
if [ -n "$pymod" ] && [ -n "$python" ]; then
  prog=$(find "$tmp/root" -path '*/bin/easel' | head -n 1)
  PYTHONPATH="$(dirname "$(dirname "$pymod")")" EASEL_PROGRAM="$prog" "$python" -c '
import sys, easel
assert easel.__file__.startswith(sys.argv[1]), easel.__file__
s = easel.train(easel.Config(net="lenet", iterations=4, eval_every=2, eval_images=64),
                data=easel.Data.load("synthetic:256:1x28x28:10"))
assert s["stopped"] == "completed" and s["steps"] == 4, s
assert "seconds_per_iteration" in easel.model(machine="knl-7250", net="lenet")
' "$tmp/root" > "$tmp/out.txt" 2>&1 || fail "the installed Python module failed"
fi

# The build tree, uninstalled: meson-uninstalled/easel-uninstalled.pc (pkg-config picks the
# -uninstalled file first) gives the public headers' folder and the built libeasel.
unset PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG_PATH="$build/meson-uninstalled"
uflags=$(pkg-config --cflags --libs easel)
${CXX:-c++} -std=c++20 -O0 $extra "$src/examples/train_lenet.cpp" $uflags -o "$tmp/train_lenet_b" ||
  fail "the example does not build against the build tree with: $uflags"
export LD_LIBRARY_PATH="$(pkg-config --libs-only-L easel | sed 's/ *$//; s/^-L//; s/ -L/:/g')"
ldd "$tmp/train_lenet_b" | grep -q "libeasel.so.* => $build/" || fail "the example does not run on the build tree's libeasel"
./train_lenet_b 10 centre_b.bin fashion-mnist > out.txt 2>&1 || fail "the example built against the build tree failed"
grep -q '^step 10  epoch ' out.txt || fail "no evaluation at step 10 (build tree)"
echo "install_check: ok ($n weights; flags: $flags; build tree: $uflags)"
