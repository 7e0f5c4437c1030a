#pragma once
// A training session as `headlab train` runs it, in the library so that the CLI
// (train/cli/train.cpp) and the Python module (python/runs.cpp, headlab.train) run the same
// code and write the same files:
//
//   prepare_training   the directory checked (rank 0), the plugins, the config, the memory
//                      estimate, the model and a resumed checkpoint: every user mistake is
//                      found here, before anything is written
//   start_training     the directory claimed (rank 0), a newer checkpoint resumed, run.json's
//                      session, plugins and data files, vocab.txt
//   run_training       Trainer::run, then on rank 0 the head analysis and run.json's outcome
//                      ("finished", "interrupted by SIGINT", "failed: ...")
//
// What only a caller can do comes through TrainSessionHooks: the CLI's ranks' agreement, its
// train.log and progress bar, its signals; Python's progress callback and Ctrl-C. The library
// never prints: the caller prints the summary and the analysis' text.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "train/analysis/analysis.h"
#include "train/config/config.h"
#include "train/run/run_dir.h"
#include "train/run/trainer.h"

namespace headlab {

class Comm;

struct TrainRequest {
  std::string config;                // the TOML file
  std::vector<std::string> sets;     // KEY=VALUE overrides, applied before validation
  std::vector<std::string> plugins;  // loaded before the config is read
  std::filesystem::path out;         // the run directory; empty: runs/<config file stem>
  bool resume = false;               // continue the run in `out`
  bool overwrite = false;            // replace the run in `out`
  bool no_analysis = false;          // no heads.json, attention.npy, report.html at the end
  bool dry_run = false;              // the caller stops after prepare_training (the ranks agree)
  std::vector<std::string> command;  // how the session was started, for run.json
};

// `out`, or runs/<config file name without .toml>.
std::filesystem::path run_dir_of(const TrainRequest& request);

class TrainSessionHooks {
 public:
  virtual ~TrainSessionHooks() = default;
  // Loads the request's plugins (the CLI checks the paths first and names its flag).
  virtual void load_plugins(const std::vector<std::string>& plugins);
  // Before a model is built: the memory estimate within the limit (config.h: check_memory).
  virtual void check_memory(const Config& config, MemoryUse use, int64_t examples);
  // Every rank, once the config is loaded: the CLI checks that the ranks agree.
  virtual void config_loaded(const Config& /*config*/) {}
  // Rank 0, once the directory is claimed and before run.json's session starts (the CLI opens
  // train.log here).
  virtual void run_dir_claimed(const std::filesystem::path& /*out*/) {}
  // A line for the person (a foreign entry in checkpoints/, left alone).
  virtual void note(const std::string& /*text*/) {}
  // Every rank, right after Trainer::run returned (the CLI ends its progress bar and shares
  // rank 0's stop signal).
  virtual void trained(const TrainResult& /*result*/) {}
  // Rank 0: why the run was asked to stop ("SIGINT"), or "" when it was not.
  virtual std::string stop_reason() { return {}; }
  // Rank 0, the head analysis' result, before run.json's outcome is written.
  virtual void analyzed(const AnalysisResult& /*result*/) {}
};

// Everything before the run directory is claimed (see the top); `plan` gets what claiming it
// will do (for --dry-run). Throws headlab::Error on every rank.
std::unique_ptr<Trainer> prepare_training(const TrainRequest& request, Comm& comm,
                                          TrainSessionHooks& hooks, RunDirPlan& plan);

// Claims the run directory on rank 0 (the claim is held until the result is destroyed) and
// writes the session's records there.
RunDirClaim start_training(const TrainRequest& request, Comm& comm, Trainer& trainer,
                           TrainSessionHooks& hooks);

struct TrainOutcome {
  TrainResult result;
  bool analyzed = false;
  bool analysis_skipped = false;  // a stop asked for after the last step
  double analysis_seconds = 0;
};

// Trains (every rank, watched by `observer`), then on rank 0: run.json's outcome, and unless
// the run was interrupted or the request says no_analysis, the head analysis. A stop asked for
// after the last step skips the analysis (the run is complete). A failure of either is recorded
// as the session's outcome ("failed: ...") and thrown again.
TrainOutcome run_training(const TrainRequest& request, Comm& comm, Trainer& trainer,
                          TrainObserver& observer, TrainSessionHooks& hooks);

}  // namespace headlab
