// easel.train: one Run (include/easel/run.hpp) of a Config, on a Data or on the config's `data`
// setting, its summary a dict. The run trains without the GIL; the Run's callbacks come back to
// this thread (the one that called train), take the GIL, call the progress callback after each
// evaluation and check for signals about four times a second: a KeyboardInterrupt (Ctrl-C, or
// one the callback raised) becomes Run::interrupt(SIGINT), as easel train's SIGINT handler
// does, and is raised again once the run has ended cleanly (its checkpoint and summary.json
// written), carrying the summary.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <optional>
#include <string>

#include "easel/easel.hpp"
#include "python/easel/module.hpp"

namespace py = pybind11;

namespace easel::python {

namespace {

py::dict evaluation_dict(const api::Evaluation& e) {
  py::dict d;
  d["step"] = e.step;
  d["images"] = e.images;
  d["epoch"] = e.epoch;
  d["train_loss"] = e.train_loss;
  d["test_loss"] = e.test_loss;
  d["test_accuracy"] = e.test_accuracy;
  d["images_per_second"] = e.images_per_second;
  d["wall_seconds"] = e.wall_seconds;
  d["train_seconds"] = e.train_seconds;
  d["eval_seconds"] = e.eval_seconds;
  d["compute_seconds"] = e.compute_seconds;
  d["comm_seconds"] = e.comm_seconds;
  d["wait_seconds"] = e.wait_seconds;
  return d;
}

// summary.json's names ("stopped": how the run ended).
py::dict summary_dict(const api::Summary& s) {
  py::dict d;
  d["stopped"] = api::stop_reason_name(s.stop_reason);
  d["stop_signal"] = s.stop_signal;
  d["stop_message"] = s.stop_message;
  py::list failures;  // the groups dropped or restarted (on-failure), one line each
  for (const std::string& f : s.group_failures)
    failures.append(f);
  d["group_failures"] = failures;
  d["evaluations"] = s.evaluations;
  d["test_accuracy"] = s.test_accuracy;
  d["test_loss"] = s.test_loss;
  d["best_accuracy"] = s.best_accuracy;
  d["steps"] = s.steps;
  d["images"] = s.images;
  d["epochs"] = s.epochs;
  d["wall_seconds"] = s.wall_seconds;
  d["train_seconds"] = s.train_seconds;
  d["eval_seconds"] = s.eval_seconds;
  d["setup_seconds"] = s.setup_seconds;
  d["images_per_second"] = s.images_per_second;
  d["comm_share"] = s.comm_share;
  d["wait_share"] = s.wait_share;
  d["exchanged_bytes_per_image"] = s.exchanged_bytes_per_image;
  d["target_accuracy"] = s.target_accuracy;
  d["time_to_target_seconds"] = s.time_to_target_seconds;
  d["reached_target"] = s.reached_target;
  d["groups"] = s.groups;
  d["parameters"] = s.parameters;
  d["algorithm"] = s.algorithm;
  d["net"] = s.net;
  d["directory"] = s.directory;
  return d;
}

// The Run's callbacks, on the thread that called train(): the first Python error (the
// callback's, or a signal's KeyboardInterrupt) is kept and ends the run, to be raised after it.
class Driver {
 public:
  Driver(api::Run& run, py::object progress) : run_(run), progress_(std::move(progress)) {}

  bool on_progress() {
    py::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() != 0) keep(py::error_already_set());
    return true;
  }

  bool on_evaluation(const api::Evaluation& e) {
    py::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() != 0) return keep(py::error_already_set()), true;
    if (progress_.is_none() || error_) return true;
    try {
      const py::object go_on = progress_(evaluation_dict(e));
      return !(py::isinstance<py::bool_>(go_on) && !go_on.cast<bool>());  // False stops it
    } catch (py::error_already_set& err) {
      keep(std::move(err));
      return !stopped_;
    }
  }

  // After the run, with the GIL: the kept error, a KeyboardInterrupt carrying the summary.
  void raise_kept(const py::dict& summary) {
    if (!error_) return;
    if (error_->matches(PyExc_KeyboardInterrupt)) error_->value().attr("summary") = summary;
    throw std::move(*error_);
  }

 private:
  // A KeyboardInterrupt interrupts the run (every group ends its step, the checkpoint is taken
  // there); any other error stops it at its next evaluation.
  void keep(py::error_already_set err) {
    if (error_) return;
    if (err.matches(PyExc_KeyboardInterrupt)) {
      run_.interrupt(SIGINT);
    } else {
      run_.stop();
      stopped_ = true;
    }
    error_.emplace(std::move(err));
  }

  api::Run& run_;
  py::object progress_;
  std::optional<py::error_already_set> error_;
  bool stopped_ = false;
};

py::dict train(const api::Config& config, api::Data* data, const py::object& out,
               const py::object& progress) {
  if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
    throw py::type_error("progress must be callable (it is called with each evaluation's dict)");
  api::Config cfg = config;
  if (!out.is_none())
    if (api::Status st =
            cfg.set("out", py::module_::import("os").attr("fspath")(out).cast<std::string>());
        !st.ok())
      raise(st);
  api::Run run;
  Driver driver(run, progress);
  run.on_progress([&](const api::Progress&) { return driver.on_progress(); });
  run.on_evaluation([&](const api::Evaluation& e) { return driver.on_evaluation(e); });
  api::Status st = run.open(cfg);
  if (st.ok()) {
    py::gil_scoped_release unlocked;
    st = data ? run.train(*data) : run.train();
  }
  const py::dict summary = summary_dict(run.summary());
  driver.raise_kept(summary);
  if (!st.ok()) raise(st);
  return summary;
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("train", &train, py::arg("config"), py::arg("data") = nullptr, py::arg("out") = py::none(),
        py::arg("progress") = py::none(),
        "Trains (blocking) and returns the summary as a dict (summary.json's names). data: a "
        "Data, or None for the config's data setting; out: the run directory (none: no files); "
        "progress: called with each evaluation's dict (metrics.jsonl's record), returning False "
        "stops the run. Ctrl-C interrupts it cleanly, then raises KeyboardInterrupt with "
        ".summary.");
}

}  // namespace easel::python
