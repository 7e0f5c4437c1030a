// The training-step benchmarks behind `headlab bench --preset` and `--config` (see
// bench/step.h).

#include "bench/step.h"

#include "bench/profile.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "train/distributed/comm.h"

namespace headlab::bench {
namespace {

using nlohmann::json;

Workload make_workload(const StepBenchOptions& o, int threads) {
  if (o.preset.empty() == o.config.empty())
    fail("bench: give one of --preset and --config (got {})",
         o.preset.empty() ? "neither" : "both");
  if (!o.preset.empty()) return preset_workload(o, threads);
  if (o.comm && o.comm->size() > 1)
    fail("bench: --config runs as one process; under mpirun use --preset S|M|L");
  return config_workload(o, threads);
}

json described(json report, const Workload& w) {
  const BlasInfo blas = blas_info();
  report.update(w.description);
  report.update({{"backend", backend_name(current_backend())},
                 {"openblas_parallel", blas.parallel},
                 {"openblas_core", blas.core_name}});
  return report;
}

}  // namespace

json run_step_bench(const StepBenchOptions& o, int threads) {
  Workload w = make_workload(o, threads);
  const json r = measure_steps(w.subject, {.warmup = o.warmup > 0 ? o.warmup : w.warmup,
                                           .steps = o.steps > 0 ? o.steps : w.steps,
                                           .threads = num_threads()});
  return described(r, w);
}

json run_step_profile(const StepBenchOptions& o, int threads) {
  Workload w = make_workload(o, threads);
  const json r = profile_steps(w.subject, {.warmup = o.warmup > 0 ? o.warmup : w.warmup,
                                           .steps = o.steps > 0 ? o.steps : w.steps,
                                           .cpu_clock = o.cpu_clock});
  return described(r, w);
}

}  // namespace headlab::bench
