#include "engine/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine/comm/mpi_comm.hpp"

namespace easel {

namespace fs = std::filesystem;

namespace trace_detail {
thread_local TraceTrack* current = nullptr;
}

double trace_now() {
  // Simulated (SMPI): the simulated clock, as algos' now_seconds(), whose times add_time()
  // records beside these.
  if (const double sim = sim_clock_seconds(); sim >= 0) return sim;
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

Status check_trace_path(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (path.empty() || !p.has_filename())
    return invalid_argument("--trace: '" + path + "' names no file");
  if (fs::is_directory(p, ec)) return invalid_argument("--trace: " + path + " is a directory");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec))
    return invalid_argument("--trace: " + path + ": the directory " + dir.string() +
                            " does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return invalid_argument("--trace: " + path + ": cannot write in " + dir.string() + " (" +
                            std::strerror(errno) + ")");
  if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
    return invalid_argument("--trace: cannot write " + path + " (" + std::strerror(errno) + ")");
  return {};
}

std::string trace_path_for_rank(const std::string& path, int rank) {
  if (rank == 0) return path;
  fs::path p(path);
  const std::string ext = p.extension().string();
  p.replace_extension();
  return p.string() + ".rank" + std::to_string(rank) + ext;
}

// ---- TraceTrack ----------------------------------------------------------------------------

TraceTrack::TraceTrack(std::string name, int tid, int64_t full, int64_t every, const char* unit)
    : name_(std::move(name)),
      tid_(tid),
      unit_name_(unit),
      full_(full),
      every_(std::max<int64_t>(1, every)) {}

void TraceTrack::begin_unit(int64_t u) {
  if (u == unit_ && first_ >= 0) return;
  if (first_ < 0) first_ = u;
  unit_ = u;
  const int64_t r = u - first_;
  if (r < full_) {
    recording_ = true;
    full_kept_ += 1;
    return;
  }
  if ((r - full_) % every_ != 0) {
    recording_ = false;
    return;
  }
  if (sampled_ == kTraceSampledSteps) decimate();
  recording_ = (r - full_) % every_ == 0;
  if (recording_) sampled_ += 1;
}

// Doubles the sampling period and drops the sampled units that the new period skips.
void TraceTrack::decimate() {
  every_ *= 2;
  const int64_t lo = first_ + full_;
  spans_.erase(
      std::remove_if(spans_.begin(), spans_.end(),
                     [&](const Span& s) { return s.unit >= lo && (s.unit - lo) % every_ != 0; }),
      spans_.end());
  sampled_ = (sampled_ + 1) / 2;  // units lo, lo + 2*old, ...: the even ones stay
}

// ---- Tracer --------------------------------------------------------------------------------

Tracer::Tracer(std::string process, int pid, int64_t full, int64_t every)
    : process_(std::move(process)), pid_(pid), full_(full), every_(every), zero_(trace_now()) {}

TraceTrack* Tracer::add_track(const std::string& name, int tid, int64_t full, int64_t every,
                              const char* unit) {
  tracks_.push_back(std::make_unique<TraceTrack>(name, tid, full < 0 ? full_ : full,
                                                 every < 0 ? every_ : every, unit));
  return tracks_.back().get();
}

void Tracer::set_arg(const std::string& key, const std::string& value) {
  args_.emplace_back(key, value);
}

namespace {

void append_escaped(std::string& out, const char* s) {
  out += '"';
  for (; *s; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

// Nanoseconds as microseconds with three decimals (exact: no rounding between ts and dur).
void append_us(std::string& out, int64_t ns) {
  char buf[40];
  const long long a = ns < 0 ? -static_cast<long long>(ns) : ns;  // before rank 0's zero
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ns < 0 ? "-" : "", a / 1000, a % 1000);
  out += buf;
}

}  // namespace

std::string Tracer::json() const {
  std::string out = "{\"traceEvents\":[\n";
  const std::string pid = std::to_string(pid_);
  out +=
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":";
  append_escaped(out, process_.c_str());
  out += "}}";
  for (const auto& t : tracks_) {
    if (t->optional() && t->spans().empty()) continue;
    const std::string tid = std::to_string(t->tid());
    out += ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"args\":{\"name\":";
    append_escaped(out, t->name().c_str());
    out += "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + tid + "}}";
  }
  for (const auto& t : tracks_) {
    const std::string head =
        ",\n{\"ph\":\"X\",\"pid\":" + pid + ",\"tid\":" + std::to_string(t->tid());
    for (const TraceTrack::Span& s : t->spans()) {
      // Rounded once each, so that a span within another stays within it in the file.
      const int64_t b = std::llround((s.t0 - zero_) * 1e9);
      const int64_t e = std::max(b, static_cast<int64_t>(std::llround((s.t1 - zero_) * 1e9)));
      out += head;
      out += ",\"ts\":";
      append_us(out, b);
      out += ",\"dur\":";
      append_us(out, e - b);
      out += ",\"name\":";
      append_escaped(out, s.name);
      out += ",\"cat\":";
      append_escaped(out, s.cat);
      out += ",\"args\":{\"" + std::string(t->unit_name()) + "\":" + std::to_string(s.unit) + "}}";
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{";
  for (size_t i = 0; i < args_.size(); ++i) {
    if (i > 0) out += ",";
    append_escaped(out, args_[i].first.c_str());
    out += ":";
    append_escaped(out, args_[i].second.c_str());
  }
  out += "}}\n";
  return out;
}

Status Tracer::write(const std::string& path) const {
  const std::string text = json();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return io_error("--trace: cannot write " + tmp + ": " + std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    std::remove(tmp.c_str());
    return io_error("--trace: cannot write " + tmp + " (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return io_error("--trace: cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  return {};
}

}  // namespace easel
