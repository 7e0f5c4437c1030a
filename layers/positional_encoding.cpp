#include "layers/positional_encoding.h"

#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/init.h"
#include "layers/registry.h"

namespace headlab {

PositionKind parse_position_kind(std::string_view name, std::string_view what) {
  if (name == "learned") return PositionKind::learned;
  if (name == "sinusoidal") return PositionKind::sinusoidal;
  fail("{}: unknown positions '{}' (known: learned, sinusoidal)", what, name);
}

PositionalEncoding::PositionalEncoding(const PositionalEncodingOptions& options, Rng& rng)
    : options_(options) {
  if (options.max_len <= 0 || options.d_model <= 0)
    fail("positional_encoding: max_len ({}) and d_model ({}) must be positive", options.max_len,
         options.d_model);
  if (options.kind == PositionKind::learned) {
    weight = register_parameter(
        "weight", init_normal({options.max_len, options.d_model}, options.init_std, rng));
    positions_.resize(static_cast<size_t>(options.max_len));
    std::iota(positions_.begin(), positions_.end(), 0);
    return;
  }
  // Frequencies in double: 1 / 10000^(2i/D) for the pair (2i, 2i+1).
  const int64_t d = options.d_model;
  sinusoid_ = Tensor::empty({options.max_len, d});
  for (int64_t p = 0; p < options.max_len; ++p) {
    for (int64_t j = 0; j < d; ++j) {
      const double rate = std::pow(10000.0, -static_cast<double>(j - j % 2) / d);
      const double angle = static_cast<double>(p) * rate;
      sinusoid_[p * d + j] = static_cast<float>(j % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
}

const Tensor& PositionalEncoding::table() const {
  return options_.kind == PositionKind::learned ? weight.value() : sinusoid_;
}

Var PositionalEncoding::forward(const Var& x) {
  if (x.rank() != 3 || x.size(2) != options_.d_model || x.size(1) > options_.max_len)
    fail("positional_encoding: input shape {} must be [B, T, {}] with T <= max_len {}",
         x.shape().str(), options_.d_model, options_.max_len);
  const int64_t t = x.size(1);
  if (options_.kind == PositionKind::learned) {
    // Gathering rows 0..T-1 is a slice with a scatter-add backward into the table.
    Var p = embedding(weight, std::span<const int32_t>(positions_.data(), static_cast<size_t>(t)),
                      Shape{t});
    return add(x, p);
  }
  return add(x, Var(sinusoid_.slice(0, t)));
}

int64_t PositionalEncoding::parameter_count(const PositionalEncodingOptions& o) {
  return o.kind == PositionKind::learned ? o.max_len * o.d_model : 0;
}

namespace {

PositionalEncodingOptions read_options(LayerOptions& o) {
  PositionalEncodingOptions opt;
  opt.d_model = o.require_int("d_model");
  opt.max_len = o.require_int("max_len");
  opt.kind = parse_position_kind(o.get_string("kind", "learned"), "positional_encoding");
  opt.init_std = o.get_float("init_std", 1.0f);
  return opt;
}

}  // namespace

std::shared_ptr<SequenceLayer> make_positional_encoding_layer(LayerOptions& o) {
  return std::make_shared<PositionalEncoding>(read_options(o), o.init_rng());
}

int64_t count_positional_encoding_parameters(LayerOptions& o) {
  return PositionalEncoding::parameter_count(read_options(o));
}

}  // namespace headlab
