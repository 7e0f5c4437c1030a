// Tensor <-> NumPy without copying (python/tensor_parts.h), and the small conversions every
// tensor binding shares.

#include <Python.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "python/tensor_parts.h"

namespace py = pybind11;

namespace headlab::python {
namespace {

// The release of a wrapped array: drops the Tensor's reference to it. It may run on any thread
// and with or without the GIL (a Tensor can go inside a call that released it), so it takes the
// GIL itself. After the interpreter is gone there is nothing left to release.
void release_array(void* array) {
  if (!Py_IsInitialized()) return;
  const PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(static_cast<PyObject*>(array));
  PyGILState_Release(state);
}

std::string dtype_name(const py::array& array) {
  return py::str(array.dtype()).cast<std::string>();
}

Shape shape_of(const py::array& array, const char* what) {
  if (array.ndim() > Shape::kMaxRank)
    fail("{}: array has {} dims but expected at most {}", what, array.ndim(), Shape::kMaxRank);
  return Shape(array.shape(), array.shape() + array.ndim());
}

}  // namespace

Tensor tensor_view_of(const py::array& array, const char* what) {
  if (!array.dtype().is(py::dtype::of<float>()))
    fail("{}: array dtype is {} but expected float32 (pass copy=True to convert)", what,
         dtype_name(array));
  if (!(array.flags() & py::array::c_style))
    fail(
        "{}: array is not C-contiguous but expected a C-contiguous array (pass copy=True, or "
        "numpy.ascontiguousarray)",
        what);
  if (!array.writeable())
    fail("{}: array is read-only but expected a writeable one (pass copy=True to copy it)", what);
  const Shape shape = shape_of(array, what);
  PyObject* owner = array.ptr();
  Py_INCREF(owner);  // released by release_array when the storage's last Tensor goes
  py::array writeable = array;
  return Tensor::wrap(shape, static_cast<float*>(writeable.mutable_data()), release_array, owner);
}

Tensor tensor_copy_of(const py::handle& object, const char* what) {
  py::array array;
  try {
    array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(object);
  } catch (const py::error_already_set&) {
  }
  if (!array) {
    PyErr_Clear();
    fail("{}: a {} is not numeric but expected an array, a list of numbers or a number", what,
         py::str(py::type::of(object).attr("__name__")).cast<std::string>());
  }
  const Shape shape = shape_of(array, what);
  Tensor t = Tensor::empty(shape);
  if (t.numel() > 0) std::copy_n(static_cast<const float*>(array.data()), t.numel(), t.data());
  return t;
}

Tensor tensor_from_object(const py::handle& object, bool copy, const char* what) {
  if (py::isinstance<Tensor>(object)) {
    const Tensor& t = object.cast<const Tensor&>();
    return copy ? t.clone() : t;
  }
  if (py::isinstance<Var>(object)) {
    const Var& v = object.cast<const Var&>();
    return copy ? v.value().clone() : v.value();
  }
  if (!copy && py::isinstance<py::array>(object))
    return tensor_view_of(py::reinterpret_borrow<py::array>(object), what);
  return tensor_copy_of(object, what);
}

py::array numpy_view(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = sizeof(float);
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  // The base (a headlab.Tensor holding another handle) keeps the storage alive.
  py::object base = py::cast(t);
  return py::array(py::dtype::of<float>(), std::move(shape), std::move(strides),
                   const_cast<float*>(t.data()), base);
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple out(shape.rank());
  for (int d = 0; d < shape.rank(); ++d) out[d] = shape[d];
  return out;
}

Var optional_var(const py::handle& object) {
  if (object.is_none()) return Var();
  return object.cast<Var>();
}

std::vector<int32_t> int32_values(const py::handle& object, const char* what, Shape* shape) {
  py::array array = py::module_::import("numpy").attr("asarray")(object);
  const char kind = array.dtype().kind();
  if (kind != 'i' && kind != 'u')
    fail("{}: array dtype is {} but expected integers", what, dtype_name(array));
  auto ints = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(array);
  if (shape != nullptr) *shape = shape_of(ints, what);
  return {ints.data(), ints.data() + ints.size()};
}

Rng& rng_of(const py::handle& object, Rng& own) {
  if (object.is_none()) return own;
  if (py::isinstance<Rng>(object)) return object.cast<Rng&>();
  if (py::isinstance<py::int_>(object)) {
    own.reseed(object.cast<uint64_t>());
    return own;
  }
  fail("rng: a {} but expected a headlab.Rng, an int seed or None",
       py::str(py::type::of(object).attr("__name__")).cast<std::string>());
}

}  // namespace headlab::python
