// Bandwidth of the inter-process allreduce on one packed arena (default: LeNet's 431,080
// floats), in nccl-tests' columns: the tree collective easel uses (deterministic by
// construction), MPI_Allreduce for comparison, and the hierarchical Comm with L local groups.
//   mpirun -np 2 build/tests/mpi_allreduce_bench [floats] [iterations] [local groups]
// algbw = bytes / time; busbw = algbw * 2 (n - 1) / n (what each rank's link carries).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "engine/comm/mpi_comm.hpp"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename Fn>
double median_seconds(easel::MpiComm& w, int iters, Fn fn) {
  std::vector<double> t;
  for (int i = 0; i < iters + 3; ++i) {
    w.barrier(w.rank());
    const double t0 = now();
    fn();
    const double dt = now() - t0;
    if (i >= 3) t.push_back(dt);  // 3 warm-up calls
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (easel::Status st = easel::mpi_start(&argc, &argv); !st.ok() || !easel::mpi_world()) {
    std::fprintf(stderr, "run under mpirun: mpirun -np 2 %s\n", argv[0]);
    return 1;
  }
  easel::MpiComm& w = *easel::mpi_world();
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 431080;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  const int local = argc > 3 ? std::atoi(argv[3]) : 2;
  const int p = w.size();
  std::vector<float> buf(static_cast<size_t>(n), 1.f);
  const double tree = median_seconds(w, iters, [&] { w.allreduce_sum(w.rank(), buf.data(), n); });
  const double native = median_seconds(w, iters, [&] { w.allreduce_sum_native(buf.data(), n); });
  auto hier = easel::make_hier_comm(easel::make_shm_comm(local, easel::CollectiveAlgo::tree), w);
  std::vector<std::vector<float>> lb(static_cast<size_t>(local), buf);
  const double hier_s = median_seconds(w, iters, [&] {
    std::vector<std::thread> ts;
    for (int g = 1; g < local; ++g)
      ts.emplace_back([&, g] {
        hier->allreduce_sum(w.rank() * local + g, lb[static_cast<size_t>(g)].data(), n);
      });
    hier->allreduce_sum(w.rank() * local, lb[0].data(), n);
    for (auto& t : ts)
      t.join();
  });
  if (w.rank() == 0) {
    const double bytes = static_cast<double>(n) * sizeof(float);
    const double bus = 2.0 * (p - 1) / p;
    std::printf("# ranks %d, %lld floats (%.2f MB), median of %d\n", p, static_cast<long long>(n),
                bytes / 1e6, iters);
    std::printf("%-28s %12s %10s %10s\n", "collective", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
    const auto row = [&](const char* name, double s) {
      std::printf("%-28s %12.1f %10.2f %10.2f\n", name, s * 1e6, bytes / s / 1e9,
                  bytes / s / 1e9 * bus);
    };
    row("easel tree (p2p)", tree);
    row("MPI_Allreduce", native);
    char name[64];
    std::snprintf(name, sizeof name, "hier: %d local x %d ranks", local, p);
    row(name, hier_s);
  }
  return easel::mpi_finish(0);
}
