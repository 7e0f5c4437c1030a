"""The OpenMP wait policy of a Python process: the CLI's choice, made before _headlab loads.

libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded, and importing headlab
loads it (through _headlab) unless a module imported before loaded it already (PyTorch, say).
Where neither variable is set and libgomp is not in the process yet, this makes the choice the
CLI makes as it starts (core/openmp_wait.h, train/cli/main.cpp): a short spin where the CPUs this
process may run on are idle, so two threads on a quiet machine do not wait on a wake-up per
parallel region (1.09x at M), and passive where other work runs, so a waiting thread never
holds the core the thread it waits for needs. Otherwise the library limits libgomp's spinning
itself (core/threads.h, limit_openmp_spinning).
"""

import os
import time

# core/openmp_wait.h: kQuietSpinCount and kBusyCores (tests/python/test_module.py checks they
# agree with the library's); /proc/stat counts in ticks of 10 ms, 40 ms gives 4 per CPU.
QUIET_SPIN_COUNT = 5000
BUSY_CORES = 0.5
SAMPLE_SECONDS = 0.04
MARK = "HEADLAB_OPENMP_WAIT"


def _cpu_ticks(cpus):
    """(busy, total, lines) of the "cpuN" lines of /proc/stat for `cpus`, or None."""
    busy = total = lines = 0
    with open("/proc/stat", encoding="ascii") as stat:
        for line in stat:
            name, _, rest = line.partition(" ")
            if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
                continue
            f = [int(x) for x in rest.split()[:8]] + [0] * 8
            b = f[0] + f[1] + f[2] + f[5] + f[6] + f[7]  # user nice system irq softirq steal
            busy, total, lines = busy + b, total + b + f[3] + f[4], lines + 1
    return (busy, total, lines) if lines == len(cpus) else None


def busy_cores(cpus):
    """Cores' worth of work on `cpus` over SAMPLE_SECONDS, or None where it cannot be read."""
    try:
        before = _cpu_ticks(cpus)
        time.sleep(SAMPLE_SECONDS)
        after = _cpu_ticks(cpus)
    except (OSError, ValueError):
        return None
    if before is None or after is None:
        return None
    if after[1] <= before[1] or after[0] < before[0]:
        return 0.0  # no tick passed
    return len(cpus) * min(1.0, (after[0] - before[0]) / (after[1] - before[1]))


def choose(cpus, busy):
    """(variable, value, reason) for `cpus` usable CPUs with `busy` cores of other work."""
    if cpus < 2:
        return "OMP_WAIT_POLICY", "passive", "one CPU: no thread waits for another"
    if busy is None:
        return "OMP_WAIT_POLICY", "passive", "the CPUs' load could not be read"
    if busy >= BUSY_CORES:
        return "OMP_WAIT_POLICY", "passive", f"other work on the CPUs at start, {busy:.1f} cores busy"
    return "GOMP_SPINCOUNT", str(QUIET_SPIN_COUNT), f"the CPUs were idle at start, {busy:.1f} cores busy"


def _libgomp_loaded():
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return any("libgomp" in line for line in maps)
    except OSError:
        return True  # cannot tell: leave the environment alone


def choose_before_load():
    """Sets the policy in os.environ where the user chose none and libgomp is not loaded yet."""
    mark = os.environ.get(MARK)
    inherited = mark is not None and mark.split(" ", 1)[0] != str(os.getpid())
    if mark is not None and not inherited:
        return
    if not inherited and ("OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ):
        return  # the user's choice
    if _libgomp_loaded():
        return
    cpus = sorted(os.sched_getaffinity(0))
    variable, value, reason = choose(len(cpus), busy_cores(cpus) if len(cpus) >= 2 else None)
    os.environ.pop("GOMP_SPINCOUNT" if variable == "OMP_WAIT_POLICY" else "OMP_WAIT_POLICY", None)
    os.environ[variable] = value
    os.environ[MARK] = f"{os.getpid()} {variable}={value}; {reason}"


def openmp_wait_policy():
    """The wait policy libgomp took in this process, as `headlab info` prints it."""
    mark = os.environ.get(MARK, "")
    pid, _, rest = mark.partition(" ")
    if pid == str(os.getpid()) and "; " in rest:
        setting, reason = rest.split("; ", 1)
        return f"{setting} (headlab's choice: {reason})"
    if "OMP_WAIT_POLICY" in os.environ:
        return os.environ["OMP_WAIT_POLICY"]
    if "GOMP_SPINCOUNT" in os.environ:
        return f"GOMP_SPINCOUNT={os.environ['GOMP_SPINCOUNT']}"
    return "libgomp's default, spin limited by the library"


choose_before_load()  # on import: headlab/__init__.py imports this module before _headlab
