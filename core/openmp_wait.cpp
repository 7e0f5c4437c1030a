#include "core/openmp_wait.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>

namespace headlab {

namespace {

// The fields of a "cpuN ..." line after its name: user nice system idle iowait irq softirq steal
// (guest time is inside user already). Older kernels print fewer; absent ones count 0.
std::optional<CpuTicks> line_ticks(std::string_view rest) {
  uint64_t f[8] = {};
  int n = 0;
  size_t i = 0;
  while (n < 8) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    if (i == rest.size()) break;
    const auto [end, ec] = std::from_chars(rest.data() + i, rest.data() + rest.size(), f[n]);
    if (ec != std::errc() || (end != rest.data() + rest.size() && *end != ' ')) return std::nullopt;
    i = static_cast<size_t>(end - rest.data());
    ++n;
  }
  if (n < 4) return std::nullopt;
  CpuTicks t;
  t.busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  t.total = t.busy + f[3] + f[4];
  t.cpus = 1;
  return t;
}

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::optional<CpuTicks> read_ticks(const std::vector<int>& cpus) {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return parse_cpu_ticks(text, cpus);
}

}  // namespace

std::optional<CpuTicks> parse_cpu_ticks(std::string_view proc_stat, const std::vector<int>& cpus) {
  CpuTicks sum;
  std::vector<bool> seen(cpus.size(), false);
  while (!proc_stat.empty()) {
    const size_t eol = proc_stat.find('\n');
    const std::string_view line = proc_stat.substr(0, eol);
    proc_stat = eol == std::string_view::npos ? std::string_view{} : proc_stat.substr(eol + 1);
    // "cpuN": the aggregate "cpu " line and every other line are skipped.
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;
    int id = 0;
    const auto [end, ec] = std::from_chars(line.data() + 3, line.data() + line.size(), id);
    if (ec != std::errc()) return std::nullopt;
    const auto wanted = std::find(cpus.begin(), cpus.end(), id);
    if (!cpus.empty() && wanted == cpus.end()) continue;
    const std::optional<CpuTicks> t =
        line_ticks(line.substr(static_cast<size_t>(end - line.data())));
    if (!t) return std::nullopt;
    if (!cpus.empty()) seen[static_cast<size_t>(wanted - cpus.begin())] = true;
    sum.busy += t->busy;
    sum.total += t->total;
    sum.cpus += 1;
  }
  if (sum.cpus == 0 || std::find(seen.begin(), seen.end(), false) != seen.end())
    return std::nullopt;
  return sum;
}

double busy_cores(const CpuTicks& before, const CpuTicks& after) {
  if (after.total <= before.total || after.busy < before.busy) return 0.0;
  const double busy = static_cast<double>(after.busy - before.busy);
  const double total = static_cast<double>(after.total - before.total);
  return static_cast<double>(after.cpus) * std::min(1.0, busy / total);
}

OpenMPWait choose_openmp_wait(int cpus, std::optional<double> busy) {
  if (cpus < 2) return {"OMP_WAIT_POLICY", "passive", "one CPU: no thread waits for another"};
  if (!busy) return {"OMP_WAIT_POLICY", "passive", "the CPUs' load could not be read"};
  if (*busy >= kBusyCores)
    return {"OMP_WAIT_POLICY", "passive",
            fmt::format("other work on the CPUs at start, {:.1f} cores busy", *busy)};
  return {"GOMP_SPINCOUNT", std::to_string(kQuietSpinCount),
          fmt::format("the CPUs were idle at start, {:.1f} cores busy", *busy)};
}

std::string openmp_wait_setting() {
  std::string out;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* value = std::getenv(name))
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, value);
  return out.empty() ? "libgomp's default" : out;
}

std::optional<double> sample_busy_cores(int window_ms) {
  const std::vector<int> cpus = affinity_cpus();
  const std::optional<CpuTicks> before = read_ticks(cpus);
  if (!before) return std::nullopt;
  std::this_thread::sleep_for(std::chrono::milliseconds(window_ms));
  const std::optional<CpuTicks> after = read_ticks(cpus);
  if (!after || after->cpus != before->cpus) return std::nullopt;
  return busy_cores(*before, *after);
}

}  // namespace headlab
