#pragma once
// run.json: how a run was made. One document per run directory, rewritten atomically (the old
// file or the new one, never a mix) at the start and at the end of every session (a resume is
// a new session), and read through the bounded JSON reader:
//
//   {"format_version": 1,
//    "command": ["headlab", "train", "configs/tiny.toml", "--out", "runs/tiny"],  (this session)
//    "cwd": "/home/me/headlab",
//    "headlab": {"version", "git_commit", "git_dirty", "build_type", "compiler"},
//    "backend": "onednn", "libraries": {"onednn", "onednn_isa", "onednn_runtime", "openblas",
//    "openblas_core", "openblas_threading", "nlohmann_json"},
//    "cpu": {"model": "...", "hardware_threads": 2, "threads": 1},
//    "start": "2024-06-07T12:34:56Z", "end": "..." (null while it runs),
//    "outcome": "running" | "finished" | "interrupted by SIGTERM" | "failed: <message>",
//    "sessions": [{"command", "cwd", "start", "end", "start_step", "end_step", "outcome"}],
//    "plugins": [{"path": "/abs/path/libmine.so", "sha256": "<64 hex digits>"}, ...]}
//
// plugins: every plugin loaded when the run was trained (--plugin or runtime.plugins), so that
// `headlab eval`, `analyze` and `train --resume` load them again without flags, and refuse a
// plugin that is missing or has changed (train/plugins/loader.h).
//
// data_files: [{"key": "task.train_file", "path": "/abs/train.conllu", "bytes": N, "sha256": ...}]:
// every data file of the task (its *_file keys, absolute in a loaded config), so that `eval`,
// `analyze` and `train --resume` refuse a file that has changed since (check_run_data_files).
//
// Keys this version does not know (a newer headlab's, distributed ranks, ...) are kept as they
// are when a session rewrites the file. summary.json points here ("run_json": "run.json").

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace headlab {

// The format this headlab writes, and the newest it reads.
inline constexpr int64_t kRunJsonFormatVersion = 1;

std::filesystem::path run_json_path(const std::filesystem::path& run_dir);

// The current time in UTC, "2024-06-07T12:34:56Z".
std::string utc_now();

// The build and the machine: "headlab" (version, git commit of the build, build type,
// compiler), "backend", "libraries" (with versions) and "cpu" (model, hardware threads, threads
// in use). Reads /proc/cpuinfo (bounded); never throws for what it cannot find ("unknown").
nlohmann::json build_provenance();

// run_dir/run.json, or an empty object when there is none. Throws headlab::Error when it is not
// a regular file, too large, not a JSON object, or of a newer format_version.
nlohmann::json read_run_json(const std::filesystem::path& run_dir);
// Writes run_dir/run.json atomically (format_version set).
void write_run_json(const std::filesystem::path& run_dir, nlohmann::json doc);

// A new session of the run: build_provenance(), the command line and working directory, the
// start time, outcome "running"; earlier sessions are kept.
void record_session_start(const std::filesystem::path& run_dir,
                          const std::vector<std::string>& command, int64_t start_step);
// Ends the newest session: its end time, outcome and step (also the document's "end" and
// "outcome").
void record_session_end(const std::filesystem::path& run_dir, const std::string& outcome,
                        int64_t end_step);

// ---- The plugins of a run (typed: they are checked before anything is loaded).

struct PluginRecord {
  std::string path;  // absolute
  std::string sha256;
};

// run.json's "plugins" (none when the key is absent). Throws "<name>: plugins[0].sha256 is a
// number but expected a string", ... naming the file.
std::vector<PluginRecord> plugins_from_json(const nlohmann::json& document,
                                            const std::string& name);
// The plugins of run_dir/run.json (none without a run.json).
std::vector<PluginRecord> read_run_plugins(const std::filesystem::path& run_dir);
// Replaces run.json's "plugins", keeping every other key.
void write_run_plugins(const std::filesystem::path& run_dir,
                       const std::vector<PluginRecord>& plugins);

// ---- The data files of a run (docs/data.md).
struct Config;
struct DataFileRecord {
  std::string key;  // "task.train_file"
  std::string path;
  uint64_t bytes = 0;
  std::string sha256;
};
// The task's data files of `config` (its string options named *_file, non-empty), measured now.
// Throws naming the key when one cannot be read.
std::vector<DataFileRecord> measure_data_files(const Config& config);
// Replaces run.json's "data_files" with measure_data_files(config), keeping every other key.
void record_run_data_files(const std::filesystem::path& run_dir, const Config& config);
// Throws one line when a data file run.json records is missing or differs in size or SHA-256:
// "<run.json>: task.train_file '/abs/x.conllu' has changed since the run was trained (sha256
// <then>, now <now>)". Nothing to check without a run.json or its "data_files".
void check_run_data_files(const std::filesystem::path& run_dir);

}  // namespace headlab
