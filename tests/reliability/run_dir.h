#pragma once
// Run directories for the reliability tests: a fingerprint of every entry (to prove a failed
// command damaged nothing), byte comparisons of checkpoints, and the corruption operations the
// hostile checkpoint cases are written in (tests/hostile/checkpoint/cases.txt).

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace headlab::testing {

// Every entry under `dir` by relative path: "dir", "link -> <target>", or
// "file <size> <fnv1a64 of the bytes>" ("file <size> mtime <time>" above 64 MiB).
using Snapshot = std::map<std::string, std::string>;
Snapshot snapshot(const std::filesystem::path& dir);
// The entries that differ, one per line ("+ added", "- removed", "~ changed"), or "".
std::string snapshot_diff(const Snapshot& before, const Snapshot& after);

std::string read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::string& bytes);

// Copies a directory tree, symbolic links as links.
void copy_tree(const std::filesystem::path& from, const std::filesystem::path& to);

// What a checkpoint's tensor file holds, for comparing the weights of two runs: its tensors
// (names, shapes, values) and metadata, without the run id (which differs between runs by design,
// train/run/checkpoint.h). Bytes equal exactly when the files are equal but for the run id.
std::string tensors_of(const std::filesystem::path& safetensors_file);

// metrics.jsonl without the fields that measure time (tokens_per_second, elapsed_seconds):
// one compact JSON object per line.
std::string metrics_without_timing(const std::filesystem::path& metrics_jsonl);

// A path of the operation language: relative to `run`, LATEST standing for the directory
// checkpoints/latest names.
std::filesystem::path resolve_path(const std::filesystem::path& run, const std::string& word);

// Applies one corruption operation to the run directory `run` (see
// tests/hostile/checkpoint/cases.txt for the language; also `fifo P`, a FIFO in place of P);
// `hostile` is tests/hostile, for operations that copy a corpus file. Throws std::runtime_error for
// an operation it does not know.
void apply_operation(const std::filesystem::path& run, const std::filesystem::path& hostile,
                     const std::string& operation);

}  // namespace headlab::testing
