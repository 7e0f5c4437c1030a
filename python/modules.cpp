// The layers as Python objects: headlab.Linear, LayerNorm, FeedForward, MultiHeadAttention,
// EncoderLayer, Encoder, Embedding, and any registered layer through headlab.layer(name, ...).
// Each is built from keyword arguments (the C++ options struct's members) and an Rng for its
// initial values; calling one runs its forward with the GIL released. parameters() alias the
// live parameters; state_dict() gives NumPy views of them.

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/embedding.h"
#include "layers/encoder.h"
#include "layers/encoder_layer.h"
#include "layers/feed_forward.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/multi_head_attention.h"
#include "layers/registry.h"
#include "python/tensor_parts.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace headlab::python {
namespace {

OptionValue option_value(const py::handle& value, const std::string& key) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return value.cast<int64_t>();
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    OptionArray items;
    for (const py::handle item : value) items.push_back(option_value(item, key));
    return items;
  }
  fail("option {}: a {} but expected a bool, an int, a float, a string or a list", key,
       py::str(py::type::of(value).attr("__name__")).cast<std::string>());
}

OptionMap option_map(const py::dict& options) {
  OptionMap map;
  for (const auto& [key, value] : options) {
    const std::string name = py::str(key);
    map.set(name, option_value(value, name));
  }
  return map;
}

py::dict state_dict_of(const StateDict& state) {
  py::dict out;
  for (const NamedTensor& entry : state) out[py::str(entry.name)] = numpy_view(entry.tensor);
  return out;
}

StateDict state_dict_from(const py::dict& state, const char* what) {
  StateDict out;
  for (const auto& [key, value] : state)
    out.push_back({py::str(key).cast<std::string>(), tensor_from_object(value, true, what)});
  return out;
}

const Tensor* optional_mask(const py::object& mask, Tensor& storage, const char* what) {
  if (mask.is_none()) return nullptr;
  storage = tensor_from_object(mask, true, what);
  return &storage;
}

void bind_module_base(py::module_& m) {
  py::class_<Module, std::shared_ptr<Module>>(m, "Module", "The base of every layer")
      .def("parameters", &Module::parameters, "The parameters (Vars aliasing the live values)")
      .def(
          "named_parameters",
          [](const Module& module) {
            std::vector<std::pair<std::string, Var>> out;
            for (const NamedParameter& p : module.named_parameters())
              out.emplace_back(p.name, p.var);
            return out;
          },
          "(dotted name, Var) pairs, in the order checkpoints and optimizers use")
      .def(
          "state_dict", [](const Module& module) { return state_dict_of(module.state_dict()); },
          "name -> NumPy view of the parameter (editing it edits the model)")
      .def(
          "load_state_dict",
          [](Module& module, const py::dict& state) {
            module.load_state_dict(state_dict_from(state, "load_state_dict"));
          },
          "state"_a, "Copies values in by name; every problem is listed in one headlab.Error")
      .def("train", &Module::train, "on"_a = true)
      .def("eval", &Module::eval)
      .def_property_readonly("training", &Module::is_training)
      .def("zero_grad", &Module::zero_grad);

  py::class_<SequenceLayer, Module, std::shared_ptr<SequenceLayer>>(m, "SequenceLayer")
      .def("forward", &SequenceLayer::forward, "x"_a, py::call_guard<py::gil_scoped_release>())
      .def("__call__", &SequenceLayer::forward, "x"_a, py::call_guard<py::gil_scoped_release>());
}

