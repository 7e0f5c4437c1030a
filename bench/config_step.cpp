// The config workload of `headlab bench --config FILE` (see bench/step.h): the training's own
// step (train/run/step.h) of the config's model, task, batch, optimizer and schedule, as
// `headlab train` takes it. Nothing is written: no run directory is involved.

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
#include "train/distributed/comm.h"
#include "train/plugins/loader.h"
#include "train/run/model.h"
#include "train/run/step.h"
#include "train/tasks/task.h"

namespace headlab::bench {
namespace {

using nlohmann::json;

struct ConfigState {
  explicit ConfigState(const Config& config) : model(config), step(model, comm) {
    // The inference forward: one training-sized batch of the evaluation stream.
    model.task().generate(static_cast<uint64_t>(config.train.eval_seed), 0, config.train.batch_size,
                          batch);
    batch.feature_spans(spans);
  }
  void forward() { model.encoder().forward(spans, batch.batch_size, batch.seq_len); }

  LocalComm comm;
  RunModel model;
  TrainStep step;
  int64_t steps = 0;  // taken so far: the data stream's position
  Batch batch;
  std::vector<std::span<const int32_t>> spans;
};

// Matmul FLOPs of one inference forward, as the GEMM observer sees them (the products inside
// the fused attention included).
double observed_forward_flops(ConfigState& s) {
  GemmRecorder recorder;
  NoGradGuard no_grad;
  s.model.encoder().eval();
  set_gemm_observer(&recorder);
  s.forward();
  set_gemm_observer(nullptr);
  s.model.encoder().train();
  double flops = 0.0;
  for (const GemmDesc& d : recorder.descs) flops += gemm_flops(d);
  return flops;
}

}  // namespace

Workload config_workload(const StepBenchOptions& o, int threads) {
  std::vector<std::string> sets = o.sets;
  if (threads > 0) sets.push_back(fmt::format("runtime.threads={}", threads));
  if (!o.backend.empty()) sets.push_back(fmt::format("runtime.backend=\"{}\"", o.backend));
  if (!o.precision.empty()) sets.push_back(fmt::format("runtime.precision=\"{}\"", o.precision));
  const Config config =
      load_config(o.config, sets, {}, [](const std::filesystem::path& p) { load_plugin(p); });
  check_memory(config);  // against what this machine has, before the model is built
  auto state = std::make_shared<ConfigState>(config);  // sets the threads and the backend
  ConfigState& s = *state;

  Workload w;
  w.state = state;
  w.warmup = 10;
  w.steps = 100;
  w.subject.train_step = [&s] { return static_cast<float>(s.step(s.steps++).loss); };
  w.subject.forward = [&s] { s.forward(); };
  w.subject.set_training = [&s](bool training) {
    training ? s.model.encoder().train() : s.model.encoder().eval();
  };
  w.subject.forward_flops = observed_forward_flops(s);
  const ModelConfig& m = config.model;
  w.description = {{"bench", "headlab_step"},
                   {"config", o.config},
                   {"task", s.model.task().name()},
                   {"seq", s.batch.seq_len},
                   {"d_model", m.d_model},
                   {"heads", m.heads},
                   {"batch", config.train.batch_size},
                   {"layers", m.layers},
                   {"d_ff", m.d_ff},
                   {"params", s.model.parameter_count()},
                   {"threads", num_threads()}};
  return w;
}

}  // namespace headlab::bench
