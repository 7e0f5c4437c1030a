// headlab: the command-line front end. The library throws; this is the one place that prints
// errors and chooses exit codes.

#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "core/error.h"
#include "core/version.h"
#include "train/cli/commands.h"
#include "train/run/trainer.h"

namespace {

// The error as the last line on stderr: "headlab: error: <message>" on one line. Messages quote
// what the user gave, so a hostile input must not garble the terminal or flood it: control
// characters become spaces or \xNN, and a message longer than kMaxMessage keeps its head and
// its tail (the expected values) around a note of what was cut.
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
  std::fprintf(stderr, "headlab: error: %s\n", line.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace headlab;
  CLI::App app{"headlab: a small C++ training framework with tape-based autodiff"};
  app.require_subcommand(1);
  app.set_version_flag("--version", HEADLAB_VERSION);
  int exit_code = cli::kOk;
  cli::add_train_command(app, exit_code);
  cli::add_eval_command(app, exit_code);
  cli::add_info_command(app, exit_code);
  cli::add_bench_command(app, exit_code);
  cli::add_gradcheck_command(app, exit_code);
  cli::add_analyze_command(app, exit_code);
  cli::add_sweep_command(app, exit_code);
  if (argc > 1 && argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
    std::string known;
    bool found = false;
    for (CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->check_name(argv[1]);
    }
    if (!found)
      return report(std::string("unknown command '") + argv[1] + "' (commands: " + known + ")",
                    cli::kUsage);
  }
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
  } catch (const NonFiniteError& e) {  // NaN/Inf loss or gradient: training stopped
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
  return exit_code;
}
