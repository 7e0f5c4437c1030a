// `headlab info`: versions, ISA, threads, the selected backend and MPI.

#include <memory>
#include <string>

#include <fmt/core.h>

#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "train/cli/commands.h"
#include "train/cli/world.h"
#include "train/dist/world.h"

namespace headlab::cli {
namespace {

struct InfoOptions {
  int threads = 0;
  std::string backend = "auto";
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
  fmt::print("threads: {} (openmp {}, openblas {}, hardware {})\n", num_threads(), num_threads(),
             blas.num_threads, hardware_threads());
  fmt::print("backend: {}{}\n", backend_name(current_backend()),
             o.backend == "auto" ? " (auto)" : "");
  fmt::print("mpi: {}\n", mpi_text());
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("info", "Print library versions, CPU ISA, threads and backend");
  auto opts = std::make_shared<InfoOptions>();
  cmd->add_option("--threads", opts->threads, "Threads for oneDNN and OpenBLAS (0: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--backend", opts->backend, "reference | blas | onednn | auto");
  cmd->callback([opts, &exit_code] {
    print_info(*opts);
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
