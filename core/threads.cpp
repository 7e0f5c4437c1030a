#include "core/threads.h"

#include <cblas.h>
#include <omp.h>

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
  return info;
}

OneDnnInfo onednn_info() {
  OneDnnInfo info;
  const dnnl_version_t* v = dnnl_version();
  info.version = fmt::format("{}.{}.{} (git {})", v->major, v->minor, v->patch, v->hash);
  switch (v->cpu_runtime) {
    case DNNL_RUNTIME_OMP:
      info.runtime = "OpenMP";
      break;
    case DNNL_RUNTIME_TBB:
      info.runtime = "TBB";
      break;
    case DNNL_RUNTIME_THREADPOOL:
      info.runtime = "threadpool";
      break;
    case DNNL_RUNTIME_SEQ:
      info.runtime = "sequential";
      break;
    default:
      info.runtime = fmt::format("other ({})", v->cpu_runtime);
  }
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::all:
      info.isa = "no JIT (reference code only)";
      break;
    case isa::sse41:
      info.isa = "SSE4.1";
      break;
    case isa::avx:
      info.isa = "AVX";
      break;
    case isa::avx2:
      info.isa = "AVX2";
      break;
    case isa::avx2_vnni:
      info.isa = "AVX2 with VNNI";
      break;
    case isa::avx512_mic:
      info.isa = "AVX-512 (Xeon Phi)";
      break;
    case isa::avx512_mic_4ops:
      info.isa = "AVX-512 (Xeon Phi, 4ops)";
      break;
    case isa::avx512_core:
      info.isa = "AVX-512";
      break;
    case isa::avx512_core_vnni:
      info.isa = "AVX-512 with VNNI";
      break;
    case isa::avx512_core_bf16:
      info.isa = "AVX-512 with VNNI and BF16";
      break;
    case isa::avx512_core_amx:
      info.isa = "AVX-512 with VNNI, BF16 and AMX";
      break;
    default:
      info.isa = fmt::format("unknown (dnnl_cpu_isa_t {:#x})",
                             static_cast<int>(dnnl::get_effective_cpu_isa()));
  }
  return info;
}

}  // namespace headlab
