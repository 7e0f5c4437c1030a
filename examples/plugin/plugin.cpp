// The plugin's one entry point: what it adds to headlab. Loaded by
//   headlab train plugin.toml --plugin <build>/libheadlab_example_plugin.so
// it makes "swiglu", "alibi_attention", "talking_heads_attention" and "mirror" usable from any
// config, the optimizer "lion" and the schedule "linear_decay";
// `headlab gradcheck --plugin <build>/libheadlab_example_plugin.so` checks the op
// "squareplus" and the layers, each with the gradcheck cases registered here.

#include <headlab/train/plugins/plugin.h>

#include "alibi_attention.h"
#include "linear_decay.h"
#include "lion.h"
#include "mirror_task.h"
#include "squareplus.h"
#include "swiglu.h"
#include "talking_heads.h"

HEADLAB_PLUGIN(registry) {
  using headlab::LayerKind;
  registry.add_layer("swiglu", LayerKind::feed_forward, example::make_swiglu,
                     example::count_swiglu_parameters);
  registry.add_layer("alibi_attention", LayerKind::attention, example::make_alibi_attention,
                     example::count_alibi_attention_parameters,
                     {{"fixed slopes", {}}, {"learned slopes", {{"learn_slopes", true}}}});
  registry.add_layer("talking_heads_attention", LayerKind::attention,
                     example::make_talking_heads_attention,
                     example::count_talking_heads_attention_parameters);
  registry.add_task("mirror", example::make_mirror_task);
  registry.add_op("squareplus", example::squareplus_op, example::squareplus_cases());
  registry.add_optimizer("lion", example::make_lion, 1, example::lion_options());
  registry.add_schedule("linear_decay", example::make_linear_decay,
                        example::linear_decay_options());
}
