#include "train/cli/job.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "core/kernels/fast.h"
#include "core/threads.h"
#include "core/version.h"
#include "layers/registry.h"
#include "train/config/config.h"
#include "train/distributed/agree.h"
#include "train/distributed/build_id.h"
#include "train/distributed/world.h"
#include "train/plugins/loader.h"
#include "train/tasks/registry.h"

namespace headlab::cli {
namespace {

std::unique_ptr<Comm>& world_slot() {
  static std::unique_ptr<Comm> comm = std::make_unique<LocalComm>();
  return comm;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The environment variables that steer which kernels run, or how many threads, and so can change
// a result's bits: OpenBLAS's and oneDNN's dispatch (and oneDNN's fp math), OpenMP's thread count
// and teams. (Binding and spinning only change the speed.)
constexpr const char* kNumericEnvironment[] = {"OPENBLAS_CORETYPE",
                                               "OPENBLAS_NUM_THREADS",
                                               "ONEDNN_MAX_CPU_ISA",
                                               "DNNL_MAX_CPU_ISA",
                                               "ONEDNN_CPU_ISA_HINTS",
                                               "DNNL_CPU_ISA_HINTS",
                                               "ONEDNN_DEFAULT_FPMATH_MODE",
                                               "DNNL_DEFAULT_FPMATH_MODE",
                                               "OMP_NUM_THREADS",
                                               "OMP_DYNAMIC",
                                               "OMP_THREAD_LIMIT",
                                               "OMP_SCHEDULE"};

}  // namespace

Comm& world() {
  return *world_slot();
}

void set_world(std::unique_ptr<Comm> comm) {
  world_slot() = std::move(comm);
}

std::string build_fingerprint() {
  const std::string id = executable_build_id();
  std::string plugins;
  for (const LoadedPlugin& p : loaded_plugins())
    plugins +=
        fmt::format("{}{} (sha256 {})", plugins.empty() ? "" : ", ", p.path.string(), p.sha256);
  return fmt::format(
      "headlab {}\nbuild id {}\nplugins: {}\nlayers: {}\ntasks: {}\nonednn isa: {}\n",
      HEADLAB_VERSION, id.empty() ? "(none)" : id, plugins.empty() ? "none" : plugins,
      joined(registered_layers()), joined(registered_tasks()), onednn_info().isa);
}

std::string numeric_settings(int threads) {
  const BlasInfo blas = blas_info();
  std::string s = fmt::format(
      "openblas core: {} ({})\nonednn isa: {}\nheadlab kernels: {}\nthreads: {}\n", blas.core_name,
      blas.parallel, onednn_info().isa, fast::avx512_enabled() ? "AVX-512" : "portable",
      threads > 0 ? threads : hardware_threads());
  for (const char* name : kNumericEnvironment) {
    const char* value = std::getenv(name);
    s += fmt::format("{}={}\n", name, value ? value : "(unset)");
  }
  return s;
}

void check_ranks_agree(const Config& config) {
  Comm& comm = world();
  comm.set_timeout(config.runtime.dist_timeout);
  const std::string text = to_toml(config);
  check_same_on_every_rank(comm, "the headlab build", build_fingerprint());
  check_same_on_every_rank(comm, "the settings that can change results",
                           numeric_settings(static_cast<int>(config.runtime.threads)));
  // The resolved values, without the comment lines (the overrides that led to them).
  std::string values;
  for (size_t at = 0, end = 0; at < text.size(); at = end + 1) {
    end = std::min(text.find('\n', at), text.size());
    if (text[at] != '#') values.append(text, at, end - at).push_back('\n');
  }
  check_same_on_every_rank(comm, "the resolved config", values);
}

std::string binding_warning(int threads) {
  const std::string launcher = launcher_name();
  const int want = threads > 0 ? threads : hardware_threads(), cores = affinity_cores();
  if (launcher.empty() || want <= cores) return "";
  const std::string fix = launcher == "srun"
                              ? fmt::format("add --cpus-per-task={}", want)
                              : fmt::format("add --bind-to none or --map-by slot:PE={}", want);
  return fmt::format("headlab: warning: rank {} runs {} threads on {} core{} ({} bound it; {})",
                     launcher_rank(), want, cores, cores == 1 ? "" : "s", launcher, fix);
}

std::string sweep_binding_warning(int threads, int64_t at_once) {
  const std::string launcher = launcher_name();
  const int each = threads > 0 ? threads : hardware_threads(), cores = affinity_cores();
  const int64_t want = each * at_once;
  if (launcher.empty() || want <= cores) return "";
  const std::string jobs = at_once > 1 ? ", or lower --jobs" : "";
  const std::string fix =
      launcher == "srun" ? fmt::format("add --cpus-per-task={}{}", want, jobs)
                         : fmt::format("add --bind-to none or --map-by slot:PE={}{}", want, jobs);
  return fmt::format(
      "headlab: warning: rank {}'s sweep runs {} run{} at a time of {} thread{} each: {} threads "
      "on {} core{} ({} bound it; {})",
      launcher_rank(), at_once, at_once == 1 ? "" : "s", each, each == 1 ? "" : "s", want, cores,
      cores == 1 ? "" : "s", launcher, fix);
}

}  // namespace headlab::cli
