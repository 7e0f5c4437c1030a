#pragma once
// Parameter groups from glob patterns over parameter names (the config's optim.no_decay and
// optim.lr_scale): `*` matches any run of characters (dots included), `?` one character, and
// everything else itself, over the whole name ("*.bias" matches "encoder.layers.0.ffn.linear1.bias";
// "*norm*" every parameter of a norm layer).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "layers/module.h"
#include "optim/optimizer.h"

namespace headlab {

bool glob_match(std::string_view pattern, std::string_view name);

// One learning-rate scale: parameters matching `pattern` train at lr * scale.
struct LrScale {
  std::string pattern;
  double scale = 1.0;
};

// The group of each parameter, in order: weight_decay false where a no_decay pattern matches,
// lr_scale from the lr_scale pattern that matches (1 where none does). Throws headlab::Error
// naming the key and pattern for a pattern that matches no parameter, a parameter that two
// lr_scale patterns match (which scale would be ambiguous), and a scale not finite and >= 0.
std::vector<ParameterGroup> parameter_groups(const NamedParameters& params,
                                             const std::vector<std::string>& no_decay,
                                             const std::vector<LrScale>& lr_scale);

}  // namespace headlab
