// _headlab: the compiled half of the Python package headlab (python/headlab/__init__.py imports
// it). Every binding lives in its own file, one floor of the house each (python/bindings.h).

#include <pybind11/pybind11.h>

#include "core/openmp_wait.h"
#include "core/version.h"
#include "python/bindings.h"

PYBIND11_MODULE(_headlab, m) {
  m.doc() = "headlab: tape-based autodiff and a Transformer encoder workbench (C++)";
  m.attr("__version__") = HEADLAB_VERSION;
  // What headlab/_openmp.py repeats in Python (it runs before this module loads libgomp).
  m.attr("_openmp_quiet_spin_count") = headlab::kQuietSpinCount;
  m.attr("_openmp_busy_cores") = headlab::kBusyCores;
  headlab::python::bind_errors(m);
  headlab::python::bind_tensors(m);
  headlab::python::bind_runs(m);
  headlab::python::bind_model(m);
}
