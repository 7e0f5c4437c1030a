#pragma once
// The CLI's subcommands. Each file in train/cli/ adds one subcommand to the app; its callback
// returns the process exit code through `exit_code`. Errors are thrown (headlab::Error for a
// user's mistake) and turned into one line and an exit code by main().

#include <CLI/CLI.hpp>

namespace headlab {
class Trainer;
}

namespace headlab::cli {

// Exit codes shared by every command.
enum ExitCode { kOk = 0, kFailure = 1, kUsage = 2, kNonFinite = 3 };

void add_info_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_gradcheck_command(CLI::App& app, int& exit_code);
void add_analyze_command(CLI::App& app, int& exit_code);  // analyze.cpp
void add_sweep_command(CLI::App& app, int& exit_code);    // sweep.cpp
void add_train_command(CLI::App& app, int& exit_code);    // train.cpp
void add_eval_command(CLI::App& app, int& exit_code);     // eval.cpp
// The head analysis at the end of `headlab train` (heads.json, attention.npy, report.html).
void analyze_after_train(Trainer& trainer);

}  // namespace headlab::cli
