#include "model/machine.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/config.hpp"
#include "model/machines_dirs.h"

#ifndef EASEL_MACHINES_SOURCE_DIR
#define EASEL_MACHINES_SOURCE_DIR ""
#endif
#ifndef EASEL_MACHINES_INSTALL_DIR
#define EASEL_MACHINES_INSTALL_DIR ""
#endif

namespace easel::model {

namespace {

const TomlValue* as_table(const TomlValue* v) {
  return v != nullptr && v->type == TomlValue::Type::table ? v : nullptr;
}
const TomlValue* as_array(const TomlValue* v) {
  return v != nullptr && v->type == TomlValue::Type::array ? v : nullptr;
}

// Reads one table of the description, naming the file and key in every error.
class Reader {
 public:
  Reader(const TomlValue& root, std::string origin) : root_(root), origin_(std::move(origin)) {}

  Status error(const std::string& key, const std::string& what, const TomlValue* n = nullptr) {
    std::string line;
    if (n != nullptr && n->line > 0) line = ":" + std::to_string(n->line);
    return invalid_argument(origin_ + line + ": " + key + ": " + what);
  }

  // A table that must exist (and carry a non-empty `source`).
  Result<const TomlValue*> table(const TomlValue& in, const std::string& prefix,
                                 const std::string& key, bool required) {
    const TomlValue* n = in.find(key);
    const std::string full = prefix.empty() ? key : prefix + "." + key;
    if (n == nullptr) {
      if (required) return error(full, "missing (a table)");
      return static_cast<const TomlValue*>(nullptr);
    }
    const TomlValue* t = as_table(n);
    if (t == nullptr) return error(full, "must be a table", n);
    EASEL_RETURN_IF_ERROR(source(*t, full));
    return t;
  }

  // Every table says where its figures come from.
  Status source(const TomlValue& t, const std::string& full) {
    const TomlValue* s = t.find("source");
    if (s == nullptr) return error(full + ".source", "missing (where the figures come from)");
    if (s->type != TomlValue::Type::string || s->str.empty())
      return error(full + ".source", "must be a non-empty string", s);
    return Status::ok_status();
  }

  // A number in [lo, hi]; `def` when absent and not required.
  Result<double> number(const TomlValue& t, const std::string& prefix, const std::string& key,
                        double lo, double hi, bool required, double def = 0) {
    const TomlValue* n = t.find(key);
    const std::string full = prefix + "." + key;
    if (n == nullptr) {
      if (required) return error(full, "missing (a number)");
      return def;
    }
    double v = 0;
    if (n->type == TomlValue::Type::integer)
      v = static_cast<double>(n->integer);
    else if (n->type == TomlValue::Type::floating)
      v = n->floating;
    else
      return error(full, "must be a number", n);
    if (!std::isfinite(v) || v < lo || v > hi) {
      std::ostringstream os;
      os << "must be in [" << lo << ", " << hi << "], not " << v;
      return error(full, os.str(), n);
    }
    return v;
  }

  Result<std::string> text(const TomlValue& t, const std::string& prefix, const std::string& key,
                           bool required) {
    const TomlValue* n = t.find(key);
    const std::string full = prefix + "." + key;
    if (n == nullptr) {
      if (required) return error(full, "missing (a string)");
      return std::string();
    }
    if (n->type != TomlValue::Type::string || n->str.empty())
      return error(full, "must be a non-empty string", n);
    return n->str;
  }

  // Keys of t that are not in `known`: an error naming the first (a typo would silently use a
  // default otherwise).
  Status only(const TomlValue& t, const std::string& prefix,
              std::initializer_list<const char*> known) {
    return only(t, prefix, std::vector<const char*>(known));
  }
  Status only(const TomlValue& t, const std::string& prefix,
              const std::vector<const char*>& known) {
    for (const TomlField& f : t.fields) {
      bool ok = false;
      for (const char* name : known)
        ok = ok || f.key == name;
      if (!ok) return error(prefix.empty() ? f.key : prefix + "." + f.key, "unknown key", &f.value);
    }
    return Status::ok_status();
  }

  const TomlValue& root() const { return root_; }

