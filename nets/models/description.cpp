#include "nets/models/description.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "devices/ops/op_def.hpp"
#include "engine/config.hpp"
#include "nets/graph.hpp"

namespace easel {

namespace {

using Type = TomlValue::Type;

constexpr int64_t kMaxLayers = 10'000;
constexpr int64_t kMaxSize = 1 << 20;  // any count, side, kernel or stride
constexpr size_t kMaxFileBytes = size_t{16} << 20;

// A name is in every message about its net or layer, and those are one line: no control
// characters (a "\n" in a TOML string).
bool has_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

std::string control_error(std::string_view name) {
  return "'" + printable(name) + "' holds a control character (a name is one line)";
}

// One layer's fields, read once each; what is left unread at the end is an unknown key.
class Fields {
 public:
  Fields(const TomlValue& table, std::string where) : t_(table), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  Status error(const std::string& key, const std::string& what) const {
    return invalid_argument(where_ + key + (key.empty() ? "" : ": ") + what);
  }
  const TomlValue* take(const std::string& key) {
    used_.push_back(key);
    return t_.find(key);
  }
  Result<std::string> text(const std::string& key, std::string fallback, bool required = false);
  Result<int64_t> integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi);
  Result<float> number(const std::string& key, float fallback, double lo, double hi);
  Result<bool> boolean(const std::string& key, bool fallback);
  Result<std::vector<std::string>> names(const std::string& key);
  Result<std::vector<float>> numbers(const std::string& key, std::vector<float> fallback);
  // The first key of the table that no reader took.
  Status no_unknown_keys(const std::string& type) const {
    for (const auto& [k, v] : t_.fields)
      if (std::find(used_.begin(), used_.end(), k) == used_.end())
        return error(printable(k), "unknown key for a " + type + " layer");
    return {};
  }

 private:
  Status wrong_type(const std::string& key, const TomlValue& v, const char* want) const {
    return error(key, std::string("must be ") + want + ", not " + toml_type_name(v.type));
  }
  const TomlValue& t_;
  std::string where_;
  std::vector<std::string> used_;
};

Result<std::string> Fields::text(const std::string& key, std::string fallback, bool required) {
  const TomlValue* v = take(key);
  if (!v) {
    if (required) return error(key, "missing");
    return fallback;
  }
  if (v->type != Type::string) return wrong_type(key, *v, "a string");
  if (v->str.empty()) return error(key, "is empty");
  return v->str;
}

Result<int64_t> Fields::integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) {
  const TomlValue* v = take(key);
  if (!v) return fallback;
  if (v->type != Type::integer) return wrong_type(key, *v, "an integer");
  if (v->integer < lo || v->integer > hi)
    return error(key, std::to_string(v->integer) + " is out of range [" + std::to_string(lo) +
                          ", " + std::to_string(hi) + "]");
  return v->integer;
}

Result<float> Fields::number(const std::string& key, float fallback, double lo, double hi) {
  const TomlValue* v = take(key);
  if (!v) return fallback;
  double x = 0;
  if (v->type == Type::floating)
    x = v->floating;
  else if (v->type == Type::integer)
    x = static_cast<double>(v->integer);
  else
    return wrong_type(key, *v, "a number");
  if (!std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream os;
    os << x << " is out of range [" << lo << ", " << hi << "]";
    return error(key, os.str());
  }
  return static_cast<float>(x);
}

Result<bool> Fields::boolean(const std::string& key, bool fallback) {
  const TomlValue* v = take(key);
  if (!v) return fallback;
  if (v->type != Type::boolean) return wrong_type(key, *v, "true or false");
  return v->boolean;
}

Result<std::vector<std::string>> Fields::names(const std::string& key) {
  const TomlValue* v = take(key);
  if (!v) return std::vector<std::string>{};
  if (v->type != Type::array) return wrong_type(key, *v, "an array of layer names");
  if (v->items.empty()) return error(key, "is empty (leave it out to read the layer before)");
  std::vector<std::string> out;
  for (const TomlValue& x : v->items) {
    if (x.type != Type::string) return wrong_type(key, x, "an array of layer names");
    if (has_control(x.str)) return error(key, control_error(x.str));
    out.push_back(x.str);
  }
  return out;
}

