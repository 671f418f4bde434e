// Checkpoints: encoding, decoding with every count checked, atomic files (run/checkpoint.hpp).
#include "run/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <type_traits>

#include "engine/rng.hpp"

namespace easel {
namespace {

constexpr char kMagic[8] = {'E', 'A', 'S', 'E', 'L', 'C', 'K', 'V'};
constexpr char kMagicV1[8] = {'E', 'A', 'S', 'E', 'L', 'C', 'K', '1'};  // format 1: no version
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr size_t kHeaderV1 = sizeof kMagicV1 + 2 * sizeof(uint64_t);
constexpr size_t kHeader = sizeof kMagic + 2 * sizeof(uint32_t) + 2 * sizeof(uint64_t);

constexpr uint64_t kFnvStart = 0xcbf29ce484222325ull;

uint64_t fnv1a(std::string_view s, uint64_t h = kFnvStart) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Encodes the payload into a sink (a string, or a file as it goes, so that writing a
// checkpoint holds no second copy of it), counting its bytes and hashing them.
class Writer {
 public:
  explicit Writer(std::function<void(std::string_view)> sink) : sink_(std::move(sink)) {}
  template <typename T>
  void num(T v) {
    static_assert(std::is_arithmetic_v<T>);
    put({reinterpret_cast<const char*>(&v), sizeof v});
  }
  void str(const std::string& s) {
    num<uint64_t>(s.size());
    put(s);
  }
  void floats(const std::vector<float>& v) {
    num<uint64_t>(v.size());
    put({reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)});
  }
  uint64_t bytes() const { return bytes_; }
  uint64_t hash() const { return hash_; }

 private:
  void put(std::string_view s) {
    hash_ = fnv1a(s, hash_);
    bytes_ += s.size();
    sink_(s);
  }
  std::function<void(std::string_view)> sink_;
  uint64_t bytes_ = 0, hash_ = kFnvStart;
};

std::string header(uint64_t n, uint64_t h) {
  std::string out(kMagic, sizeof kMagic);
  out.append(reinterpret_cast<const char*>(&kCheckpointVersion), sizeof kCheckpointVersion);
  out.append(reinterpret_cast<const char*>(&kByteOrderMark), sizeof kByteOrderMark);
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(reinterpret_cast<const char*>(&h), sizeof h);
  return out;
}

// Reads the payload; the first failure sticks and names the field.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  T num(const char* field) {
    T v{};
    if (!take(&v, sizeof v, field)) return T{};
    return v;
  }
  std::string str(const char* field) {
    const uint64_t n = num<uint64_t>(field);
    if (!ok() || !fits(n, 1, field)) return {};
    std::string s(in_.substr(0, n));
    in_.remove_prefix(n);
    return s;
  }
  std::vector<float> floats(const char* field) {
    const uint64_t n = num<uint64_t>(field);
    if (!ok() || !fits(n, sizeof(float), field)) return {};
    std::vector<float> v(n);
    if (n != 0) std::memcpy(v.data(), in_.data(), n * sizeof(float));  // data() may be null
    in_.remove_prefix(n * sizeof(float));
    return v;
  }
  // A count of records of at least `min_bytes` each.
  uint64_t count(const char* field, size_t min_bytes) {
    const uint64_t n = num<uint64_t>(field);
    if (ok() && n > in_.size() / min_bytes) fail(field);
    return ok() ? n : 0;
  }
  bool ok() const { return bad_.empty(); }
  const std::string& bad() const { return bad_; }
  size_t left() const { return in_.size(); }
  // The first failure sticks: `field` names what is wrong.
  void fail(const char* field) {
    if (ok()) bad_ = field;
  }

