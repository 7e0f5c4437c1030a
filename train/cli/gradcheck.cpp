// `headlab gradcheck`: every registered gradcheck case (the built-in ops, ops registered by a
// program or a plugin, and the layers with each case they declare) on each backend; a table, or one JSON object per line with --json. Exits with 4 (kGradcheckFailed) if
// any check fails; 1 stays for internal errors.

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/checks/op_checks.h"
#include "autograd/gradcheck.h"
#include "autograd/op_registry.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "layers/layer_checks.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"

namespace headlab::cli {
namespace {

// Every suite of cases the command runs: a new family is one more line here.
std::vector<GradcheckCase> all_cases() {
  std::vector<GradcheckCase> cases;
  for (auto suite : {&op_gradcheck_cases, &registered_op_gradcheck_cases, &layer_gradcheck_cases}) {
    std::vector<GradcheckCase> more = suite();
    for (GradcheckCase& c : more) cases.push_back(std::move(c));
  }
  return cases;
}

struct Row {
  const GradcheckCase* c;
  Backend backend;
  GradcheckResult result;
  std::string error;  // set when the case threw
};

Row run_case(const GradcheckCase& c, Backend backend, uint64_t seed) {
  Row row{&c, backend, {}, {}};
  set_backend(backend);
  try {
    row.result = c.run(seed);
  } catch (const std::exception& e) {
    row.result.pass = false;
    row.result.max_rel_error = NAN;
    row.error = e.what();
  }
  return row;
}

void print_json(const Row& r) {
  nlohmann::json j = {{"name", r.c->name},
                      {"kind", r.c->kind},
                      {"backend", backend_name(r.backend)},
                      {"max_rel_error", r.result.max_rel_error},
                      {"pass", r.result.pass},
                      {"variant", r.c->variant},
                      {"inputs", r.result.inputs},
                      {"checked", r.result.checked}};
  if (!r.result.pass) j["worst"] = r.error.empty() ? r.result.worst : r.error;
  fmt::print("{}\n", j.dump());
}

void print_row(const Row& r) {
  const std::string inputs = fmt::format("{} ({})", r.result.inputs, r.result.checked);
  fmt::print("{:<20} {:<28} {:<5} {:<9} {:>9} {:>13.2e}  {}\n", r.c->name, r.c->variant, r.c->kind,
             backend_name(r.backend), inputs, r.result.max_rel_error,
             r.result.pass ? "pass" : "FAIL");
  if (!r.result.pass) fmt::print("    {}\n", r.error.empty() ? r.result.worst : r.error);
}

}  // namespace

void add_gradcheck_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "gradcheck", "Check every op's (and layer's) backward against central differences");
  static std::string backend = "all";
  static bool json = false;
  static uint64_t seed = 1;
  static int threads = 1;
  static std::string only;
  static std::vector<std::string> plugins;
  add_string_option(*cmd, "--backend", backend, "reference | blas | onednn | auto | all",
                    "one of reference, blas, onednn, auto, all")
      ->default_str(backend);
  cmd->add_flag("--json", json, "One JSON object per line and check");
  cmd->add_option("--seed", seed, "Seed of every case's inputs")->capture_default_str();
  add_int_option(*cmd, "--threads", threads, 0, 1024,
                 "Threads for oneDNN and OpenBLAS (0: all cores; default 1)");
  add_string_option(*cmd, "--only", only, "Run only the cases with this name (e.g. softmax)",
                    "the name of a case, e.g. softmax");
  add_plugin_option(cmd, plugins);  // their ops and layers with the cases they declare
  cmd->callback([&exit_code] {
    load_plugin_flags(plugins);
    set_num_threads(threads);
    std::vector<Backend> backends;
    if (backend == "all")
      backends = {Backend::reference, Backend::blas, Backend::onednn};
    else
      backends = {parse_backend(backend)};
    const std::vector<GradcheckCase> cases = all_cases();
    const Backend previous = current_backend();
    if (!json)
      fmt::print("{:<20} {:<28} {:<5} {:<9} {:>9} {:>13}  {}\n", "name", "case", "kind", "backend",
                 "inputs", "max rel error", "result");
    int failed = 0, total = 0;
    double worst = 0.0;
    for (Backend b : backends)
      for (const GradcheckCase& c : cases) {
        if (!only.empty() && c.name != only) continue;
        const Row row = run_case(c, b, seed);
        ++total;
        if (!row.result.pass) ++failed;
        if (!std::isnan(row.result.max_rel_error) && row.result.max_rel_error > worst)
          worst = row.result.max_rel_error;
        json ? print_json(row) : print_row(row);
      }
    set_backend(previous);
    if (total == 0) fail("gradcheck: no case named '{}'", only);
    if (!json)
      fmt::print("{} checks, {} failed, worst relative error {:.2e} (pass when <= {:.0e})\n", total,
                 failed, worst, GradcheckOptions{}.rtol);
    exit_code = failed > 0 ? kGradcheckFailed : kOk;
  });
}

}  // namespace headlab::cli
