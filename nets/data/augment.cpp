// Augmentation specs, per-image draws and the augmenting byte-to-float conversion.
#include "nets/data/augment.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include "nets/data/stream_source.hpp"

namespace easel {
namespace {

struct Preset {
  const char* name;
  std::vector<float> mean, std;
};

// Per-channel statistics of the training sets' pixels / 255 (torchvision's ImageNet values).
const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {"cifar10", {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}},
      {"cifar100", {0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}},
      {"imagenet", {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}},
      {"mnist", {0.1307f}, {0.3081f}},
      {"fashion-mnist", {0.2860f}, {0.3530f}},
  };
  return p;
}

// A float list "a/b/c" (1 to 64 finite values).
bool parse_floats(std::string_view s, std::vector<float>* out) {
  out->clear();
  for (;;) {
    const size_t slash = s.find('/');
    const std::string_view f = s.substr(0, slash);
    float v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (f.empty() || ec != std::errc() || end != f.data() + f.size() || !std::isfinite(v))
      return false;
    out->push_back(v);
    if (out->size() > 64) return false;
    if (slash == std::string_view::npos) return true;
    s.remove_prefix(slash + 1);
  }
}

std::string float_list(const std::vector<float>& v) {
  std::string s;
  for (float x : v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", static_cast<double>(x));  // reads back to the same float
    s += (s.empty() ? "" : "/") + std::string(b);
  }
  return s;
}

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// What parse_augment has met so far in a spec: the field names, and which of mean, std and
// normalize (a preset) were given.
struct FieldsSeen {
  std::set<std::string> keys;
  bool has_mean = false, has_std = false, has_preset = false;
};

// The one-line refusal of augment spec `text`: why, then the forms it takes.
Status bad_augment(std::string_view text, const std::string& why) {
  return invalid_argument("augment '" + std::string(text) + "': " + why +
                          " (expected none, imagenet, or fields crop-pad=N, "
                          "random-resized-crop=N, flip, normalize=NAME, mean=M/M/M and "
                          "std=S/S/S, e.g. crop-pad=4,flip,normalize=cifar10)");
}

// An integer field's value: the whole of `value`, in [lo, hi].
bool parse_int_in(std::string_view value, int64_t lo, int64_t hi, int64_t* out) {
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), *out);
  return !value.empty() && ec == std::errc() && end == value.data() + value.size() && *out >= lo &&
         *out <= hi;
}

// normalize=NAME (of spec `text`): the mean and std of preset NAME ("cifar": cifar10).
Status set_preset(std::string_view text, std::string_view value, Augment* a) {
  const std::string name(value == "cifar" ? "cifar10" : value);
  std::string names;
  for (const Preset& p : presets()) {
    names += (names.empty() ? "" : ", ") + std::string(p.name);
    if (name == p.name) {
      a->mean = p.mean;
      a->std = p.std;
    }
  }
  if (a->mean.empty()) {
    return bad_augment(text,
                       "normalize must be one of " + names + ", not '" + std::string(value) + "'");
  }
  return {};
}

// Applies one field KEY[=VALUE] of spec `text` to *a; refuses an empty, repeated, unknown or
// ill-valued field.
Status parse_field(std::string_view text, std::string_view field, Augment* a, FieldsSeen* seen) {
  const auto bad = [&](const std::string& why) { return bad_augment(text, why); };
  const size_t eq = field.find('=');
  const std::string key(field.substr(0, eq));
  const std::string_view value =
      eq == std::string_view::npos ? std::string_view() : field.substr(eq + 1);
  if (key.empty()) return bad("an empty field");
  if (!seen->keys.insert(key).second) return bad(key + " given twice");
  if (key == "crop-pad") {
    if (!parse_int_in(value, 1, kMaxCropPad, &a->crop_pad)) {
      return bad("crop-pad must be an integer in [1, 256], not '" + std::string(value) + "'");
    }
  } else if (key == "random-resized-crop") {
    if (!parse_int_in(value, 8, 4096, &a->resized_crop)) {
      return bad("random-resized-crop must be an integer in [8, 4096], not '" + std::string(value) +
                 "'");
    }
  } else if (key == "flip") {
    if (eq != std::string_view::npos) return bad("flip takes no value");
    a->flip = true;
  } else if (key == "normalize") {
    EASEL_RETURN_IF_ERROR(set_preset(text, value, a));
    seen->has_preset = true;
  } else if (key == "mean" || key == "std") {
    std::vector<float>& v = key == "mean" ? a->mean : a->std;
    if (!parse_floats(value, &v)) {
      return bad(key + " must be 1 to 64 numbers separated by '/', not '" + std::string(value) +
                 "'");
    }
    if (key == "std") {
      for (float s : v)
        if (!(s > 0)) return bad("std must be positive, not '" + std::string(value) + "'");
    }
    (key == "mean" ? seen->has_mean : seen->has_std) = true;
  } else if (key == "none") {
    return bad("none cannot be combined with other fields");
  } else {
    return bad("unknown field '" + key + "'");
  }
  return {};
}

