// easel.Data: a training and a test set from numpy arrays, or loaded as easel train --data
// loads them. uint8 images are borrowed (include/easel/data.hpp, Data::borrow_train): the
// engine reads them where numpy holds them, and the Data keeps the arrays alive, so a data set
// costs its arrays alone. float32 images are read where numpy holds them into the engine's
// 8-bit copy (a quarter of them), the only one: 1.25 times the arrays while they live.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "easel/data.hpp"
#include "python/easel/module.hpp"

namespace py = pybind11;

namespace easel::python {

namespace {

[[noreturn]] void refuse(const std::string& set, const std::string& what) {
  throw py::value_error(set + " set: " + what);
}

// Images N x C x H x W (or N x H x W, one channel) as float32 or uint8 in C order, borrowed:
// another dtype or a strided view is refused rather than copied whole (the caller converts it
// once).
py::array images_of(const std::string& set, py::handle obj) {
  if (!py::isinstance<py::array>(obj))
    refuse(set, "images must be a numpy array (N x C x H x W float32 or uint8), not a " +
                    py::str(obj.get_type().attr("__name__")).cast<std::string>());
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!a.dtype().is(py::dtype::of<float>()) && !a.dtype().is(py::dtype::of<uint8_t>()))
    refuse(set, "images are " + py::str(a.dtype()).cast<std::string>() +
                    ", not float32 or uint8 (np.asarray(images, dtype=np.float32) converts "
                    "them)");
  if (!(a.flags() & py::array::c_style))
    refuse(set, "images are not C-contiguous (np.ascontiguousarray(images) copies them once)");
  if (a.ndim() != 4 && a.ndim() != 3)
    refuse(set, "images have " + std::to_string(a.ndim()) +
                    " dimensions, not 4 (N x C x H x W) or 3 (N x H x W)");
  return a;
}

// Labels of any integer dtype as int32: borrowed when they are int32 in C order, else converted
// (4 bytes a label, small beside an image); a value int32 cannot hold is refused as out of
// range rather than wrapped.
std::vector<int32_t> labels_of(const std::string& set, py::handle obj, int64_t classes,
                               py::object* borrowed) {
  auto a = py::array::ensure(obj);
  if (!a || a.ndim() != 1 || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u'))
    refuse(set, "labels must be a 1-D numpy array of integers");
  if (a.dtype().is(py::dtype::of<int32_t>()) && (a.flags() & py::array::c_style)) {
    *borrowed = a;
    return {};
  }
  auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<int32_t> out(static_cast<size_t>(wide.size()));
  for (py::ssize_t i = 0; i < wide.size(); ++i) {
    const int64_t v = wide.data()[i];
    if (v < 0 || v >= classes)
      refuse(set, "labels[" + std::to_string(i) + "] is " + std::to_string(v) + ", outside [0, " +
                      std::to_string(classes) + ")");
    out[static_cast<size_t>(i)] = static_cast<int32_t>(v);
  }
  return out;
}

// Whatever keeps a numpy array's memory valid, as the C++ API holds it (ImageBytes::owner): a
// reference to the array, dropped under the GIL whichever thread lets the Data go.
std::shared_ptr<const void> owner_of(const py::array& a) {
  return {a.data(), [keep = new py::object(a)](const void*) {
            py::gil_scoped_acquire locked;
            delete keep;
          }};
}

// The extents of images N x C x H x W (or N x H x W) into a set of either kind.
template <typename Set>
void shape_into(Set& s, const py::array& im, int64_t classes) {
  s.count = im.shape(0);
  s.channels = im.ndim() == 4 ? im.shape(1) : 1;
  s.height = im.shape(im.ndim() - 2);
  s.width = im.shape(im.ndim() - 1);
  s.classes = classes;
}

// One set into `data`: float32 images copied into 8-bit pixels, uint8 ones borrowed (the Data
// holds them); the checks and the copy run without the GIL (numpy's arrays stay referenced by
// this frame).
void set_arrays(api::Data& data, const std::string& set, py::handle images, py::handle labels,
                int64_t classes) {
  const py::array im = images_of(set, images);
  py::object borrowed;  // null unless the labels are used where they are
  const std::vector<int32_t> converted = labels_of(set, labels, classes, &borrowed);
  std::span<const int32_t> label_span = converted;
  if (borrowed) {
    const auto l = borrowed.cast<py::array>();
    label_span = {static_cast<const int32_t*>(l.data()), static_cast<size_t>(l.size())};
  }
  const bool train = set == "train";
  const size_t n = static_cast<size_t>(im.size());
  api::Status st;
  if (im.dtype().is(py::dtype::of<uint8_t>())) {
    api::ImageBytes b;
    shape_into(b, im, classes);
    b.pixels = {static_cast<const uint8_t*>(im.data()), n};
    b.labels = label_span;
    b.owner = owner_of(im);
    py::gil_scoped_release unlocked;
    st = train ? data.borrow_train(b) : data.borrow_test(b);
  } else {
    api::ImageArrays a;
    shape_into(a, im, classes);
    a.images = {static_cast<const float*>(im.data()), n};
    a.labels = label_span;
    py::gil_scoped_release unlocked;
    st = train ? data.set_train(a) : data.set_test(a);
  }
  if (!st.ok()) raise(st);
}

// The classes the labels span when the caller does not say: one past the largest label.
int64_t classes_of(py::handle train_labels, py::handle test_labels) {
  int64_t top = -1;
  for (py::handle l : {train_labels, test_labels}) {
    auto a = py::array::ensure(l);
    const char kind = a ? a.dtype().kind() : 0;
    if (a && a.size() > 0 && (kind == 'i' || kind == 'u'))
      top = std::max(top, a.attr("max")().cast<int64_t>());
  }
  return top + 1;
}

}  // namespace

void bind_data(py::module_& m) {
  py::class_<api::Data>(m, "Data")
      .def(py::init([](py::handle train_images, py::handle train_labels, py::handle test_images,
                       py::handle test_labels, std::optional<int64_t> classes) {
             auto data = std::make_unique<api::Data>();
             const int64_t k = classes ? *classes : classes_of(train_labels, test_labels);
             set_arrays(*data, "train", train_images, train_labels, k);
             set_arrays(*data, "test", test_images, test_labels, k);
             return data;
           }),
           py::arg("train_images"), py::arg("train_labels"), py::arg("test_images"),
           py::arg("test_labels"), py::arg("classes") = py::none(),
           "Images N x C x H x W (C order): float32 in [0, 1], read into 8-bit pixels, or uint8, "
           "borrowed (the Data keeps the arrays alive; the net reads pixel / 256); labels of any "
           "integer dtype in [0, classes); classes: one past the largest label unless given")
      .def_static(
          "load",
          [](const std::string& spec, uint64_t seed) {
            auto data = std::make_unique<api::Data>();
            api::Status st;
            {
              py::gil_scoped_release unlocked;
              st = data->load(spec, seed);
            }
            if (!st.ok()) raise(st);
            return data;
          },
          py::arg("spec"), py::arg("seed") = 1,
          "Both sets as easel train --data SPEC reads them (fashion-mnist, mnist, a folder, "
          "synthetic:N:CxHxW:classes)")
      .def_property_readonly("train_count", &api::Data::train_count)
      .def_property_readonly("test_count", &api::Data::test_count);
}

}  // namespace easel::python
