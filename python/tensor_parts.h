#pragma once
// The parts of bind_tensors (python/tensors.cpp calls them in this order) and the conversions
// between headlab::Tensor and NumPy that they share.
//
// Memory: a Tensor made from a NumPy array views the array's buffer (Tensor::wrap) and holds a
// reference to the array until its storage's last Tensor goes; a NumPy array made from a Tensor
// views the Tensor's storage, its base a Python headlab.Tensor holding the handle. Either side
// may go first.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "autograd/var.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace headlab::python {

// A Tensor viewing `array`'s memory; throws headlab::Error naming `what` unless the array is
// float32, C-contiguous, writeable and of rank <= 6 (the message says how to get a copy).
Tensor tensor_view_of(const pybind11::array& array, const char* what);
// A new Tensor holding `object` (an array of any real dtype and layout, a list, a number)
// converted to float32; throws headlab::Error naming `what` when it is not numeric.
Tensor tensor_copy_of(const pybind11::handle& object, const char* what);
// A headlab.Tensor as is, else tensor_view_of a float32 C-contiguous array (copy false) or
// tensor_copy_of anything (copy true, or not an array).
Tensor tensor_from_object(const pybind11::handle& object, bool copy, const char* what);
// A NumPy array over t's memory (writeable), which keeps t's storage alive.
pybind11::array numpy_view(const Tensor& t);
// A shape as a Python tuple of ints.
pybind11::tuple shape_tuple(const Shape& shape);
// None as an undefined Var (an optional gain, bias or weight), else the Var itself.
Var optional_var(const pybind11::handle& object);
// Integer ids or targets as int32 (copied), with their shape; throws naming `what` for a
// non-integer array.
std::vector<int32_t> int32_values(const pybind11::handle& object, const char* what, Shape* shape);
// The generator `object` names: a headlab.Rng (used in place), an int seed or None (seed 0),
// which live in `own`.
Rng& rng_of(const pybind11::handle& object, Rng& own);

void bind_tensor_class(pybind11::module_& m);
void bind_vars(pybind11::module_& m);
void bind_ops(pybind11::module_& m);
void bind_modules(pybind11::module_& m);  // calls bind_encoder (python/encoder.cpp)
void bind_encoder(pybind11::module_& m);
void bind_optimizers(pybind11::module_& m);

}  // namespace headlab::python
