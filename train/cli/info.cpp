// `headlab info`: versions, ISA, threads, the selected backend, MPI, the loaded plugins with
// what each registered, and every registered layer (by kind), task, optimizer and schedule.

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "core/version.h"
#include "layers/registry.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"
#include "train/cli/commands.h"
#include "train/cli/job.h"
#include "train/cli/options.h"
#include "train/distributed/world.h"
#include "train/tasks/registry.h"

namespace headlab::cli {
namespace {

// The policy libgomp runs with: headlab's choice with its reason (train/cli/main.cpp marks it in
// HEADLAB_OPENMP_WAIT as "<pid> <VARIABLE>=<value>; <reason>"), else the user's.
std::string openmp_wait_text() {
  const char* mark = std::getenv("HEADLAB_OPENMP_WAIT");
  if (mark && std::atol(mark) == static_cast<long>(getpid())) {
    const std::string_view m = mark;
    const size_t space = m.find(' '), semi = m.find("; ");
    if (space != std::string_view::npos && semi != std::string_view::npos && semi > space)
      return fmt::format("{} (headlab's choice: {})", m.substr(space + 1, semi - space - 1),
                         m.substr(semi + 2));
  }
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  return policy ? std::string(policy)
         : spin ? fmt::format("GOMP_SPINCOUNT={}", spin)
                : std::string("libgomp's default (spins about 3 ms)");
}

struct InfoOptions {
  int threads = 0;
  std::string backend = "auto";
  std::vector<std::string> plugins;
};

// The MPI line: what this build can do, and this process's place when started by mpirun.
std::string mpi_text() {
  const std::string library = mpi_library();
  if (library.empty())
    return "not built (single process only; install libopenmpi-dev and rebuild for mpirun)";
  const Comm& comm = world();
  return comm.size() > 1 ? fmt::format("{}, rank {} of {}", library, comm.rank(), comm.size())
                         : fmt::format("{} (mpirun -np N headlab train ...)", library);
}

// The registered layers by kind and the tasks, built-in and from plugins.
std::string registry_text() {
  std::string out = "layers:\n";
  for (LayerKind kind : {LayerKind::attention, LayerKind::feed_forward, LayerKind::norm,
                         LayerKind::positions, LayerKind::other}) {
    std::string names;
    for (const std::string& n : registered_layers(kind)) names += (names.empty() ? "" : ", ") + n;
    out += fmt::format("  {}: {}\n", layer_kind_name(kind), names);
  }
  auto list = [](const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
    return text;
  };
  return out + fmt::format("tasks: {}\noptimizers: {}\nschedules: {}\n", list(registered_tasks()),
                           list(registered_optimizers()), list(registered_schedules()));
}

// OpenBLAS runs narrower kernels than the CPU has: say why, what it costs and how to fix it.
void print_blas_warning(const BlasInfo& blas) {
  const std::string why =
      blas.coretype_env.empty()
          ? std::string("this OpenBLAS does not recognise the CPU")
          : fmt::format("OPENBLAS_CORETYPE={} is set in the environment", blas.coretype_env);
  fmt::print(
      "warning: OpenBLAS runs its {} kernels ({}-bit vectors) on a CPU with {}-bit vectors,\n"
      "  because {}.\n"
      "  Products through OpenBLAS (the blas backend; PyTorch and NumPy on this machine,\n"
      "  which load the system OpenBLAS in the same environment) run at a fraction of the\n"
      "  CPU's speed; the onednn backend is not affected. For a benchmark, start the\n"
      "  program measured with OPENBLAS_CORETYPE={} (bench/compare.sh runs PyTorch both\n"
      "  ways and compares headlab with the faster).\n",
      blas.core_name, blas.core_vector_bits, blas.cpu_vector_bits, why, blas.best_core);
}

void print_info(const InfoOptions& o) {
  if (!speaks_for_job()) return;
  set_num_threads(o.threads);
  set_backend(parse_backend(o.backend));
  const OneDnnInfo dnnl = onednn_info();
  const BlasInfo blas = blas_info();
  fmt::print("headlab {}\n", HEADLAB_VERSION);
  fmt::print("onednn: {}, cpu runtime {}\n", dnnl.version, dnnl.runtime);
  fmt::print("onednn isa: {}\n", dnnl.isa);
  fmt::print("openblas: {}\n", blas.version);
  fmt::print("openblas core: {}, threading build: {}\n", blas.core_name, blas.parallel);
  if (blas.core_vector_bits < blas.cpu_vector_bits) print_blas_warning(blas);
  fmt::print("threads: {} (openmp {}, openblas {}, hardware {})\n", num_threads(), num_threads(),
             blas.num_threads, hardware_threads());
  fmt::print("openmp wait policy: {}\n", openmp_wait_text());
  fmt::print("backend: {}{}\n", backend_name(current_backend()),
             o.backend == "auto" ? " (auto)" : "");
  fmt::print("mpi: {}\n", mpi_text());
  fmt::print("{}{}", plugins_text(), registry_text());
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("info", "Print library versions, CPU ISA, threads and backend");
  auto opts = std::make_shared<InfoOptions>();
  add_int_option(*cmd, "--threads", opts->threads, 0, 1024,
                 "Threads for oneDNN and OpenBLAS (0: all cores)");
  add_string_option(*cmd, "--backend", opts->backend, "reference | blas | onednn | auto",
                    "one of reference, blas, onednn, auto");
  add_plugin_option(cmd, opts->plugins);
  cmd->callback([opts, &exit_code] {
    load_plugin_flags(opts->plugins);
    print_info(*opts);
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
