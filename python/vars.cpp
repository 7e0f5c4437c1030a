// headlab.Var: a value in the autograd graph, its gradient as a NumPy view, backward() (the GIL
// released) and the Python operators; headlab.no_grad's guard.

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "python/tensor_parts.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace headlab::python {
namespace {

// A constant of x's shape, for a Python number on either side of an operator.
Var constant_like(const Var& x, float value) {
  return Var(Tensor::full(x.shape(), value));
}

Var matmul_operator(const Var& a, const Var& b) {
  // numpy's @: a 2-D right operand multiplies every row of a; equal leading dims batch.
  if (b.rank() == 2) return matmul(a, b);
  return batched_matmul(a, b);
}

std::string var_repr(const Var& v) {
  if (!v.defined()) return "headlab.Var(undefined)";
  const std::string values = py::str(py::module_::import("numpy").attr("array2string")(
      numpy_view(v.value()), "separator"_a = ", "));
  return "headlab.Var(" + values + ", shape=" + v.shape().str() +
         (v.requires_grad() ? ", requires_grad=True)" : ")");
}

// headlab.no_grad's C++ half: one NoGradGuard per `with` block (nesting restores in order).
class NoGradScope {
 public:
  void enter() { guard_.emplace(); }
  void exit() { guard_.reset(); }

 private:
  std::optional<NoGradGuard> guard_;
};

}  // namespace

void bind_vars(py::module_& m) {
  py::class_<Var> var(m, "Var", "A value in the autograd graph (copies alias, as in C++)");
  var.def(py::init([](const py::object& value, bool requires_grad, bool copy) {
            return Var(tensor_from_object(value, copy, "Var"), requires_grad);
          }),
          "value"_a, "requires_grad"_a = false, "copy"_a = false,
          "A leaf over value (a headlab.Tensor, or an array as headlab.Tensor takes it: a "
          "float32 C-contiguous array is shared, not copied)")
      .def_property_readonly("value", [](const Var& v) { return v.value(); })
      .def("numpy", [](const Var& v) { return numpy_view(v.value()); })
      .def_property_readonly(
          "grad",
          [](const Var& v) -> py::object {
            if (!v.has_grad()) return py::none();
            return numpy_view(v.grad());
          },
          "The accumulated gradient as a NumPy view, or None before one arrives")
      .def_property("requires_grad", &Var::requires_grad, &Var::set_requires_grad)
      .def_property_readonly("is_leaf", &Var::is_leaf)
      .def_property_readonly("shape", [](const Var& v) { return shape_tuple(v.shape()); })
      .def_property_readonly("ndim", &Var::rank)
      .def_property_readonly("numel", &Var::numel)
      .def("item", [](const Var& v) { return v.value().item(); })
      .def(
          "backward",
          [](const Var& v, const py::object& seed) {
            if (seed.is_none()) {
              py::gil_scoped_release release;
              v.backward();
            } else {
              const Tensor s = tensor_from_object(seed, false, "backward");
              py::gil_scoped_release release;
              v.backward(s);
            }
          },
          "seed"_a = py::none(), "Reverse pass from this scalar (or with seed of its shape)")
      .def("zero_grad", &Var::zero_grad)
      .def("clear_grad", &Var::clear_grad)
      .def("detach", &Var::detach)
      .def("__repr__", &var_repr)
      // Operators: Var with Var, a Python number, or an array (taken as a constant).
      .def("__add__", [](const Var& a, const Var& b) { return add(a, b); })
      .def("__add__", [](const Var& a, float b) { return add(a, constant_like(a, b)); })
      .def("__radd__", [](const Var& a, float b) { return add(constant_like(a, b), a); })
      .def("__sub__", [](const Var& a, const Var& b) { return sub(a, b); })
      .def("__sub__", [](const Var& a, float b) { return sub(a, constant_like(a, b)); })
      .def("__rsub__", [](const Var& a, float b) { return sub(constant_like(a, b), a); })
      .def("__mul__", [](const Var& a, const Var& b) { return mul(a, b); })
      .def("__mul__", [](const Var& a, float b) { return scale(a, b); })
      .def("__rmul__", [](const Var& a, float b) { return scale(a, b); })
      .def("__truediv__", [](const Var& a, const Var& b) { return div(a, b); })
      .def("__truediv__", [](const Var& a, float b) { return div(a, constant_like(a, b)); })
      .def("__rtruediv__", [](const Var& a, float b) { return div(constant_like(a, b), a); })
      .def("__neg__", [](const Var& a) { return scale(a, -1.0f); })
      .def("__matmul__", &matmul_operator)
      .def("__pow__", [](const Var& a, float p) { return pow(a, p); })
      // Methods over the ops that take one Var.
      .def(
          "sum",
          [](const Var& x, const std::optional<int>& dim, bool keepdim) {
            return dim ? sum(x, *dim, keepdim) : sum(x);
          },
          "dim"_a = py::none(), "keepdim"_a = false)
      .def(
          "mean",
          [](const Var& x, const std::optional<int>& dim, bool keepdim) {
            return dim ? mean(x, *dim, keepdim) : mean(x);
          },
          "dim"_a = py::none(), "keepdim"_a = false)
      .def(
          "max", [](const Var& x, int dim, bool keepdim) { return max(x, dim, keepdim); }, "dim"_a,
          "keepdim"_a = false)
      .def("reshape",
           [](const Var& x, const py::args& dims) {
             std::vector<int64_t> d;
             if (dims.size() == 1 && !py::isinstance<py::int_>(dims[0]))
               d = dims[0].cast<std::vector<int64_t>>();
             else
               d = dims.cast<std::vector<int64_t>>();
             if (d.size() > static_cast<size_t>(Shape::kMaxRank))
               fail("reshape: {} dims but expected at most {}", d.size(), Shape::kMaxRank);
             return reshape(x, Shape(d.begin(), d.end()));
           })
      .def("transpose", [](const Var& x) { return transpose(x); })
      .def_property_readonly("T", [](const Var& x) { return transpose(x); })
      .def("permute",
           [](const Var& x, const py::args& dims) {
             std::vector<int> d;
             if (dims.size() == 1 && !py::isinstance<py::int_>(dims[0]))
               d = dims[0].cast<std::vector<int>>();
             else
               d = dims.cast<std::vector<int>>();
             return permute(x, std::span<const int>(d));
           })
      .def("relu", [](const Var& x) { return relu(x); })
      .def("gelu", [](const Var& x) { return gelu(x); })
      .def("tanh", [](const Var& x) { return tanh(x); })
      .def("sigmoid", [](const Var& x) { return sigmoid(x); })
      .def("exp", [](const Var& x) { return exp(x); })
      .def("log", [](const Var& x) { return log(x); })
      .def("sqrt", [](const Var& x) { return sqrt(x); })
      .def("softmax", [](const Var& x) { return softmax(x); })
      .def("log_softmax", [](const Var& x) { return log_softmax(x); });
  // numpy defers to Var's reflected operators (array + var is a Var, not an object array).
  var.attr("__array_ufunc__") = py::none();
  py::implicitly_convertible<Tensor, Var>();

  py::class_<NoGradScope>(m, "_NoGradScope")
      .def(py::init<>())
      .def("enter", &NoGradScope::enter)
      .def("exit", &NoGradScope::exit);
  m.def("grad_enabled", &grad_enabled, "Whether ops record onto the tape (this thread)");
}

}  // namespace headlab::python
