// headlab.Encoder: the whole encoder (embeddings, positions, blocks, final norm, classifier) as a
// module of the tensors part, built from EncoderOptions' members as keywords and called on
// integer feature arrays [B, T].

#include <pybind11/stl.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/encoder.h"
#include "python/tensor_parts.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace headlab::python {
namespace {

EncoderOutput run_encoder(Encoder& encoder, const py::object& features,
                          const py::object& key_padding_mask, bool need_weights) {
  // One [B, T] array per input feature (vocab_sizes order); a lone array is the only feature.
  std::vector<py::object> arrays;
  if (py::isinstance<py::list>(features) || py::isinstance<py::tuple>(features)) {
    for (const py::handle f : features) arrays.push_back(py::reinterpret_borrow<py::object>(f));
  } else {
    arrays.push_back(features);
  }
  std::vector<std::vector<int32_t>> ids;
  Shape shape;
  for (const py::object& f : arrays) {
    Shape s;
    ids.push_back(int32_values(f, "Encoder features", &s));
    if (s.rank() != 2) fail("Encoder: features shape is {} but expected [B, T]", s.str());
    if (ids.size() > 1 && s != shape)
      fail("Encoder: feature {} shape is {} but expected {} (feature 0's)", ids.size() - 1, s.str(),
           shape.str());
    shape = s;
  }
  if (ids.empty()) fail("Encoder: no features given but expected one [B, T] array per feature");
  std::vector<std::span<const int32_t>> spans(ids.begin(), ids.end());
  Tensor padding;
  if (!key_padding_mask.is_none())
    padding = tensor_from_object(key_padding_mask, true, "key_padding_mask");
  py::gil_scoped_release release;
  return encoder.forward(std::span<const std::span<const int32_t>>(spans), shape[0], shape[1],
                         padding.defined() ? &padding : nullptr, need_weights);
}

}  // namespace

void bind_encoder(py::module_& m) {
  py::class_<EncoderOutput>(m, "EncoderOutput")
      .def_readonly("logits", &EncoderOutput::logits)
      .def_readonly("hidden", &EncoderOutput::hidden)
      .def_readonly("weights", &EncoderOutput::weights);

  py::class_<Encoder, Module, std::shared_ptr<Encoder>>(m, "Encoder")
      .def(py::init([](const std::vector<int64_t>& vocab_sizes, int64_t max_len, int64_t d_model,
                       int64_t heads, int64_t layers, int64_t d_ff, int64_t num_classes,
                       int64_t head_dim, const std::string& activation, const std::string& norm,
                       const std::string& positions, float dropout, float attn_dropout,
                       const std::string& init, uint64_t dropout_seed, const py::object& rng) {
             EncoderOptions o;
             o.vocab_sizes = vocab_sizes;
             o.max_len = max_len;
             o.d_model = d_model;
             o.heads = heads;
             o.layers = layers;
             o.d_ff = d_ff;
             o.num_classes = num_classes;
             o.head_dim = head_dim;
             o.activation = parse_activation(activation, "Encoder activation");
             o.norm = parse_norm_position(norm, "Encoder norm");
             o.positions = parse_position_kind(positions, "Encoder positions");
             o.dropout = dropout;
             o.attn_dropout = attn_dropout;
             o.init = parse_init(init, "Encoder init");
             o.dropout_seed = dropout_seed;
             Rng own;
             return std::make_shared<Encoder>(o, rng_of(rng, own));
           }),
           "vocab_sizes"_a = std::vector<int64_t>{17, 4}, "max_len"_a = 17, "d_model"_a = 64,
           "heads"_a = 4, "layers"_a = 1, "d_ff"_a = 128, "num_classes"_a = 64, "head_dim"_a = 0,
           "activation"_a = "relu", "norm"_a = "pre", "positions"_a = "learned", "dropout"_a = 0.0f,
           "attn_dropout"_a = 0.0f, "init"_a = "default", "dropout_seed"_a = 0,
           "rng"_a = py::none())
      .def("__call__", &run_encoder, "features"_a, "key_padding_mask"_a = py::none(),
           "need_weights"_a = false,
           "features: one integer array [B, T] per input feature (or one array); returns an "
           "EncoderOutput with logits [B, T, C], hidden [B, T, D] and weights (need_weights)")
      .def_property_readonly("num_layers", &Encoder::num_layers)
      .def(
          "layer", [](Encoder& e, int64_t l) { return &e.layer(l); },
          py::return_value_policy::reference_internal, "l"_a,
          "Block l (the returned object keeps the encoder alive)");
}

}  // namespace headlab::python
