#include "core/threads.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <dnnl.hpp>

#include "core/error.h"

namespace headlab {

void set_num_threads(int n) {
  if (n < 0) fail("threads: {} is negative (use 0 for all cores)", n);
  const int threads = n == 0 ? hardware_threads() : n;
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
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
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
