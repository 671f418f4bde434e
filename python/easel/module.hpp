// What the files of the Python module (_easel) share.
#pragma once

#include <pybind11/pybind11.h>

#include "easel/status.hpp"

namespace easel::python {

// A request the caller must fix (easel train exits 2 on these: invalid_argument, not_found,
// data_error) is a ValueError; the rest (the machine, a file that cannot be written, a diverged
// run) a RuntimeError. The message is the line easel train prints after "easel: ".
[[noreturn]] void raise(const api::Status& st);

void bind_config(pybind11::module_& m);  // py_config.cpp
void bind_data(pybind11::module_& m);    // py_data.cpp
void bind_train(pybind11::module_& m);   // py_train.cpp

}  // namespace easel::python
