// easel's Python module (_easel, wrapped by easel/__init__.py): the public C++ API
// (include/easel/, docs/API.md) and nothing else. A Config is set by name as easel train's
// flags, with easel train's one-line messages as ValueError (py_config.cpp); a Data reads
// uint8 numpy arrays in place and copies float32 ones into the engine's 8-bit pixels, the one
// copy it needs (py_data.cpp); train()
// releases the GIL while the run trains, calls the progress callback after each evaluation and
// turns Ctrl-C into Run::interrupt, as easel train turns SIGINT into it (py_train.cpp).
#include <pybind11/pybind11.h>

#include <stdexcept>

#include "easel/easel.hpp"
#include "python/easel/module.hpp"

namespace easel::python {

void raise(const api::Status& st) {
  if (st.code() == api::Code::invalid_argument || st.code() == api::Code::not_found ||
      st.code() == api::Code::data_error)
    throw pybind11::value_error(st.message());
  throw std::runtime_error(st.message());
}

}  // namespace easel::python

PYBIND11_MODULE(_easel, m) {
  m.doc() = "easel's public C++ API (docs/API.md, 'Python'); import easel, not this";
  m.def("version", &easel::api::version);
  easel::python::bind_config(m);
  easel::python::bind_data(m);
  easel::python::bind_train(m);
}