void bind_basic_layers(py::module_& m) {
  py::class_<Linear, SequenceLayer, std::shared_ptr<Linear>>(m, "Linear")
      .def(py::init([](int64_t in_features, int64_t out_features, bool bias,
                       const std::string& init, const py::object& rng) {
             Rng own;
             return std::make_shared<Linear>(
                 LinearOptions{in_features, out_features, bias, parse_init(init, "Linear init")},
                 rng_of(rng, own));
           }),
           "in_features"_a, "out_features"_a, "bias"_a = true, "init"_a = "default",
           "rng"_a = py::none())
      .def_readonly("weight", &Linear::weight)
      .def_readonly("bias", &Linear::bias);

  py::class_<LayerNorm, SequenceLayer, std::shared_ptr<LayerNorm>>(m, "LayerNorm")
      .def(py::init([](int64_t dim, float eps, bool affine) {
             return std::make_shared<LayerNorm>(LayerNormOptions{dim, eps, affine});
           }),
           "dim"_a, "eps"_a = 1e-5f, "affine"_a = true)
      .def_readonly("weight", &LayerNorm::weight)
      .def_readonly("bias", &LayerNorm::bias);

  py::class_<FeedForward, SequenceLayer, std::shared_ptr<FeedForward>>(m, "FeedForward")
      .def(py::init([](int64_t d_model, int64_t d_ff, const std::string& activation,
                       float activation_dropout, bool bias, const std::string& init,
                       const py::object& rng) {
             Rng own;
             FeedForwardOptions o{d_model,
                                  d_ff,
                                  parse_activation(activation, "FeedForward activation"),
                                  activation_dropout,
                                  bias,
                                  parse_init(init, "FeedForward init")};
             return std::make_shared<FeedForward>(o, rng_of(rng, own));
           }),
           "d_model"_a, "d_ff"_a, "activation"_a = "relu", "activation_dropout"_a = 0.0f,
           "bias"_a = true, "init"_a = "default", "rng"_a = py::none())
      .def_readonly("w1", &FeedForward::w1)
      .def_readonly("w2", &FeedForward::w2);

  py::class_<Embedding, Module, std::shared_ptr<Embedding>>(m, "Embedding")
      .def(py::init([](int64_t num_embeddings, int64_t embedding_dim, float init_std,
                       const py::object& rng) {
             Rng own;
             return std::make_shared<Embedding>(
                 EmbeddingOptions{num_embeddings, embedding_dim, init_std}, rng_of(rng, own));
           }),
           "num_embeddings"_a, "embedding_dim"_a, "init_std"_a = 1.0f, "rng"_a = py::none())
      .def("__call__", [](Embedding& e, const py::object& ids) {
        Shape shape;
        const std::vector<int32_t> values = int32_values(ids, "Embedding", &shape);
        py::gil_scoped_release release;
        return e.forward(values, shape);
      });

  m.def(
      "layer",
      [](const std::string& name, const py::object& rng, const py::kwargs& options) {
        Rng own;
        return make_layer(name, option_map(options), rng_of(rng, own));
      },
      "name"_a, "rng"_a = py::none(),
      "A registered layer (layers/registry.h; a plugin's too) from its options as keywords");
}

}  // namespace

void bind_attention_layers(py::module_& m);

void bind_modules(py::module_& m) {
  bind_module_base(m);
  bind_basic_layers(m);
  bind_attention_layers(m);
  bind_encoder(m);
}

