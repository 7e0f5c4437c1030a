// `headlab eval RUN_DIR [--checkpoint NAME|PATH]`: loads the run's plugins (run.json) and a
// checkpoint of the run (the latest by default) with the config saved in it and prints accuracy
// and loss on the evaluation sentences (train.eval_seed; change it, or the number and size of
// batches, with --set). Reads only: a run that is still training is evaluated at a complete
// checkpoint.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "layers/encoder.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/config/config.h"
#include "train/run/checkpoint.h"
#include "train/run/evaluate.h"
#include "train/run/model.h"
#include "train/run/run_checkpoint.h"
#include "train/run/run_dir.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string run_dir;
  std::vector<std::string> sets;
  std::string checkpoint;
  bool json = false;
};

void print_json(const EvalMetrics& e, const TrainConfig& t, const fs::path& checkpoint) {
  nlohmann::json components = nlohmann::json::object();
  for (size_t r = 0; r < e.relations.size() && r < e.relation_accuracy.size(); ++r)
    components[e.relations[r]] = e.relation_accuracy[r];
  const nlohmann::json out = {{"step", e.step},
                              {"checkpoint", checkpoint.string()},
                              {"accuracy", e.accuracy},
                              {"loss", e.loss},
                              {"component_accuracy", components},
                              {"tokens", e.tokens},
                              {"eval_batches", t.eval_batches},
                              {"eval_batch_size", t.eval_batch_size},
                              {"eval_seed", t.eval_seed},
                              {"sentences", e.sentences},
                              {"eval_set", e.from_set}};
  fmt::print("{}\n", out.dump());
}

int run_eval(const EvalArgs& a) {
  RunCheckpoint rc = resolve_run_checkpoint(a.run_dir, a.checkpoint);
  CheckpointData c;
  std::unique_ptr<RunModel> restored;
  // Everything read from the run comes from one run, even beside `train --overwrite`.
  read_run_stably(rc.run_dir, [&] {
    rc = resolve_run_checkpoint(a.run_dir, a.checkpoint);
    load_run_plugins(rc.run_dir);  // the run's plugins, from run.json
    c = load_run_checkpoint(rc);
    // The config the checkpoint was trained with; --set may change what an evaluation measures.
    const Config config =
        parse_config(c.resolved_config, (c.dir / "config.resolved.toml").string(), a.sets);
    check_memory_now(config, MemoryUse::evaluate);
    restored = std::make_unique<RunModel>(config);
    restored->restore(c, ConfigUse::evaluate, rc.run_dir);
  });
  RunModel& model = *restored;
  const fs::path used = c.dir;
  const EvalMetrics e = evaluate(model, c.step);
  check_finite(e, model.encoder(), fmt::format("checkpoint '{}' (step {})", used.string(), c.step));
  const TrainConfig& t = model.config().train;
  if (a.json) {
    print_json(e, t, used);
    return kOk;
  }
  fmt::print("checkpoint: {} (step {})\n", used.string(), e.step);
  if (e.from_set)
    fmt::print("sentences: the task's evaluation set, {} in order ({} tokens)\n", e.sentences,
               e.tokens);
  else
    fmt::print("sentences: {} x {} from eval_seed {} ({} tokens)\n", t.eval_batches,
               t.eval_batch_size, t.eval_seed, e.tokens);
  fmt::print("accuracy: {:.4f}\nloss: {:.4f}\n", e.accuracy, e.loss);
  for (size_t r = 0; r < e.relations.size() && r < e.relation_accuracy.size(); ++r)
    fmt::print("{} component accuracy: {:.4f}\n", e.relations[r], e.relation_accuracy[r]);
  return kOk;
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "eval", "Evaluate a checkpoint of a run (the latest by default) on seeded sentences");
  static EvalArgs args;
  add_path_option(*cmd, "RUN_DIR", args.run_dir,
                  "Run directory written by `headlab train` (or one of its checkpoint "
                  "directories)",
                  "a run directory")
      ->required();
  add_path_option(*cmd, "--checkpoint", args.checkpoint,
                  "The checkpoint to evaluate: step-NNNNNN, or a path to one of the run's "
                  "checkpoint directories (default: checkpoints/latest)",
                  kCheckpointExpected)
      ->type_name("NAME|PATH");
  add_set_option(*cmd, args.sets,
                 "Change what the evaluation measures, e.g. --set train.eval_seed=7 or --set "
                 "train.eval_batches=16 (only train.eval_* and runtime.* may differ from the "
                 "run's config)");
  cmd->add_flag("--json", args.json, "Print one JSON object instead of text");
  cmd->footer(exit_codes_text());
  cmd->callback([&exit_code] { exit_code = run_eval(args); });
}

}  // namespace headlab::cli
