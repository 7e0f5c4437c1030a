#include "layers/init.h"

#include <cmath>

#include "core/error.h"

namespace headlab {

Init parse_init(std::string_view name, std::string_view what) {
  if (name == "default") return Init::default_uniform;
  if (name == "xavier_uniform") return Init::xavier_uniform;
  fail("{}: unknown init '{}' (known: default, xavier_uniform)", what, name);
}

const char* init_name(Init init) {
  return init == Init::xavier_uniform ? "xavier_uniform" : "default";
}

Tensor init_uniform(const Shape& shape, float bound, Rng& rng) {
  Tensor t = Tensor::empty(shape);
  for (float& v : t.span()) v = rng.uniform(-bound, bound);
  return t;
}

Tensor init_normal(const Shape& shape, float std, Rng& rng, float mean) {
  Tensor t = Tensor::empty(shape);
  for (float& v : t.span()) v = rng.normal(mean, std);
  return t;
}

float fan_in_bound(int64_t fan_in) {
  return fan_in > 0 ? 1.0f / std::sqrt(static_cast<float>(fan_in)) : 0.0f;
}

float xavier_bound(int64_t fan_in, int64_t fan_out) {
  const int64_t fans = fan_in + fan_out;
  return fans > 0 ? std::sqrt(6.0f / static_cast<float>(fans)) : 0.0f;
}

}  // namespace headlab
