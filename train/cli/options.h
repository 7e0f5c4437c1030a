#pragma once
// What every command shares: integer options range-checked like config keys, the --set option,
// the exit codes for --help, and the command line as the user typed it (for run.json and the
// hints a message gives).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace headlab::cli {

// An integer option that must lie in [lo, hi]. Checked while the command line is parsed, before
// any work, with the config keys' wording: "--seeds = 20000 is out of range: expected an integer
// in [1, 10000]", "--batches = x is not an integer". The doc gets the range.
CLI::Option* add_int_option(CLI::App& cmd, const std::string& name, int64_t& value, int64_t lo,
                            int64_t hi, const std::string& doc);
// The same for an int.
CLI::Option* add_int_option(CLI::App& cmd, const std::string& name, int& value, int64_t lo,
                            int64_t hi, const std::string& doc);

// --set KEY=VALUE, repeatable; applied in order before validation.
CLI::Option* add_set_option(CLI::App& cmd, std::vector<std::string>& sets, const std::string& doc);

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
// train or sweep prints).
std::string resume_command(const std::filesystem::path& out,
                           const std::vector<std::string>& drop = {});

}  // namespace headlab::cli
