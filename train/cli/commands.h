#pragma once
// The CLI's subcommands. Each file in train/cli/ adds one subcommand to the app; its callback
// returns the process exit code through `exit_code`. Errors are thrown (headlab::Error for a
// user's mistake) and turned into one line and an exit code by main().

#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/run/run_plugins.h"

namespace headlab {
class Trainer;
struct AnalysisResult;
struct CheckpointData;
}  // namespace headlab

namespace headlab::cli {

// Exit codes shared by every command.
// kGradcheckFailed: `headlab gradcheck` ran, and a check failed (1 stays for internal errors).
enum ExitCode { kOk = 0, kFailure = 1, kUsage = 2, kNonFinite = 3, kGradcheckFailed = 4 };

void add_info_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_gradcheck_command(CLI::App& app, int& exit_code);
void add_analyze_command(CLI::App& app, int& exit_code);        // analyze.cpp
void add_sweep_command(CLI::App& app, int& exit_code);          // sweep.cpp
void add_train_command(CLI::App& app, int& exit_code);          // train.cpp
void add_eval_command(CLI::App& app, int& exit_code);           // eval.cpp
void add_export_conllu_command(CLI::App& app, int& exit_code);  // export_conllu.cpp
// The text of the head analysis at the end of `headlab train` (which wrote heads.json,
// attention.npy and report.html: train/run/session.h), on the terminal and in train.log.
void report_train_analysis(const AnalysisResult& result, const std::filesystem::path& run_dir);

// Plugins (plugins.cpp). --plugin PATH, repeatable, into `plugins`.
void add_plugin_option(CLI::App* cmd, std::vector<std::string>& plugins);
// Loads each --plugin; an error names the flag and the plugin.
void load_plugin_flags(const std::vector<std::string>& plugins);
// "plugins: none", or each loaded plugin with its sha256 and what it registered.
std::string plugins_text();
// The run and checkpoint that `eval` and `analyze` read: RUN_DIR may itself be one of
// the run's checkpoint directories; checkpoint "" means the latest (train/run/run_checkpoint.h).
// What --checkpoint of eval and analyze expects (its refusals say it).
inline constexpr const char* kCheckpointExpected =
    "step-NNNNNN or a path to one of the run's checkpoint directories; without --checkpoint the "
    "latest";

}  // namespace headlab::cli
