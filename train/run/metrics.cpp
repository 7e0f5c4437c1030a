#include "train/run/metrics.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/run/checkpoint.h"

namespace headlab {

using json = nlohmann::json;

namespace {

// NaN and Inf have no JSON spelling: they become null.
json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json components(const std::vector<std::string>& relations, const std::vector<double>& acc) {
  json out = json::object();
  for (size_t r = 0; r < relations.size() && r < acc.size(); ++r) out[relations[r]] = acc[r];
  return out;
}

}  // namespace

json step_to_json(const StepMetrics& m) {
  return {{"step", m.step},
          {"loss", number(m.loss)},
          {"accuracy", number(m.accuracy)},
          {"lr", number(m.lr)},
          {"grad_norm", number(m.grad_norm)},
          {"tokens_per_second", number(m.tokens_per_second)},
          {"elapsed_seconds", number(m.elapsed_seconds)}};
}

json eval_to_json(const EvalMetrics& m) {
  return {{"step", m.step},
          {"eval", true},
          {"loss", number(m.loss)},
          {"accuracy", number(m.accuracy)},
          {"component_accuracy", components(m.relations, m.relation_accuracy)},
          {"tokens", m.tokens},
          {"elapsed_seconds", number(m.elapsed_seconds)}};
}

MetricsWriter::MetricsWriter(std::filesystem::path path, int64_t keep_through)
    : path_(std::move(path)) {
  std::string kept;
  if (keep_through >= 0 && std::filesystem::exists(path_)) {
    // A torn last line of a crashed session (or an edited one) is dropped, never trusted.
    for_each_jsonl_row(path_, uint64_t{1} << 32, [&](std::string_view line, const json& row) {
      const auto step_it = row.find("step");
      if (step_it == row.end() || !step_it->is_number_integer()) return;
      const int64_t step = step_it->get<int64_t>();
      if (step > keep_through) return;
      kept.append(line).append("\n");
      const auto eval_it = row.find("eval"), accuracy_it = row.find("accuracy");
      if (eval_it != row.end() && *eval_it == true && accuracy_it != row.end() &&
          accuracy_it->is_number())
        evals_.emplace_back(step, accuracy_it->get<double>());
    });
  }
  write_file_atomic(path_, kept);
  out_.open(path_, std::ios::app | std::ios::binary);
  if (!out_) fail("cannot open '{}' for appending: {}", path_.string(), std::strerror(errno));
}

void MetricsWriter::write_eval(const EvalMetrics& m) {
  write(eval_to_json(m));
  evals_.emplace_back(m.step, m.accuracy);
}

void MetricsWriter::write(const json& row) {
  out_ << row.dump() << '\n';
  out_.flush();
  if (!out_) fail("cannot write '{}': {}", path_.string(), std::strerror(errno));
}

int64_t first_step_reaching(const std::vector<std::pair<int64_t, double>>& evals,
                            double threshold) {
  for (const auto& [step, acc] : evals)
    if (acc >= threshold) return step;
  return -1;
}

json summary_to_json(const TrainResult& r, const Config& c, int64_t parameters) {
  const EvalMetrics& e = r.final_eval;
  json s;
  s["eval_accuracy"] = number(e.accuracy);
  s["eval_loss"] = number(e.loss);
  s["eval_component_accuracy"] = components(e.relations, e.relation_accuracy);
  s["eval_tokens"] = e.tokens;
  s["steps"] = r.steps;
  s["resumed_from_step"] = r.start_step;
  s["steps_to_95"] = r.steps_to_95 >= 0 ? json(r.steps_to_95) : json(nullptr);
  s["final_loss"] = number(r.final_loss);
  s["train_seconds"] = r.train_seconds;
  s["wall_seconds"] = r.wall_seconds;
  s["eval_seconds"] = r.eval_seconds;
  s["steps_per_second"] = r.steps_per_second;
  s["heads"] = c.model.heads;
  s["layers"] = c.model.layers;
  s["d_model"] = c.model.d_model;
  s["seed"] = c.train.seed;
  s["batch_size"] = c.train.batch_size;
  s["grad_accum"] = c.train.grad_accum;
  s["ranks"] = r.ranks;
  s["global_batch"] = c.train.batch_size * c.train.grad_accum * r.ranks;
  s["parameters"] = parameters;
  s["task"] = c.task.name;
  s["relations"] = e.relations;
  s["config_hash"] = config_hash(c);
  s["threads"] = num_threads();
  s["backend"] = backend_name(current_backend());
  s["versions"] = library_versions();
  // How the run was made and what it printed (train/run/run_json.h, the CLI's train.log).
  s["run_json"] = "run.json";
  s["train_log"] = "train.log";
  return s;
}

void write_summary(const std::filesystem::path& run_dir, const json& summary) {
  write_file_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
}

}  // namespace headlab
