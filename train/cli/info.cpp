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
#include "train/cli/options.h"

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

// Vector width a kernel set uses: 3 AVX-512, 2 AVX2, 1 AVX, 0 older.
int blas_level(const std::string& core) {
  for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core == c) return 3;
  for (const char* c : {"Haswell", "Zen", "Excavator", "Steamroller"})
    if (core == c) return 2;
  for (const char* c : {"Sandybridge", "Bulldozer", "Piledriver"})
    if (core == c) return 1;
  return 0;
}

int cpu_level(const std::string& isa) {
  if (isa.find("AVX-512") != std::string::npos) return 3;
  if (isa.find("AVX2") != std::string::npos) return 2;
  return isa.find("AVX") != std::string::npos ? 1 : 0;
}

// OpenBLAS picks its kernels by recognising the CPU; an older OpenBLAS on a newer CPU falls back
// to an older family's (Prescott, Haswell, ...), and `info` should say so rather than look as if
// that were the CPU.
std::string core_note(const BlasInfo& blas, const OneDnnInfo& dnnl) {
  if (blas_level(blas.core_name) >= cpu_level(dnnl.isa)) return "";
  return fmt::format(
      " (older kernels than this CPU supports: {} does not recognise it and picked {}'s; the "
      "onednn and auto backends run headlab's matrix products in oneDNN, which uses {})",
      blas.version.substr(0, blas.version.find(' ', 9)), blas.core_name, dnnl.isa);
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
  fmt::print("openblas core: {}{}, threading build: {}\n", blas.core_name, core_note(blas, dnnl),
             blas.parallel);
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
  add_int_option(*cmd, "--threads", opts->threads, 0, 1024,
                 "Threads for oneDNN and OpenBLAS (0: all cores)");
  cmd->add_option("--backend", opts->backend, "reference | blas | onednn | auto");
  add_plugin_option(cmd, opts->plugins);
  cmd->callback([opts, &exit_code] {
    load_plugin_flags(opts->plugins);
    print_info(*opts);
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
