#pragma once
// Checkpoints: one directory per saved step under <run_dir>/checkpoints/.
//
//   checkpoints/step-000400/model.safetensors      model.state_dict(), metadata {"step": "400"}
//                          /optimizer.safetensors  optimizer.state_dict(), metadata {"step": ..}
//                          /state.json             see below
//                          /config.resolved.toml   the resolved config, verbatim
//   checkpoints/latest -> step-000400              relative symbolic link, replaced last
//
// state.json: {"format_version": 1, "step": 400, "config_hash": "...", "data_cursor": 400,
//              "rng": {}, "versions": {...}, "extra": {...}}
// ("rng" holds named generator states; the trainer's streams are keyed by step and sentence,
// so it saves none.)
//
// Saving is crash safe: the files are written into checkpoints/.tmp-step-000400-<pid>/, each
// fsynced, the directory fsynced and renamed to step-000400, then `latest` is replaced
// atomically (symlink latest.tmp, rename over latest) and checkpoints/ fsynced. A crash at any
// moment leaves `latest` pointing at a complete checkpoint (or absent, before the first save).
// Leftover .tmp-*/.trash-* directories are ignored by readers and removed by the next save.
// If the save fails (unwritable directory, full disk, ...) the temporary directory is removed,
// the previous checkpoints and `latest` are untouched, and headlab::Error names the path and the
// system's reason.
//
// Retention: after `latest` is replaced, the newest `keep` step directories with a step <= the
// saved step are kept; older ones, and step directories newer than the saved step (left by a
// crashed run between renaming its directory and replacing `latest`; a resumed run regenerates
// them), are removed. The directory `latest` points to is never removed.
//
// Usage (trainer):
//   CheckpointData c;
//   c.step = step; c.model = model.state_dict(); c.optimizer = optimizer.state_dict();
//   c.data_cursor = step;
//   c.resolved_config = to_toml(config); c.config_hash = config_hash(config);
//   save_checkpoint(run_dir, c, config.train.keep_checkpoints);
// Resume:
//   if (!latest_checkpoint(run_dir)) fail("--resume: no checkpoint in '{}'", run_dir.string());
//   CheckpointData c = load_checkpoint(run_dir);
//   ... compare parse_config(c.resolved_config, ...) with the current config (shapes) ...
//   model.load_state_dict(c.model);          // names and shapes: reported by Module
//   optimizer.load_state_dict(c.optimizer);

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/state_dict.h"

namespace headlab {

// The format this headlab writes, and the newest it reads.
inline constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointData {
  int64_t step = 0;
  StateDict model;
  StateDict optimizer;
  // RNG states by name, each Rng::state_string(); validated with Rng::parse_state on save and
  // on load.
  std::map<std::string, std::string> rng_states;
  // Position of the training data stream (batches consumed), >= 0.
  int64_t data_cursor = 0;
  // Anything else the trainer needs to resume exactly; stored as given (a JSON object).
  nlohmann::json extra = nlohmann::json::object();
  std::string resolved_config;  // the TOML text, stored verbatim
  std::string config_hash;
  // On load: the versions stored in state.json, and the directory read. Ignored on save
  // (save stores library_versions()).
  nlohmann::json versions = nlohmann::json::object();
  std::filesystem::path dir;
};

// "step-000400" (at least six digits).
std::string checkpoint_dir_name(int64_t step);

// headlab, oneDNN, OpenBLAS and nlohmann_json versions, as strings; also for summary.json.
nlohmann::json library_versions();

// Saves `data` as checkpoints/step-NNNNNN under run_dir (creating run_dir/checkpoints if
// needed), points `latest` at it and applies retention. keep >= 1 keeps that many step
// directories; keep == 0 keeps all. Saving a step that already exists replaces it (crash safe
// too). Returns the new directory. Throws headlab::Error: step or data_cursor < 0, keep < 0, a
// malformed RNG state, extra not a JSON object, any tensor-file problem (see safetensors.h), or
// an I/O failure.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir,
                                      const CheckpointData& data, int64_t keep);

// The directory that <run_dir>/checkpoints/latest points to; nullopt when there is no `latest`
// (no checkpoint saved yet). Throws headlab::Error if `latest` is not a symbolic link, points
// outside checkpoints/ (an absolute path or one with '/'), or is dangling ("... points to
// 'step-000400', which does not exist").
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// Loads the checkpoint `latest` points to. Throws headlab::Error: no checkpoint ("no checkpoint
// in '<run_dir>': '<run_dir>/checkpoints/latest' does not exist"), and everything
// load_checkpoint_dir throws.
CheckpointData load_checkpoint(const std::filesystem::path& run_dir);

// Loads one checkpoint directory, read-only. Throws headlab::Error naming the file: a missing
// file; state.json that is not JSON, lacks a key or has one of the wrong type; a format_version
// newer than kCheckpointFormatVersion ("state.json has format_version 7, but this headlab reads
// up to 1: it was written by a newer headlab") or below 1; a step that disagrees with the
// directory name or with the tensor files' metadata; a malformed RNG state; any safetensors
// problem. Tensor names and shapes are checked by Module/Optimizer::load_state_dict.
CheckpointData load_checkpoint_dir(const std::filesystem::path& dir);

}  // namespace headlab
