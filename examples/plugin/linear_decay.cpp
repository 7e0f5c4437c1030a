#include "linear_decay.h"

#include <headlab/core/error.h>

namespace example {

headlab::DeclaredOptions linear_decay_options() {
  return {{"final_fraction",
           headlab::OptionSpec::real(0, 1).documented("The last step's rate, as a fraction of lr."),
           0.0}};
}

headlab::Schedule make_linear_decay(const headlab::ScheduleOptions& o, double lr) {
  const double f = headlab::option_real(o.options, "final_fraction");
  const double w = static_cast<double>(o.warmup_steps), n = static_cast<double>(o.total_steps);
  if (o.total_steps <= o.warmup_steps)
    headlab::fail("linear_decay: train.steps = {} must be above schedule.warmup_steps = {}",
                  o.total_steps, o.warmup_steps);
  return headlab::Schedule::custom(
      "linear_decay",
      [=](int64_t step) {
        const double s = static_cast<double>(step);
        if (s <= w) return lr * s / w;
        if (s >= n) return f * lr;
        return lr * (1.0 - (1.0 - f) * (s - w) / (n - w));
      },
      o.warmup_steps);
}

}  // namespace example