 private:
  bool take(void* p, size_t n, const char* field) {
    if (!ok()) return false;
    if (in_.size() < n) {
      fail(field);
      return false;
    }
    std::memcpy(p, in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool fits(uint64_t n, size_t each, const char* field) {
    if (n > in_.size() / each) {
      fail(field);
      return false;
    }
    return true;
  }
  std::string_view in_;
  std::string bad_;
};

void put_times(Writer& w, const GroupTimes& t) {
  w.num(t.compute);
  w.num(t.comm);
  w.num(t.wait);
  w.num(t.preempted);
}

GroupTimes get_times(Reader& r) {
  GroupTimes t;
  t.compute = r.num<double>("group times");
  t.comm = r.num<double>("group times");
  t.wait = r.num<double>("group times");
  t.preempted = r.num<double>("group times");
  return t;
}

void encode_payload(const Checkpoint& ck, Writer& w) {
  w.str(ck.identity);
  w.num(ck.iterations_done);
  w.num(ck.total_iterations);
  w.num(ck.wall_seconds);
  w.num(ck.train_seconds);
  w.num(ck.eval_seconds);
  w.num(ck.best_accuracy);
  w.num(ck.time_to_target_seconds);
  w.num(ck.images_before_round);
  w.num(ck.centre_version);
  w.num(ck.algo.turn);
  w.floats(ck.centre);
  w.floats(ck.algo.buffer);
  w.num<int32_t>(ck.mid_round ? 1 : 0);
  w.num(ck.lost_steps);
  w.num(ck.clock_seconds);
  w.num<uint64_t>(ck.failures.size());
  for (const GroupFailure& f : ck.failures) {
    w.num<int32_t>(f.group);
    w.num(f.step);
    w.str(f.action);
    w.str(f.why);
    w.num<int32_t>(f.nonfinite ? 1 : 0);
  }
  w.num<uint64_t>(ck.algo.words.size());
  for (int64_t x : ck.algo.words)
    w.num(x);
  w.num<uint64_t>(ck.groups.size());
  for (const GroupCheckpoint& g : ck.groups) {
    w.num(g.steps);
    w.floats(g.weights);
    w.floats(g.momentum);
    w.num(g.stream.epoch);
    w.num(g.stream.cursor);
    for (uint64_t x : g.stream.rng)
      w.num(x);
    w.num(g.centre_read_version);
    put_times(w, g.times);
    w.num(g.staleness_sum);
    w.num(g.staleness_count);
    w.num(g.staleness_max);
    w.num(g.loss_sum);
    w.num(g.loss_count);
    w.num<int32_t>(g.dropped ? 1 : 0);
  }
}

}  // namespace

std::string encode_checkpoint(const Checkpoint& ck) {
  std::string payload;
  Writer w([&](std::string_view s) { payload += s; });
  encode_payload(ck, w);
  return header(w.bytes(), w.hash()) + payload;
}

namespace {

// The header's format version and payload (format 1 or 2), or why the file is not a checkpoint
// this machine reads.
Result<std::pair<uint32_t, std::string_view>> payload_of(std::string_view bytes,
                                                         const std::string& name) {
  uint32_t version = 1, mark = kByteOrderMark;
  size_t head = kHeaderV1;
  if (bytes.size() >= kHeader && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0) {
    std::memcpy(&version, bytes.data() + sizeof kMagic, sizeof version);
    std::memcpy(&mark, bytes.data() + sizeof kMagic + sizeof version, sizeof mark);
    head = kHeader;
  } else if (bytes.size() < kHeaderV1 ||
             std::memcmp(bytes.data(), kMagicV1, sizeof kMagicV1) != 0) {
    return data_error(name + ": not an easel checkpoint (no EASELCKV or EASELCK1 header)");
  } else if (std::endian::native != std::endian::little) {
    mark = 0;  // format 1 is little-endian
  }
  if (mark != kByteOrderMark)
    return data_error(name + ": written on a machine of the other byte order (this one reads " +
                      (std::endian::native == std::endian::little ? "little" : "big") +
                      "-endian checkpoints)");
  if (version < 1 || version > kCheckpointVersion)
    return data_error(name + ": checkpoint format " + std::to_string(version) +
                      " (this easel reads formats 1 to " + std::to_string(kCheckpointVersion) +
                      ")");
  uint64_t n = 0, h = 0;
  std::memcpy(&n, bytes.data() + head - 2 * sizeof n, sizeof n);
  std::memcpy(&h, bytes.data() + head - sizeof h, sizeof h);
  const std::string_view payload = bytes.substr(head);
  if (payload.size() != n)
    return data_error(name + ": truncated or padded (header says " + std::to_string(n) +
                      " payload bytes, the file has " + std::to_string(payload.size()) + ")");
  if (fnv1a(payload) != h) return data_error(name + ": corrupted (checksum mismatch)");
  return std::make_pair(version, payload);
}

GroupCheckpoint decode_group(Reader& r, uint32_t version) {
  GroupCheckpoint g;
  g.steps = r.num<int64_t>("group steps");
  g.weights = r.floats("group weights");
  g.momentum = r.floats("group momentum");
  g.stream.epoch = r.num<int64_t>("data position");
  g.stream.cursor = r.num<int64_t>("data position");
  for (uint64_t& x : g.stream.rng)
    x = r.num<uint64_t>("data position");
  g.centre_read_version = r.num<int64_t>("group centre version");
  g.times = get_times(r);
  g.staleness_sum = r.num<int64_t>("staleness");
  g.staleness_count = r.num<int64_t>("staleness");
  g.staleness_max = r.num<int64_t>("staleness");
  if (version >= 2) {
    g.loss_sum = r.num<double>("group loss");
    g.loss_count = r.num<int64_t>("group loss");
  }
  if (version >= 3) {
    const int32_t mark = r.num<int32_t>("dropped mark");
    if (mark != 0 && mark != 1) r.fail("dropped mark (0 or 1)");
    g.dropped = mark == 1;
  }
  return g;
}

}  // namespace

Result<Checkpoint> decode_checkpoint(std::string_view bytes, const std::string& name) {
  EASEL_ASSIGN_OR_RETURN(auto found, payload_of(bytes, name));
  const auto [version, payload] = found;
  Reader r(payload);
  Checkpoint ck;
  ck.identity = r.str("identity");
  ck.iterations_done = r.num<int64_t>("iterations done");
  ck.total_iterations = r.num<int64_t>("total iterations");
  ck.wall_seconds = r.num<double>("wall seconds");
  ck.train_seconds = r.num<double>("training seconds");
  ck.eval_seconds = r.num<double>("evaluation seconds");
  ck.best_accuracy = r.num<double>("best accuracy");
  ck.time_to_target_seconds = r.num<double>("time to target");
  ck.images_before_round = r.num<int64_t>("images");
  ck.centre_version = r.num<int64_t>("centre version");
  ck.algo.turn = r.num<int32_t>("turn");
  ck.centre = r.floats("centre");
  ck.algo.buffer = r.floats("algorithm buffer");
  if (version >= 2) {
    const int32_t mark = r.num<int32_t>("mid-round mark");
    if (r.ok() && mark != 0 && mark != 1)
      return data_error(name + ": mid-round mark " + std::to_string(mark) + " is not 0 or 1");
    ck.mid_round = mark == 1;
  }
  if (version >= 3) {
    ck.lost_steps = r.num<int64_t>("lost steps");
    ck.clock_seconds = r.num<double>("clock seconds");
    const uint64_t failures = r.count("group failures", 4 + 8 + 8 + 8 + 4);
    for (uint64_t i = 0; i < failures && r.ok(); ++i) {
      GroupFailure f;
      f.group = r.num<int32_t>("group failure");
      f.step = r.num<int64_t>("group failure");
      f.action = r.str("group failure");
      f.why = r.str("group failure");
      const int32_t nonfinite = r.num<int32_t>("group failure");
      if (nonfinite != 0 && nonfinite != 1) r.fail("group failure's non-finite mark (0 or 1)");
      f.nonfinite = nonfinite == 1;
      ck.failures.push_back(std::move(f));
    }
    const uint64_t words = r.count("algorithm words", sizeof(int64_t));
    for (uint64_t i = 0; i < words && r.ok(); ++i)
      ck.algo.words.push_back(r.num<int64_t>("algorithm words"));
  }
  const uint64_t groups = r.count("groups", 8 * sizeof(int64_t));
  for (uint64_t i = 0; i < groups && r.ok(); ++i)
    ck.groups.push_back(decode_group(r, version));
  if (!r.ok()) return data_error(name + ": truncated at the " + r.bad() + " field");
  if (r.left() != 0)
    return data_error(name + ": " + std::to_string(r.left()) + " bytes after the last field");
  if (ck.iterations_done < 0 || ck.groups.empty() || ck.lost_steps < 0)
    return data_error(name + ": holds no groups or a negative iteration or lost-step count");
  return ck;
}

namespace {

// A temporary name beside `path` that no other writer (another process, another run in the
// same --out) takes: path.tmp.PID.RANDOM.
std::string temporary_name(const std::string& path) {
  std::random_device rd;
  const uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r));
  return path + ".tmp." + std::to_string(::getpid()) + "." + buf;
}

}  // namespace