 private:
  const TomlValue& root_;
  std::string origin_;
};

constexpr double kBig = 1e9;

Status read_memory(Reader& r, const TomlValue& mem, const std::string& key, MemoryFigure* out) {
  EASEL_ASSIGN_OR_RETURN(const TomlValue* t, r.table(mem, "memory", key, false));
  if (t == nullptr) return Status::ok_status();
  const std::string p = "memory." + key;
  EASEL_RETURN_IF_ERROR(
      r.only(*t, p, {"bandwidth_gbs", "core_bandwidth_gbs", "capacity_gb", "source"}));
  out->present = true;
  EASEL_ASSIGN_OR_RETURN(out->bandwidth_gbs, r.number(*t, p, "bandwidth_gbs", 1e-3, kBig, true));
  EASEL_ASSIGN_OR_RETURN(out->core_bandwidth_gbs,
                         r.number(*t, p, "core_bandwidth_gbs", 1e-3, kBig, false));
  EASEL_ASSIGN_OR_RETURN(out->capacity_gb, r.number(*t, p, "capacity_gb", 1e-6, kBig, true));
  return Status::ok_status();
}

// Points timed by size, each a table under `p`: bytes > 0, seconds > 0, optionally
// cold_seconds > 0; groups >= least_groups when least_groups > 0 (else no groups key: 1);
// with `slowest`, optionally slowest_seconds and slowest_cold_seconds (the Comm path's root).
Status read_points(Reader& r, const TomlValue& node, const std::string& p, int least_groups,
                   bool slowest, std::vector<ExchangePoint>* out) {
  const TomlValue* arr = as_array(&node);
  if (arr == nullptr) return r.error(p, "must be an array of tables ([[" + p + "]])", &node);
  std::vector<const char*> keys = {"bytes", "seconds", "cold_seconds"};
  if (least_groups > 0) keys.push_back("groups");
  if (slowest) keys.insert(keys.end(), {"slowest_seconds", "slowest_cold_seconds"});
  for (size_t j = 0; j < arr->items.size(); ++j) {
    const std::string lp = p + "[" + std::to_string(j) + "]";
    const TomlValue* t = as_table(&arr->items[j]);
    if (t == nullptr) return r.error(lp, "must be a table", &arr->items[j]);
    EASEL_RETURN_IF_ERROR(r.only(*t, lp, keys));
    ExchangePoint x;
    x.groups = 1;
    if (least_groups > 0) {
      EASEL_ASSIGN_OR_RETURN(const double g, r.number(*t, lp, "groups", least_groups, 1e6, true));
      x.groups = static_cast<int>(g);
    }
    EASEL_ASSIGN_OR_RETURN(x.bytes, r.number(*t, lp, "bytes", 1, 1e15, true));
    EASEL_ASSIGN_OR_RETURN(x.seconds, r.number(*t, lp, "seconds", 1e-12, 1e6, true));
    EASEL_ASSIGN_OR_RETURN(x.cold_seconds, r.number(*t, lp, "cold_seconds", 1e-12, 1e6, false, 0));
    if (slowest) {
      EASEL_ASSIGN_OR_RETURN(x.slowest_seconds,
                             r.number(*t, lp, "slowest_seconds", 1e-12, 1e6, false, 0));
      EASEL_ASSIGN_OR_RETURN(x.slowest_cold_seconds,
                             r.number(*t, lp, "slowest_cold_seconds", 1e-12, 1e6, false, 0));
    }
    out->push_back(x);
  }
  return Status::ok_status();
}

// [[transport.shared_memory.exchange]] (groups >= 2: the fused exchanges),
// [[transport.shared_memory.comm_exchange]] (groups >= 1, and the slowest group) and
// [[transport.shared_memory.centre_exchange]] (no groups).
Status read_exchange_points(Reader& r, const TomlValue& node, const std::string& key,
                            std::vector<ExchangePoint>* out) {
  const int least = key == "centre_exchange" ? 0 : key == "comm_exchange" ? 1 : 2;
  return read_points(r, node, "transport.shared_memory." + key, least, key == "comm_exchange", out);
}

Status read_transport(Reader& r, const TomlValue& tr, const std::string& key, Transport* out,
                      Machine* m) {
  EASEL_ASSIGN_OR_RETURN(const TomlValue* t, r.table(tr, "transport", key, false));
  if (t == nullptr) return Status::ok_status();
  const std::string p = "transport." + key;
  if (key == "shared_memory") {
    EASEL_RETURN_IF_ERROR(r.only(
        *t, p,
        {"latency_us", "bandwidth_gbs", "exchange", "comm_exchange", "centre_exchange", "source"}));
    if (const TomlValue* x = t->find("exchange"))
      EASEL_RETURN_IF_ERROR(read_exchange_points(r, *x, "exchange", &m->shm_exchange));
    if (const TomlValue* x = t->find("comm_exchange"))
      EASEL_RETURN_IF_ERROR(read_exchange_points(r, *x, "comm_exchange", &m->shm_comm_exchange));
    if (const TomlValue* x = t->find("centre_exchange"))
      EASEL_RETURN_IF_ERROR(
          read_exchange_points(r, *x, "centre_exchange", &m->shm_centre_exchange));
  } else {
    EASEL_RETURN_IF_ERROR(r.only(*t, p, {"latency_us", "bandwidth_gbs", "source"}));
  }
  out->present = true;
  EASEL_ASSIGN_OR_RETURN(out->latency_us, r.number(*t, p, "latency_us", 0, 1e7, true));
  EASEL_ASSIGN_OR_RETURN(out->bandwidth_gbs, r.number(*t, p, "bandwidth_gbs", 1e-3, kBig, true));
  return Status::ok_status();
}

Status read_nets(Reader& r, const TomlValue& node, Machine* m) {
  const TomlValue* arr = as_array(&node);
  if (arr == nullptr) return r.error("net", "must be an array of tables ([[net]])", &node);
  for (size_t i = 0; i < arr->items.size(); ++i) {
    const std::string p = "net[" + std::to_string(i) + "]";
    const TomlValue* t = as_table(&arr->items[i]);
    if (t == nullptr) return r.error(p, "must be a table", &arr->items[i]);
    EASEL_RETURN_IF_ERROR(r.source(*t, p));
    EASEL_RETURN_IF_ERROR(r.only(*t, p,
                                 {"name", "batch", "step_seconds", "update_seconds",
                                  "oversubscription_overhead", "layer", "source"}));
    NetCalibration c;
    EASEL_ASSIGN_OR_RETURN(c.net, r.text(*t, p, "name", true));
    EASEL_ASSIGN_OR_RETURN(const double batch, r.number(*t, p, "batch", 1, 65536, true));
    c.batch = static_cast<int64_t>(batch);
    EASEL_ASSIGN_OR_RETURN(c.step_seconds, r.number(*t, p, "step_seconds", 1e-9, 1e6, true));
    EASEL_ASSIGN_OR_RETURN(c.update_seconds, r.number(*t, p, "update_seconds", 0, 1e6, false));
    EASEL_ASSIGN_OR_RETURN(c.oversubscription_overhead,
                           r.number(*t, p, "oversubscription_overhead", 0, 10, false, -1));
    if (c.update_seconds > c.step_seconds)
      return r.error(p + ".update_seconds", "is more than step_seconds", t->find("update_seconds"));
    if (const TomlValue* l = t->find("layer")) {
      const TomlValue* la = as_array(l);
      if (la == nullptr) return r.error(p + ".layer", "must be an array of tables", l);
      for (size_t j = 0; j < la->items.size(); ++j) {
        const std::string lp = p + ".layer[" + std::to_string(j) + "]";
        const TomlValue* lt = as_table(&la->items[j]);
        if (lt == nullptr) return r.error(lp, "must be a table", &la->items[j]);
        EASEL_RETURN_IF_ERROR(
            r.only(*lt, lp, {"name", "kind", "forward_seconds", "backward_seconds"}));
        NetCalibration::Layer layer;
        EASEL_ASSIGN_OR_RETURN(layer.name, r.text(*lt, lp, "name", true));
        EASEL_ASSIGN_OR_RETURN(layer.kind, r.text(*lt, lp, "kind", true));
        EASEL_ASSIGN_OR_RETURN(layer.forward_seconds,
                               r.number(*lt, lp, "forward_seconds", 0, 1e6, true));
        EASEL_ASSIGN_OR_RETURN(layer.backward_seconds,
                               r.number(*lt, lp, "backward_seconds", 0, 1e6, true));
        c.layers.push_back(layer);
      }
    }
    for (const NetCalibration& other : m->nets)
      if (other.net == c.net) return r.error(p + ".name", "'" + c.net + "' is described twice");
    m->nets.push_back(std::move(c));
  }
  return Status::ok_status();
}

Status read_step(Reader& r, const TomlValue& root, Machine* m) {
  EASEL_ASSIGN_OR_RETURN(const TomlValue* t, r.table(root, "", "step", false));
  if (t == nullptr) return Status::ok_status();
  EASEL_RETURN_IF_ERROR(r.source(*t, "step"));
  EASEL_RETURN_IF_ERROR(r.only(
      *t, "step",
      {"update_gbs", "other_seconds_per_image", "rate", "update", "elastic_update", "source"}));
  if (const TomlValue* u = t->find("update")) {
    EASEL_RETURN_IF_ERROR(read_points(r, *u, "step.update", 0, false, &m->update_passes));
    for (const ExchangePoint& x : m->update_passes)
      m->step.update_by_size.emplace_back(x.bytes, x.seconds);
  }
  if (const TomlValue* u = t->find("elastic_update"))
    EASEL_RETURN_IF_ERROR(read_points(r, *u, "step.elastic_update", 0, false, &m->elastic_passes));
  EASEL_ASSIGN_OR_RETURN(m->step.update_gbs, r.number(*t, "step", "update_gbs", 1e-3, kBig, true));
  EASEL_ASSIGN_OR_RETURN(m->step.other_per_image,
                         r.number(*t, "step", "other_seconds_per_image", 0, 1e3, false, 0));
  const TomlValue* l = t->find("rate");
  const TomlValue* la = l ? as_array(l) : nullptr;
  if (la == nullptr) return r.error("step.rate", "must be an array of tables ([[step.rate]])", l);
  for (size_t j = 0; j < la->items.size(); ++j) {
    const std::string lp = "step.rate[" + std::to_string(j) + "]";
    const TomlValue* lt = as_table(&la->items[j]);
    if (lt == nullptr) return r.error(lp, "must be a table", &la->items[j]);
    EASEL_RETURN_IF_ERROR(
        r.only(*lt, lp, {"class", "pass", "gflops", "gbs", "weight_gbs", "gpixels", "samples"}));
    LayerRate rate;
    EASEL_ASSIGN_OR_RETURN(rate.cls, r.text(*lt, lp, "class", true));
    EASEL_ASSIGN_OR_RETURN(const std::string pass, r.text(*lt, lp, "pass", true));
    if (pass != "forward" && pass != "backward")
      return r.error(lp + ".pass", "must be \"forward\" or \"backward\", not \"" + pass + "\"",
                     lt->find("pass"));
    rate.backward = pass == "backward";
    EASEL_ASSIGN_OR_RETURN(rate.gflops, r.number(*lt, lp, "gflops", 0, 1e8, false, 0));
    EASEL_ASSIGN_OR_RETURN(rate.gbs, r.number(*lt, lp, "gbs", 0, kBig, false, 0));
    EASEL_ASSIGN_OR_RETURN(rate.gpixels, r.number(*lt, lp, "gpixels", 0, kBig, false, 0));
    if (lt->find("weight_gbs") != nullptr) {
      EASEL_ASSIGN_OR_RETURN(const double w, r.number(*lt, lp, "weight_gbs", 0, kBig, true));
      rate.weight_gbs = w;
    }
    EASEL_ASSIGN_OR_RETURN(const double n, r.number(*lt, lp, "samples", 0, 1e9, false, 0));
    rate.samples = static_cast<int>(n);
    if (rate.gflops <= 0 && rate.gbs <= 0 && rate.weight_gbs.value_or(0) <= 0 && rate.gpixels <= 0)
      return r.error(lp, "needs gflops, gbs, weight_gbs or gpixels (a positive rate)",
                     &la->items[j]);
    for (const LayerRate& o : m->step.rates)
      if (o.cls == rate.cls && o.backward == rate.backward)
        return r.error(lp + ".class", "'" + rate.cls + "' " + pass + " is described twice",
                       lt->find("class"));
    m->step.rates.push_back(std::move(rate));
  }
  return Status::ok_status();
}

Status read_modes(Reader& r, const TomlValue& node, Machine* m) {
  const TomlValue* arr = as_array(&node);
  if (arr == nullptr) return r.error("mode", "must be an array of tables ([[mode]])", &node);
  for (size_t i = 0; i < arr->items.size(); ++i) {
    const std::string p = "mode[" + std::to_string(i) + "]";
    const TomlValue* t = as_table(&arr->items[i]);
    if (t == nullptr) return r.error(p, "must be a table", &arr->items[i]);
    EASEL_RETURN_IF_ERROR(r.source(*t, p));
    EASEL_RETURN_IF_ERROR(r.only(*t, p, {"name", "localities", "hbw_gb", "dram_gb", "source"}));
    LocalityMode mode;
    EASEL_ASSIGN_OR_RETURN(mode.name, r.text(*t, p, "name", true));
    EASEL_ASSIGN_OR_RETURN(const double loc, r.number(*t, p, "localities", 1, 1024, true));
    mode.localities = static_cast<int>(loc);
    if (m->cores % mode.localities != 0)
      return r.error(p + ".localities",
                     "must divide machine.cores (" + std::to_string(m->cores) + ")",
                     t->find("localities"));
    EASEL_ASSIGN_OR_RETURN(mode.hbw_gb, r.number(*t, p, "hbw_gb", 0, kBig, false));
    EASEL_ASSIGN_OR_RETURN(mode.dram_gb, r.number(*t, p, "dram_gb", 0, kBig, false));
    m->modes.push_back(std::move(mode));
  }
  return Status::ok_status();
}

Result<Machine> read(Reader& r, const std::string& origin) {
  const TomlValue& root = r.root();
  EASEL_RETURN_IF_ERROR(
      r.only(root, "", {"machine", "compute", "memory", "transport", "net", "step", "mode"}));
  Machine m;
  m.file = origin;
  EASEL_ASSIGN_OR_RETURN(const TomlValue* mt, r.table(root, "", "machine", true));
  EASEL_RETURN_IF_ERROR(r.only(*mt, "machine", {"name", "kind", "cores", "devices", "source"}));
  EASEL_ASSIGN_OR_RETURN(m.name, r.text(*mt, "machine", "name", true));
  EASEL_ASSIGN_OR_RETURN(const std::string kind, r.text(*mt, "machine", "kind", true));
  if (kind != "cpu" && kind != "gpu")
    return r.error("machine.kind", "must be \"cpu\" or \"gpu\", not \"" + kind + "\"",
                   mt->find("kind"));
  m.gpu = kind == "gpu";
  EASEL_ASSIGN_OR_RETURN(const double cores, r.number(*mt, "machine", "cores", 1, 65536, true));
  m.cores = static_cast<int>(cores);
  EASEL_ASSIGN_OR_RETURN(const double devices,
                         r.number(*mt, "machine", "devices", 1, 4096, m.gpu, 0));
  m.devices = static_cast<int>(devices);
  if (!m.gpu && mt->find("devices") != nullptr)
    return r.error("machine.devices", "only a gpu machine has devices", mt->find("devices"));

  EASEL_ASSIGN_OR_RETURN(const TomlValue* ct, r.table(root, "", "compute", true));
  EASEL_RETURN_IF_ERROR(r.only(
      *ct, "compute",
      {"peak_gflops", "tf32_gflops", "bf16_gflops", "efficiency", "serial_fraction", "contention",
       "oversubscription_overhead", "oversubscribed_wait", "vector_floats", "source"}));
  EASEL_ASSIGN_OR_RETURN(m.peak_gflops, r.number(*ct, "compute", "peak_gflops", 1e-3, 1e7, true));
  EASEL_ASSIGN_OR_RETURN(m.efficiency, r.number(*ct, "compute", "efficiency", 1e-3, 1, true));
  EASEL_ASSIGN_OR_RETURN(m.tf32_gflops,
                         r.number(*ct, "compute", "tf32_gflops", 1e-3, 1e8, false, 0));
  EASEL_ASSIGN_OR_RETURN(m.bf16_gflops,
                         r.number(*ct, "compute", "bf16_gflops", 1e-3, 1e8, false, 0));
  EASEL_ASSIGN_OR_RETURN(m.serial_fraction,
                         r.number(*ct, "compute", "serial_fraction", 0, 1, false, 0));
  EASEL_ASSIGN_OR_RETURN(m.contention, r.number(*ct, "compute", "contention", 0.5, 100, false, 1));
  EASEL_ASSIGN_OR_RETURN(m.oversubscription_overhead,
                         r.number(*ct, "compute", "oversubscription_overhead", 0, 10, false, 0));
  EASEL_ASSIGN_OR_RETURN(m.oversubscribed_wait,
                         r.number(*ct, "compute", "oversubscribed_wait", 0, 10, false, 0));
  EASEL_ASSIGN_OR_RETURN(const double lanes,
                         r.number(*ct, "compute", "vector_floats", 1, 64, false, 1));
  m.vector_floats = static_cast<int>(lanes);

  EASEL_ASSIGN_OR_RETURN(const TomlValue* mem, r.table(root, "", "memory", true));
  EASEL_RETURN_IF_ERROR(r.only(*mem, "memory", {"dram", "hbw", "device", "cache_mb", "source"}));
  EASEL_ASSIGN_OR_RETURN(m.cache_mb, r.number(*mem, "memory", "cache_mb", 0, kBig, false, 0));
  EASEL_RETURN_IF_ERROR(read_memory(r, *mem, "dram", &m.dram));
  EASEL_RETURN_IF_ERROR(read_memory(r, *mem, "hbw", &m.hbw));
  EASEL_RETURN_IF_ERROR(read_memory(r, *mem, "device", &m.device));
  if (!m.dram.present) return r.error("memory.dram", "missing (a table)");
  if (m.gpu && !m.device.present)
    return r.error("memory.device", "missing (a gpu machine's device memory)");

  EASEL_ASSIGN_OR_RETURN(const TomlValue* tr, r.table(root, "", "transport", true));
  EASEL_RETURN_IF_ERROR(
      r.only(*tr, "transport", {"shared_memory", "mpi", "nccl", "host_device", "source"}));
  EASEL_RETURN_IF_ERROR(read_transport(r, *tr, "shared_memory", &m.shared_memory, &m));
  EASEL_RETURN_IF_ERROR(read_transport(r, *tr, "mpi", &m.mpi, &m));
  EASEL_RETURN_IF_ERROR(read_transport(r, *tr, "nccl", &m.nccl, &m));
  EASEL_RETURN_IF_ERROR(read_transport(r, *tr, "host_device", &m.host_device, &m));
  if (!m.shared_memory.present) return r.error("transport.shared_memory", "missing (a table)");
  if (m.gpu && !m.host_device.present)
    return r.error("transport.host_device", "missing (a gpu machine's host link)");

  if (const TomlValue* n = root.find("net")) EASEL_RETURN_IF_ERROR(read_nets(r, *n, &m));
  EASEL_RETURN_IF_ERROR(read_step(r, root, &m));
  if (const TomlValue* n = root.find("mode")) EASEL_RETURN_IF_ERROR(read_modes(r, *n, &m));
  return m;
}

}  // namespace

const NetCalibration* Machine::calibration(const std::string& net) const {
  for (const NetCalibration& c : nets)
    if (c.net == net) return &c;
  return nullptr;
}

Result<Machine> parse_machine(const std::string& text, const std::string& origin) {
  EASEL_ASSIGN_OR_RETURN(const TomlValue table, parse_toml(text, origin));
  Reader r(table, origin);
  return read(r, origin);
}

Result<Machine> load_machine(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return invalid_argument("--machine: " + path + ": no such file");
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  if (!f && !f.eof()) return invalid_argument("--machine: " + path + ": cannot read it");
  if (os.str().size() > (1u << 20))
    return invalid_argument("--machine: " + path + ": more than 1 MiB (not a description)");
  return parse_machine(os.str(), path);
}

std::string default_calibration_path() {
  if (const char* e = std::getenv("EASEL_MACHINE"); e != nullptr && *e != 0) return e;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != 0 ? home : ".") + "/.config/easel/machine.toml";
}

