#pragma once
// Checkpoints: one directory per saved step under <run_dir>/checkpoints/.
//
//   checkpoints/step-000400/model.safetensors      model.state_dict()
//                          /optimizer.safetensors  optimizer.state_dict()
//                          /state.json             see below
//                          /config.resolved.toml   the resolved config, verbatim
//   checkpoints/latest -> step-000400              relative symbolic link, replaced last
//
// Format version 3 (kCheckpointFormatVersion). Integrity: every tensor carries an XXH3-64
// checksum (train/io/checksum.h) in its file's __metadata__, next to the run id and step of the
// checkpoint it belongs to:
//   {"step": "400", "run_id": "<16 hex>", "checksum": "xxh3_64",
//    "xxh3_64:encoder.layers.0.attn.in_proj_weight": "<hex>", ...}
// (Python's safetensors reads these files unchanged; the metadata is plain strings.) state.json:
//   {"format_version": 3, "step": 400, "data_cursor": 400, "config_hash": "...", "run_id": "...",
//    "rng": {}, "versions": {...}, "extra": {...},
//    "files": {"config.resolved.toml": "<xxh3 of the file>", "model.safetensors": "<digest>",
//              "optimizer.safetensors": "<digest>"}, "checksum": "<xxh3>"}
// where "checksum" is the XXH3-64 of the document without it, as compact JSON (state_checksum),
// and a tensor file's digest is tensor_file_digest of its tensors and metadata (so of its run
// id, step, every tensor's name, shape and checksum: of all of its contents).
// One checkpoint's files are tied together in one direction: the tensor files name the run and
// step (known before anything is written), state.json, written last, records the digest of
// each other file and its own checksum. The tensor files cannot also carry state.json's hash:
// state.json holds theirs, so each would have to be written before the other. A file swapped in
// from another run (other seed, other lr), another step or another save of the same step is
// refused naming the file, the run and step it belongs to, and the ones expected; a state.json
// from another run is refused naming state.json (the run directory's id says which file is the
// stranger).
// Every load verifies all of it: a mismatch, a missing checksum or a non-finite value (NaN,
// Inf) in any tensor is refused, naming the file and the tensor. A non-finite tensor is never
// written either. Format 2 (tensor files that name only their step, no digests in state.json)
// is read as it was written: its files are tied by their step only; a format-3 tensor file
// (one naming a run id) beside a format-2 state.json is refused. Version 1 (no checksums) is
// refused with a message saying so; checkpoints cannot be migrated from it without trusting
// unchecked bytes. ("rng" holds named generator states; the trainer's streams are keyed by step
// and sentence, so it saves none.)
//
// Saving is crash safe: the files are written into checkpoints/.tmp-step-000400-<pid>/, each
// fsynced, the directory fsynced and renamed to step-000400, then `latest` is replaced
// atomically (symlink latest.tmp, rename over latest) and checkpoints/ fsynced. A crash at any
// moment leaves `latest` pointing at a complete checkpoint (or absent, before the first save).
// Leftovers of a crashed save (exactly headlab's names: .tmp-step-N-<pid>[b], .trash-step-N-<pid>
// of a process that is gone, the link latest.tmp) are ignored by readers and removed by the next
// save; nothing else is ever removed. If the save fails (unwritable directory, full disk, ...)
// the temporary directory is removed, the previous checkpoints and `latest` are untouched, and
// headlab::Error names the path and the system's reason.
//
// Retention: after `latest` is replaced, the newest `keep` checkpoints with a step <= the saved
// step are kept; older ones, and checkpoints newer than the saved step (left by a crashed run
// between renaming its directory and replacing `latest`; a resumed run regenerates them), are
// removed. Only complete headlab checkpoints count and are removed: a step-<digits> directory
// holding exactly the four files above. The directory `latest` points to is never removed.
//
// Readers and retention: a reader holds a shared lock (flock) on the checkpoint directory while
// it reads; retention takes the exclusive lock without waiting and keeps a directory that a
// reader holds (the next save removes it). So `headlab eval` of a live run reads a complete
// checkpoint, and load_checkpoint(run_dir) retries with the new `latest` when the one it
// resolved was removed before it could lock it.
//
// Usage (trainer):
//   CheckpointData c;
//   c.step = step; c.model = model.state_dict(); c.optimizer = optimizer.state_dict();
//   c.data_cursor = step;
//   c.resolved_config = to_toml(config); c.config_hash = config_hash(config);
//   save_checkpoint(run_dir, c, config.train.keep_checkpoints);
// Resume:
//   CheckpointData c = load_checkpoint(run_dir);   // or load_checkpoint_dir(chosen directory)
//   ... compare parse_config(c.resolved_config, ...) with the current config ...
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

