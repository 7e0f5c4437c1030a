// headlab.Tensor (the buffer protocol: numpy.asarray(t) is a view) and headlab.Rng; then the
// autograd, module and optimizer parts (python/tensor_parts.h).

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "python/bindings.h"
#include "python/tensor_parts.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace headlab::python {
namespace {

Shape shape_from(const std::vector<int64_t>& dims) {
  if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
    fail("Tensor: shape has {} dims but expected at most {}", dims.size(), Shape::kMaxRank);
  for (int64_t d : dims)
    if (d < 0) fail("Tensor: shape has a negative dim {}", d);
  return Shape(dims.begin(), dims.end());
}

std::string tensor_repr(const Tensor& t) {
  if (!t.defined()) return "headlab.Tensor(undefined)";
  const std::string values = py::str(
      py::module_::import("numpy").attr("array2string")(numpy_view(t), "separator"_a = ", "));
  return "headlab.Tensor(" + values + ", shape=" + t.shape().str() + ")";
}

}  // namespace

void bind_tensor_class(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", py::buffer_protocol(),
                     "fp32, contiguous, up to 6 dims; shares memory with NumPy both ways")
      .def(py::init([](const py::object& data, bool copy) {
             return tensor_from_object(data, copy, "Tensor");
           }),
           "data"_a, "copy"_a = false,
           "A float32 C-contiguous writeable array is viewed (shared memory, kept alive); any "
           "other array raises headlab.Error unless copy=True. Lists and numbers are copied.")
      .def_buffer([](Tensor& t) {
        if (!t.defined()) fail("Tensor: undefined tensor has no buffer");
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
        std::vector<py::ssize_t> strides(shape.size());
        py::ssize_t stride = sizeof(float);
        for (size_t d = shape.size(); d-- > 0;) {
          strides[d] = stride;
          stride *= shape[d];
        }
        return py::buffer_info(t.data(), sizeof(float), py::format_descriptor<float>::format(),
                               static_cast<py::ssize_t>(shape.size()), shape, strides);
      })
      .def_static(
          "zeros",
          [](const std::vector<int64_t>& shape) { return Tensor::zeros(shape_from(shape)); },
          "shape"_a)
      .def_static(
          "full",
          [](const std::vector<int64_t>& shape, float value) {
            return Tensor::full(shape_from(shape), value);
          },
          "shape"_a, "value"_a)
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("ndim", &Tensor::rank)
      .def_property_readonly("numel", &Tensor::numel)
      .def_property_readonly("dtype", [](const Tensor&) { return py::dtype::of<float>(); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.rank() == 0) fail("Tensor: len() of a 0-d tensor");
             return t.size(0);
           })
      .def("numpy", &numpy_view, "A NumPy view of the values (shared memory)")
      .def("clone", &Tensor::clone)
      .def("item", &Tensor::item)
      .def("tolist", [](const Tensor& t) { return numpy_view(t).attr("tolist")(); })
      .def("shares_memory", &Tensor::shares_storage, "other"_a)
      .def("__repr__", &tensor_repr);
  m.def(
      "from_numpy", [](const py::array& a) { return tensor_view_of(a, "from_numpy"); }, "array"_a,
      "A Tensor sharing a's memory (float32, C-contiguous, writeable; else headlab.Error)");

  py::class_<Rng>(m, "Rng", "headlab's generator (xoshiro256**); a seed gives the C++ stream")
      .def(py::init<uint64_t>(), "seed"_a = 0)
      .def("uniform", py::overload_cast<>(&Rng::uniform))
      .def("normal", py::overload_cast<>(&Rng::normal))
      .def("state", &Rng::state_string);
}

void bind_tensors(py::module_& m) {
  bind_tensor_class(m);
  bind_vars(m);
  bind_ops(m);
  bind_modules(m);
  bind_optimizers(m);
}

}  // namespace headlab::python
