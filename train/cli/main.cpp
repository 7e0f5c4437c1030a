// headlab: the command-line front end. The library throws; this is the one place that prints
// errors and chooses exit codes (train/cli/options.h: exit_codes_text).

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "core/error.h"
#include "core/version.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/cli/output.h"
#include "train/cli/signals.h"
#include "train/run/trainer.h"

namespace {

using namespace headlab;

// The subcommand argv[1] names, for the error line ("headlab: error: eval: ..."); "" if none.
std::string command_name;

// The error as the last line on stderr: "headlab: error: <command>: <message>" on one line.
// Messages quote what the user gave, so a hostile input must not garble the terminal or flood
// it: control characters become spaces or \xNN, and a message longer than kMaxMessage keeps its
// head and its tail (the expected values) around a note of what was cut.
int report(const std::string& message, int code) {
  constexpr size_t kMaxMessage = 1000;
  std::string line;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t')
      line += ' ';
    else if (u < 0x20 || u == 0x7f)
      line += fmt::format("\\x{:02x}", u);
    else
      line += c;
  }
  if (line.size() > kMaxMessage) {
    size_t head = kMaxMessage / 2, tail = line.size() - kMaxMessage / 2;
    while (head > 0 && (static_cast<unsigned char>(line[head]) & 0xc0) == 0x80) --head;
    while (tail < line.size() && (static_cast<unsigned char>(line[tail]) & 0xc0) == 0x80) ++tail;
    line = fmt::format("{} [... {} characters ...] {}", line.substr(0, head), tail - head,
                       line.substr(tail));
  }
  std::fflush(stdout);
  const bool named = command_name.empty() || line.rfind(command_name + ": ", 0) == 0;
  cli::Output::get().final_line("headlab: error: " + (named ? "" : command_name + ": ") + line);
  return code;
}

// `headlab` alone: what there is to do, on stderr.
int usage(CLI::App& app) {
  std::string text = "usage: headlab COMMAND [OPTIONS]  (headlab COMMAND --help for more)\n";
  text += "commands:\n";
  for (CLI::App* sub : app.get_subcommands({}))
    text += fmt::format("  {:<10} {}\n", sub->get_name(), sub->get_description());
  text += cli::exit_codes_text() + "\n";
  std::fputs(text.c_str(), stderr);
  return cli::kUsage;
}

// Why an earlier write to stdout failed: its errno is long gone, but a closed pipe still shows.
std::string stdout_error() {
  if (cli::stdout_failure() != 0) return std::strerror(cli::stdout_failure());
  pollfd fd{STDOUT_FILENO, 0, 0};
  if (::poll(&fd, 1, 0) == 1 && (fd.revents & POLLERR)) return std::strerror(EPIPE);
  return "a write failed (a full disk?)";
}

// After a command that succeeded: what it printed must have arrived. (A failed one reported its
// error already.)
int check_outputs(int code) {
  if (code != cli::kOk) return code;
  const bool failed_before = std::ferror(stdout) != 0;
  errno = 0;
  if (std::fflush(stdout) != 0 || failed_before) {
    const std::string why = !failed_before && errno ? std::strerror(errno) : stdout_error();
    return report(fmt::format("cannot write to standard output: {}", why), cli::kUsage);
  }
  if (const auto& log = cli::Output::get().log_error()) return report(*log, cli::kUsage);
  if (cli::Output::get().stderr_failed()) return cli::kUsage;
  return code;
}

int run(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // bad command line
    return report(e.what(), cli::kUsage);
  } catch (const NonFiniteError& e) {  // NaN/Inf loss, gradient or update: training stopped
    return report(e.what(), cli::kNonFinite);
  } catch (const Error& e) {  // a user's mistake: config, file, checkpoint
    return report(e.what(), cli::kUsage);
  } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave
    return report(e.what(), cli::kUsage);
  } catch (const InternalError& e) {
    return report(e.what(), cli::kFailure);
  } catch (const std::bad_alloc&) {
    return report("out of memory", cli::kFailure);
  } catch (const std::exception& e) {
    return report(e.what(), cli::kFailure);
  } catch (...) {
    return report("unknown exception", cli::kFailure);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  cli::ignore_write_signals();
  cli::set_command_line(argc, argv);
  CLI::App app{"headlab: a small C++ training framework with tape-based autodiff"};
  app.require_subcommand(1);
  app.set_version_flag("--version", HEADLAB_VERSION);
  app.footer(cli::exit_codes_text());
  int exit_code = cli::kOk;
  cli::add_train_command(app, exit_code);
  cli::add_eval_command(app, exit_code);
  cli::add_info_command(app, exit_code);
  cli::add_bench_command(app, exit_code);
  cli::add_gradcheck_command(app, exit_code);
  cli::add_analyze_command(app, exit_code);
  cli::add_sweep_command(app, exit_code);
  if (argc < 2) return usage(app);
  if (argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
    std::string known;
    for (CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      if (sub->check_name(argv[1])) command_name = sub->get_name();
    }
    if (command_name.empty())
      return report(std::string("unknown command '") + argv[1] + "' (commands: " + known + ")",
                    cli::kUsage);
  }
  const int failed = run(app, argc, argv);
  return check_outputs(failed >= 0 ? failed : exit_code);
}
