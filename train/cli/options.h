#pragma once
// What every command shares: integer options range-checked like config keys, the --set option,
// the exit codes for --help, and the command line as the user typed it (for run.json and the
// hints a message gives).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/config/config.h"

namespace headlab::cli {

// An integer option that must lie in [lo, hi]. Checked while the command line is parsed, before
// any work, with the config keys' wording: "--seeds = 20000 is out of range: expected an integer
// in [1, 10000]", "--batches = x is not an integer". The doc gets the range.
CLI::Option* add_int_option(CLI::App& cmd, const std::string& name, int64_t& value, int64_t lo,
                            int64_t hi, const std::string& doc);
// The same for an int.
CLI::Option* add_int_option(CLI::App& cmd, const std::string& name, int& value, int64_t lo,
                            int64_t hi, const std::string& doc);

// Bytes headlab may add below a run directory it writes (its longest names are like
// "checkpoints/.trash-step-000250-<pid>/optimizer.safetensors.tmp", under 70), with room to
// spare; a sweep adds a run's directory name (train/sweep/plan.h: kMaxRunNameBytes) above that.
inline constexpr size_t kRunDirReserve = 128;

// A path option or argument (`name` is "--out" or "CONFIG"). A value given empty, or impossible
// on this system (as an absolute path, plus `reserve` bytes for what headlab writes below it,
// longer than PATH_MAX - 1 bytes, or with a component longer than NAME_MAX), is refused while
// the command line is parsed, before anything is read or created, in one line naming the
// option: "--out: the path is empty (expected a run directory)". `expected` says what the
// value is ("a run directory", "a config file").
CLI::Option* add_path_option(CLI::App& cmd, const std::string& name, std::string& value,
                             const std::string& doc, const std::string& expected,
                             size_t reserve = 0);
// The check itself, for values collected otherwise (--plugin).
void check_path_value(const std::string& name, const std::string& value,
                      const std::string& expected, size_t reserve = 0);
// A string option that may not be given empty ("--only: the value is empty (expected the name
// of a case, e.g. softmax)").
CLI::Option* add_string_option(CLI::App& cmd, const std::string& name, std::string& value,
                               const std::string& doc, const std::string& expected);

// --set KEY=VALUE, repeatable; applied in order before validation.
CLI::Option* add_set_option(CLI::App& cmd, std::vector<std::string>& sets, const std::string& doc);

// Right before a command allocates a model: the memory estimate of `use` within the limit
// (train/config/config.h: check_memory; the smaller of runtime.max_memory_gb, the machine's
// memory and ulimit -v), else headlab::Error naming both. The estimate is remembered for the
// message of a std::bad_alloc (memory_note).
void check_memory_now(const Config& config, MemoryUse use = MemoryUse::train, int64_t examples = 0);
// "" before any check_memory_now, else "; the estimate was 1.23 GiB, within
// runtime.max_memory_gb = 8".
std::string memory_note();

// The exit codes, for the footer of --help.
std::string exit_codes_text();

// fflush(stdout), remembering the reason of a failure for the error main() reports at the end
// (stdout_failure).
void flush_stdout();
// The errno of a failed flush_stdout, or 0.
int stdout_failure();

// The command line of this process, as given to main().
void set_command_line(int argc, char** argv);
const std::vector<std::string>& command_line();
// `args` as one line a shell reads back the same: words with special characters single-quoted,
// words with control characters (a newline in --out) as bash's $'...' with \n, \t, \xNN.
std::string shell_command(const std::vector<std::string>& args);
// The command that continues what this process was doing in `out`: its own command line without
// the words in `drop`, with --resume and --out OUT added where missing (the hint an interrupted
// train or sweep prints). Under a launcher with several ranks it starts with the launcher and
// the rank count ("mpirun -np 2 headlab train ...", "srun -n 2 ...").
std::string resume_command(const std::filesystem::path& out,
                           const std::vector<std::string>& drop = {});

}  // namespace headlab::cli
