// Cross-field checks and the memory estimate: everything decided from the config alone, before
// a single tensor is allocated.

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "train/config/config.h"
#include "train/config/model.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

// The parameters of the model the trainer would build, each layer counting its own from its
// options (layers/registry.h): nothing is allocated, except that a registry layer without a
// counter is built once, alone.
int64_t parameter_count(const Config& c, const Task& task) {
  try {
    return Encoder::parameter_count(encoder_options(c, task));
  } catch (const Error& e) {
    rethrow_with_position(e, c);
  }
}

}  // namespace

MemoryEstimate estimate_memory(const Config& c) {
  // The task object is a few small vectors; building it gives its exact sizes.
  const std::unique_ptr<Task> task = make_task(c.task);
  const ModelConfig& m = c.model;
  const double d = static_cast<double>(m.d_model);
  const double inner = static_cast<double>(m.heads) * (m.head_dim > 0 ? m.head_dim : d / m.heads);
  const double dff = static_cast<double>(m.d_ff);
  const double h = static_cast<double>(m.heads);
  const double T = static_cast<double>(task->seq_len());
  const double classes = static_cast<double>(task->num_classes());

  MemoryEstimate e;
  e.parameters = parameter_count(c, *task);
  const double p = static_cast<double>(e.parameters);
  // Values and gradients; with gradient accumulation also the reduction's running sum and, on
  // the ranks after the first of a distributed run, one scaled gradient per micro-batch
  // (train/distributed/reduce.h): at most grad_accum + 1 more copies.
  const double accum = static_cast<double>(c.train.grad_accum);
  e.parameter_bytes = 4 * (2 + (accum > 1 ? accum + 1 : 0)) * p;
  const double moments = c.optim.name == "sgd" ? (c.optim.momentum > 0 ? 1 : 0) : 2;
  e.optimizer_bytes = 4 * moments * p;

  // Values the tape keeps per token and layer (normalised inputs, Q/K/V and their head-split
  // copies, attention output, FFN hidden and activation, residuals) plus the attention maps
  // (scores, softmax, dropout mask and output); gradients of the same size arrive in backward.
  auto activations = [&](double batch) {
    const double tokens = batch * T;
    const double per_token = 6 * d + 8 * inner + 2 * dff;
    const double maps = 4 * batch * h * T * T;
    const double layers = static_cast<double>(m.layers) * (tokens * per_token + maps);
    const double ends = tokens * (4 * d + 3 * classes);
    return 4 * (layers + ends);
  };
  e.activation_bytes = std::max(2 * activations(static_cast<double>(c.train.batch_size)),
                                activations(static_cast<double>(c.train.eval_batch_size)));
  return e;
}

namespace {

// Throws naming the size that drives the estimate when it exceeds runtime.max_memory_gb.
void check_memory(const Config& c) {
  const MemoryEstimate e = estimate_memory(c);
  const double limit = c.runtime.max_memory_gb * 1024.0 * 1024.0 * 1024.0;
  if (e.total_bytes() > limit) {
    // Point at the explicitly set size that drives the estimate, else at the limit itself.
    std::string key = "runtime.max_memory_gb";
    if (!c.origins.contains(key))
      for (const char* k : {"train.batch_size", "train.eval_batch_size", "model.d_model",
                            "model.d_ff", "model.layers", "model.heads", "model.head_dim"})
        if (c.origins.contains(k)) {
          key = k;
          break;
        }
    const double gib = 1024.0 * 1024.0 * 1024.0;
    fail(
        "{}: {}: estimated memory {:.2f} GiB (parameters and gradients {:.2f}, optimizer state "
        "{:.2f}, activations {:.2f}) exceeds runtime.max_memory_gb = {}",
        c.where(key), key, e.total_bytes() / gib, e.parameter_bytes / gib, e.optimizer_bytes / gib,
        e.activation_bytes / gib, c.runtime.max_memory_gb);
  }
}

}  // namespace

void validate_config(const Config& c) {
  const ModelConfig& m = c.model;
  if (m.head_dim == 0 && m.d_model % m.heads != 0)
    fail(
        "{}: model.heads = {} does not divide model.d_model = {} (set model.head_dim to use "
        "heads of another width)",
        c.where("model.heads"), m.heads, m.d_model);
  if (m.head_dim > 0 && m.heads * m.head_dim > 65536)
    fail("{}: model.heads * model.head_dim = {} is out of range: expected at most 65536",
         c.where("model.head_dim"), m.heads * m.head_dim);
  if (c.schedule.min_lr > c.optim.lr)
    fail("{}: schedule.min_lr = {} is larger than optim.lr = {}: expected min_lr <= lr",
         c.where("schedule.min_lr"), c.schedule.min_lr, c.optim.lr);

  const OptimizerOptions& o = c.optim;
  if (o.name != "sgd" && (o.momentum != 0.0 || o.nesterov)) {
    const char* key = o.momentum != 0.0 ? "optim.momentum" : "optim.nesterov";
    fail("{}: {} applies to sgd only, but optim.name is \"{}\"", c.where(key), key, o.name);
  }
  if (o.nesterov && o.momentum == 0.0)
    fail("{}: optim.nesterov = true needs optim.momentum > 0", c.where("optim.nesterov"));
  const ScheduleOptions& s = c.schedule;
  if (s.name == "warmup_cosine" && s.warmup_steps >= c.train.steps)
    fail("{}: schedule.warmup_steps = {} must be below train.steps = {} for warmup_cosine",
         c.where(c.origins.contains("schedule.warmup_steps") ? "schedule.warmup_steps"
                                                             : "train.steps"),
         s.warmup_steps, c.train.steps);
  if (s.name == "warmup_inverse_sqrt" && s.warmup_steps < 1)
    fail("{}: schedule.warmup_steps = {} must be >= 1 for warmup_inverse_sqrt",
         c.where("schedule.warmup_steps"), s.warmup_steps);

  check_memory(c);
}

}  // namespace headlab
