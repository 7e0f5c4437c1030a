#pragma once
// One thread pool: oneDNN and OpenBLAS (its OpenMP build) both run on libgomp's pool, so the
// thread count set here applies to both.

#include <string>

namespace headlab {

// n >= 1 threads for every kernel; 0 means all cores. Throws headlab::Error if n < 0.
void set_num_threads(int n);
int num_threads();
int hardware_threads();

struct BlasInfo {
  std::string version;    // openblas_get_config()
  std::string core_name;  // openblas_get_corename()
  std::string parallel;   // "sequential", "pthreads" or "openmp" (openblas_get_parallel())
  int num_threads = 0;
};
BlasInfo blas_info();

}  // namespace headlab
