// Data: arrays in memory checked and stored as the trainer's Datasets (8-bit pixels: float
// images copied in, 8-bit ones borrowed), or the sets `easel train --data` loads.
#include <cmath>
#include <limits>

#include "api/convert.hpp"

namespace easel::api {

Data::Data() : impl_(std::make_unique<Impl>()) {}
Data::~Data() = default;
Data::Data(Data&&) noexcept = default;
Data& Data::operator=(Data&&) noexcept = default;

namespace {

Status bad(const char* set, const std::string& what) {
  return {Code::invalid_argument, std::string(set) + " set: " + what};
}

// The extents are positive and N*C*H*W is far from overflowing (below 2^40 values).
template <typename Set>
Status check_extents(const char* set, const Set& a) {
  const struct {
    const char* name;
    int64_t v;
  } extents[] = {{"count", a.count},
                 {"channels", a.channels},
                 {"height", a.height},
                 {"width", a.width},
                 {"classes", a.classes}};
  for (const auto& e : extents)
    if (e.v <= 0 || e.v > (int64_t{1} << 31))
      return bad(set,
                 std::string(e.name) + " is " + std::to_string(e.v) + " (it must be in [1, 2^31])");
  const double values = static_cast<double>(a.count) * static_cast<double>(a.channels) *
                        static_cast<double>(a.height) * static_cast<double>(a.width);
  if (values > static_cast<double>(int64_t{1} << 40))
    return bad(set, "N x C x H x W is " + std::to_string(values) + " values (at most 2^40)");
  return {};
}

// The extents, the sizes of the images (`array`: their name, `values`: their size) and of the
// labels, and the labels' range: what either kind of set must satisfy.
template <typename Set>
Status check_set(const char* set, const Set& a, const char* array, size_t values) {
  if (Status st = check_extents(set, a); !st.ok()) return st;
  const int64_t n = a.count * a.channels * a.height * a.width;
  const std::string shape = std::to_string(a.count) + " x " + std::to_string(a.channels) + " x " +
                            std::to_string(a.height) + " x " + std::to_string(a.width);
  if (static_cast<int64_t>(values) != n)
    return bad(set, std::string(array) + " holds " + std::to_string(values) +
                        " values, the shape " + shape + " needs " + std::to_string(n));
  if (static_cast<int64_t>(a.labels.size()) != a.count)
    return bad(set, "labels holds " + std::to_string(a.labels.size()) + " values, count is " +
                        std::to_string(a.count));
  for (size_t i = 0; i < a.labels.size(); ++i)
    if (a.labels[i] < 0 || a.labels[i] >= a.classes)
      return bad(set, "labels[" + std::to_string(i) + "] is " + std::to_string(a.labels[i]) +
                          ", outside [0, " + std::to_string(a.classes) + ")");
  return {};
}

Status check_arrays(const char* set, const ImageArrays& a) {
  if (Status st = check_set(set, a, "images", a.images.size()); !st.ok()) return st;
  for (size_t i = 0; i < a.images.size(); ++i)
    if (!(a.images[i] >= 0.f && a.images[i] <= 1.f))  // NaN fails too
      return bad(set, "images[" + std::to_string(i) + "] is " + std::to_string(a.images[i]) +
                          ", outside [0, 1]");
  return {};
}

// A checked set's name, extents and labels; the pixels are the caller's to fill.
template <typename Set>
Dataset shaped(const char* set, const Set& a) {
  Dataset out;
  out.name = std::string("memory/") + set;
  out.count = a.count;
  out.channels = a.channels;
  out.height = a.height;
  out.width = a.width;
  out.classes = a.classes;
  out.labels.assign(a.labels.begin(), a.labels.end());
  return out;
}

// The checked arrays as a Dataset: pixel = round(x * 256), at most 255 (the trainer feeds the
// net pixel * kPixelScale = pixel / 256).
Status to_dataset(const char* set, const ImageArrays& a, Dataset& ds) {
  if (Status st = check_arrays(set, a); !st.ok()) return st;
  auto pixels = Buffer::allocate(a.images.size(), MemKind::dram);
  if (!pixels.ok()) return from_internal(pixels.status());
  Dataset out = shaped(set, a);
  out.pixels = std::move(pixels).value();
  uint8_t* px = out.pixels.as<uint8_t>();
  for (size_t i = 0; i < a.images.size(); ++i)
    px[i] = static_cast<uint8_t>(std::min(255.f, std::nearbyint(a.images[i] / kPixelScale)));
  ds = std::move(out);
  return {};
}

// The checked bytes as a Dataset over the caller's pixels, their owner held with them. The
// engine only reads a data set's pixels (Buffer has no read-only kind, hence the cast).
Status to_dataset(const char* set, const ImageBytes& a, Dataset& ds) {
  if (Status st = check_set(set, a, "pixels", a.pixels.size()); !st.ok()) return st;
  Dataset out = shaped(set, a);
  out.pixels = Buffer::borrow(const_cast<uint8_t*>(a.pixels.data()), a.pixels.size());
  out.owner = a.owner;
  ds = std::move(out);
  return {};
}

// One set of either kind as the training (or test) set, the Data then named "memory".
template <typename Set>
Status set_memory(Data::Impl& impl, bool train, const Set& a) {
  Dataset& ds = train ? impl.split.train : impl.split.test;
  if (Status st = to_dataset(train ? "train" : "test", a, ds); !st.ok()) return st;
  (train ? impl.has_train : impl.has_test) = true;
  impl.name = "memory";
  return {};
}

}  // namespace

Status Data::set_train(const ImageArrays& arrays) {
  return set_memory(*impl_, true, arrays);
}
Status Data::set_test(const ImageArrays& arrays) {
  return set_memory(*impl_, false, arrays);
}
Status Data::borrow_train(const ImageBytes& bytes) {
  return set_memory(*impl_, true, bytes);
}
Status Data::borrow_test(const ImageBytes& bytes) {
  return set_memory(*impl_, false, bytes);
}

Status Data::load(std::string_view spec, uint64_t seed) {
  auto split = load_data(std::string(spec), MemKind::dram, seed);
  if (!split.ok()) return from_internal(split.status());
  impl_->split = std::move(split).value();
  impl_->has_train = impl_->has_test = true;
  impl_->name = std::string(spec);
  return {};
}

int64_t Data::train_count() const {
  return impl_->has_train ? impl_->split.train.count : 0;
}
int64_t Data::test_count() const {
  return impl_->has_test ? impl_->split.test.count : 0;
}

}  // namespace easel::api
