// `easel --version` (-V): the version (meson.build's), the commit it was built from where known,
// the compiler and the -march it compiled for, the CPU features the compiled code may use, what
// oneDNN runs on this CPU and its version, and whether CUDA and MPI are in.
#include <cstdio>
#include <string>

#include "devices/cpu/dnnl_ops.hpp"
#include "easel_config.h"
#include "engine/comm/smpi.hpp"
#include "tools/cli/cli.hpp"
#include "tools/easel_version.h"

namespace easel::cli {

namespace {

// The instruction sets the compiler was allowed (by -march) for easel's own kernels.
std::string built_features() {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
#if defined(__AVX2__)
  add(true, "avx2");
#endif
#if defined(__FMA__)
  add(true, "fma");
#endif
#if defined(__AVX512F__)
  add(true, "avx512f");
#endif
#if defined(__AVX512BF16__)
  add(true, "avx512bf16");
#endif
  add(s.empty(), "sse2 only");
  return s;
}

const char* yes_no(bool on) {
  return on ? "yes" : "no";
}

}  // namespace

int run_version() {
  std::printf("easel %s (commit %s)\n", EASEL_VERSION, EASEL_COMMIT);
  std::printf("compiler: %s, -march=%s (%s)\n", EASEL_COMPILER, EASEL_MARCH,
              built_features().c_str());
  std::printf("oneDNN: %s\n", dnnl_version_line().c_str());
  std::printf("CUDA: %s (cuDNN %s, NCCL %s); MPI: %s\n", yes_no(EASEL_HAVE_CUDA),
              yes_no(EASEL_HAVE_CUDNN), yes_no(EASEL_HAVE_NCCL),
              smpi::built()    ? "SimGrid SMPI"
              : EASEL_HAVE_MPI ? "yes"
                               : "no");
  return 0;
}

}  // namespace easel::cli
