#include "train/run/session.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/core.h>

#include "core/error.h"
#include "train/distributed/agree.h"
#include "train/distributed/comm.h"
#include "train/plugins/loader.h"
#include "train/run/analyze_run.h"
#include "train/run/checkpoint.h"
#include "train/run/run_json.h"
#include "train/run/run_plugins.h"
#include "train/run/vocab_file.h"

namespace headlab {
namespace {

namespace fs = std::filesystem;

RunDirUse dir_use(const TrainRequest& r) {
  return r.resume ? RunDirUse::write : r.overwrite ? RunDirUse::overwrite : RunDirUse::create;
}

// The shell's quoting of one word, for the choices every rank must share.
std::string quoted(const std::string& word) {
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// --resume: the plugins the run was trained with. Rank 0 reads them from run.json; the other
// ranks load the same files (on their host, at the same path), checked against the same digests.
void load_plugins_of_run(Comm& comm, const fs::path& out) {
  std::string list;
  on_root(comm, [&] {
    load_run_plugins(out);
    for (const LoadedPlugin& p : loaded_plugins()) list += p.path.string() + "\n" + p.sha256 + "\n";
  });
  if (comm.size() == 1) return;
  list = broadcast_string(comm, 0, list);
  on_every_rank(comm, [&] {
    for (size_t at = 0; at < list.size();) {
      const size_t path_end = list.find('\n', at), sha_end = list.find('\n', path_end + 1);
      load_plugin(list.substr(at, path_end - at),
                  list.substr(path_end + 1, sha_end - path_end - 1));
      at = sha_end + 1;
    }
  });
}

}  // namespace

fs::path run_dir_of(const TrainRequest& r) {
  return r.out.empty() ? fs::path("runs") / fs::path(r.config).stem() : r.out;
}

void TrainSessionHooks::load_plugins(const std::vector<std::string>& plugins) {
  load_named_plugins(plugins, "--plugin");
}

void TrainSessionHooks::check_memory(const Config& config, MemoryUse use, int64_t examples) {
  headlab::check_memory(config, use, examples);
}

std::unique_ptr<Trainer> prepare_training(const TrainRequest& r, Comm& comm,
                                          TrainSessionHooks& hooks, RunDirPlan& plan) {
  const fs::path out = run_dir_of(r);
  // The choices the config does not hold: a rank started with --resume beside ranks without it
  // would read another checkpoint (the config itself is compared by the caller's hook).
  check_same_on_every_rank(
      comm, "the train command's choices",
      fmt::format("--out {} --resume {} --overwrite {} --dry-run {} --no-analysis {}\n",
                  quoted(out.string()), r.resume, r.overwrite, r.dry_run, r.no_analysis));
  on_every_rank(comm, [&] {
    if (r.resume && r.overwrite)
      fail(
          "--resume and --overwrite exclude each other: --resume continues the run, --overwrite "
          "replaces it");
  });
  // The directory is checked before anything in it is read (a resume reads run.json for its
  // plugins), then the plugins are loaded: the config may name their layers and tasks.
  on_root(comm, [&] { plan = check_run_dir(out, dir_use(r)); });
  on_every_rank(comm, [&] { hooks.load_plugins(r.plugins); });
  if (r.resume) load_plugins_of_run(comm, out);
  Config config;
  on_every_rank(comm, [&] { config = load_config(r.config, r.sets, {}, load_config_plugin); });
  hooks.config_loaded(config);
  // The memory the run and its analysis will need, against what this machine has, before the
  // model is built.
  on_every_rank(comm, [&] {
    hooks.check_memory(config, MemoryUse::train, 0);
    if (!r.no_analysis)
      hooks.check_memory(config, MemoryUse::analyze,
                         std::min(AnalysisOptions::kDefaultExamples, config.train.eval_batch_size));
  });
  // Building the model writes nothing and finds what only the layers can check; the checkpoint
  // is checked before anything is written too.
  std::unique_ptr<Trainer> trainer;
  on_every_rank(comm, [&] { trainer = std::make_unique<Trainer>(std::move(config), out, &comm); });
  if (r.resume) trainer->resume(ConfigUse::resume);
  return trainer;
}

RunDirClaim start_training(const TrainRequest& r, Comm& comm, Trainer& trainer,
                           TrainSessionHooks& hooks) {
  const fs::path out = run_dir_of(r);
  RunDirClaim claim;
  bool newer = false;
  on_root(comm, [&] {
    claim = claim_run_dir(out, dir_use(r));
    // A writer that finished just before the claim may have saved a newer checkpoint.
    if (!r.resume) return;
    const std::optional<fs::path> latest = latest_checkpoint(out);
    newer = !latest || latest->filename() != checkpoint_dir_name(trainer.step());
  });
  if (any_rank(comm, newer)) trainer.resume(ConfigUse::resume);
  if (comm.is_root()) {
    hooks.run_dir_claimed(out);
    record_session_start(out, r.command, trainer.step());
    record_run_plugins(out);
    record_run_data_files(out, trainer.config());
    write_run_vocabulary(out, trainer.task());
    // Left alone by the saves' cleanup, and said once (--overwrite refuses such a run).
    if (const std::string foreign = foreign_checkpoint_entry(out); !foreign.empty())
      hooks.note(fmt::format("note: '{}' was not written by headlab; it is left as it is",
                             (out / foreign).string()));
  }
  return claim;
}

TrainOutcome run_training(const TrainRequest& r, Comm& comm, Trainer& trainer,
                          TrainObserver& observer, TrainSessionHooks& hooks) {
  const fs::path out = run_dir_of(r);
  TrainOutcome o;
  try {  // training and (rank 0) the analysis: a failure of either is the session's outcome
    o.result = trainer.run(&observer);
    hooks.trained(o.result);
    if (!comm.is_root()) return o;
    if (o.result.interrupted) {
      record_session_end(out, "interrupted by " + hooks.stop_reason(), o.result.steps);
      return o;
    }
    // A stop asked for after the last step: the run is complete; the analysis is skipped if it
    // had not started, or finishes (its files are written whole) and the caller reports the
    // stop after it.
    o.analysis_skipped = !hooks.stop_reason().empty();
    if (!r.no_analysis && !o.analysis_skipped) {
      const auto start = std::chrono::steady_clock::now();
      AnalysisOptions options;
      options.examples =
          std::min(AnalysisOptions::kDefaultExamples, trainer.config().train.eval_batch_size);
      options.step = trainer.step();
      const AnalysisResult analysis =
          analyze_run(out, trainer.model(), trainer.task(), trainer.config(), options);
      o.analyzed = true;
      o.analysis_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      hooks.analyzed(analysis);
    }
    record_session_end(out, "finished", o.result.steps);
  } catch (const std::exception& e) {
    if (comm.is_root()) try {
        record_session_end(out, std::string("failed: ") + e.what(), trainer.step());
      } catch (const std::exception&) {  // the first error is the one to report
      }
    throw;
  }
  return o;
}

}  // namespace headlab
