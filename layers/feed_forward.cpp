#include "layers/feed_forward.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/dropout.h"
#include "layers/registry.h"

namespace headlab {

Activation parse_activation(std::string_view name, std::string_view what) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  fail("{}: unknown activation '{}' (known: relu, gelu)", what, name);
}

FeedForward::FeedForward(const FeedForwardOptions& options, Rng& rng,
                         std::shared_ptr<SampleRng> dropout_rng)
    : options_(options),
      dropout_rng_(dropout_rng ? std::move(dropout_rng) : std::make_shared<SampleRng>(0)) {
  if (options.d_model <= 0 || options.d_ff <= 0)
    fail("feed_forward: d_model ({}) and d_ff ({}) must be positive", options.d_model,
         options.d_ff);
  check_dropout_p(options.activation_dropout, "feed_forward: activation_dropout");
  w1 = register_module(
      "w1", std::make_shared<Linear>(
                LinearOptions{options.d_model, options.d_ff, options.bias, options.init}, rng));
  w2 = register_module(
      "w2", std::make_shared<Linear>(
                LinearOptions{options.d_ff, options.d_model, options.bias, options.init}, rng));
}

Var FeedForward::forward(const Var& x) {
  if (x.rank() < 2 || x.size(-1) != options_.d_model)
    fail("feed_forward: input shape {} must be [.., {}]", x.shape().str(), options_.d_model);
  // [.., d_ff]; ReLU runs in the GEMM's epilogue (linear with relu = relu(w1->forward(x))).
  Var h = options_.activation == Activation::gelu ? gelu(w1->forward(x))
                                                  : linear(x, w1->weight, w1->bias, true);
  h = hook("hook_post", h);
  if (dropout_active() && options_.activation_dropout > 0.0f)
    h = dropout(h, options_.activation_dropout, *dropout_rng_, true);
  return w2->forward(h);
}

int64_t FeedForward::parameter_count(const FeedForwardOptions& o) {
  return 2 * o.d_model * o.d_ff + (o.bias ? o.d_ff + o.d_model : 0);
}

namespace {

FeedForwardOptions read_options(LayerOptions& o) {
  FeedForwardOptions opt;
  opt.d_model = o.require_int("d_model");
  opt.d_ff = o.require_int("d_ff");
  opt.activation = parse_activation(o.get_string("activation", "relu"), "feed_forward");
  opt.activation_dropout = o.get_float("activation_dropout", 0.0f);
  opt.bias = o.get_bool("bias", true);
  opt.init = parse_init(o.get_string("init", "default"), "feed_forward");
  return opt;
}

}  // namespace

std::shared_ptr<SequenceLayer> make_feed_forward_layer(LayerOptions& o) {
  return std::make_shared<FeedForward>(read_options(o), o.init_rng(), o.dropout_rng());
}

int64_t count_feed_forward_parameters(LayerOptions& o) {
  return FeedForward::parameter_count(read_options(o));
}

}  // namespace headlab