// The format this headlab writes; it reads it and kOldestCheckpointFormat (see above).
inline constexpr int64_t kCheckpointFormatVersion = 3;
inline constexpr int64_t kOldestCheckpointFormat = 2;

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
  // The id of the run directory that wrote it (train/run/run_dir.h), "" outside a run directory.
  std::string run_id;
  // On load: the versions stored in state.json, and the directory read. Ignored on save
  // (save stores library_versions()).
  nlohmann::json versions = nlohmann::json::object();
  std::filesystem::path dir;
};

// "step-000400" (at least six digits).
std::string checkpoint_dir_name(int64_t step);
// The step of a "step-<digits>" name, or -1.
int64_t parse_checkpoint_name(const std::string& name);

// headlab, oneDNN, OpenBLAS and nlohmann_json versions, as strings; also for summary.json.
nlohmann::json library_versions();

// Saves `data` as checkpoints/step-NNNNNN under run_dir (creating run_dir/checkpoints if
// needed), points `latest` at it and applies retention. keep >= 1 keeps that many checkpoints;
// keep == 0 keeps all. Saving a step that already exists replaces it (crash safe too). Returns
// the new directory. Throws headlab::Error: step or data_cursor < 0, keep < 0, a malformed RNG
// state, extra not a JSON object, a non-finite tensor value ("tensor 'w' of the model holds NaN
// at element 3"), any tensor-file problem (see safetensors.h), or an I/O failure.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir,
                                      const CheckpointData& data, int64_t keep);

// The directory that <run_dir>/checkpoints/latest points to; nullopt when there is no `latest`
// (no checkpoint saved yet). Throws headlab::Error if `latest` is not a symbolic link, points
// outside checkpoints/ (an absolute path or one with '/'), or is dangling ("... points to
// 'step-000400', which does not exist").
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// The checkpoint directory that `choice` names for the run in run_dir: "" or "latest" (the
// latest one), a name "step-NNNNNN" (or "step-400") under run_dir/checkpoints, or a path to a
// directory that is one of run_dir's checkpoints. Throws headlab::Error when there is none, it
// does not exist, or the path lies outside run_dir/checkpoints.
std::filesystem::path find_checkpoint(const std::filesystem::path& run_dir,
                                      const std::string& choice);

// Loads the checkpoint `latest` points to (retrying when retention removed it before it was
// locked). Throws headlab::Error: no checkpoint ("no checkpoint in '<run_dir>':
// '<run_dir>/checkpoints/latest' does not exist"), and everything load_checkpoint_dir throws.
CheckpointData load_checkpoint(const std::filesystem::path& run_dir);

// Loads and verifies one checkpoint directory, read-only, holding a shared lock on it while it
// reads. Throws headlab::Error naming the file: a missing file; state.json that is not JSON,
// lacks a key or has one of the wrong type; a format_version other than 2 or 3 ("... reads only
// 2 and 3: written by a newer headlab", "... by an older headlab, without checksums"); a checksum that
// is missing or does not match (state.json, config.resolved.toml, any tensor: "model.safetensors:
// tensor 'w' fails its checksum (xxh3_64 ... stored, ... computed): the file is damaged"); a
// non-finite tensor value; a step that disagrees with the directory name or with the tensor
// files' metadata; a tensor file of another run, step or save (format 3: its run id, step and
// digest against state.json); a malformed RNG state; any safetensors problem; the directory
// removed while it was being read. Tensor names and shapes are checked by Module/Optimizer::load_state_dict.
CheckpointData load_checkpoint_dir(const std::filesystem::path& dir);

// The digest state.json records of a tensor file: XXH3-64 of its metadata (every "key\0value\n",
// in key order) followed by every tensor's "name\0d0,d1,...,\n" in file order. The metadata
// holds each tensor's checksum, so the digest covers the whole file's contents.
std::string tensor_file_digest(const StateDict& tensors,
                               const std::map<std::string, std::string>& metadata);

// XXH3-64 of a state.json document without its "checksum" key, as compact JSON.
std::string state_checksum(const nlohmann::json& state);

// The first entry of <run_dir>/checkpoints that headlab did not write (anything but complete
// checkpoints, `latest`, and the leftovers of its own saves), or "" when all are headlab's
// (or there is no checkpoints/).
std::string foreign_checkpoint_entry(const std::filesystem::path& run_dir);

}  // namespace headlab
