// The config workload of `headlab bench --config FILE` (see bench/step.h): the trainer's own
// step of the config's task, batch, model, optimizer and schedule. Nothing is written: the
// Trainer is built for a run directory it never creates.

#include <filesystem>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "bench/gemm_only.h"
#include "bench/step.h"
#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "layers/encoder.h"
#include "train/config/config.h"
#include "train/run/trainer.h"
#include "train/tasks/task.h"

namespace headlab::bench {
namespace {

using nlohmann::json;

struct ConfigState {
  explicit ConfigState(const Config& config)
      : trainer(config, std::filesystem::path("bench-run-never-written")) {
    // The inference forward: one training-sized batch of the evaluation stream.
    trainer.task().generate(static_cast<uint64_t>(config.train.eval_seed), 0,
                            config.train.batch_size, batch);
    for (const auto& f : batch.features) spans.emplace_back(f);
  }
  void forward() { trainer.model().forward(spans, batch.batch_size, batch.seq_len); }

  Trainer trainer;
  Batch batch;
  std::vector<std::span<const int32_t>> spans;
};

// Matmul FLOPs of one inference forward, as the GEMM observer sees them (the products inside
// the fused attention included).
double observed_forward_flops(ConfigState& s) {
  GemmRecorder recorder;
  NoGradGuard no_grad;
  s.trainer.model().eval();
  set_gemm_observer(&recorder);
  s.forward();
  set_gemm_observer(nullptr);
  s.trainer.model().train();
  double flops = 0.0;
  for (const GemmDesc& d : recorder.descs) flops += gemm_flops(d);
  return flops;
}

}  // namespace

Workload config_workload(const StepBenchOptions& o, int threads) {
  std::vector<std::string> sets = o.sets;
  if (threads > 0) sets.push_back(fmt::format("runtime.threads={}", threads));
  if (!o.backend.empty()) sets.push_back(fmt::format("runtime.backend=\"{}\"", o.backend));
  const Config config = load_config(o.config, sets);
  auto state = std::make_shared<ConfigState>(config);  // sets the threads and the backend
  ConfigState& s = *state;

  Workload w;
  w.state = state;
  w.warmup = 10;
  w.steps = 100;
  w.subject.train_step = [&s] { return static_cast<float>(s.trainer.step_once().loss); };
  w.subject.forward = [&s] { s.forward(); };
  w.subject.set_training = [&s](bool training) {
    training ? s.trainer.model().train() : s.trainer.model().eval();
  };
  w.subject.forward_flops = observed_forward_flops(s);
  const ModelConfig& m = config.model;
  w.description = {{"bench", "headlab_step"},
                   {"config", o.config},
                   {"task", s.trainer.task().name()},
                   {"seq", s.batch.seq_len},
                   {"d_model", m.d_model},
                   {"heads", m.heads},
                   {"batch", config.train.batch_size},
                   {"layers", m.layers},
                   {"d_ff", m.d_ff},
                   {"params", s.trainer.parameter_count()},
                   {"threads", num_threads()}};
  return w;
}

}  // namespace headlab::bench
