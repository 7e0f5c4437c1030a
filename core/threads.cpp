#include "core/threads.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <dnnl.hpp>

#include "core/error.h"

namespace headlab {

int resolve_threads(int requested, int usable_cpus) {
  if (requested < 0) fail("threads: {} is negative (use 0 for all cores)", requested);
  return requested == 0 ? std::max(1, usable_cpus) : requested;
}

int usable_cpus(int affinity_cpus, int online_cpus) {
  return std::max(1, affinity_cpus > 0 ? affinity_cpus : online_cpus);
}

void set_num_threads(int n) {
  const int threads = resolve_threads(n, hardware_threads());
  limit_openmp_spinning();
  omp_set_num_threads(threads);
  // The OpenMP build of OpenBLAS runs on the same libgomp pool as oneDNN and takes the same
  // count. Its pthread build brings a second pool that fights oneDNN's for the cores, so it is
  // kept on one thread (it then computes on the calling thread and its pool sleeps).
  openblas_set_num_threads(openblas_get_parallel() == 2 ? threads : 1);
}

int num_threads() {
  return omp_get_max_threads();
}

int hardware_threads() {
  // std::thread::hardware_concurrency counts the online CPUs, also those taskset or a cpuset
  // keeps this process off.
  cpu_set_t set;
  CPU_ZERO(&set);
  const int affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  return usable_cpus(affinity, static_cast<int>(std::thread::hardware_concurrency()));
}

int kernel_threads() {
  limit_openmp_spinning();
  return omp_get_max_threads();
}

bool openmp_spins_by_default(const char* wait_policy, const char* spin_count) {
  return wait_policy == nullptr && spin_count == nullptr;
}

namespace {

std::atomic<bool> spinning_limited{false};

// libgomp counts the threads of every team it keeps (its gomp_managed_threads); while they
// outnumber the CPUs it saw at start (gomp_available_cpus), a waiting thread spins 100 times,
// not 300,000, before it sleeps (libgomp's manual, GOMP_SPINCOUNT). A team of `cpus` threads,
// held by this thread and never used again, makes the count exceed the CPUs whenever a kernel
// runs two threads or more. Its threads wait on a futex (no CPU after their first few ms).
[[noreturn]] void sleeping_team(int cpus) {
  // A body that does something: GCC removes a parallel region whose body is empty.
  std::atomic<int> members{0};
#pragma omp parallel num_threads(cpus)
  members.fetch_add(1);
  spinning_limited.store(members.load() == cpus);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

}  // namespace

void limit_openmp_spinning() {
  static const bool started = [] {
    if (!openmp_spins_by_default(std::getenv("OMP_WAIT_POLICY"), std::getenv("GOMP_SPINCOUNT")))
      return false;
    const int cpus = omp_get_num_procs();
    if (cpus < 2) return false;  // more than one thread on one CPU: libgomp throttles already
    // Its threads take no signal: one sent to the process goes to a thread that handles it.
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    bool ok = true;
    try {
      std::thread(sleeping_team, cpus).detach();
    } catch (const std::system_error&) {
      ok = false;  // no thread to spare: the run is correct, only slower beside other work
    }
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    return ok;
  }();
  (void)started;
}

bool openmp_spinning_limited() {
  return spinning_limited.load();
}

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return hardware_threads();
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : hardware_threads();
}

// OpenBLAS 0.3.21's x86-64 core names by the vector width of their SGEMM kernels.
int openblas_core_vector_bits(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto any_of = [&name](std::initializer_list<std::string_view> cores) {
    return std::any_of(cores.begin(), cores.end(),
                       [&name](std::string_view c) { return name.find(c) != std::string::npos; });
  };
  if (any_of({"skylakex", "cooperlake", "sapphirerapids"})) return 512;
  if (any_of(
          {"haswell", "zen", "sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"}))
    return 256;
  return 128;
}

namespace {

int cpu_vector_bits() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 512;
  if (__builtin_cpu_supports("avx2")) return 256;
  return 128;
}

// The core type whose kernels use the widest unit this CPU has.
std::string best_core() {
  if (cpu_vector_bits() == 512)
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  if (cpu_vector_bits() == 256) return "Haswell";
  return "Prescott";
}

}  // namespace

BlasInfo blas_info() {
  BlasInfo info;
  info.version = openblas_get_config();
  info.core_name = openblas_get_corename();
  switch (openblas_get_parallel()) {
    case 0:
      info.parallel = "sequential";
      break;
    case 1:
      info.parallel = "pthreads";
      break;
    case 2:
      info.parallel = "openmp";
      break;
    default:
      info.parallel = "unknown";
  }
  info.num_threads = openblas_get_num_threads();
  info.core_vector_bits = openblas_core_vector_bits(info.core_name);
  info.cpu_vector_bits = cpu_vector_bits();
  info.best_core = best_core();
  if (const char* env = std::getenv("OPENBLAS_CORETYPE")) info.coretype_env = env;
  return info;
}

namespace {

// Readable names of oneDNN's threading runtime and ISA; null for one this build does not know.
const char* runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    default:
      return nullptr;
  }
}

const char* isa_name(dnnl::cpu_isa isa) {
  using enum dnnl::cpu_isa;
  switch (isa) {
    case all:
      return "no JIT (reference code only)";
    case sse41:
      return "SSE4.1";
    case avx:
      return "AVX";
    case avx2:
      return "AVX2";
    case avx2_vnni:
      return "AVX2 with VNNI";
    case avx512_mic:
      return "AVX-512 (Xeon Phi)";
    case avx512_mic_4ops:
      return "AVX-512 (Xeon Phi, 4ops)";
    case avx512_core:
      return "AVX-512";
    case avx512_core_vnni:
      return "AVX-512 with VNNI";
    case avx512_core_bf16:
      return "AVX-512 with VNNI and BF16";
    case avx512_core_amx:
      return "AVX-512 with VNNI, BF16 and AMX";
    default:
      return nullptr;
  }
}

}  // namespace

OneDnnInfo onednn_info() {
  OneDnnInfo info;
  const dnnl_version_t* v = dnnl_version();
  info.version = fmt::format("{}.{}.{} (git {})", v->major, v->minor, v->patch, v->hash);
  const char* runtime = runtime_name(v->cpu_runtime);
  info.runtime = runtime ? runtime : fmt::format("other ({})", v->cpu_runtime);
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const char* name = isa_name(isa);
  info.isa = name ? name : fmt::format("unknown (dnnl_cpu_isa_t {:#x})", static_cast<int>(isa));
  return info;
}

}  // namespace headlab
