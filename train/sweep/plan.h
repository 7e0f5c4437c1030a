#pragma once
// Sweeps: a grid of training runs over config values and seeds (`headlab sweep`).
//
//   SweepSpec spec;                                  // from the command line
//   spec.over = {parse_over("model.heads=1,2,4,8")};
//   spec.seeds = 3;                                  // train.seed + 0 .. 2
//   std::vector<SweepRun> runs = plan_sweep(spec);   // loads and validates every run's config
//   ... train each run into runs[i].dir with runs[i].overrides (the CLI re-invokes
//       `headlab train CONFIG --set ... --out DIR`) ...
//   std::vector<SweepOutcome> outcomes; for (auto& r : runs) outcomes.push_back(collect_run(r));
//   write_sweep(spec, outcomes);                      // sweep.json, sweep.csv, report.html
//
// This header plans the runs (plan.cpp); train/sweep/collect.h reads them back and writes the
// sweep's files (collect.cpp).
//
// Grid order: the first --over key varies slowest, seeds fastest. Run directories are named
// from the last dotted component of each key and its value as a value (no TOML quotes), then
// the seed: "heads-4_seed-2", "activation-gelu_heads-2_seed-1" under the output directory.
// Characters other than [A-Za-z0-9.,+-] become '_'; a name longer than kMaxRunNameBytes keeps
// its head and ends in a hash of the whole, and names that would collide get a hash of their
// values, so every run has its own directory, well under the file system's 255 bytes.
//
// The limits, checked before anything trains: --seeds at most kMaxSeeds, at most kMaxRuns runs,
// train.seed + seeds - 1 within a 64-bit integer, no two runs with the same resolved config (a
// value given twice, also as "4" and "4.0").

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace headlab {

inline constexpr int64_t kMaxSeeds = 10000;
inline constexpr int64_t kMaxRuns = 10000;
inline constexpr size_t kMaxRunNameBytes = 100;

struct SweepAxis {
  std::string key;                  // dotted config key, e.g. "model.heads"
  std::vector<std::string> values;  // each in TOML value syntax, e.g. "4", "[0.9,0.98]"
};

// Parses "KEY=V1,V2,..." (commas inside [..], {..} or quotes do not split). Throws headlab::Error
// ("--over: ...") for a missing '=', an empty key or an empty value.
SweepAxis parse_over(const std::string& text);

struct SweepSpec {
  std::filesystem::path config;   // the base config file
  std::vector<SweepAxis> over;    // at least one
  int64_t seeds = 1;              // >= 1
  std::vector<std::string> sets;  // extra "--set k=v" applied to every run (before the grid)
  std::filesystem::path out_dir;
  // Loads the plugins the config names (runtime.plugins) while the runs' configs are checked;
  // empty: their layers and tasks must be registered already (config.h, PluginLoader).
  PluginLoader load_plugin;
  // SweepPlan::resume: leave the runs whose last session failed as they are (RunState::failed)
  // instead of training them again.
  bool skip_failed = false;
};

// What a sweep does with a run (SweepPlan::resume decides it from the run's directory).
// A run is done only when it trained every step and its analysis is whole (heads.json,
// attention.npy, report.html, one set: train/report/report.h, load_run_files); one stopped between its last step and its analysis is resumed,
// and `headlab train --resume` of a run at its last step writes the analysis.
enum class RunState {
  fresh,      // no directory yet: `headlab train`
  done,       // finished with this config, analysis included: collected, not trained again
  resume,     // has a checkpoint: `headlab train --resume`
  overwrite,  // a run of headlab without a checkpoint (stopped before its first): --overwrite
  failed,     // its last session failed and SweepSpec::skip_failed: collected as failed
};

struct SweepRun {
  std::vector<std::pair<std::string, std::string>> values;  // key -> value text, grid order
  std::vector<std::string> plain_values;  // the same as values: "relu", not "\"relu\""
  int64_t seed = 0;                       // the run's train.seed
  int64_t seed_index = 0;                 // 0 .. seeds-1
  std::vector<std::string> overrides;     // every --set for this run (sets, grid values, seed)
  std::vector<std::string> origins;       // what each override came from, for messages
  std::filesystem::path dir;
  RunState state = RunState::fresh;
};

// What the planned runs' directories are checked for.
enum class SweepPlan {
  fresh,    // a new sweep: no run directory may exist yet
  resume,   // --resume: each run's state from its directory; a run trained with another config
            // than this grid's is refused
  collect,  // --report-only: nothing checked
};

// Every run of the grid x seeds. Loads the base config with each run's overrides, so a bad key
// or value fails here, before anything trains (headlab::Error with the key and position, named
// as the user gave it: "--over model.heads=4,5: model.heads = 5 does not divide ..."). Also
// throws for no --over, seeds outside [1, kMaxSeeds], more than kMaxRuns runs, a key given
// twice, a value that gives the same run twice, and (fresh) a run directory that exists.
std::vector<SweepRun> plan_sweep(const SweepSpec& spec, SweepPlan plan = SweepPlan::fresh);
// What --resume does with `run`, from its directory on this host (SweepPlan::resume's check of
// one run; a distributed sweep's trainers plan their own runs with it).
RunState resume_state(const SweepSpec& spec, const SweepRun& run);
// A value as a value: TOML quotes taken off strings ("'a,b'" -> a,b), arrays as a,b,c.
std::string plain_value(const std::string& text);

}  // namespace headlab
