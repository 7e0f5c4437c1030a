#pragma once
// A sweep's finished runs read back from their directories, and the sweep's files written from
// them: sweep.json, sweep.csv, report.html (collect.cpp). The runs are planned in
// train/sweep/plan.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/report/report.h"
#include "train/sweep/plan.h"

namespace headlab {

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
  std::vector<std::string> relations;  // heads.json's, in the task's order
  bool specialized = false;            // is_specialized (train/report/report.h)
  // The step each relation is first claimed, from timeline.jsonl (empty without one).
  std::vector<FirstClaim> first_claims;
};

// Reads <dir>/summary.json, heads.json, metrics.jsonl, timeline.jsonl and config.resolved.toml. A
// missing timeline leaves first_claims empty; a missing or
// unreadable summary or heads file gives ok = false with the reason (never throws).
SweepOutcome collect_run(const SweepRun& run);

// The sweep.json document: {"over": [...], "seeds": N, "runs": [{"values": {...}, "seed",
// "eval_accuracy", "steps_to_95" (or null), "train_seconds", "s_match", "s_max", "n_claimed",
// "d_k", "dir" (relative to the sweep directory), "ok", "error", "specialized" (or null),
// "first_claims": {relation: step or null} and "claim_order" (claim_order(); both null without a
// timeline)}]}. Values are JSON numbers, booleans, arrays or strings as their TOML text parses.
nlohmann::json sweep_to_json(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes);
// The CSV with the same columns (one per --over key, then seed, eval_accuracy, steps_to_95,
// train_seconds, s_match, s_max, n_claimed, d_k, dir, ok, specialized, claim_order, first_claims
// as "HEAD=100;SEM=150;PREV=300" with "never" for a relation never claimed); steps_to_95 is empty
// when never; values as values (plain_value).
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
