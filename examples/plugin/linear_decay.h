#pragma once
// A linear-decay schedule: linear warmup from 0 to lr over schedule.warmup_steps, then a straight
// line down to final_fraction * lr at the run's last step (train.steps). With base lr L, warmup
// W, total N and fraction f, for update s = 1, 2, ...:
//   s <= W: L * s / W;   W < s < N: L * (1 - (1 - f) * (s - W) / (N - W));   s >= N: f * L
// A pure function of s, so a resumed run needs no schedule state. Registered as "linear_decay":
// [schedule] name = "linear_decay", and [schedule.options] final_fraction = 0.1.

#include <headlab/optim/declared_options.h>
#include <headlab/optim/factory.h>

namespace example {

headlab::DeclaredOptions linear_decay_options();
headlab::Schedule make_linear_decay(const headlab::ScheduleOptions& o, double lr);

}  // namespace example