Status write_checkpoint(const std::string& path, const Checkpoint& ck) {
  const std::string tmp = temporary_name(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wbx");  // never an existing file
  if (f == nullptr) return io_error("cannot write " + tmp + ": " + std::strerror(errno));
  // The payload streams to the file after a header of zeros; the header is written last.
  bool wrote = std::fwrite(header(0, 0).data(), 1, kHeader, f) == kHeader;
  Writer w([&](std::string_view s) {
    // An empty piece (an empty vector's null data()) is not passed on: fwrite's buffer is nonnull.
    wrote = wrote && (s.empty() || std::fwrite(s.data(), 1, s.size(), f) == s.size());
  });
  encode_payload(ck, w);
  const std::string head = header(w.bytes(), w.hash());
  wrote = wrote && std::fseek(f, 0, SEEK_SET) == 0 &&
          std::fwrite(head.data(), 1, head.size(), f) == head.size();
  const bool flushed = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !flushed || !closed) {
    std::remove(tmp.c_str());
    return io_error("cannot write " + tmp + " (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());  // the previous checkpoint, if any, stays
    return io_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  // The rename itself reaches the disk with the directory.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int d = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return {};
}

Result<Checkpoint> read_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return not_found(path + ": no such file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error(path + ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return io_error(path + ": read error");
  return decode_checkpoint(bytes, path);
}

namespace {

// `identity` with its group count (", P group(s), ") masked, and without the "groups" member of
// its settings (checkpoints written while --groups could not change on resume held it there).
std::string identity_sans_groups(std::string id) {
  const std::string tag = " group(s), ";
  if (const size_t at = id.find(tag); at != std::string::npos) {
    size_t from = at;
    while (from > 0 && std::isdigit(static_cast<unsigned char>(id[from - 1])))
      --from;
    if (from < at) id.replace(from, at - from, "P");
  }
  const size_t settings = id.find(kSettingsMark);
  const std::string key = "\"groups\":\"";
  if (size_t at = settings == std::string::npos ? settings : id.find(key, settings);
      at != std::string::npos) {
    size_t end = id.find('"', at + key.size());
    if (end != std::string::npos) {
      ++end;
      if (end < id.size() && id[end] == ',')
        ++end;  // "groups":"2",
      else if (id[at - 1] == ',')
        --at;  // ,"groups":"2"}
      id.erase(at, end - at);
    }
  }
  return id;
}

std::string regroup_refusal(const std::string& algo, size_t had, size_t now) {
  return "--groups: a checkpoint of " + algo + " resumes only with its " + std::to_string(had) +
         " group(s), not " + std::to_string(now) +
         ": each group's replica (and momentum) is its own state, not a function of a centre, so "
         "it cannot be re-split (the EASGD algorithms, whose replicas start again from the "
         "centre, can: easgd-rr, async-easgd, async-measgd, hogwild-easgd, sync-easgd; and "
         "local-sgd, slowmo, diloco from a checkpoint at a meeting)";
}

// Every group of `run` starts where algo.regroup_start says (the checkpoint's centre, momentum
// zero, for the EASGD family; the anchor and the old groups' mean momentum for local-sgd, slowmo
// and diloco), its data stream at a fresh epoch (one past the latest any old group reached) in
// an order drawn from (seed, the step, the group); the step counts go on from ck's; the loss
// sums of a cut round go to group 0.
Status regroup_run(const Checkpoint& ck, const Algorithm& algo, uint64_t seed, Run& run) {
  const size_t n = static_cast<size_t>(run.arena_floats());
  EASEL_ASSIGN_OR_RETURN(
      const Algorithm::RegroupStart start,
      algo.regroup_start(run, ck.centre, ck.algo, ck.iterations_done, ck.groups.size()));
  EASEL_CHECK(start.weights != nullptr);
  std::vector<float> momentum(n, 0.f);
  if (start.mean_momentum) {
    for (const GroupCheckpoint& c : ck.groups)
      for (size_t j = 0; j < n; ++j)
        momentum[j] += c.momentum[j];
    const float inv = 1.f / static_cast<float>(ck.groups.size());
    for (float& v : momentum)
      v *= inv;
  }
  int64_t epoch = 0;
  double loss_sum = 0;
  int64_t loss_count = 0;
  for (const GroupCheckpoint& c : ck.groups) {
    epoch = std::max(epoch, c.stream.epoch);
    loss_sum += c.loss_sum;
    loss_count += c.loss_count;
  }
  for (size_t i = 0; i < run.groups.size(); ++i) {
    Group& g = *run.groups[i];
    copy_bytes(g.weights.data(), g.weights.kind(), start.weights, MemKind::dram, n * sizeof(float));
    copy_bytes(g.momentum.data(), g.momentum.kind(), momentum.data(), MemKind::dram,
               n * sizeof(float));
    StreamState st;
    st.epoch = epoch + 1;
    st.rng = Rng::stream(seed ^ (0x5245475250ull * static_cast<uint64_t>(ck.iterations_done + 1)),
                         static_cast<uint64_t>(g.global_id))
                 .state();
    Status sought;
    g.worker->run([&] { sought = g.data->seek(st); });
    if (!sought.ok())
      return invalid_argument("--resume: group " + std::to_string(i) + ": " + sought.message());
    g.steps.store(ck.iterations_done);
    g.centre_read_version = ck.centre_version;
    g.times = {};
    g.staleness_sum = g.staleness_count = g.staleness_max = 0;
    g.loss_sum = ck.mid_round && i == 0 ? loss_sum : 0;
    g.loss_count = ck.mid_round && i == 0 ? loss_count : 0;
  }
  return {};
}

}  // namespace

bool regrouped(const Checkpoint& ck, const Run& run) {
  return ck.groups.size() != static_cast<size_t>(run.total_groups());
}

Status check_resume_groups(const Checkpoint& ck, const std::string& algo, const GroupCount& groups,
                           int ranks) {
  if (!groups.is_count()) return {};
  const size_t now = static_cast<size_t>(groups.n) * static_cast<size_t>(std::max(1, ranks));
  if (now == ck.groups.size() || ck.groups.empty()) return {};
  auto a = make_algorithm(algo);
  if (!a.ok() || (*a)->regroupable()) return {};
  return invalid_argument(regroup_refusal(algo, ck.groups.size(), now));
}

// Puts a checkpoint's state into a freshly built run, before algo.prepare() (which derives the
// algorithm's own buffers, e.g. sync-easgd's second centre and the GPU copies, from the
// weights and the centre it finds).
Status restore_run(const Checkpoint& ck, const std::string& identity, const Algorithm& algo,
                   uint64_t seed, Run& run) {
  if (identity_sans_groups(ck.identity) != identity_sans_groups(identity))
    return invalid_argument("--resume: the checkpoint is of another run (it holds " + ck.identity +
                            "; this run is " + identity + ")");
  const size_t n = static_cast<size_t>(run.arena_floats());
  if (ck.groups.empty() || ck.centre.size() != (algo.uses_centre() ? n : 0))
    return invalid_argument("--resume: the checkpoint's groups or centre do not fit this run");
  if (regrouped(ck, run) && !algo.regroupable())
    return invalid_argument(regroup_refusal(algo.name(), ck.groups.size(), run.groups.size()));
  for (size_t i = 0; i < ck.groups.size(); ++i) {
    const GroupCheckpoint& c = ck.groups[i];
    if (c.weights.size() != n || c.momentum.size() != n || c.steps < 0)
      return invalid_argument("--resume: group " + std::to_string(i) +
                              "'s arenas in the checkpoint do not fit this run's net");
  }
  // Every round gives the groups iterations x P steps in all (each group its share in the sync
  // algorithms). The algorithm checks its own state (e.g. easgd-rr's turn) in restore_state.
  // Steps lost to failed groups count as the rounds' (format 3).
  int64_t steps = ck.lost_steps, want = 0;
  bool dropped = false, overflow = __builtin_mul_overflow(
                            ck.iterations_done, static_cast<int64_t>(ck.groups.size()), &want);
  for (const GroupCheckpoint& c : ck.groups) {
    overflow = overflow || __builtin_add_overflow(steps, c.steps, &steps);
    dropped = dropped || c.dropped;
  }
  if (overflow || steps != want)
    return invalid_argument("--resume: the checkpoint's step counts do not add up");
  if (dropped && run.on_failure == OnFailure::stop)
    return invalid_argument(
        "--resume: the checkpoint's run had dropped a failed group; --on-failure stop cannot go "
        "on without it (give --on-failure drop or restart)");
  if (algo.uses_centre())
    copy_bytes(run.centre.data(), run.centre.kind(), ck.centre.data(), MemKind::dram,
               n * sizeof(float));
  run.centre_version.store(ck.centre_version);
  if (regrouped(ck, run)) return regroup_run(ck, algo, seed, run);  // every group afresh
  run.lost_before = run.rank == 0 ? ck.lost_steps : 0;  // (a checkpoint sums the ranks')
  for (size_t i = 0; i < run.groups.size(); ++i) {      // across ranks: this rank's groups
    Group& g = *run.groups[i];
    const GroupCheckpoint& c = ck.groups[static_cast<size_t>(g.global_id)];
    copy_bytes(g.weights.data(), g.weights.kind(), c.weights.data(), MemKind::dram,
               n * sizeof(float));
    copy_bytes(g.momentum.data(), g.momentum.kind(), c.momentum.data(), MemKind::dram,
               n * sizeof(float));
    Status st;
    g.worker->run([&] { st = g.data->seek(c.stream); });  // restarts its pipeline
    if (!st.ok())
      return invalid_argument("--resume: group " + std::to_string(i) + ": " + st.message());
    g.steps.store(c.steps);
    g.centre_read_version = c.centre_read_version;
    g.times = c.times;
    g.staleness_sum = c.staleness_sum;
    g.staleness_count = c.staleness_count;
    g.staleness_max = c.staleness_max;
    g.loss_sum = ck.mid_round ? c.loss_sum : 0;  // a cut round goes on with its sums
    g.loss_count = ck.mid_round ? c.loss_count : 0;
    g.dropped = c.dropped;
  }
  return {};
}

// The run's state after a round (every group stopped): the inverse of restore_run.
Checkpoint capture_run(Run& run, Algorithm& algo, const std::string& identity) {
  Checkpoint ck;
  ck.identity = identity;
  const size_t n = static_cast<size_t>(run.arena_floats());
  auto host_copy = [&](const float* src, MemKind kind) {
    std::vector<float> v(n);
    copy_bytes(v.data(), MemKind::dram, src, kind, n * sizeof(float));
    return v;
  };
  // The centre the algorithm reads next (sync-easgd's may be in its second buffer).
  if (algo.uses_centre()) ck.centre = host_copy(algo.eval_weights(run), run.centre.kind());
  ck.algo = algo.save_state(run);
  ck.centre_version = run.centre_version.load();
  ck.lost_steps = run.lost_before;
  for (const auto& gp : run.groups) {
    const Group& g = *gp;
    GroupCheckpoint c;
    c.steps = g.steps.load();
    c.dropped = g.dropped;
    c.weights = host_copy(g.weights.data(), g.weights.kind());
    c.momentum = host_copy(g.momentum.data(), g.momentum.kind());
    c.stream = g.data->state();
    c.centre_read_version = g.centre_read_version;
    c.times = g.times;
    c.staleness_sum = g.staleness_sum;
    c.staleness_count = g.staleness_count;
    c.staleness_max = g.staleness_max;
    c.loss_sum = g.loss_sum;
    c.loss_count = g.loss_count;
    ck.groups.push_back(std::move(c));
  }
  return ck;
}

void gather_checkpoint_groups(MpiComm& world, Checkpoint& mine) {
  Checkpoint part;
  part.lost_steps = mine.lost_steps;
  part.groups = std::move(mine.groups);
  mine.groups.clear();
  std::string bytes = encode_checkpoint(part);
  const int ranks = world.size(), rank = world.rank();
  // gather_bytes takes equal parts: each rank's encoding padded to the largest.
  uint64_t n = bytes.size(), most = 0;
  std::vector<uint64_t> sizes(rank == 0 ? static_cast<size_t>(ranks) : 0);
  world.gather_bytes(&n, sizeof n, sizes.data(), 0);
  if (rank == 0) most = *std::max_element(sizes.begin(), sizes.end());
  world.broadcast_bytes(&most, sizeof most, 0);
  bytes.resize(most);
  std::string all(rank == 0 ? most * static_cast<size_t>(ranks) : 0, '\0');
  world.gather_bytes(bytes.data(), most, all.data(), 0);
  if (rank != 0) return;
  mine.lost_steps = 0;
  for (int r = 0; r < ranks; ++r) {
    auto one = decode_checkpoint(std::string_view(all).substr(most * r, sizes[r]),
                                 "rank " + std::to_string(r) + "'s groups");
    EASEL_CHECK(one.ok());  // encoded just now, by the same code
    mine.lost_steps += one->lost_steps;
    for (GroupCheckpoint& g : one->groups)
      mine.groups.push_back(std::move(g));
  }
}

double young_daly_interval(double cost_seconds, double mtbf_seconds) {
  return std::sqrt(2 * std::max(cost_seconds, 0.0) * std::max(mtbf_seconds, 0.0));
}

}  // namespace easel
