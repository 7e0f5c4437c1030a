#pragma once
// Parameter initialisation. Every draw comes from an Rng passed in, in row-major order of the
// tensor, so a seed gives the same parameters on every platform. Defaults follow PyTorch:
//   Linear weight and bias  U(-1/sqrt(fan_in), 1/sqrt(fan_in))          (Init::default_uniform)
//   Linear weight           U(-sqrt(6/(fan_in+fan_out)), +..), bias 0   (Init::xavier_uniform)
//   Embedding, learned positions  N(0, std)
//   LayerNorm gain 1, bias 0

#include <cstdint>
#include <string_view>

#include "core/rng.h"
#include "core/tensor.h"

namespace headlab {

enum class Init { default_uniform, xavier_uniform };

// "default" or "xavier_uniform"; throws headlab::Error naming `what` and the known names.
Init parse_init(std::string_view name, std::string_view what);
const char* init_name(Init init);

// U(-bound, bound), drawn in row-major order.
Tensor init_uniform(const Shape& shape, float bound, Rng& rng);
// N(mean, std), drawn in row-major order.
Tensor init_normal(const Shape& shape, float std, Rng& rng, float mean = 0.0f);
// 1/sqrt(fan_in): PyTorch's Linear bound (kaiming_uniform with a = sqrt(5) reduces to it).
float fan_in_bound(int64_t fan_in);
// sqrt(6/(fan_in+fan_out)): Glorot & Bengio (2010).
float xavier_bound(int64_t fan_in, int64_t fan_out);

}  // namespace headlab