Result<std::vector<float>> Fields::numbers(const std::string& key, std::vector<float> fallback) {
  const TomlValue* v = take(key);
  if (!v) return fallback;
  if (v->type != Type::array || v->items.size() != fallback.size())
    return error(key, "must be an array of " + std::to_string(fallback.size()) +
                          " numbers (one per parameter)");
  std::vector<float> out;
  for (const TomlValue& x : v->items) {
    double d = 0;
    if (x.type == Type::floating)
      d = x.floating;
    else if (x.type == Type::integer)
      d = static_cast<double>(x.integer);
    else
      return wrong_type(key, x, "an array of numbers");
    if (!std::isfinite(d) || d < 0 || d > 1e6) return error(key, "values must lie in [0, 1e6]");
    out.push_back(static_cast<float>(d));
  }
  return out;
}

bool parse_float(std::string_view s, float* out) {
  if (s.empty()) return false;
  std::string str(s);
  char* end = nullptr;
  const double d = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size() || !std::isfinite(d) || std::fabs(d) > 1e6) return false;
  *out = static_cast<float>(d);
  return true;
}

// "xavier", "msra", "constant[:V]", "gaussian:STD", "uniform:MIN:MAX".
Result<Filler> read_filler(Fields& f, const std::string& key, Filler fallback) {
  EASEL_ASSIGN_OR_RETURN(std::string text, f.text(key, ""));
  if (text.empty()) return fallback;
  std::vector<std::string_view> parts;
  std::string_view rest = text;
  for (;;) {
    const size_t c = rest.find(':');
    parts.push_back(rest.substr(0, c));
    if (c == std::string_view::npos) break;
    rest.remove_prefix(c + 1);
  }
  Filler out;
  const std::string_view kind = parts[0];
  const auto bad = [&] {
    return f.error(key, "'" + printable(text) +
                            "' is not a filler (xavier, msra, constant:V, gaussian:STD, "
                            "uniform:MIN:MAX)");
  };
  if (kind == "xavier" && parts.size() == 1) {
    out.kind = Filler::Kind::xavier;
  } else if (kind == "msra" && parts.size() == 1) {
    out.kind = Filler::Kind::msra;
  } else if (kind == "constant" && parts.size() <= 2) {
    out.kind = Filler::Kind::constant;
    if (parts.size() == 2 && !parse_float(parts[1], &out.value)) return bad();
  } else if (kind == "gaussian" && parts.size() == 2) {
    out.kind = Filler::Kind::gaussian;
    if (!parse_float(parts[1], &out.std) || out.std < 0) return bad();
  } else if (kind == "uniform" && parts.size() == 3) {
    out.kind = Filler::Kind::uniform;
    if (!parse_float(parts[1], &out.min) || !parse_float(parts[2], &out.max) || out.min > out.max)
      return bad();
  } else {
    return bad();
  }
  return out;
}

Filler constant_filler(float v) {
  Filler f;
  f.kind = Filler::Kind::constant;
  f.value = v;
  return f;
}

// kernel / stride / pad, each either one value or its _h and _w pair.
Status read_window(Fields& f, OpDesc& d, bool kernel_required) {
  struct Pair {
    const char* key;
    int64_t *h, *w;
    int64_t fallback, lo;
  };
  // fallback -1: required.
  const Pair pairs[] = {{"kernel", &d.kh, &d.kw, kernel_required ? -1 : 1, 1},
                        {"stride", &d.stride_h, &d.stride_w, 1, 1},
                        {"pad", &d.pad_h, &d.pad_w, 0, 0}};
  for (const Pair& p : pairs) {
    const std::string k = p.key;
    EASEL_ASSIGN_OR_RETURN(int64_t both, f.integer(k, -1, p.lo, kMaxSize));
    EASEL_ASSIGN_OR_RETURN(int64_t h, f.integer(k + "_h", -1, p.lo, kMaxSize));
    EASEL_ASSIGN_OR_RETURN(int64_t w, f.integer(k + "_w", -1, p.lo, kMaxSize));
    if (both >= 0 && (h >= 0 || w >= 0))
      return f.error(k, "give either " + k + " or " + k + "_h and " + k + "_w, not both");
    if ((h >= 0) != (w >= 0)) return f.error(k + "_h", "needs " + k + "_w too (and back)");
    if (both < 0 && h < 0) {
      if (p.fallback < 0) return f.error(k, "missing");
      both = p.fallback;
    }
    *p.h = both >= 0 ? both : h;
    *p.w = both >= 0 ? both : w;
  }
  return {};
}

