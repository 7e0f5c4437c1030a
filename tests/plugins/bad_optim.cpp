// A plugin that registers a new optimizer and then a built-in schedule's name: nothing may stay
// registered.
#include "train/plugins/plugin.h"

HEADLAB_PLUGIN(registry) {
  registry.add_optimizer(
      "test_fresh_optimizer",
      [](const headlab::OptimizerOptions&, headlab::NamedParameters) { return nullptr; }, 0);
  registry.add_schedule("warmup_cosine", [](const headlab::ScheduleOptions&, double lr) {
    return headlab::Schedule::constant(lr);
  });
}
