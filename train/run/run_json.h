#pragma once
// run.json: how a run was made. One document per run directory, rewritten atomically at the
// start and at the end of every session (a resume is a new session):
//
//   {"format": 1,
//    "command": ["headlab", "train", "configs/tiny.toml", "--out", "runs/tiny"],  (this session)
//    "cwd": "/home/me/headlab",
//    "headlab": {"version", "git_commit", "git_dirty", "build_type", "compiler"},
//    "backend": "onednn", "libraries": {"onednn", "onednn_isa", "onednn_runtime", "openblas",
//    "openblas_core", "openblas_threading", "nlohmann_json"},
//    "cpu": {"model": "...", "hardware_threads": 2, "threads": 1},
//    "start": "2024-06-07T12:34:56Z", "end": "..." (null while it runs),
//    "outcome": "running" | "finished" | "interrupted by SIGTERM" | "failed: <message>",
//    "sessions": [{"command", "cwd", "start", "end", "start_step", "end_step", "outcome"}],
//    "plugins": [...]}                                     (the plugins' identities, if any)
//
// Other keys are kept as they are when a session rewrites the file, so later fields (plugins,
// distributed ranks) live beside these. summary.json points here ("run_json": "run.json").

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace headlab {

// The current time in UTC, "2024-06-07T12:34:56Z".
std::string utc_now();

// The build and the machine: "headlab" (version, git commit of the build, build type,
// compiler), "backend", "libraries" (with versions) and "cpu" (model, hardware threads, threads
// in use). Reads /proc/cpuinfo (bounded); never throws for what it cannot find ("unknown").
nlohmann::json build_provenance();

// run_dir/run.json, or an empty object when there is none. Throws headlab::Error when it is not
// a regular file, too large or not a JSON object.
nlohmann::json read_run_json(const std::filesystem::path& run_dir);
// Writes run_dir/run.json atomically.
void write_run_json(const std::filesystem::path& run_dir, const nlohmann::json& doc);

// A new session of the run: build_provenance(), the command line and working directory, the
// start time, outcome "running"; earlier sessions are kept.
void record_session_start(const std::filesystem::path& run_dir,
                          const std::vector<std::string>& command, int64_t start_step);
// Ends the newest session: its end time, outcome and step (also the document's "end" and
// "outcome").
void record_session_end(const std::filesystem::path& run_dir, const std::string& outcome,
                        int64_t end_step);

}  // namespace headlab
