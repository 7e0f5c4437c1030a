// The memory estimate's parameter count is the model's, exactly, before anything is built.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "layers/encoder.h"
#include "train/config/config.h"
#include "train/config/model.h"
#include "train/tasks/registry.h"

using namespace headlab;

namespace {

// The parameters of the Encoder the trainer builds from `config`, summed over
// named_parameters().
int64_t built_parameters(const Config& config) {
  const auto task = make_task(config.task);
  Rng rng(1);
  const Encoder model(encoder_options(config, *task), rng);
  int64_t n = 0;
  for (const NamedParameter& p : model.named_parameters()) n += p.var.numel();
  return n;
}

const std::string kTask = "[task]\nname = \"dependency\"\n";

}  // namespace

TEST_CASE("train: estimate_memory counts exactly the parameters of the model it describes") {
  using V = std::vector<std::string>;
  const std::vector<V> variants = {
      {},                       // the flagship
      {"model.norm=\"post\""},  // no final norm
      {"model.norm=\"post\"", "model.positions=\"sinusoidal\"", "model.layers=3"},
      {"model.head_dim=8", "model.heads=3", "task.embedding=\"joint\""},
      {"model.ffn_options.bias=false", "model.norm_options.affine=false"},
      // A registry layer from outside the library (examples/custom_layer), through its counter.
      {"model.norm_layer=\"rms_norm\"", "model.norm_options.eps=1e-6"},
      {"model.norm_layer=\"rms_norm\"", "model.norm=\"post\"", "task.colours=5"},
  };
  for (const V& overrides : variants) {
    const Config c = parse_config(kTask, "t.toml", overrides);
    CAPTURE(to_toml(c));
    CHECK(estimate_memory(c).parameters == built_parameters(c));
  }
}

TEST_CASE("train: estimate_memory reports a slot option's type error with its position") {
  CHECK_THROWS_WITH_AS(
      parse_config(kTask, "t.toml", std::vector<std::string>{"model.norm_options.affine=3"}),
      doctest::Contains("--set model.norm_options.affine=3: layers: option 'affine' of layer "
                        "'layer_norm' is an integer but expected a boolean"),
      Error);
}
