// headlab.train's compiled half: the library's training session (train/run/session.h), the one
// `headlab train` runs, with the GIL released while it computes. Python comes back in through
// the observer: the progress callback (with the GIL, only for the call) and, after every step,
// PyErr_CheckSignals, so a Ctrl-C stops the run the way SIGINT stops the CLI: the step ends, a
// checkpoint is written, run.json says "interrupted by SIGINT", then KeyboardInterrupt is raised.

#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "core/one_line.h"
#include "python/bindings.h"
#include "train/distributed/comm.h"
#include "train/run/session.h"

namespace py = pybind11;

namespace headlab::python {
namespace {

// Holds the first Python exception raised while the session ran (the callback's, or the
// KeyboardInterrupt of a signal handler) and asks the trainer to stop at it.
class PythonObserver : public TrainObserver, public TrainSessionHooks {
 public:
  explicit PythonObserver(py::object progress) : progress_(std::move(progress)) {}
  ~PythonObserver() override {
    py::gil_scoped_acquire gil;
    progress_ = py::object();
  }

  bool should_stop() override {
    check_signals();
    return error_ != nullptr;
  }
  void on_log(const StepMetrics& m) override {
    if (error_) return;
    py::gil_scoped_acquire gil;
    if (progress_.is_none()) return;
    call([&] {
      progress_(py::dict(py::arg("event") = "step", py::arg("step") = m.step,
                         py::arg("total_steps") = m.total_steps, py::arg("loss") = m.loss,
                         py::arg("accuracy") = m.accuracy, py::arg("lr") = m.lr,
                         py::arg("grad_norm") = m.grad_norm,
                         py::arg("tokens_per_second") = m.tokens_per_second,
                         py::arg("elapsed_seconds") = m.elapsed_seconds));
    });
  }
  void on_eval(const EvalMetrics& e) override {
    if (error_) return;
    py::gil_scoped_acquire gil;
    if (progress_.is_none()) return;
    call([&] {
      progress_(py::dict(py::arg("event") = "eval", py::arg("step") = e.step,
                         py::arg("loss") = e.loss, py::arg("accuracy") = e.accuracy,
                         py::arg("tokens") = e.tokens));
    });
  }
  void on_checkpoint(int64_t step, const std::filesystem::path& dir) override {
    if (error_) return;
    py::gil_scoped_acquire gil;
    if (progress_.is_none()) return;
    call([&] {
      progress_(py::dict(py::arg("event") = "checkpoint", py::arg("step") = step,
                         py::arg("path") = dir.string()));
    });
  }
  // After the last step a Ctrl-C skips the analysis, as SIGINT does in the CLI.
  std::string stop_reason() override {
    check_signals();
    return reason_;
  }

  // With the GIL: the held exception raised again (KeyboardInterrupt, the callback's).
  void raise_held() {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void check_signals() {
    if (error_) return;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) hold(py::error_already_set());
  }
  template <class F>
  void call(F&& f) {
    try {
      f();
    } catch (py::error_already_set& e) {
      hold(std::move(e));
    }
  }
  // With the GIL.
  void hold(py::error_already_set e) {
    reason_ =
        e.matches(PyExc_KeyboardInterrupt)
            ? std::string("SIGINT")
            : "an exception in Python (" + std::string(py::str(e.type().attr("__name__"))) + ")";
    error_ = std::make_exception_ptr(std::move(e));
  }

  py::object progress_;
  std::exception_ptr error_;
  std::string reason_;
};

// `headlab train`'s error line names its command ("train: ..."), and so does headlab.Error's text.
[[noreturn]] void fail_as_train(const std::string& message) {
  const std::string line = one_line_message(message);
  throw Error(line.rfind("train: ", 0) == 0 ? line : "train: " + line);
}

py::dict train(const std::string& config, const std::string& out,
               const std::vector<std::string>& sets, const std::vector<std::string>& plugins,
               bool resume, bool overwrite, bool no_analysis,
               const std::vector<std::string>& command, py::object progress) {
  TrainRequest request;
  request.config = config;
  request.out = out;
  request.sets = sets;
  request.plugins = plugins;
  request.resume = resume;
  request.overwrite = overwrite;
  request.no_analysis = no_analysis;
  request.command = command;
  PythonObserver observer(std::move(progress));
  TrainOutcome outcome;
  try {
    py::gil_scoped_release release;
    LocalComm comm;
    RunDirPlan plan{};
    std::unique_ptr<Trainer> trainer = prepare_training(request, comm, observer, plan);
    const RunDirClaim claim = start_training(request, comm, *trainer, observer);
    outcome = run_training(request, comm, *trainer, observer, observer);
  } catch (const Error& e) {
    fail_as_train(e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    fail_as_train(e.what());
  }
  observer.raise_held();
  const TrainResult& r = outcome.result;
  return py::dict(py::arg("run_dir") = run_dir_of(request).string(), py::arg("steps") = r.steps,
                  py::arg("start_step") = r.start_step, py::arg("interrupted") = r.interrupted,
                  py::arg("analyzed") = outcome.analyzed,
                  py::arg("eval_accuracy") = r.final_eval.accuracy,
                  py::arg("eval_loss") = r.final_eval.loss);
}

}  // namespace

void bind_runs(py::module_& m) {
  m.def("train", &train, py::arg("config"), py::arg("out"), py::arg("sets"), py::arg("plugins"),
        py::arg("resume"), py::arg("overwrite"), py::arg("no_analysis"), py::arg("command"),
        py::arg("progress"),
        "The session `headlab train` runs (train/run/session.h); headlab.train wraps it.");
}

}  // namespace headlab::python
