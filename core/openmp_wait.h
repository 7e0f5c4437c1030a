#pragma once
// The OpenMP wait policy the CLI starts libgomp with where the user chose none (train/cli/main.cpp
// restarts itself with it; libgomp reads it once, before main). Neither fixed policy serves both
// machines a user has:
//   - passive (a waiting thread sleeps at once): every parallel region and barrier wakes a
//     sleeping thread (a futex wake-up; on a virtual machine an interrupt to another vCPU); on a
//     quiet 2-core machine the M step at two threads took 40.5 ms passive against 35.7 ms with
//     OMP_WAIT_POLICY=active and 37.1 ms with a spin of 5,000 (medians of 8 alternating runs;
//     docs/performance.md);
//   - libgomp's default (spin about 3 ms) or active: beside another busy process the spinning
//     thread holds the core the thread it waits for needs, and a region waits a time slice (two
//     threads 2-20x slower than one).
// So the CLI looks before it starts: where the CPUs it may run on are idle (less than half a core
// of other work over a short window) a waiting thread spins a short while before it sleeps
// (kQuietSpinCount: about a quarter of a millisecond, a PAUSE taking 50 ns on the Zen 4
// measured), which bridges most gaps between the regions of a step; where other work runs, or
// the CPUs cannot be read, it sleeps at once. Work that starts later meets a bounded spin, not
// libgomp's 3 ms: beside two busy threads that started after it, the M step at two threads and
// the flagship run at runtime.threads = 2 took about what they took passive, and about their
// one-thread time.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headlab {

// Clock ticks of a set of CPUs, summed from /proc/stat's "cpuN" lines.
struct CpuTicks {
  uint64_t busy = 0;   // user, nice, system, irq, softirq, steal
  uint64_t total = 0;  // busy, idle and iowait
  int cpus = 0;        // lines summed
};

// The ticks of the CPUs numbered in `cpus` (every "cpuN" line when empty) in the text of
// /proc/stat; nullopt where a wanted CPU has no line or a line is not numbers.
std::optional<CpuTicks> parse_cpu_ticks(std::string_view proc_stat, const std::vector<int>& cpus);

// Cores' worth of work between two readings of the same CPUs: cpus x busy ticks / all ticks
// (0 when no tick passed).
double busy_cores(const CpuTicks& before, const CpuTicks& after);

// The spin libgomp gets on idle CPUs (GOMP_SPINCOUNT; 300,000 is libgomp's default, 0 passive),
// and the other work, in cores, from which on a waiting thread sleeps at once.
inline constexpr int64_t kQuietSpinCount = 5000;
inline constexpr double kBusyCores = 0.5;

struct OpenMPWait {
  std::string variable;  // "GOMP_SPINCOUNT" or "OMP_WAIT_POLICY"
  std::string value;     // "5000", or "passive"
  std::string reason;    // why, for `headlab info`: "the CPUs were idle at start, ..."
};

// The policy for `cpus` usable CPUs with `busy` cores of other work on them (nullopt: unknown).
OpenMPWait choose_openmp_wait(int cpus, std::optional<double> busy);

// The wait policy libgomp read from this process's environment, as run.json records it:
// "OMP_WAIT_POLICY=passive", "GOMP_SPINCOUNT=5000" (both, space-separated, where both are set),
// or "libgomp's default" (spin limited by the library: core/threads.h, limit_openmp_spinning).
std::string openmp_wait_setting();

// The busy cores of the CPUs this process may run on (its affinity mask) over `window_ms`
// milliseconds, from /proc/stat read before and after; nullopt where it cannot be read.
std::optional<double> sample_busy_cores(int window_ms);

}  // namespace headlab
