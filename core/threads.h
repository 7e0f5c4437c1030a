#pragma once
// One thread pool: oneDNN and OpenBLAS (its OpenMP build) both run on libgomp's pool.
// set_num_threads sets OpenMP's count for the calling thread (which oneDNN reads when it creates
// a primitive, so the count is part of the primitive cache key) and OpenBLAS's count; call it
// from the thread that runs the kernels.

#include <string>

namespace headlab {

// n >= 1 threads for every kernel; 0 means all cores. Throws headlab::Error if n < 0. With the
// pthread build of OpenBLAS loaded instead of the OpenMP one, OpenBLAS stays on one thread.
void set_num_threads(int n);
int num_threads();
int hardware_threads();
// The cores this process may run on (its affinity mask, sched_getaffinity): fewer than
// hardware_threads() when a launcher bound it (mpirun binds each rank to one core by default).
// hardware_threads() where the mask cannot be read.
int affinity_cores();

struct BlasInfo {
  std::string version;    // openblas_get_config()
  std::string core_name;  // openblas_get_corename()
  std::string parallel;   // "sequential", "pthreads" or "openmp" (openblas_get_parallel())
  int num_threads = 0;
  // Vector width of the kernels OpenBLAS runs for core_name, and the widest this CPU has. When
  // the first is narrower (OpenBLAS does not know the CPU, or OPENBLAS_CORETYPE forces an older
  // core) every OpenBLAS product runs at a fraction of the machine's speed, in this program
  // and in any other on this machine that loads the same OpenBLAS in the same environment.
  int core_vector_bits = 0;
  int cpu_vector_bits = 0;
  std::string best_core;     // the OPENBLAS_CORETYPE that uses the widest unit ("Cooperlake")
  std::string coretype_env;  // OPENBLAS_CORETYPE as set in the environment, or empty
};
BlasInfo blas_info();
// The vector width of OpenBLAS's kernels for a core name ("Haswell" 256, "SkylakeX" 512).
int openblas_core_vector_bits(std::string name);

struct OneDnnInfo {
  std::string version;  // "2.6.3 (git <hash>)"
  std::string runtime;  // CPU threading runtime: "OpenMP", "TBB", "threadpool", "sequential"
  std::string isa;      // the ISA its JIT kernels use, readable ("AVX-512 with VNNI and BF16")
};
OneDnnInfo onednn_info();

}  // namespace headlab