// `outputs`: a count, or "classes" (the data's class count).
Result<int64_t> read_outputs(Fields& f, int64_t classes) {
  const TomlValue* v = f.take("outputs");
  if (!v) return f.error("outputs", "missing");
  if (v->type == Type::string && v->str == "classes") return classes;
  if (v->type != Type::integer)
    return f.error("outputs",
                   "must be a count or \"classes\", not " + std::string(toml_type_name(v->type)));
  if (v->integer < 1 || v->integer > kMaxSize)
    return f.error("outputs", std::to_string(v->integer) + " is out of range [1, " +
                                  std::to_string(kMaxSize) + "]");
  return v->integer;
}

// The keys of one layer, by kind.
Status read_layer_fields(Fields& f, LayerSpec& l, const ModelInput& in) {
  OpDesc& d = l.op;
  const auto learned = [&](Filler weights) -> Status {
    EASEL_ASSIGN_OR_RETURN(d.bias, f.boolean("bias", true));
    EASEL_ASSIGN_OR_RETURN(Filler w, read_filler(f, "weight_filler", weights));
    EASEL_ASSIGN_OR_RETURN(Filler b, read_filler(f, "bias_filler", constant_filler(0)));
    l.fillers = {w};
    if (d.bias) l.fillers.push_back(b);
    EASEL_ASSIGN_OR_RETURN(l.lr_mult,
                           f.numbers("lr_mult", std::vector<float>(l.fillers.size(), 1)));
    EASEL_ASSIGN_OR_RETURN(l.decay_mult,
                           f.numbers("decay_mult", std::vector<float>(l.fillers.size(), 1)));
    return {};
  };
  Filler xavier;
  xavier.kind = Filler::Kind::xavier;
  switch (d.kind) {
    case OpKind::conv: {
      EASEL_ASSIGN_OR_RETURN(d.oc, read_outputs(f, in.classes));
      EASEL_RETURN_IF_ERROR(read_window(f, d, /*kernel_required=*/true));
      EASEL_ASSIGN_OR_RETURN(d.group, f.integer("group", 1, 1, kMaxSize));
      return learned(xavier);
    }
    case OpKind::inner_product: {
      EASEL_ASSIGN_OR_RETURN(d.oc, read_outputs(f, in.classes));
      return learned(xavier);
    }
    case OpKind::max_pool:
    case OpKind::avg_pool: {
      EASEL_RETURN_IF_ERROR(read_window(f, d, /*kernel_required=*/true));
      EASEL_ASSIGN_OR_RETURN(d.ceil_mode, f.boolean("ceil_mode", true));
      return {};
    }
    case OpKind::lrn: {
      EASEL_ASSIGN_OR_RETURN(d.local_size, f.integer("local_size", 5, 1, 99));
      EASEL_ASSIGN_OR_RETURN(d.alpha, f.number("alpha", 1e-4f, 0, 1e6));
      EASEL_ASSIGN_OR_RETURN(d.beta, f.number("beta", 0.75f, 0, 1e6));
      EASEL_ASSIGN_OR_RETURN(d.k, f.number("k", 1.f, 1e-6, 1e6));
      EASEL_ASSIGN_OR_RETURN(std::string region, f.text("region", "across_channels"));
      if (region != "across_channels" && region != "within_channel")
        return f.error("region",
                       "'" + printable(region) + "' is neither across_channels nor within_channel");
      d.lrn_within_channel = region == "within_channel";
      return {};
    }
    case OpKind::dropout: {
      EASEL_ASSIGN_OR_RETURN(d.ratio, f.number("ratio", 0.5f, 0, 0.99));
      return {};
    }
    case OpKind::batch_norm: {
      EASEL_ASSIGN_OR_RETURN(d.eps, f.number("eps", 1e-5f, 1e-12, 1));
      EASEL_ASSIGN_OR_RETURN(d.bn_momentum, f.number("momentum", 0.1f, 0, 1));
      // scale 1, shift 0; the running mean 0 and variance 1 (state).
      l.fillers = {constant_filler(1), constant_filler(0), constant_filler(0), constant_filler(1)};
      EASEL_ASSIGN_OR_RETURN(std::vector<float> lr, f.numbers("lr_mult", {1, 1}));
      EASEL_ASSIGN_OR_RETURN(std::vector<float> decay, f.numbers("decay_mult", {1, 1}));
      l.lr_mult = {lr[0], lr[1], 0, 0};
      l.decay_mult = {decay[0], decay[1], 0, 0};
      return {};
    }
    case OpKind::relu:
    case OpKind::add:
    case OpKind::concat:
    case OpKind::global_avg_pool:
      return {};
  }
  return f.error("type", "has no reader (nets/models/description.cpp)");
}