// The in-memory images idx[0..n) of ds into out [n, c, h, w] (nhwc or nchw), each byte v of
// channel ch as convert(ch, v), moved by its draw (none when draws is null): flipped, and
// cropped at (dy, dx) from the image padded by pad (the padding is byte 0); labels[i] is its
// label.
template <class T, class Convert>
void gather_moved(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout, T* out,
                  int32_t* labels, const AugmentDraw* draws, int64_t pad, Convert convert) {
  const int64_t c = ds.channels, h = ds.height, w = ds.width, hw = h * w, chw = c * hw;
  const bool nhwc = layout == Layout::nhwc;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = idx[i];
    EASEL_CHECK(k >= 0 && k < ds.count);
    labels[i] = ds.labels[static_cast<size_t>(k)];
    const AugmentDraw d = draws != nullptr ? draws[i] : AugmentDraw{};
    EASEL_CHECK(d.dy >= 0 && d.dy <= 2 * pad && d.dx >= 0 && d.dx <= 2 * pad);
    const uint8_t* src = ds.image(k);
    T* dst = out + i * chw;
    for (int64_t ch = 0; ch < c; ++ch) {
      const uint8_t* s = src + ch * hw;
      for (int64_t y = 0; y < h; ++y) {
        const int64_t sy = y + d.dy - pad;  // the source row; outside: padding
        for (int64_t x = 0; x < w; ++x) {
          const int64_t sx = (d.flip ? w - 1 - x : x) + d.dx - pad;
          const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
          dst[nhwc ? (y * w + x) * c + ch : ch * hw + y * w + x] =
              convert(ch, inside ? s[sy * w + sx] : uint8_t{0});
        }
      }
    }
  }
}

}  // namespace

