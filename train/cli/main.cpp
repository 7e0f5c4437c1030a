// headlab: the command-line front end. The library throws; this is the one place that prints
// errors and chooses exit codes.
//
// Under mpirun every rank runs main(). An error every rank meets alike (a bad command line or
// config, a refused run directory, a non-finite loss: CollectiveError, NonFiniteError) is
// printed once, by rank 0, and every rank exits with its code. An error of one rank alone is
// printed by that rank as "headlab: error: rank R: ..." and ends the whole job at once
// (abort_world, MPI_Abort), so no other rank waits for it (docs/distributed.md, "Failure").

#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/cli/world.h"
#include "train/dist/agree.h"
#include "train/dist/world.h"
#include "train/run/trainer.h"

namespace {

// The error as the last line on stderr: "headlab: error: <message>" on one line. Messages quote
// what the user gave, so a hostile input must not garble the terminal or flood it: control
// characters become spaces or \xNN, and a message longer than kMaxMessage keeps its head and
// its tail (the expected values) around a note of what was cut.
std::string one_line(const std::string& message) {
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
  return line;
}

// An error every rank met alike: rank 0 prints it, every rank returns `code`.
int report(const std::string& message, int code) {
  std::fflush(stdout);
  if (headlab::cli::speaks_for_job())
    std::fprintf(stderr, "headlab: error: %s\n", one_line(message).c_str());
  return code;
}

// An error of this rank alone: with other ranks, it names this rank and ends the whole job.
int report_local(const std::string& message, int code) {
  headlab::Comm& world = headlab::cli::world();
  if (world.size() == 1) return report(message, code);
  std::fflush(stdout);
  std::fprintf(stderr, "headlab: error: rank %d: %s\n", world.rank(), one_line(message).c_str());
  headlab::abort_world(code);
}

// Only these commands run as ranks of one job; the others are one process's work.
bool runs_distributed(const char* command) {
  for (const char* c : {"train", "sweep", "bench", "info"})
    if (std::string(command) == c) return true;
  return false;
}

// What is wrong with the command word before anything is parsed, or "": an unknown command
// (CLI11 would only say "A subcommand is required"), or one that does not run under mpirun.
std::string command_error(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::string known;
  bool found = false;
  for (CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    found = found || sub->check_name(argv[1]);
  }
  if (!found) return std::string("unknown command '") + argv[1] + "' (commands: " + known + ")";
  if (headlab::launched_by_mpi() && headlab::launcher_size() > 1 && !runs_distributed(argv[1]))
    return fmt::format("headlab {} runs as one process; run it without mpirun", argv[1]);
  return "";
}

int run_command(CLI::App& app, int argc, char** argv, const int& exit_code) {
  using namespace headlab;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli::speaks_for_job() ? app.exit(e) : 0;
  } catch (const CLI::CallForAllHelp& e) {
    return cli::speaks_for_job() ? app.exit(e) : 0;
  } catch (const CLI::CallForVersion& e) {
    return cli::speaks_for_job() ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {  // bad command line
    return report(e.what(), cli::kUsage);
  } catch (const NonFiniteError& e) {  // NaN/Inf loss or gradient: training stopped
    return report(e.what(), cli::kNonFinite);
  } catch (const CollectiveError& e) {  // every rank: config, run directory, checkpoint
    return report(e.what(), cli::kUsage);
  } catch (const Error& e) {  // a user's mistake: config, file, checkpoint
    return report_local(e.what(), cli::kUsage);
  } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave
    return report_local(e.what(), cli::kUsage);
  } catch (const InternalError& e) {
    return report_local(e.what(), cli::kFailure);
  } catch (const std::bad_alloc&) {
    return report_local("out of memory", cli::kFailure);
  } catch (const std::exception& e) {
    return report_local(e.what(), cli::kFailure);
  } catch (...) {
    return report_local("unknown exception", cli::kFailure);
  }
  return exit_code;
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
  if (const std::string error = command_error(app, argc, argv); !error.empty()) {
    if (launcher_rank() == 0) report(error, cli::kUsage);  // the world is not open yet
    return cli::kUsage;
  }
  try {
    cli::set_world(open_world());
  } catch (const Error& e) {
    if (launcher_rank() == 0) report(e.what(), cli::kUsage);
    return cli::kUsage;
  }
  const int code = run_command(app, argc, argv, exit_code);
  close_world();
  return code;
}