std::string kind_names() {
  std::string out;
  for (const OpDef* def : op_list())
    out += (out.empty() ? "" : ", ") + std::string(def->name);
  return out;
}

Result<LayerSpec> read_layer(const TomlValue& t, size_t index, const std::string& origin,
                             const ModelInput& in) {
  const std::string at = origin + ":" + std::to_string(t.line) + ": layer ";
  if (t.type != Type::table)
    return invalid_argument(at + std::to_string(index + 1) + ": must be a table ([[layer]])");
  Fields first(t, at + std::to_string(index + 1) + ": ");
  EASEL_ASSIGN_OR_RETURN(std::string name, first.text("name", "", /*required=*/true));
  if (has_control(name)) return first.error("name", control_error(name));
  LayerSpec l;
  l.name = name;
  Fields f(t, at + printable(name) + ": ");
  f.take("name");
  EASEL_ASSIGN_OR_RETURN(std::string type, f.text("type", "", /*required=*/true));
  const OpDef* def = nullptr;
  for (const OpDef* d : op_list())
    if (type == d->name) def = d;
  if (!def)
    return f.error("type",
                   "unknown layer type '" + printable(type) + "' (known: " + kind_names() + ")");
  l.op.kind = def->kind;
  EASEL_ASSIGN_OR_RETURN(l.inputs, f.names("inputs"));
  const auto [lo, hi] = input_range(def->kind);
  const int given = l.inputs.empty() ? 1 : static_cast<int>(l.inputs.size());
  if (given < lo || given > hi)
    return f.error("inputs", std::string(def->name) + " takes " + std::to_string(lo) +
                                 (lo == hi ? "" : " to " + std::to_string(hi)) + " input(s), got " +
                                 std::to_string(given));
  EASEL_RETURN_IF_ERROR(read_layer_fields(f, l, in));
  EASEL_RETURN_IF_ERROR(f.no_unknown_keys(def->name));
  return l;
}

Result<int64_t> header_int(const TomlValue& table, const std::string& key, int64_t fallback,
                           int64_t hi, const std::string& where) {
  const TomlValue* v = table.find(key);
  if (!v) return fallback;
  if (v->type != Type::integer || v->integer < 1 || v->integer > hi)
    return invalid_argument(where + "input: " + key + ": must be an integer in [1, " +
                            std::to_string(hi) + "]");
  return v->integer;
}

