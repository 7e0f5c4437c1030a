#include "layers/dropout.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/registry.h"

namespace headlab {

void check_dropout_p(float p, const char* what) {
  if (!(p >= 0.0f && p < 1.0f)) fail("{}: p is {} but must be in [0, 1)", what, p);
}

Dropout::Dropout(const DropoutOptions& options, std::shared_ptr<SampleRng> rng)
    : options_(options), rng_(rng ? std::move(rng) : std::make_shared<SampleRng>(0)) {
  check_dropout_p(options.p, "dropout");
}

Var Dropout::forward(const Var& x) {
  if (!dropout_active() || options_.p == 0.0f) return x;
  return dropout(x, options_.p, *rng_, true);
}

std::shared_ptr<SequenceLayer> make_dropout_layer(LayerOptions& o) {
  DropoutOptions opt;
  opt.p = o.get_float("p", 0.0f);
  return std::make_shared<Dropout>(opt, o.dropout_rng());
}

}  // namespace headlab