Result<Augment> parse_augment(std::string_view text) {
  Augment a;
  if (text.empty() || text == "none") return a;
  if (text == "imagenet") return parse_augment("random-resized-crop=224,flip,normalize=imagenet");
  FieldsSeen seen;
  std::string_view rest = text;
  for (;;) {
    const size_t comma = rest.find(',');
    EASEL_RETURN_IF_ERROR(parse_field(text, rest.substr(0, comma), &a, &seen));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (a.resized_crop > 0 && a.crop_pad > 0)
    return bad_augment(text, "crop-pad and random-resized-crop both given");
  if (seen.has_preset && (seen.has_mean || seen.has_std))
    return bad_augment(text, "normalize and mean/std both given");
  if (seen.has_mean != seen.has_std)
    return bad_augment(text, seen.has_mean ? "mean without std" : "std without mean");
  if (a.mean.size() != a.std.size()) {
    return bad_augment(text, "mean has " + std::to_string(a.mean.size()) + " values but std " +
                                 std::to_string(a.std.size()));
  }
  return a;
}

std::string augment_text(const Augment& a) {
  std::string s;
  const auto add = [&s](const std::string& f) { s += (s.empty() ? "" : ",") + f; };
  if (a.resized_crop > 0) add("random-resized-crop=" + std::to_string(a.resized_crop));
  if (a.crop_pad > 0) add("crop-pad=" + std::to_string(a.crop_pad));
  if (a.flip) add("flip");
  if (a.normalizes()) add("mean=" + float_list(a.mean) + ",std=" + float_list(a.std));
  return s.empty() ? "none" : s;
}

Status check_augment(const Augment& a, const Dataset& ds) {
  if (a.mean.size() != a.std.size() || (a.normalizes() && a.std.empty()))
    return invalid_argument("augment: mean and std must have as many values");
  const size_t n = a.mean.size();
  if (n > 1 && static_cast<int64_t>(n) != ds.channels) {
    return invalid_argument("augment '" + augment_text(a) + "': mean and std have " +
                            std::to_string(n) + " values but data set '" + ds.name + "' has " +
                            std::to_string(ds.channels) + " channel" +
                            (ds.channels == 1 ? "" : "s") + " (give one value or one per channel)");
  }
  if (a.crop_pad < 0 || a.crop_pad > kMaxCropPad)
    return invalid_argument("augment: crop-pad must be in [0, 256]");
  if (a.resized_crop > 0 && !ds.source)
    return invalid_argument("augment '" + augment_text(a) +
                            "': random-resized-crop decodes each "
                            "image as it is needed, and data set '" +
                            ds.name +
                            "' is held decoded: give an image folder (DIR, not DIR:SIDE) or "
                            "shards:DIR");
  if (ds.source && a.crop_pad > 0)
    return invalid_argument("augment '" + augment_text(a) +
                            "': crop-pad needs a data set held "
                            "decoded, and '" +
                            ds.name + "' is streamed (use random-resized-crop)");
  return {};
}

AugmentDraw draw_augment(const Augment& a, uint64_t seed, uint64_t stream, int64_t epoch,
                         int64_t position) {
  constexpr uint64_t kDomain = 0x61756731ull;  // "aug1": apart from the shuffling streams
  Rng rng(mix(mix(mix(mix(seed ^ kDomain) ^ stream) ^ static_cast<uint64_t>(epoch)) ^
              static_cast<uint64_t>(position)));
  AugmentDraw d;
  if (a.crop_pad > 0) {
    const uint64_t span = static_cast<uint64_t>(2 * a.crop_pad + 1);
    d.dy = static_cast<int64_t>(rng.below(span));
    d.dx = static_cast<int64_t>(rng.below(span));
  }
  if (a.flip) d.flip = (rng.next_u64() >> 63) != 0;
  if (a.resized_crop > 0) d.key = rng.next_u64();
  return d;
}

void gather_batch(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout, float* images,
                  int32_t* labels, const Augment& a, const AugmentDraw* draws) {
  if (ds.source) {  // streamed: decoded now, cropped as the draws say
    gather_streamed(ds, idx, n, layout, images, labels, a, draws);
    return;
  }
  if (!a.normalizes() && (!a.moves() || draws == nullptr)) {
    gather_batch(ds, idx, n, layout, images, labels);  // the same bits as without augmentation
    return;
  }
  const std::vector<float> lut = pixel_table(ds, a);  // each channel's float for each byte
  gather_moved(ds, idx, n, layout, images, labels, draws, draws != nullptr ? a.crop_pad : 0,
               [&lut](int64_t ch, uint8_t v) { return lut[static_cast<size_t>(ch * 256 + v)]; });
}

std::vector<float> pixel_table(const Dataset& ds, const Augment& a) {
  if (ds.source) return streamed_pixel_table(a);
  const int64_t c = ds.channels;
  std::vector<float> t(static_cast<size_t>(c * 256));
  for (int64_t ch = 0; ch < c; ++ch) {
    const size_t m = a.mean.size() == 1 ? 0 : static_cast<size_t>(ch);
    for (int v = 0; v < 256; ++v) {  // the two conversions (gather_batch reads this table)
      t[static_cast<size_t>(ch * 256 + v)] =
          a.normalizes() ? (static_cast<float>(v) / 255.f - a.mean[m]) / a.std[m]
                         : static_cast<float>(v) * kPixelScale;
    }
  }
  return t;
}

void gather_batch_bytes(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout,
                        uint8_t* bytes, int32_t* labels, const Augment& a,
                        const AugmentDraw* draws) {
  if (ds.source) {
    gather_streamed_bytes(ds, idx, n, layout, bytes, labels, a, draws);
    return;
  }
  gather_moved(ds, idx, n, layout, bytes, labels, a.moves() ? draws : nullptr,
               draws != nullptr ? a.crop_pad : 0, [](int64_t, uint8_t v) { return v; });
}

}  // namespace easel
