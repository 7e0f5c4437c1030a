// `headlab info`: versions, ISA, threads, the selected backend, the loaded plugins with what each
// registered, and every registered layer (by kind) and task.

#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "core/version.h"
#include "layers/registry.h"
#include "train/cli/commands.h"
#include "train/tasks/registry.h"

namespace headlab::cli {
namespace {

struct InfoOptions {
  int threads = 0;
  std::string backend = "auto";
  std::vector<std::string> plugins;
};

// The registered layers by kind and the tasks, built-in and from plugins.
std::string registry_text() {
  std::string out = "layers:\n";
  for (LayerKind kind : {LayerKind::attention, LayerKind::feed_forward, LayerKind::norm,
                         LayerKind::positions, LayerKind::other}) {
    std::string names;
    for (const std::string& n : registered_layers(kind)) names += (names.empty() ? "" : ", ") + n;
    out += fmt::format("  {}: {}\n", layer_kind_name(kind), names);
  }
  std::string tasks;
  for (const std::string& n : registered_tasks()) tasks += (tasks.empty() ? "" : ", ") + n;
  return out + fmt::format("tasks: {}\n", tasks);
}

void print_info(const InfoOptions& o) {
  set_num_threads(o.threads);
  set_backend(parse_backend(o.backend));
  const OneDnnInfo dnnl = onednn_info();
  const BlasInfo blas = blas_info();
  fmt::print("headlab {}\n", HEADLAB_VERSION);
  fmt::print("onednn: {}, cpu runtime {}\n", dnnl.version, dnnl.runtime);
  fmt::print("onednn isa: {}\n", dnnl.isa);
  fmt::print("openblas: {}\n", blas.version);
  fmt::print("openblas core: {}, threading build: {}\n", blas.core_name, blas.parallel);
  fmt::print("threads: {} (openmp {}, openblas {}, hardware {})\n", num_threads(), num_threads(),
             blas.num_threads, hardware_threads());
  fmt::print("backend: {}{}\n", backend_name(current_backend()),
             o.backend == "auto" ? " (auto)" : "");
  fmt::print("{}{}", plugins_text(), registry_text());
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("info", "Print library versions, CPU ISA, threads and backend");
  auto opts = std::make_shared<InfoOptions>();
  cmd->add_option("--threads", opts->threads, "Threads for oneDNN and OpenBLAS (0: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--backend", opts->backend, "reference | blas | onednn | auto");
  add_plugin_option(cmd, opts->plugins);
  cmd->callback([opts, &exit_code] {
    load_plugin_flags(opts->plugins);
    print_info(*opts);
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
