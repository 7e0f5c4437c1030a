// The ops of autograd/ops.h as functions of headlab (headlab.matmul(a, b), headlab.softmax(x),
// ...): each checks its shapes and throws headlab.Error naming the op, the expected and the
// actual shape, as in C++.

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "python/tensor_parts.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace headlab::python {
namespace {

Shape shape_arg(const std::vector<int64_t>& dims, const char* op) {
  if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
    fail("{}: shape has {} dims but expected at most {}", op, dims.size(), Shape::kMaxRank);
  return Shape(dims.begin(), dims.end());
}

}  // namespace

void bind_ops(py::module_& m) {
  // Linear algebra.
  m.def("matmul", &matmul, "a"_a, "b"_a, "trans_a"_a = false, "trans_b"_a = false);
  m.def("batched_matmul", &batched_matmul, "a"_a, "b"_a, "trans_a"_a = false, "trans_b"_a = false);
  m.def(
      "einsum",
      [](const std::string& equation, const Var& a, const Var& b) {
        return einsum(equation, a, b);
      },
      "equation"_a, "a"_a, "b"_a);
  // Element-wise, broadcasting as NumPy.
  m.def("add", &add, "a"_a, "b"_a);
  m.def("sub", &sub, "a"_a, "b"_a);
  m.def("mul", &mul, "a"_a, "b"_a);
  m.def("div", &div, "a"_a, "b"_a);
  m.def("scale", &scale, "x"_a, "s"_a);
  m.def("relu", &relu, "x"_a);
  m.def("gelu", &gelu, "x"_a);
  m.def("gelu_tanh", &gelu_tanh, "x"_a);
  m.def("sigmoid", &sigmoid, "x"_a);
  m.def("tanh", &tanh, "x"_a);
  m.def("exp", &exp, "x"_a);
  m.def("log", &log, "x"_a);
  m.def("sqrt", &sqrt, "x"_a);
  m.def("pow", &pow, "x"_a, "p"_a);
  m.def("softplus", &softplus, "x"_a);
  m.def(
      "dropout",
      [](const Var& x, float p, Rng& rng, bool training) { return dropout(x, p, rng, training); },
      "x"_a, "p"_a, "rng"_a, "training"_a = true);
  // Reductions and shapes.
  m.def(
      "sum",
      [](const Var& x, const std::optional<int>& dim, bool keepdim) {
        return dim ? sum(x, *dim, keepdim) : sum(x);
      },
      "x"_a, "dim"_a = py::none(), "keepdim"_a = false);
  m.def(
      "mean",
      [](const Var& x, const std::optional<int>& dim, bool keepdim) {
        return dim ? mean(x, *dim, keepdim) : mean(x);
      },
      "x"_a, "dim"_a = py::none(), "keepdim"_a = false);
  m.def(
      "max", [](const Var& x, int dim, bool keepdim) { return max(x, dim, keepdim); }, "x"_a,
      "dim"_a, "keepdim"_a = false);
  m.def("logsumexp", &logsumexp, "x"_a, "dim"_a, "keepdim"_a = false);
  m.def("cumsum", &cumsum, "x"_a, "dim"_a);
  m.def(
      "reshape",
      [](const Var& x, const std::vector<int64_t>& shape) {
        return reshape(x, shape_arg(shape, "reshape"));
      },
      "x"_a, "shape"_a);
  m.def("transpose", &transpose, "x"_a);
  m.def(
      "permute",
      [](const Var& x, const std::vector<int>& dims) {
        return permute(x, std::span<const int>(dims));
      },
      "x"_a, "dims"_a);
  m.def(
      "concat",
      [](const std::vector<Var>& xs, int dim) { return concat(std::span<const Var>(xs), dim); },
      "xs"_a, "dim"_a);
  m.def(
      "slice",
      [](const Var& x, int dim, int64_t begin, int64_t end) { return slice(x, dim, begin, end); },
      "x"_a, "dim"_a, "begin"_a, "end"_a);
  m.def("split_heads", &split_heads, "x"_a, "heads"_a);
  m.def("merge_heads", &merge_heads, "x"_a);
  m.def(
      "expand",
      [](const Var& x, const std::vector<int64_t>& shape) {
        return expand(x, shape_arg(shape, "expand"));
      },
      "x"_a, "shape"_a);
  // Normalisation, probabilities and losses.
  m.def("softmax", &softmax, "x"_a);
  m.def("log_softmax", &log_softmax, "x"_a);
  m.def(
      "cross_entropy",
      [](const Var& logits, const py::object& targets, int32_t ignore_index) {
        const std::vector<int32_t> t = int32_values(targets, "cross_entropy", nullptr);
        return cross_entropy(logits, t, ignore_index);
      },
      "logits"_a, "targets"_a, "ignore_index"_a = -100,
      "Mean cross-entropy of logits [.., C] against integer targets (one per row)");
  m.def(
      "layer_norm",
      [](const Var& x, const py::object& gain, const py::object& bias, float eps) {
        return layer_norm(x, optional_var(gain), optional_var(bias), eps);
      },
      "x"_a, "gain"_a = py::none(), "bias"_a = py::none(), "eps"_a = 1e-5f);
  m.def(
      "add_layer_norm",
      [](const Var& x, const Var& r, const py::object& gain, const py::object& bias, float eps) {
        return add_layer_norm(x, r, optional_var(gain), optional_var(bias), eps);
      },
      "x"_a, "r"_a, "gain"_a = py::none(), "bias"_a = py::none(), "eps"_a = 1e-5f);
  m.def(
      "linear",
      [](const Var& x, const Var& weight, const py::object& bias, bool relu) {
        return linear(x, weight, optional_var(bias), relu);
      },
      "x"_a, "weight"_a, "bias"_a = py::none(), "relu"_a = false);
  // Indexing, gates and masks.
  m.def(
      "embedding",
      [](const Var& weight, const py::object& ids) {
        Shape shape;
        const std::vector<int32_t> values = int32_values(ids, "embedding", &shape);
        return embedding(weight, values, shape);
      },
      "weight"_a, "ids"_a);
  m.def("head_gate", &head_gate, "x"_a, "gate"_a);
  m.def(
      "masked_fill",
      [](const Var& x, const py::object& mask, float value) {
        return masked_fill(x, tensor_from_object(mask, true, "masked_fill"), value);
      },
      "x"_a, "mask"_a, "value"_a, "Where mask != 0 the output is value (the mask is copied)");
  m.def(
      "where",
      [](const py::object& mask, const Var& a, const Var& b) {
        return where(tensor_from_object(mask, true, "where"), a, b);
      },
      "mask"_a, "a"_a, "b"_a);
}

}  // namespace headlab::python