Result<NetHeader> read_header(const TomlValue& doc, const std::string& origin) {
  NetHeader h;
  const std::string where = origin + ": ";
  for (const auto& [k, v] : doc.fields)
    if (k != "name" && k != "description" && k != "input" && k != "layer")
      return invalid_argument(where + printable(k) +
                              ": unknown key (a description has name, description, [input] and "
                              "[[layer]] tables)");
  const TomlValue* name = doc.find("name");
  if (!name || name->type != Type::string || name->str.empty())
    return invalid_argument(where + "name: missing (a non-empty string)");
  if (has_control(name->str)) return invalid_argument(where + "name: " + control_error(name->str));
  h.name = name->str;
  if (const TomlValue* d = doc.find("description")) {
    if (d->type != Type::string) return invalid_argument(where + "description: must be a string");
    h.description = d->str;
  }
  if (const TomlValue* in = doc.find("input")) {
    if (in->type != Type::table)
      return invalid_argument(where + "input: must be a table ([input])");
    for (const auto& [k, v] : in->fields)
      if (k != "channels" && k != "height" && k != "width" && k != "classes")
        return invalid_argument(where + "input: " + printable(k) +
                                ": unknown key (channels, height, width, classes)");
    EASEL_ASSIGN_OR_RETURN(h.input.channels, header_int(*in, "channels", 1, 4096, where));
    EASEL_ASSIGN_OR_RETURN(h.input.height, header_int(*in, "height", 28, 65536, where));
    EASEL_ASSIGN_OR_RETURN(h.input.width, header_int(*in, "width", 28, 65536, where));
    EASEL_ASSIGN_OR_RETURN(h.input.classes, header_int(*in, "classes", 10, 1'000'000, where));
  }
  return h;
}

// A syntax error is the description's fault, like any other: exit 2 as a bad config.
Result<TomlValue> parse_doc(std::string_view text, const std::string& origin) {
  Result<TomlValue> doc = parse_toml(text, origin);
  if (!doc.ok()) return invalid_argument(doc.status().message());
  return doc;
}

}  // namespace

Result<NetHeader> parse_net_header(std::string_view text, const std::string& origin) {
  EASEL_ASSIGN_OR_RETURN(TomlValue doc, parse_doc(text, origin));
  return read_header(doc, origin);
}

Result<NetSpec> parse_net_description(std::string_view text, const std::string& origin,
                                      const ModelInput& in, bool check_shapes) {
  EASEL_ASSIGN_OR_RETURN(TomlValue doc, parse_doc(text, origin));
  EASEL_ASSIGN_OR_RETURN(NetHeader header, read_header(doc, origin));
  const TomlValue* layers = doc.find("layer");
  if (!layers || layers->type != Type::array || layers->items.empty())
    return invalid_argument(origin + ": no layers (each is a [[layer]] table)");
  if (static_cast<int64_t>(layers->items.size()) > kMaxLayers)
    return invalid_argument(origin + ": more than " + std::to_string(kMaxLayers) + " layers");
  NetSpec spec;
  spec.name = header.name;
  spec.channels = in.channels;
  spec.height = in.height;
  spec.width = in.width;
  spec.classes = in.classes;
  for (size_t i = 0; i < layers->items.size(); ++i) {
    EASEL_ASSIGN_OR_RETURN(LayerSpec l, read_layer(layers->items[i], i, origin, in));
    spec.layers.push_back(std::move(l));
  }
  if (Status s = check_shapes ? check_net(spec) : resolve_graph(spec).status(); !s.ok())
    return invalid_argument(origin + ": " + s.message());
  return spec;
}

Status check_net(const NetSpec& spec) {
  EASEL_ASSIGN_OR_RETURN(NetGraph g, resolve_graph(spec));
  // One image is enough to check every shape.
  EASEL_ASSIGN_OR_RETURN(
      std::vector<Shape4> shapes,
      infer_shapes(g, spec, {1, spec.channels, spec.height, spec.width}, Layout::nchw));
  const Shape4& out = shapes.back();
  if (out.per_image() != spec.classes)
    return invalid_argument("net '" + spec.name + "', layer " + g.layers.back().name + ": has " +
                            std::to_string(out.per_image()) +
                            " outputs per image but the data has " + std::to_string(spec.classes) +
                            " classes (outputs = \"classes\" follows the data)");
  return {};
}

Result<std::string> read_net_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found("--net: " + path + ": no such file");
  if (!S_ISREG(st.st_mode)) return invalid_argument("--net: " + path + ": not a regular file");
  if (static_cast<size_t>(st.st_size) > kMaxFileBytes)
    return invalid_argument("--net: " + path + ": larger than 16 MiB, not a net description");
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("--net: " + path + ": cannot be opened");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace easel
