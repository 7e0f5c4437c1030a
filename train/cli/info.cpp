// `headlab info`: versions, ISA, threads and the selected backend.

#include <memory>
#include <string>

#include <fmt/core.h>

#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"

namespace headlab::cli {
namespace {

struct InfoOptions {
  int threads = 0;
  std::string backend = "auto";
};

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
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("info", "Print library versions, CPU ISA, threads and backend");
  auto opts = std::make_shared<InfoOptions>();
  add_int_option(*cmd, "--threads", opts->threads, 0, 1024,
                 "Threads for oneDNN and OpenBLAS (0: all cores)");
  cmd->add_option("--backend", opts->backend, "reference | blas | onednn | auto");
  cmd->callback([opts, &exit_code] {
    print_info(*opts);
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
