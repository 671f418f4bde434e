// A timeline of a run in Chrome's trace-event format (what Perfetto and chrome://tracing read;
// docs/TRACE.md): one track per thread that takes part (each worker group, the centre's thread,
// the main thread), spans on each. A thread records into its own track through a thread-local
// pointer (TraceBind), without locks; the tracks are written out once the threads have stopped.
// When no trace is asked for the pointer is null and a span costs one branch.
//
// Bounded: a track keeps its first `full` units (a group's steps) whole, then every `every`-th
// unit; when kTraceSampledSteps such units are kept the period doubles and every other one of
// them goes, so that a track never holds more than full + kTraceSampledSteps units, whatever the
// run's length.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/status.hpp"

namespace easel {

inline constexpr int64_t kTraceSampledSteps = 256;  // sampled units a track keeps at most
inline constexpr int64_t kMaxTraceSteps = 100000;   // largest --trace-steps

// Whether `path` can take a trace file (its directory exists and is writable; it is not a
// directory, nor a file this process may not write). Errors name --trace.
Status check_trace_path(const std::string& path);

// Monotonic seconds on the clock the spans use (steady_clock, or the simulated clock under
// SMPI: as algos' now_seconds()).
double trace_now();

class TraceTrack {
 public:
  struct Span {
    const char* name;  // outlives the track's writing (a literal, or a net's layer name)
    const char* cat;   // a literal
    double t0, t1;     // trace_now() seconds
    int64_t unit;
  };

  // `tid`: the track's id in the file (its order); `full`, `every`: the bound above; `unit`:
  // what a unit is (a literal: "step", "round"), each span's argument in the file.
  TraceTrack(std::string name, int tid, int64_t full, int64_t every, const char* unit = "step");

  // Starts unit u (a step): whether its spans are kept. The first unit seen counts as the first;
  // calling it again with the same u changes nothing.
  void begin_unit(int64_t u);
  bool recording() const { return recording_; }
  // A span [t0, t1] of the current unit (kept when it is recorded). Spans of one track must nest:
  // a span that starts within another ends within it.
  void add(const char* name, const char* cat, double t0, double t1) {
    if (recording_) spans_.push_back({name, cat, t0, t1, unit_});
  }

  // Names for the spans of add_phase: up to kPhases keys (the addresses of a group's time
  // counters), each with a span name and category (literals).
  static constexpr int kPhases = 3;
  void set_phase(int i, const void* key, const char* name, const char* cat) {
    phases_[i] = {key, name, cat};
  }
  // A span [t0, t1] named for `key`'s phase; none when key names no phase.
  void add_phase(const void* key, double t0, double t1) {
    if (!recording_) return;
    for (const Phase& p : phases_)
      if (p.key == key && p.name != nullptr) {
        spans_.push_back({p.name, p.cat, t0, t1, unit_});
        return;
      }
  }

  const std::string& name() const { return name_; }
  const char* unit_name() const { return unit_name_; }
  // Left out of the file when it holds no span (a thread that may never run).
  void set_optional(bool v) { optional_ = v; }
  bool optional() const { return optional_; }
  int tid() const { return tid_; }
  const std::vector<Span>& spans() const { return spans_; }
  int64_t units_kept() const { return full_kept_ + sampled_; }

 private:
  void decimate();

  std::string name_;
  int tid_;
  const char* unit_name_;
  int64_t full_, every_;
  int64_t first_ = -1, unit_ = -1;
  int64_t full_kept_ = 0, sampled_ = 0;
  bool recording_ = true;
  bool optional_ = false;
  std::vector<Span> spans_;
  struct Phase {
    const void* key = nullptr;
    const char* name = nullptr;
    const char* cat = nullptr;
  };
  Phase phases_[kPhases];
};

namespace trace_detail {
extern thread_local TraceTrack* current;
}

// The track this thread records into, when it is recording now; else null.
inline TraceTrack* recording_track() {
  TraceTrack* t = trace_detail::current;
  return t != nullptr && t->recording() ? t : nullptr;
}
// The track this thread records into (null: none).
inline TraceTrack* bound_track() {
  return trace_detail::current;
}

// This thread's span [t0, t1] for the phase `key` (TraceTrack::add_phase), when it records.
inline void trace_phase(const void* key, double t0, double t1) {
  if (TraceTrack* t = recording_track()) t->add_phase(key, t0, t1);
}

// Makes `track` (may be null) this thread's track for the scope; the previous one after it.
class TraceBind {
 public:
  explicit TraceBind(TraceTrack* track) : prev_(trace_detail::current) {
    trace_detail::current = track;
  }
  ~TraceBind() { trace_detail::current = prev_; }
  TraceBind(const TraceBind&) = delete;
  TraceBind& operator=(const TraceBind&) = delete;

 private:
  TraceTrack* prev_;
};

// A span over a scope on this thread's track (nothing when it records none).
class TraceSpan {
 public:
  TraceSpan(const char* name, const char* cat) : track_(recording_track()) {
    if (track_) {
      name_ = name;
      cat_ = cat;
      t0_ = trace_now();
    }
  }
  ~TraceSpan() {
    if (track_) track_->add(name_, cat_, t0_, trace_now());
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceTrack* track_;
  const char* name_ = nullptr;
  const char* cat_ = nullptr;
  double t0_ = 0;
};

// The tracks of one process and the file they go to.
class Tracer {
 public:
  // `process`: the process's name in the file; `pid`: its id (the MPI rank).
  Tracer(std::string process, int pid, int64_t full, int64_t every);

  // A new track; pointers stay valid for the tracer's life. Tracks are made before the threads
  // that record into them start.
  // full, every < 0: the tracer's.
  TraceTrack* add_track(const std::string& name, int tid, int64_t full = -1, int64_t every = -1,
                        const char* unit = "step");
  // The clock's zero (trace_now() seconds): the tracer's creation, unless set (across MPI
  // ranks, rank 0's).
  double zero() const { return zero_; }
  void set_zero(double z) { zero_ = z; }
  // The tracks, in the order they were made.
  std::vector<const TraceTrack*> tracks() const {
    std::vector<const TraceTrack*> out;
    for (const auto& t : tracks_)
      out.push_back(t.get());
    return out;
  }
  // A key and value shown with the process (the run's settings).
  void set_arg(const std::string& key, const std::string& value);

  // The file's text: {"traceEvents": [...], ...}; every thread that records must have stopped.
  // An optional track without spans is left out.
  std::string json() const;
  // Writes json() to path atomically (a temporary beside it, then a rename).
  Status write(const std::string& path) const;

 private:
  std::string process_;
  int pid_;
  int64_t full_, every_;
  double zero_;
  std::vector<std::unique_ptr<TraceTrack>> tracks_;
  std::vector<std::pair<std::string, std::string>> args_;
};

// The file of MPI rank `rank`: path itself on rank 0, else path with ".rankR" before its
// extension (trace.json -> trace.rank1.json).
std::string trace_path_for_rank(const std::string& path, int rank);

}  // namespace easel
