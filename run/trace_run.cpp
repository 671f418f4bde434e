// The run's timeline (--trace): its tracks, named by the algorithm's phases (its list row), and
// the file.
#include <cstdio>
#include <cstring>

#include "algos/list.hpp"
#include "engine/log.hpp"
#include "run/train_run.hpp"

namespace easel {

void start_trace(TrainRun& t) {
  Run& run = t.run;
  const std::string algo = t.algo->name();
  t.tracer = std::make_unique<Tracer>(
      t.ranks > 1 ? "easel rank " + std::to_string(t.rank) + ": " + algo : "easel: " + algo, t.rank,
      t.cfg.trace_steps, t.cfg.trace_every);
  if (t.world) {  // one clock for every rank's file (the ranks of one node share it)
    double zero = t.tracer->zero();
    t.world->broadcast_bytes(&zero, sizeof zero, 0);
    t.tracer->set_zero(zero);
  }
  Tracer& tr = *t.tracer;
  tr.set_arg("algo", algo);
  tr.set_arg("net", t.spec.name);
  tr.set_arg("groups", std::to_string(t.p));
  tr.set_arg("batch", std::to_string(t.cfg.batch));
  // summary.json's figure: for a bf16 or int8 exchange what its compressed ring sends.
  char bytes[32];
  std::snprintf(bytes, sizeof bytes, "%.6g",
                exchanged_bytes_per_image(*t.resolved.row, run, t.cfg.batch));
  tr.set_arg("exchanged_bytes_per_image", bytes);
  tr.set_arg("trace-steps", std::to_string(t.cfg.trace_steps));
  tr.set_arg("trace-every", std::to_string(t.cfg.trace_every));
  tr.set_arg("bound",
             "each group's track keeps its first trace-steps steps, then every "
             "trace-every-th step, at most " +
                 std::to_string(kTraceSampledSteps) + " of them (past that the period doubles)");
  // The main thread's units are rounds: kTraceSampledSteps of them whole, then sampled alike.
  t.main_track =
      tr.add_track("main: rounds, evaluation, checkpoints", 0, kTraceSampledSteps, 1, "round");
  const PhaseNames names = t.resolved.row->phases(run.params);
  for (auto& g : run.groups) {
    TraceTrack* track = tr.add_track("group " + std::to_string(g->global_id), 1 + g->global_id);
    track->set_phase(0, &g->times.compute, "update", "compute");
    track->set_phase(1, &g->times.comm, names.exchange, "comm");
    track->set_phase(2, &g->times.wait, names.wait, "wait");
    t.group_tracks.push_back(track);
  }
  run.centre_trace = tr.add_track("centre", 1 + t.p, -1, -1, "exchange");
  run.centre_trace->set_optional(true);  // only an algorithm with a centre thread binds it
}

void write_trace(TrainRun& t) {
  const std::string path = trace_path_for_rank(t.cfg.trace, t.rank);
  int64_t spans = 0;
  for (const TraceTrack* track : t.tracer->tracks())
    spans += static_cast<int64_t>(track->spans().size());
  if (Status st = t.tracer->write(path); !st.ok()) {
    log_error("trace", st.message());
    return;
  }
  log_info("trace", "wrote " + path + " (" + std::to_string(spans) + " spans)");
}

}  // namespace easel
