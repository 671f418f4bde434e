// engine/comm/smpi.hpp outside an SMPI build: nothing is simulated, so every answer is the
// ordinary behaviour (real sleeps, plain malloc, no watchdog; MpiWorld keeps its own deadlines).
#include <chrono>
#include <cstdlib>
#include <thread>

#include "engine/comm/smpi.hpp"

namespace easel::smpi {

bool built() {
  return false;
}

bool launched() {
  return false;
}

void sleep_seconds(unsigned seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
}

double step_flops() {
  return 0;
}

void execute_flops(double) {}

void execute_seconds(double) {}

bool computation_timed() {
  return false;
}

bool in_rank_actor() {
  return false;
}

void* shared_malloc(size_t bytes) {
  return std::malloc(bytes);
}

void shared_free(void* p) {
  std::free(p);
}

void start_watchdog(const WaitState*, int, double) {}

}  // namespace easel::smpi
