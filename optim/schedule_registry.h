#pragma once
// The schedule registry: the names schedule.name takes, each with a factory and the options it
// declares for [schedule.options]. The built-ins (constant, warmup_inverse_sqrt,
// warmup_cosine) are entries like any other, with no options of their own (theirs are the
// [schedule] keys warmup_steps, min_lr and d_model, kept there so that older configs read). A
// program registers in one call, a plugin through its entry point (registry.add_schedule, in
// train/plugins/plugin.h):
//
//     headlab::register_schedule(
//         "linear_decay",
//         [](const headlab::ScheduleOptions& o, double lr) {
//           const double floor = headlab::option_real(o.options, "final_fraction") * lr;
//           return headlab::Schedule::custom("linear_decay", [=](int64_t s) { ... });
//         },
//         {{"final_fraction", OptionSpec::real(0, 1).documented("..."), 0.0}});
//
// A factory's Schedule must be a pure function of the step (Schedule::custom), so that a
// resumed run needs no schedule state. The factory receives the [schedule] options with
// total_steps set to train.steps and `options` resolved against its declaration.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "optim/declared_options.h"
#include "optim/factory.h"

namespace headlab {

using ScheduleFactory = std::function<Schedule(const ScheduleOptions&, double lr)>;

struct ScheduleDefinition {
  ScheduleFactory factory;
  DeclaredOptions options;  // [schedule.options]
  bool builtin = false;
};

// Adds `factory` under `name` with its options. Throws headlab::Error if the name is empty or
// taken (a built-in or registered), the factory is empty, or a declared option repeats.
void register_schedule(std::string name, ScheduleFactory factory, DeclaredOptions options = {});
// Removes a name register_schedule added. Throws for a built-in; an unknown name is a no-op.
void unregister_schedule(std::string_view name);

bool has_schedule(std::string_view name);
// Every name (built-ins and registered), sorted.
std::vector<std::string> registered_schedules();
// The definition under `name` (a copy: the registry may change afterwards). Throws
// "schedule: name is \"x\" but expected one of: constant, ..." for an unknown name.
ScheduleDefinition find_schedule(std::string_view name);

}  // namespace headlab
