// `headlab info`: versions, ISA, threads and the selected backend.

#include <cstdio>

#include <dnnl.hpp>
#include <fmt/core.h>

#include "core/kernels.h"
#include "core/threads.h"
#include "train/cli/commands.h"

namespace headlab::cli {

void add_info_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("info", "Print library versions, CPU ISA, threads and backend");
  static int threads = 0;
  static std::string backend = "auto";
  cmd->add_option("--threads", threads, "Threads for oneDNN and OpenBLAS (0: all cores)");
  cmd->add_option("--backend", backend, "reference | blas | onednn | auto");
  cmd->callback([&exit_code] {
    set_num_threads(threads);
    set_backend(parse_backend(backend));
    const dnnl_version_t* v = dnnl::version();
    const BlasInfo blas = blas_info();
    fmt::print("headlab {}\n", HEADLAB_VERSION);
    fmt::print("onednn: {}.{}.{} (git {}), cpu runtime {}\n", v->major, v->minor, v->patch,
               v->hash, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
    fmt::print("onednn isa: {}\n", static_cast<int>(dnnl::get_effective_cpu_isa()));
    fmt::print("openblas: {}\n", blas.version);
    fmt::print("openblas core: {}, threading: {}, threads: {}\n", blas.core_name, blas.parallel,
               blas.num_threads);
    fmt::print("threads: {} (hardware {})\n", num_threads(), hardware_threads());
    fmt::print("backend: {}\n", backend_name(current_backend()));
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
