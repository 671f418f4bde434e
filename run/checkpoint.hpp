// A run's state between two rounds: everything the trainer needs to go on exactly where it
// stopped (the same numbers as a run that never stopped, for the deterministic algorithms).
// `easel train` writes one to --out after every evaluation (checkpoint.bin) and continues from
// it with --resume (docs/DESIGN.md, "Checkpoints").
//
// File format (version 3): the magic "EASELCKV", a u32 format version (3), a u32 byte-order
// mark 0x01020304, a u64 payload length, the payload's 64-bit FNV-1a hash, then the payload:
// the fields below in order, each number as its bytes in the writer's byte order (which the
// mark states: a file from a machine of the other byte order is refused, naming it), each
// string and vector as a u64 count then its elements. Reading checks the magic, the version,
// the mark, the length, the hash and every count against the bytes left, so a truncated or
// corrupted file gives one error naming it, never a huge allocation. Files of format 1 (the
// magic "EASELCK1", no version or mark, little-endian; no mid-round fields) are still read on
// little-endian machines: they were written at evaluations. Format 2 lacks the lost steps, the
// group failures, the clock, the algorithm's words and the dropped marks (from before a group
// could fail alone or a run on a clock resume).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "algos/algorithm.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/status.hpp"
#include "nets/data/batch_stream.hpp"

namespace easel {

struct GroupCheckpoint {
  int64_t steps = 0;
  std::vector<float> weights, momentum;  // the whole arena each
  StreamState stream;                    // the position of its next batch
  int64_t centre_read_version = 0;
  GroupTimes times;
  int64_t staleness_sum = 0, staleness_count = 0, staleness_max = 0;
  // The train loss summed over the round so far (format 2; the round goes on from it when the
  // checkpoint was taken mid-round).
  double loss_sum = 0;
  int64_t loss_count = 0;
  // Dropped under --on-failure drop (format 3): it trains no more when the run goes on.
  bool dropped = false;
};

// A group that failed during the run (--on-failure; summary.json's group_failures): its global
// id, its step count when it failed (the failed step is lost), what the run did with it
// ("dropped", "restarted", "stopped") and why (one line).
struct GroupFailure {
  int group = 0;
  int64_t step = 0;
  std::string action;
  std::string why;
  bool nonfinite = false;  // a non-finite train loss (else its thread threw)
};

// The format encode_checkpoint writes; decode_checkpoint reads it and formats 1 and 2.
inline constexpr uint32_t kCheckpointVersion = 3;

// In a checkpoint's identity, what precedes TrainConfig::settings (when it is set).
inline constexpr const char* kSettingsMark = "; settings ";

struct Checkpoint {
  // What the run must match to continue from it (algorithm, net, data, groups, batch, arena
  // size), as the trainer writes it; compared whole on resume.
  std::string identity;
  int64_t iterations_done = 0;   // iterations of the run (each group stepped this often)
  int64_t total_iterations = 0;  // the run's length when it was written (poly's schedule)
  double wall_seconds = 0, train_seconds = 0, eval_seconds = 0;
  double best_accuracy = 0;
  double time_to_target_seconds = -1;  // < 0: not reached
  int64_t images_before_round = 0;     // images at the last evaluation (for images/s)
  // Taken when a round was cut short (a signal): iterations_done is not an evaluation's, the
  // groups' loss sums continue and the next evaluation is the one the round would have had.
  bool mid_round = false;
  // Group-steps lost to failed groups (format 3; Run::lost_before): the groups' steps and these
  // make iterations_done x groups.
  int64_t lost_steps = 0;
  std::vector<GroupFailure> failures;  // the run's so far, in order (format 3)
  // On --clock (format 3): the described machine's simulated seconds when it was taken (every
  // group's clock stands there between rounds); < 0: the run had no clock.
  double clock_seconds = -1;
  int64_t centre_version = 0;
  std::vector<float> centre;  // empty when the algorithm has none
  // The algorithm's own state (Algorithm::save_state): in the file, its turn after
  // centre_version and its buffer after the centre (where format 1 had easgd-rr's turn and
  // async-msgd's centre momentum, the only algorithms that keep any), so older files read.
  AlgoState algo;
  std::vector<GroupCheckpoint> groups;
};

std::string encode_checkpoint(const Checkpoint& ck);
// `name` (the file) prefixes every error.
Result<Checkpoint> decode_checkpoint(std::string_view bytes, const std::string& name);

// Writes atomically: a temporary file beside `path` with a name of its own (path.tmp.PID.RANDOM),
// flushed, then renamed over it, so that a run killed while writing (kill -9 included) leaves
// the previous checkpoint whole; the temporary is removed when the write or the rename fails.
Status write_checkpoint(const std::string& path, const Checkpoint& ck);
Result<Checkpoint> read_checkpoint(const std::string& path);

// The run's state after a round (no group running); `identity` names the run (the trainer's
// algorithm, net, data, P, batch and parameter count). Arenas are copied off their devices.
Checkpoint capture_run(Run& run, Algorithm& algo, const std::string& identity);
// Puts ck into a freshly built run (weights, momentum, centre, data positions, counters),
// before algo.prepare(), which derives the algorithm's own buffers from them as it does from
// the initial weights; after prepare(), algo.restore_state(run, ck.algo) puts back the
// algorithm's own state. Fails, naming --resume, when ck is of another run.
// Into another number of groups (regrouped): only when algo.regroupable() (else refused,
// naming --groups and why); the centre and the step carry over, every group of the run starts
// where algo.regroup_start says (the centre with zero momentum for the EASGD family; local-sgd,
// slowmo and diloco the anchor with the old groups' mean momentum, at a meeting only) and a
// data stream reseeded from (seed, the step, the group) at a fresh epoch.
Status restore_run(const Checkpoint& ck, const std::string& identity, const Algorithm& algo,
                   uint64_t seed, Run& run);
// Whether `run` has another number of groups (over all its ranks) than ck's run had. Across
// MPI ranks a checkpoint holds every rank's groups in global order; each rank restores its own
// (Group::global_id), whatever the split of the same number into ranks and groups.
bool regrouped(const Checkpoint& ck, const Run& run);
// Before a resumed run is built: refuses, as restore_run would, an explicit --groups `groups`
// per rank of `ranks` (a count; "auto" and other forms are left to restore_run) whose total
// differs from ck's when `algo` cannot regroup.
Status check_resume_groups(const Checkpoint& ck, const std::string& algo, const GroupCount& groups,
                           int ranks = 1);

// Young's optimal interval between checkpoints, sqrt(2 C M), for a checkpoint that takes C
// seconds from training and a mean time between failures of M seconds (Young 1974; Daly 2006
// shows it first-order optimal for C << M).
double young_daly_interval(double cost_seconds, double mtbf_seconds);

// Across MPI ranks, at an evaluation (every rank there): every rank's groups of its own capture
// `mine` gathered into rank 0's, in global group order (rank r's L groups are r*L .. r*L+L-1);
// the other ranks' `mine` keeps only its centre and counters. A collective: every rank calls it.
void gather_checkpoint_groups(MpiComm& world, Checkpoint& mine);

}  // namespace easel
