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
// The CPUs this process may run on: its affinity mask (taskset, a cgroup's cpuset), not every
// online CPU, so "all cores" never puts two threads on one CPU. At least 1.
int hardware_threads();
// The cores this process may run on (its affinity mask, sched_getaffinity): fewer than
// hardware_threads() when a launcher bound it (mpirun binds each rank to one core by default).
// hardware_threads() where the mask cannot be read.
int affinity_cores();

// What set_num_threads does with a request: n >= 1 as asked, 0 all `usable_cpus`. Throws
// headlab::Error if n < 0.
int resolve_threads(int requested, int usable_cpus);
// The CPUs to count: the affinity mask's count, or the online CPUs where the mask could not be
// read (affinity_cpus <= 0); at least 1.
int usable_cpus(int affinity_cpus, int online_cpus);

// The thread count kernels split their work over: OpenMP's max-threads for the calling thread,
// after limit_openmp_spinning(). Kernels ask this, not omp_get_max_threads().
int kernel_threads();

// libgomp reads its wait policy once, when it is loaded; with none chosen a waiting thread spins
// about 3 ms before it sleeps, and beside another busy process that spin takes the core the
// thread it waits for needs, so a parallel region waits a scheduler time slice (two threads
// 5-20x slower than one). Where the environment chose no policy (the library in a program
// started without OMP_WAIT_POLICY or GOMP_SPINCOUNT; the CLI sets one itself), this makes
// libgomp spin 100 times instead (its documented spin "if there are more OpenMP threads than
// available CPUs"): a thread of its own holds a team of as many OpenMP threads as the process
// has CPUs, asleep for the life of the process (core/threads.cpp). Called by set_num_threads
// and kernel_threads; it acts once per process.
void limit_openmp_spinning();
// Whether libgomp spins its default 3 ms: neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set
// (null). A policy the user set (active included) is kept.
bool openmp_spins_by_default(const char* wait_policy, const char* spin_count);
// Whether limit_openmp_spinning started its sleeping team in this process.
bool openmp_spinning_limited();

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