Result<std::string> resolve_machine_path(const std::string& spec) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (spec == "this") {
    const std::string p = default_calibration_path();
    if (!fs::is_regular_file(p, ec))
      return invalid_argument("--machine this: " + p +
                              " does not exist (write it with `easel bench --calibrate`, or set "
                              "EASEL_MACHINE to a calibration file)");
    return p;
  }
  const bool toml_name = spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".toml") == 0;
  if (spec.find('/') != std::string::npos || toml_name) return spec;
  std::vector<std::string> dirs;
  if (const char* e = std::getenv("EASEL_MACHINES"); e != nullptr && *e != 0) dirs.push_back(e);
  if (const char* e = std::getenv("EASEL_SOURCE_ROOT"); e != nullptr && *e != 0)
    dirs.push_back(std::string(e) + "/tools/machines");
  dirs.push_back(EASEL_MACHINES_SOURCE_DIR);
  dirs.push_back(EASEL_MACHINES_INSTALL_DIR);
  std::string names;
  for (const std::string& d : dirs) {
    if (d.empty()) continue;
    const fs::path p = fs::path(d) / (spec + ".toml");
    if (fs::is_regular_file(p, ec)) return p.string();
    if (names.empty() && fs::is_directory(d, ec))
      for (const auto& entry : fs::directory_iterator(d, ec))
        if (entry.path().extension() == ".toml")
          names += (names.empty() ? "" : ", ") + entry.path().stem().string();
  }
  return invalid_argument("--machine: '" + spec + "' is neither a file nor a described machine" +
                          (names.empty() ? std::string() : " (" + names + ")") + " nor 'this'");
}

}  // namespace easel::model
