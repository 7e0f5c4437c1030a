// headlab.Error: what the CLI prints after "headlab: error: " is the exception's text, so a
// Python caller reads the same line the command line shows.

#include <pybind11/pybind11.h>

#include "core/error.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace headlab::python {

void bind_errors(py::module_& m) {
  // A subclass of RuntimeError, as headlab::Error is of std::runtime_error, so code that catches
  // RuntimeError keeps working.
  // register_exception translates every headlab::Error thrown through a binding.
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
}

}  // namespace headlab::python
