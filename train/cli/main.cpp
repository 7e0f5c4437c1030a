// headlab: the command-line front end. The library throws; this is the one place that prints
// errors and chooses exit codes.

#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "train/cli/commands.h"

int main(int argc, char** argv) {
  using namespace headlab;
  CLI::App app{"headlab: a small C++ training framework with tape-based autodiff"};
  app.require_subcommand(1);
  app.set_version_flag("--version", HEADLAB_VERSION);
  int exit_code = cli::kOk;
  cli::add_info_command(app, exit_code);
  cli::add_gradcheck_command(app, exit_code);
  cli::add_analyze_command(app, exit_code);
  cli::add_sweep_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "headlab: error: %s\n", e.what());
    return cli::kUsage;
  } catch (const Error& e) {
    std::fprintf(stderr, "headlab: error: %s\n", e.what());
    return cli::kUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headlab: error: %s\n", e.what());
    return cli::kFailure;
  }
  return exit_code;
}
