#include "core/threads.h"

#include <omp.h>
#include <cblas.h>

#include <thread>

#include "core/error.h"

namespace headlab {

void set_num_threads(int n) {
  if (n < 0) fail("threads: {} is negative (use 0 for all cores)", n);
  const int threads = n == 0 ? hardware_threads() : n;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

BlasInfo blas_info() {
  BlasInfo info;
  info.version = openblas_get_config();
  info.core_name = openblas_get_corename();
  switch (openblas_get_parallel()) {
    case 0: info.parallel = "sequential"; break;
    case 1: info.parallel = "pthreads"; break;
    case 2: info.parallel = "openmp"; break;
    default: info.parallel = "unknown";
  }
  info.num_threads = openblas_get_num_threads();
  return info;
}

}  // namespace headlab
