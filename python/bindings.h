#pragma once
// The parts of the Python module _headlab (python/module.cpp calls each once, in this order).
// Each part binds one floor of the house; a part may use the Python types an earlier part bound.

#include <pybind11/pybind11.h>

namespace headlab::python {

// headlab.Error (the CLI's one-line message as its text) and the translation of headlab::Error.
void bind_errors(pybind11::module_& m);
// headlab.Tensor (zero-copy with NumPy), Var and the ops, modules, optimizers and schedules.
void bind_tensors(pybind11::module_& m);
// headlab.train's session (python/runs.cpp): the library's, the one `headlab train` runs.
void bind_runs(pybind11::module_& m);
// headlab.Model and load_model: a trained run's model and its hook points (model*.cpp).
void bind_model(pybind11::module_& m);

}  // namespace headlab::python
