#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "algos/algorithm.hpp"
#include "algos/exchange.hpp"
#include "algos/periodic.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/span_ops.hpp"
#include "engine/trace.hpp"
#include "engine/tsan.hpp"

namespace easel {

double now_seconds() {
  if (const double sim = sim_clock_seconds(); sim >= 0) return sim;  // simulated (SMPI)
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

namespace {

// Throws Abandoned when the trainer gave g up as stalled (Group::abandoned).
void throw_if_abandoned(const Group& g) {
  if (g.abandoned.load(std::memory_order_acquire))
    throw Abandoned("group " + std::to_string(g.global_id) + " came back after it was given up");
}

// What EASEL_FAULT asks of group g now (engine/fault.hpp), once.
void inject_fault(Group& g) {
  const Fault f = *g.fault;
  g.fault.reset();
  const std::string where =
      "EASEL_FAULT: group " + std::to_string(g.global_id) + " at step " + std::to_string(f.step);
  switch (f.action) {
    case Fault::Action::kill:
      std::fprintf(stderr, "%s: killed\n", where.c_str());
      std::fflush(stderr);
      ::kill(::getpid(), SIGKILL);
      break;
    case Fault::Action::nan: {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      copy_bytes(g.weights.data(), g.weights.kind(), &nan, MemKind::dram, sizeof nan);
      break;
    }
    case Fault::Action::raise:
      throw GroupFailed(where + ": threw", false);
    case Fault::Action::stall:  // a hung kernel, until the trainer gives the group up
      while (!g.abandoned.load(std::memory_order_acquire))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      throw_if_abandoned(g);
      break;
    case Fault::Action::hang:  // a thread that never comes back (the process's exit ends it)
      for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

// A non-finite train loss of group g at its current step: recorded (the first), and either the
// run told (it stops as diverged) or, under --on-failure drop or restart, GroupFailed thrown.
void note_nonfinite(Group& g, double loss) {
  const bool first = g.nonfinite_step < 0;
  if (first) g.nonfinite_step = g.steps.load(std::memory_order_relaxed);
  if (first) g.nonfinite_loss = loss;
  std::string where;
  if (g.weights.kind() != MemKind::device)  // the weights this step read (not yet updated)
    where = first_nonfinite(g.net->params().segments(), g.weights.data());
  if (first) g.nonfinite_where = where;
  if (g.fail_on_nonfinite)
    throw GroupFailed("its train loss is " + std::to_string(loss) + " at step " +
                          std::to_string(g.steps.load(std::memory_order_relaxed)) +
                          (where.empty() ? std::string() : "; first non-finite weight: " + where),
                      true);
  if (g.diverged) g.diverged->store(true, std::memory_order_relaxed);
}

}  // namespace

double local_gradient(Group& g) {
  if (g.fault && g.steps.load(std::memory_order_relaxed) == g.fault->step) inject_fault(g);
  if (g.before_step) g.before_step(g);
  if (TraceTrack* tr = bound_track()) tr->begin_unit(g.steps.load(std::memory_order_relaxed));
  TraceSpan span("gradient", "compute");
  const double t0 = now_seconds();
  if (sim_inject_step()) {  // simulated, compute injected (tools/simulate --compute model)
    g.times.compute += now_seconds() - t0;
    return 0;
  }
  if (g.fake_gradient) {
    g.fake_gradient(g);
    g.times.compute += now_seconds() - t0;
    return 0;
  }
  const Batch& b = g.data->next();
  g.net->set_draw(g.draw_stream, static_cast<uint64_t>(g.steps.load(std::memory_order_relaxed)));
  StepStats st;
  if (g.device->is_host()) {
    st = g.net->train_step(b.images.as<float>(), b.labels.data(), g.weights.data(), g.diff.data());
  } else {
    Device& d = *g.device;
    const float* input =
        stage_batch(g, b.images.data(), b.labels.data(), static_cast<int64_t>(b.labels.size()));
    const bool staged = g.dev_weights.size() > 0;
    if (staged) {
      d.upload(g.dev_weights.data(), g.weights.data(),
               static_cast<size_t>(g.weights.size()) * sizeof(float));
    }
    st = g.net->train_step(input, g.dev_labels.as<int32_t>(),
                           staged ? g.dev_weights.data() : g.weights.data(),
                           staged ? g.dev_diff.data() : g.diff.data());
    if (staged) {
      d.download(g.diff.data(), g.dev_diff.data(),
                 static_cast<size_t>(g.diff.size()) * sizeof(float));
      // The state the step updated on the device (batch norm's running statistics) comes back
      // with the gradient: the host weights are the ones the algorithm exchanges.
      for (const Segment& s : g.net->params().segments())
        if (s.state)
          d.download(g.weights.data() + s.offset, g.dev_weights.data() + s.offset,
                     static_cast<size_t>(s.count) * sizeof(float));
    } else {
      d.synchronize();
    }
  }
  throw_if_abandoned(g);  // given up while it computed: neither its loss nor its update counts
  if (!std::isfinite(st.loss) && (g.nonfinite_step < 0 || g.fail_on_nonfinite)) {
    g.times.compute += now_seconds() - t0;
    note_nonfinite(g, st.loss);  // may throw GroupFailed: the step's loss is not counted
  }
  g.loss_sum += st.loss;
  g.loss_count += 1;
  sim_charge_step();  // simulated on a described machine's clock: its step's price, not ours
  g.times.compute += now_seconds() - t0;
  return st.loss;
}

const float* stage_batch(Group& g, const void* images, const int32_t* labels, int64_t n) {
  Device& d = *g.device;
  Shape4 shape = g.net->input_shape();
  shape.n = n;
  const size_t count = static_cast<size_t>(shape.count());
  d.upload(g.dev_images.data(), images, count * (g.batch_bytes ? 1 : sizeof(float)));
  d.upload(g.dev_labels.data(), labels, static_cast<size_t>(n) * sizeof(int32_t));
  const DType act = g.net->activation_type();
  if (g.batch_bytes) {
    d.normalize_bytes(g.dev_images.as<uint8_t>(), g.dev_table.as<float>(), shape, g.net->layout(),
                      act, g.dev_input.data());
    return g.dev_input.as<float>();
  }
  if (act == DType::f32) return g.dev_images.as<float>();
  d.to_activations(g.dev_images.as<float>(), act, g.dev_input.data(), shape.count());
  return g.dev_input.as<float>();
}

std::string first_nonfinite(std::span<const Segment> segs, const float* w) {
  for (const Segment& s : segs)
    for (int64_t i = 0; i < s.count; ++i)
      if (!std::isfinite(w[s.offset + i])) return s.name + " (element " + std::to_string(i) + ")";
  return {};
}

bool stop_here(Run& run, const Group& g) {
  return stop_here(run, g, g.steps.load(std::memory_order_relaxed));
}

bool stop_here(Run& run, const Group& g, int64_t s) {
  int64_t at = run.stop_at.load(std::memory_order_acquire);
  if (at == kNoStop && g.id == 0 && stop_wanted(run)) {
    run.stop_at.compare_exchange_strong(at, s + run.stop_lead, std::memory_order_acq_rel);
    at = run.stop_at.load(std::memory_order_acquire);
  }
  return s >= at;
}

void lock_or_stall(std::unique_lock<std::timed_mutex>& lock, const Group& g,
                   const std::string& algo) {
  const double limit = stall_timeout_seconds();
  const double t0 = now_seconds();
  for (;;) {
    TsanTryLock seen(lock.mutex()->native_handle());  // try_lock_for: pthread_mutex_clocklock
    const bool locked = lock.try_lock_for(std::chrono::milliseconds(100));
    seen.done(locked);
    if (locked) {
      if (!g.abandoned.load(std::memory_order_acquire)) return;
      lock.unlock();  // checked under the lock: a group given up never writes into the centre
      throw_if_abandoned(g);
    }
    throw_if_stalled();
    const double waited = now_seconds() - t0;
    if (waited >= limit)
      stalled("group " + std::to_string(g.global_id) + " waited " + std::to_string(waited) +
              " s for the centre lock (" + algo + "; EASEL_STALL_TIMEOUT)");
  }
}

bool claim_step(Run& run, const Group& g) {
  throw_if_abandoned(g);
  if (run.clock) run.clock->await_turn(g);
  if (stop_wanted(run)) {
    const int64_t p = run.size();
    int64_t b = run.budget.load(std::memory_order_relaxed);
    while (b >= p && !run.budget.compare_exchange_weak(b, b % p, std::memory_order_relaxed)) {
    }
  }
  const bool claimed = run.budget.fetch_sub(1, std::memory_order_relaxed) > 0;
  if (run.clock) {
    if (claimed)
      run.clock->step(g);
    else
      run.clock->leave(g);
  }
  return claimed;
}

void clock_exchange(Run& run, const Group& g, bool locked) {
  if (run.clock) run.clock->exchange(g, locked);
}

StepStart start_step(const Run& run, Group& g) {
  local_gradient(g);
  const int64_t step = g.steps.load(std::memory_order_relaxed);
  return {step, static_cast<float>(run.params.lr.at(step))};
}

namespace {

bool any_nonfinite(const float* x, int64_t n) {
  uint32_t bad = 0;  // an exponent of all ones: inf or nan (integer ops, so that it vectorises)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    bad |= (b & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
  }
  return bad != 0;
}

}  // namespace

void check_replica(const Run& run, const Group& g, const Arena& a) {
  if (!g.fail_on_nonfinite || !any_nonfinite(a.data(), a.size())) return;
  const char* what = &a == &g.weights ? "replica" : "gradient";
  throw GroupFailed(std::string("its ") + what + " turned non-finite before its exchange at step " +
                        std::to_string(g.steps.load(std::memory_order_relaxed)) +
                        "; first non-finite value: " + first_nonfinite(run.segments(), a.data()),
                    true);
}

void rejoin_from_centre(Run& run, Group& g, bool racy) {
  const int64_t n = run.arena_floats();
  if (racy)
    racy_copy_from(g.weights.data(), run.centre.data(), n);
  else
    span_copy(g.weights.data(), run.centre.data(), n);
  span_zero(g.momentum.data(), n);
  g.centre_read_version = run.centre_version.load(std::memory_order_relaxed);
  if (run.on_rejoin) run.on_rejoin(run, g);
}

std::string failure_refusal(const Algorithm& algo, OnFailure mode, int ranks) {
  if (mode != OnFailure::drop && mode != OnFailure::restart) return {};
  const std::string flag =
      std::string("--on-failure ") + (mode == OnFailure::drop ? "drop" : "restart") + ": ";
  if (!algo.survives_group_loss())
    return flag + algo.name() +
           "'s groups meet in every exchange (or there is one group), so a lost group would "
           "leave the others waiting and change every later step's arithmetic: it takes stop "
           "only (the async centre algorithms, async-easgd, async-measgd, async-sgd, async-msgd, "
           "hogwild-easgd and hogwild-sgd, and local-sgd, slowmo and diloco take drop and "
           "restart)";
  if (ranks > 1)
    return flag +
           "one process only: across MPI ranks a lost group's rank ends the job "
           "(easel launch relaunches it from the last checkpoint)";
  return {};
}

Status expect_no_state(const AlgoState& s, const std::string& algo) {
  if (s.turn == 0 && s.buffer.empty() && s.words.empty()) return {};
  return invalid_argument("--resume: the checkpoint's turn and buffers do not add up for " + algo +
                          " (it keeps none)");
}

Result<Arena> arena_on(Group& g, int64_t n, MemKind kind) {
  Result<Arena> out = internal_error("arena_on: not run");
  g.worker->run([&] { out = Arena::create(n, kind); });
  return out;
}

}  // namespace easel
