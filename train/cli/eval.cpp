// `headlab eval RUN_DIR`: loads the run's plugins (run.json) and its latest checkpoint with the
// config saved beside it and prints accuracy and loss on the evaluation sentences
// (train.eval_seed; change it, or the number and size of batches, with --set).

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/run/checkpoint.h"
#include "train/cli/commands.h"
#include "train/config/config.h"
#include "train/io/files.h"
#include "train/run/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string run_dir;
  std::vector<std::string> sets;
  bool json = false;
};

int run_eval(const EvalArgs& a) {
  const fs::path dir(a.run_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("eval: '{}' is not a directory", a.run_dir);
  const std::optional<fs::path> latest = latest_checkpoint(dir);
  if (!latest)
    fail("eval: no checkpoint in '{}' ('{}' does not exist)", a.run_dir,
         (dir / "checkpoints" / "latest").string());
  load_run_plugins(dir);  // the run's plugins, from run.json
  // The config the checkpoint was trained with; --set may change evaluation keys, and resume()
  // refuses changes of shape.
  const fs::path config_file = *latest / "config.resolved.toml";
  const Config config =
      parse_config(read_file(config_file, uint64_t{64} << 20), config_file.string(), a.sets);
  Trainer trainer(config, dir);
  trainer.resume();
  const EvalMetrics e = trainer.evaluate();
  const TrainConfig& t = trainer.config().train;
  if (a.json) {
    nlohmann::json components = nlohmann::json::object();
    for (size_t r = 0; r < e.relations.size() && r < e.relation_accuracy.size(); ++r)
      components[e.relations[r]] = e.relation_accuracy[r];
    nlohmann::json out = {{"step", e.step},
                          {"accuracy", e.accuracy},
                          {"loss", e.loss},
                          {"component_accuracy", components},
                          {"tokens", e.tokens},
                          {"eval_batches", t.eval_batches},
                          {"eval_batch_size", t.eval_batch_size},
                          {"eval_seed", t.eval_seed}};
    fmt::print("{}\n", out.dump());
    return kOk;
  }
  fmt::print("checkpoint: {} (step {})\n", latest->string(), e.step);
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
      "eval", "Evaluate the latest checkpoint of a run on seeded evaluation sentences");
  static EvalArgs args;
  cmd->add_option("RUN_DIR", args.run_dir, "Run directory written by `headlab train`")->required();
  cmd->add_option("--set", args.sets,
                  "Override a key of the run's config, e.g. --set train.eval_seed=7 or "
                  "--set train.eval_batches=16 (repeatable; shapes cannot change)")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--json", args.json, "Print one JSON object instead of text");
  cmd->callback([&exit_code] { exit_code = run_eval(args); });
}

}  // namespace headlab::cli