// MultiHeadAttention, EncoderLayer and Encoder: calls with masks and attention weights.
void bind_attention_layers(py::module_& m) {
  py::class_<MultiHeadAttention, SequenceLayer, std::shared_ptr<MultiHeadAttention>>(
      m, "MultiHeadAttention")
      .def(py::init([](int64_t d_model, int64_t heads, int64_t head_dim, float attn_dropout,
                       bool bias, const std::string& init, const py::object& rng) {
             Rng own;
             MultiHeadAttentionOptions o{d_model,      heads, head_dim,
                                         attn_dropout, bias,  parse_init(init, "attention init")};
             return std::make_shared<MultiHeadAttention>(o, rng_of(rng, own));
           }),
           "d_model"_a, "heads"_a = 1, "head_dim"_a = 0, "attn_dropout"_a = 0.0f, "bias"_a = true,
           "init"_a = "default", "rng"_a = py::none())
      .def(
          "__call__",
          [](MultiHeadAttention& attn, const Var& query, const py::object& key,
             const py::object& value, const py::object& key_padding_mask,
             const py::object& attn_mask, bool need_weights) -> py::object {
            Tensor padding, causal;
            const Tensor* kpm = optional_mask(key_padding_mask, padding, "key_padding_mask");
            const Tensor* am = optional_mask(attn_mask, causal, "attn_mask");
            const Var k = key.is_none() ? query : key.cast<Var>();
            const Var v = value.is_none() ? k : value.cast<Var>();
            AttentionOutput out;
            {
              py::gil_scoped_release release;
              out = attn.forward(query, k, v, kpm, am, need_weights);
            }
            if (need_weights) return py::make_tuple(out.output, out.weights);
            return py::cast(out.output);
          },
          "query"_a, "key"_a = py::none(), "value"_a = py::none(),
          "key_padding_mask"_a = py::none(), "attn_mask"_a = py::none(), "need_weights"_a = false,
          "The output [B, T, d_model], or (output, weights [B, h, T, S]) with need_weights")
      .def_readonly("in_proj_weight", &MultiHeadAttention::in_proj_weight)
      .def_readonly("in_proj_bias", &MultiHeadAttention::in_proj_bias)
      .def_readonly("w_o", &MultiHeadAttention::w_o)
      .def_property_readonly("head_gate", &MultiHeadAttention::head_gate)
      .def("set_head_mask", [](MultiHeadAttention& attn,
                               const std::vector<float>& mask) { attn.set_head_mask(mask); })
      .def("reset_head_mask", &MultiHeadAttention::reset_head_mask);

  py::class_<EncoderLayer, Module, std::shared_ptr<EncoderLayer>>(m, "EncoderLayer")
      .def(py::init([](int64_t d_model, int64_t heads, int64_t d_ff, int64_t head_dim,
                       const std::string& activation, const std::string& norm, float dropout,
                       float attn_dropout, const std::string& init, const py::object& rng) {
             Rng own;
             EncoderLayerOptions o;
             o.d_model = d_model;
             o.heads = heads;
             o.head_dim = head_dim;
             o.d_ff = d_ff;
             o.activation = parse_activation(activation, "EncoderLayer activation");
             o.norm = parse_norm_position(norm, "EncoderLayer norm");
             o.dropout = dropout;
             o.attn_dropout = attn_dropout;
             o.init = parse_init(init, "EncoderLayer init");
             return std::make_shared<EncoderLayer>(o, rng_of(rng, own));
           }),
           "d_model"_a, "heads"_a, "d_ff"_a, "head_dim"_a = 0, "activation"_a = "relu",
           "norm"_a = "pre", "dropout"_a = 0.0f, "attn_dropout"_a = 0.0f, "init"_a = "default",
           "rng"_a = py::none())
      .def(
          "__call__",
          [](EncoderLayer& layer, const Var& x, const py::object& key_padding_mask,
             const py::object& attn_mask, bool need_weights) -> py::object {
            Tensor padding, causal;
            const Tensor* kpm = optional_mask(key_padding_mask, padding, "key_padding_mask");
            const Tensor* am = optional_mask(attn_mask, causal, "attn_mask");
            EncoderLayerOutput out;
            {
              py::gil_scoped_release release;
              out = layer.forward(x, kpm, am, need_weights);
            }
            if (need_weights) return py::make_tuple(out.output, out.weights);
            return py::cast(out.output);
          },
          "x"_a, "key_padding_mask"_a = py::none(), "attn_mask"_a = py::none(),
          "need_weights"_a = false)
      .def_readonly("attn", &EncoderLayer::attn)
      .def_readonly("ffn", &EncoderLayer::ffn)
      .def_readonly("norm1", &EncoderLayer::norm1)
      .def_readonly("norm2", &EncoderLayer::norm2);
}

}  // namespace headlab::python
