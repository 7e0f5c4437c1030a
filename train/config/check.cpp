// Cross-field checks and the memory estimate: everything decided from the config alone, before
// a single tensor is allocated.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"
#include "train/config/config.h"
#include "train/config/model.h"
#include "train/io/files.h"
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

MemoryEstimate estimate_memory(const Config& c, MemoryUse use, int64_t examples) {
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
  // State tensors per parameter as the optimizer declares them (Adam 2, Lion 1, SGD with
  // momentum 1, without 0; optim/registry.h).
  const double moments = optimizer_state_tensors(c.optim);

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
  const double eval_batch = static_cast<double>(c.train.eval_batch_size);
  if (use == MemoryUse::train) {
    // Values and gradients; with gradient accumulation also the reduction's running sum and, on
    // the ranks after the first of a distributed run, one scaled gradient per micro-batch
    // (train/distributed/reduce.h): at most grad_accum + 1 more copies.
    const double accum = static_cast<double>(c.train.grad_accum);
    e.parameter_bytes = 4 * (2 + (accum > 1 ? accum + 1 : 0)) * p;
    e.optimizer_bytes = 4 * moments * p;
    e.activation_bytes =
        std::max(2 * activations(static_cast<double>(c.train.batch_size)), activations(eval_batch));
    return e;
  }
  // eval and analyze: the model, and the checkpoint it was restored from (its weights and
  // optimizer state, read whole); the analysis' gate gradients run backward, so it adds the
  // parameters' gradients and the activations' gradients, and keeps the attention maps of
  // `examples` sentences (attention.npy).
  const bool analysis = use == MemoryUse::analyze;
  e.parameter_bytes = 4 * (analysis ? 3 : 2) * p;
  e.optimizer_bytes = 4 * moments * p;
  // The analysis also holds its whole evaluation set (train.eval_batches batches of int32
  // features, labels and gold partners).
  const double kept = static_cast<double>(std::max<int64_t>(examples, 0)) *
                      static_cast<double>(m.layers) * h * T * T * 4;
  const double columns =
      static_cast<double>(task->features().size() + 1 + task->relations().size());
  const double eval_set = static_cast<double>(c.train.eval_batches) * eval_batch * T * columns * 4;
  e.activation_bytes =
      analysis ? 2 * activations(eval_batch) + kept + eval_set : activations(eval_batch);
  return e;
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The memory of the machine this process may use: MemTotal, or the cgroup's memory.max where
// that is lower; 0 when neither is known.
double machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  double bytes = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
  try {
    const std::string text = read_file("/sys/fs/cgroup/memory.max", 64);
    char* end = nullptr;
    const double cgroup = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && cgroup > 0 && (bytes == 0 || cgroup < bytes)) bytes = cgroup;
  } catch (const Error&) {  // no cgroup v2 limit here ("max" reads as no number)
  }
  return bytes;
}

const char* use_name(MemoryUse use) {
  switch (use) {
    case MemoryUse::train:
      return "";
    case MemoryUse::evaluate:
      return " of the evaluation";
    case MemoryUse::analyze:
      return " of the head analysis";
  }
  return "";
}

}  // namespace

MemoryLimit memory_limit(const Config& c) {
  const double configured = c.runtime.max_memory_gb * kGiB;
  MemoryLimit limit{configured, fmt::format("runtime.max_memory_gb = {}", c.runtime.max_memory_gb)};
  if (const double machine = machine_memory_bytes(); machine > 0 && machine < limit.bytes)
    limit = {machine, fmt::format("this machine's physical memory, {:.2f} GiB (runtime."
                                  "max_memory_gb = {} is higher)",
                                  machine / kGiB, c.runtime.max_memory_gb)};
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
      static_cast<double>(as.rlim_cur) < limit.bytes)
    limit = {static_cast<double>(as.rlim_cur),
             fmt::format("the address-space limit of this process (ulimit -v), {:.2f} GiB",
                         static_cast<double>(as.rlim_cur) / kGiB)};
  return limit;
}

namespace {

// Throws naming the size that drives the estimate when it exceeds `limit`.
void check_memory_within(const Config& c, MemoryUse use, int64_t examples,
                         const MemoryLimit& limit) {
  const MemoryEstimate e = estimate_memory(c, use, examples);
  if (e.total_bytes() <= limit.bytes) return;
  // Point at the explicitly set size that drives the estimate, else at the limit itself.
  // A key an override set comes first (a resolved config names every key), then one the file
  // sets.
  std::string key;
  for (const bool by_override : {true, false})
    for (const char* k : {"runtime.max_memory_gb", "train.batch_size", "train.eval_batch_size",
                          "train.eval_batches", "model.d_model", "model.d_ff", "model.layers",
                          "model.heads", "model.head_dim"}) {
      const auto it = c.origins.find(k);
      const bool counts = use == MemoryUse::train ? std::string(k) != "train.eval_batches"
                                                  : std::string(k) != "train.batch_size";
      if (key.empty() && counts && it != c.origins.end() &&
          (!by_override || it->second.rfind("--", 0) == 0))
        key = k;
    }
  if (key.empty()) key = "runtime.max_memory_gb";
  const char* parameters = use == MemoryUse::train ? "parameters and gradients"
                           : use == MemoryUse::evaluate
                               ? "parameters and the checkpoint's"
                               : "parameters, gradients and the checkpoint's";
  fail(
      "{}: {}: estimated memory{} {:.2f} GiB ({} {:.2f}, optimizer state {:.2f}, activations "
      "{:.2f}) exceeds {}",
      c.where(key), key, use_name(use), e.total_bytes() / kGiB, parameters,
      e.parameter_bytes / kGiB, e.optimizer_bytes / kGiB, e.activation_bytes / kGiB, limit.what);
}

}  // namespace

void check_memory(const Config& c, MemoryUse use, int64_t examples) {
  check_memory_within(c, use, examples, memory_limit(c));
}

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
  // A registered schedule's factory checks its own values: build it once, before training.
  if (!find_schedule(s.name).builtin) {
    try {
      (void)make_schedule(schedule_options(c), c.optim.lr);
    } catch (const Error& e) {
      fail("{}: schedule \"{}\": {}", c.where("schedule.name"), s.name, e.what());
    }
  }

  // Against runtime.max_memory_gb alone: a config means the same on every machine. What the
  // machine has is checked where memory is about to be used (check_memory, by the CLI).
  check_memory_within(c, MemoryUse::train, 0,
                      {c.runtime.max_memory_gb * kGiB,
                       fmt::format("runtime.max_memory_gb = {}", c.runtime.max_memory_gb)});
}

}  // namespace headlab
