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
//   write_sweep(spec.out_dir, spec, outcomes);        // sweep.json, sweep.csv, report.html
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
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config/config.h"

namespace headlab {

struct SweepRunData;  // train/report/report.h

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
};

// What a sweep does with a run (SweepPlan::resume decides it from the run's directory).
enum class RunState {
  fresh,      // no directory yet: `headlab train`
  done,       // finished with this config: collected, not trained again
  resume,     // has a checkpoint: `headlab train --resume`
  overwrite,  // a run of headlab without a checkpoint (stopped before its first): --overwrite
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
// A value as a value: TOML quotes taken off strings ("'a,b'" -> a,b), arrays as a,b,c.
std::string plain_value(const std::string& text);

// What one finished run reports, read from its directory.
struct SweepOutcome {
  SweepRun run;
  bool ok = false;
  std::string error;  // why not ok
  double eval_accuracy = 0;
  std::optional<int64_t> steps_to_95;
  double train_seconds = 0;
  double s_match = 0, s_max = 0;
  int64_t n_claimed = 0;
  int64_t d_k = 0;  // head width of the run's model (model.head_dim or d_model / heads)
};

// Reads <dir>/summary.json, heads.json, metrics.jsonl and config.resolved.toml. A missing or
// unreadable summary or heads file gives ok = false with the reason (never throws).
SweepOutcome collect_run(const SweepRun& run);

// The sweep.json document: {"over": [...], "seeds": N, "runs": [{"values": {...}, "seed",
// "eval_accuracy", "steps_to_95" (or null), "train_seconds", "s_match", "s_max", "n_claimed",
// "d_k", "dir" (relative to the sweep directory), "ok", "error"}]}. Values are JSON numbers,
// booleans, arrays or strings as their TOML text parses.
nlohmann::json sweep_to_json(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes);
// The CSV with the same columns (one per --over key, then seed, eval_accuracy, steps_to_95,
// train_seconds, s_match, s_max, n_claimed, d_k, dir, ok); steps_to_95 is empty when never;
// values as values (plain_value).
std::string sweep_to_csv(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes);

// Writes sweep.json, sweep.csv and report.html into out_dir, the report's curves and heads read
// from each run's directory. Throws headlab::Error on I/O failure.
void write_sweep(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes);
// The same with the runs' report data given (data[i] for outcomes[i]).
void write_sweep(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes,
                 const std::vector<SweepRunData>& data);

// A finished run as one JSON document: its outcome and its report data (the rows of
// metrics.jsonl, heads.json), read from its directory. How the ranks of a distributed sweep send
// their runs to rank 0, so the sweep directory need not be on a shared filesystem.
nlohmann::json run_record(const SweepOutcome& outcome);
// Back from run_record(): the outcome of `run` (every figure as it was) and its report data.
SweepOutcome outcome_from_record(const nlohmann::json& record, const SweepRun& run,
                                 SweepRunData& data);

}  // namespace headlab
