#!/usr/bin/env python3
"""headlab vs PyTorch at its best, side by side: the training step of the same encoder
(bench/torch_reference.py builds it in PyTorch, `headlab bench --preset` in headlab), per preset and
thread count.

PyTorch's matrix products go through the system OpenBLAS, whose kernels depend on the core type it
detects (or that OPENBLAS_CORETYPE in the environment forces). When that core does not use the CPU's
widest vector unit (bench/openblas_core.py), PyTorch runs twice per round: as the environment gives
it ("env") and with the core type that does ("best", e.g. OPENBLAS_CORETYPE=Cooperlake on AVX-512
with BF16); headlab is compared with the faster of the two (lower median). Otherwise only "env" runs.

For every (preset, threads) pair all programs of all precisions run alternately, `--rounds` times
each, in one session (the order rotates each round, so a drift in load favours none): headlab fp32,
headlab bf16, PyTorch fp32 per core setting and PyTorch bf16 per thread setting. Each run reports
its median ms per step; the ratios (PyTorch / headlab within a precision, headlab fp32 / headlab
bf16) are taken per round, and the tables give the medians of those ratios. PyTorch fp32's thread
setting per thread count: 1 thread: --threads 1; 2 threads: --threads 2 --blas-threads 1 for S,
--threads 1 --blas-threads 2 for M and L (its fastest on a 2-core machine; torch.set_num_threads
alone does not limit the OpenBLAS that Debian's torch calls). PyTorch bf16
(torch_reference.py --precision bf16: torch.autocast("cpu", dtype=torch.bfloat16), whose products
run on oneDNN's bf16 kernels and so on torch's OpenMP threads, not OpenBLAS's) runs with
--threads N ("omp") and, with more than one thread, also with one ("1-thread": small products
may not pay for a second thread); the faster is compared. Peak RSS of each run is read by this script (wait4's rusage of each
child) for all programs alike. At one thread the tables add the same ratios on each step's CPU
time (both programs report it; a busy machine stretches it far less than the wall time). The
tables end with the FMA and bf16 dot-product peaks per core that headlab's runs measured (the
loops `headlab bench --kernels` reports). `--tables-from FILE` prints the tables of a run that
`--json FILE` saved, measuring nothing.

Usage (bench/compare.sh passes its arguments here):
  compare.py [--presets S,M,L] [--threads 1,2] [--rounds 3] [--steps S=100,M=40,L=8]
             [--precisions fp32,bf16] [--baseline EXE] [--json FILE]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import openblas_core

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Targets of issue 19 against PyTorch at its best: minimum speed-up per (preset, threads).
TARGETS = {("S", 1): 2.5, ("M", 1): 1.6, ("L", 1): 1.45, ("S", 2): 3.5, ("M", 2): 2.0, ("L", 2): 1.8}
# Issue 30's bf16 goals at one thread: against PyTorch's autocast bf16, and over headlab fp32.
TARGETS_BF16 = {("M", 1): 1.5, ("L", 1): 1.5}
TARGETS_BF16_OVER_FP32 = {("M", 1): 1.6, ("L", 1): 1.6}
DEFAULT_STEPS = {"S": 100, "M": 40, "L": 8}
WARMUP = {"S": 20, "M": 8, "L": 3}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", default="S,M,L")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3, help="runs of each program per (preset, threads)")
    p.add_argument("--steps", default="", help="timed steps per run, e.g. S=100,M=40,L=8")
    p.add_argument("--headlab", default=os.environ.get("HEADLAB", os.path.join(ROOT, "build", "headlab")))
    p.add_argument("--python", default=os.environ.get("TORCH_PYTHON", "/usr/bin/python3"))
    p.add_argument("--reference", default=os.environ.get("TORCH_REFERENCE",
                                                         os.path.join(HERE, "torch_reference.py")))
    p.add_argument("--baseline", help="another headlab executable (an earlier build) run in the same "
                                      "rotation: the table adds its ms and the speed-up over it")
    p.add_argument("--precisions", default="",
                   help="tables to measure, e.g. fp32,bf16 (default: fp32, and bf16 where the CPU has "
                        "AVX512_BF16): headlab --precision and torch_reference.py --precision (autocast)")
    p.add_argument("--json", help="also write every run's report to this file")
    p.add_argument("--tables-from", metavar="FILE",
                   help="measure nothing: print the tables again from the runs a --json FILE holds")
    a = p.parse_args()
    a.presets = [s.strip() for s in a.presets.split(",") if s.strip()]
    a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    a.precisions = [s.strip() for s in a.precisions.split(",") if s.strip()] or \
        (["fp32", "bf16"] if cpu_has_bf16() else ["fp32"])
    steps = dict(DEFAULT_STEPS)
    for item in filter(None, a.steps.split(",")):
        k, v = item.split("=")
        steps[k.strip()] = int(v)
    a.steps = steps
    return a


def env_openblas_core():
    """The core type the system OpenBLAS picks in this environment (what PyTorch will run)."""
    for path in ("libopenblas.so.0", "libblas.so.3"):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return None


def run(cmd):
    """Runs cmd; returns (the JSON of its last stdout line, its peak RSS in MB, wall seconds)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.time() - t0
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit("compare: command failed ({}): {}\n{}".format(proc.returncode, " ".join(cmd),
                                                                  err.read()[-2000:]))
        lines = out.read().strip().splitlines()
    return json.loads(lines[-1]), usage.ru_maxrss / 1024.0, wall


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512_bf16" in line for line in f)
    except OSError:
        return False


def fp32_layout(preset, threads):
    """PyTorch fp32's fastest thread layout on a 2-core machine (see the module's docstring)."""
    if threads == 1:
        return ["--threads", "1"]
    if preset == "S":
        return ["--threads", str(threads), "--blas-threads", "1"]
    return ["--threads", "1", "--blas-threads", str(threads)]


def torch_settings(precision, threads, fair):
    """PyTorch's settings to run for a precision: fp32 per OpenBLAS core, bf16 per thread layout."""
    if precision == "fp32":
        return ["env"] if fair else ["env", "best"]
    return ["omp"] + (["1-thread"] if threads > 1 else [])


def torch_cmd(a, preset, threads, precision, setting):
    cmd = [a.python, a.reference, "--config", preset, "--steps", str(a.steps[preset]),
           "--warmup", str(WARMUP[preset]), "--infer-steps", str(max(10, a.steps[preset] // 2)),
           "--precision", precision]
    if precision == "fp32":
        return cmd + ["--openblas-core", setting] + fp32_layout(preset, threads)
    # bf16: the products run on oneDNN (torch's OpenMP threads); OpenBLAS's best core for whatever
    # fp32 product remains
    cmd += ["--openblas-core", "best"]
    return cmd + ["--threads", str(threads if setting == "omp" else 1), "--blas-threads", "1"]


def headlab_cmd(a, preset, threads, precision, exe=None):
    return [exe or a.headlab, "bench", "--preset", preset, "--threads", str(threads), "--steps",
            str(a.steps[preset]), "--warmup", str(WARMUP[preset]), "--precision", precision, "--json"]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def measure_pair(a, preset, threads, fair, log):
    """All rounds of one (preset, threads), every precision in one rotation: {who: [(report, rss)]}.
    who is "headlab-P", "baseline-P" or "torch-P-SETTING" for precision P."""
    programs = []
    for p in a.precisions:
        programs += ["headlab-" + p] + (["baseline-" + p] if a.baseline else [])
        programs += ["torch-{}-{}".format(p, s) for s in torch_settings(p, threads, fair)]
    runs = {who: [] for who in programs}
    for i in range(a.rounds):
        order = programs[i % len(programs):] + programs[:i % len(programs)]
        for who in order:
            kind, precision = who.split("-")[:2]
            if kind == "headlab":
                cmd = headlab_cmd(a, preset, threads, precision)
            elif kind == "baseline":
                cmd = headlab_cmd(a, preset, threads, precision, a.baseline)
            else:
                cmd = torch_cmd(a, preset, threads, precision, who.split("-", 2)[2])
            rep, rss, wall = run(cmd)
            runs[who].append((rep, rss))
            log.append({"who": who, "preset": preset, "threads": threads, "round": i, "precision": precision,
                        "load": os.getloadavg()[0], "peak_rss_mb_child": rss, "wall_s": wall, "report": rep})
        print("  {} {} thread(s) round {}: {}  (load {:.2f})".format(
            preset, threads, i + 1,
            "  ".join("{} {:.3f}".format(w, runs[w][-1][0]["train_step_ms_median"]) for w in programs),
            os.getloadavg()[0]), flush=True)
    return runs


def summarize(preset, threads, precision, runs):
    ms = lambda who: med([r["train_step_ms_median"] for r, _ in runs[who]])
    prefix = "torch-{}-".format(precision)
    torch = [w for w in runs if w.startswith(prefix)]
    best = min(torch, key=ms)  # the faster PyTorch setting
    hl = [r for r, _ in runs["headlab-" + precision]]
    per_round = lambda num, den: [n["train_step_ms_median"] / d["train_step_ms_median"] for n, d in zip(num, den)]
    ratios = per_round([t for t, _ in runs[best]], hl)
    clean = [t["train_step_ms_median_clean"] / h["train_step_ms_median_clean"]
             for (t, _), h in zip(runs[best], hl)
             if h.get("train_step_ms_median_clean") and t.get("train_step_ms_median_clean")]
    base = per_round([b for b, _ in runs["baseline-" + precision]], hl) if "baseline-" + precision in runs else []
    # bf16: headlab fp32 / headlab bf16 per round, when fp32 ran in the same rotation
    over_fp32 = per_round([f for f, _ in runs["headlab-fp32"]], hl) \
        if precision != "fp32" and "headlab-fp32" in runs else []
    peaks = lambda key: med([r[key] for r in hl if r.get(key)])
    # one thread: the same ratios on each step's CPU time (both programs report it), which a busy
    # machine stretches far less than the wall time
    cpu = lambda num, den: [n["train_step_cpu_ms_median"] / d["train_step_cpu_ms_median"]
                            for n, d in zip(num, den)
                            if n.get("train_step_cpu_ms_median") and d.get("train_step_cpu_ms_median")]
    cpu_ratios = cpu([t for t, _ in runs[best]], hl) if threads == 1 else []
    cpu_over_fp32 = cpu([f for f, _ in runs["headlab-fp32"]], hl) \
        if threads == 1 and precision != "fp32" and "headlab-fp32" in runs else []
    return {
        "preset": preset, "threads": threads, "precision": precision,
        "headlab_ms": ms("headlab-" + precision),
        "baseline_ms": ms("baseline-" + precision) if base else None,
        "speedup_over_baseline": med(base) if base else None,
        "torch_ms": {w[len(prefix):]: ms(w) for w in torch},
        "torch_core": {w[len(prefix):]: runs[w][0][0].get("openblas_corename") for w in torch},
        "torch_threads": {w[len(prefix):]: (runs[w][0][0].get("torch_get_num_threads"),
                                           runs[w][0][0].get("openblas_num_threads")) for w in torch},
        "compared_with": best[len(prefix):],
        "ratio": med(ratios), "ratios": ratios,
        "target": (TARGETS if precision == "fp32" else TARGETS_BF16).get((preset, threads)),
        "over_fp32": med(over_fp32) if over_fp32 else None, "over_fp32_ratios": over_fp32,
        "over_fp32_target": TARGETS_BF16_OVER_FP32.get((preset, threads)) if precision != "fp32" else None,
        "clean_ratio": med(clean),
        "cpu_ratio": med(cpu_ratios), "cpu_over_fp32": med(cpu_over_fp32),
        "gemm_only_ms": med([r["gemm_only_ms"] for r in hl]),
        "step_over_gemm": med([r["step_over_gemm_only"] for r in hl]),
        "gflops": med([r["achieved_gflops"] for r in hl]),
        # bf16 runs against the bf16 dot-product peak, fp32 runs against the FMA peak
        "peak_fraction": med([r.get("fraction_of_bf16_peak", r["fraction_of_fma_peak"]) for r in hl]),
        "fma_peak": peaks("fma_peak_gflops_per_core"), "bf16_peak": peaks("bf16_peak_gflops_per_core"),
        "allocs": med([r["allocations_per_step"] for r in hl]),
        "headlab_rss": max(r for _, r in runs["headlab-" + precision]),
        "torch_rss": max(r for w in torch for _, r in runs[w]),
    }


def verdict(value, target):
    return "-" if target is None else "{:.2f}x{}".format(target, " (met)" if value >= target else " (missed)")


def print_table(rows):
    settings = sorted({s for r in rows for s in r["torch_ms"]}, key=lambda s: (s != "env", s != "omp", s))
    with_base = rows and rows[0]["baseline_ms"] is not None
    with_fp32 = rows and rows[0]["over_fp32"] is not None
    hdr = ("| preset | threads | headlab ms | " + ("baseline ms | speed-up | " if with_base else "") +
           ("over headlab fp32 (per round) | median | target | CPU time | " if with_fp32 else "") +
           " | ".join("PyTorch ms ({})".format(s) for s in settings) +
           " | ratios vs faster | median ratio | target | clean-step ratio | CPU-time ratio | GEMM-only ms"
           " | step / GEMM-only"
           " | % of peak | allocs/step | peak RSS MB (headlab / torch) |")
    print(hdr)
    print("|" + "|".join(["---"] * (hdr.count("|") - 1)) + "|")
    for r in rows:
        x = lambda v: "-" if v is None or v != v else "{:.2f}x".format(v)
        clean = x(r["clean_ratio"])
        cpu = x(r.get("cpu_ratio"))
        torch = " | ".join("-" if s not in r["torch_ms"] else
                           "{:.2f}{}".format(r["torch_ms"][s], "*" if s == r["compared_with"] else "")
                           for s in settings)
        base = "{:.2f} | {:.2f}x | ".format(r["baseline_ms"], r["speedup_over_baseline"]) if with_base else ""
        fp32 = "{} | **{:.2f}x** | {} | {} | ".format(
            " ".join("{:.2f}".format(v) for v in r["over_fp32_ratios"]), r["over_fp32"],
            verdict(r["over_fp32"], r["over_fp32_target"]), x(r.get("cpu_over_fp32"))) if with_fp32 else ""
        print("| {} | {} | {:.2f} | {}{}{} | {} | **{:.2f}x** | {} | {} | {} | {:.2f} | {:.2f} | {:.0f}% | {:.0f} | {:.0f} / {:.0f} |"
              .format(r["preset"], r["threads"], r["headlab_ms"], base, fp32, torch,
                      " ".join("{:.2f}".format(v) for v in r["ratios"]), r["ratio"],
                      verdict(r["ratio"], r["target"]), clean, cpu,
                      r["gemm_only_ms"], r["step_over_gemm"], 100 * r["peak_fraction"], r["allocs"],
                      r["headlab_rss"], r["torch_rss"]))
    print("(* the faster PyTorch setting, which the ratios compare with; CPU time: the same ratio on each "
          "step's CPU time, one thread only)")


def main():
    a = parse_args()
    if a.tables_from:
        return tables_from(a.tables_from)
    if not os.access(a.headlab, os.X_OK):
        sys.exit("compare: no headlab executable at {} (build it, or pass --headlab / HEADLAB=)".format(a.headlab))
    env_core = env_openblas_core()
    best = openblas_core.best_core()
    fair = openblas_core.core_vector_bits(env_core) >= openblas_core.cpu_vector_bits()
    load = os.getloadavg()
    print("compare: {} ({} cores); headlab {} vs PyTorch ({}), {} round(s) per pair, precisions {}".format(
        openblas_core.cpu_model(), os.cpu_count(), a.headlab, a.reference, a.rounds, ", ".join(a.precisions)))
    print("  PyTorch's OpenBLAS core: env = {} (OPENBLAS_CORETYPE {}){}".format(
        env_core, os.environ.get("OPENBLAS_CORETYPE", "unset"),
        "" if fair else "; best = {} (OPENBLAS_CORETYPE={}, the CPU's {}-bit vectors)".format(
            best, best, openblas_core.cpu_vector_bits())))
    print("  load average {:.2f} {:.2f} {:.2f}".format(*load), flush=True)
    rows, log = [], []
    for threads in a.threads:
        for preset in a.presets:
            runs = measure_pair(a, preset, threads, fair, log)
            rows += [summarize(preset, threads, p, runs) for p in a.precisions]
    print_tables(rows, a.precisions)
    print("load average now {:.2f} {:.2f} {:.2f} (was {:.2f} {:.2f} {:.2f} at the start)".format(
        *os.getloadavg(), *load))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "runs": log, "env_core": env_core,
                       "best_core": best, "load_start": load, "load_end": os.getloadavg()}, f, indent=1)


def tables_from(path):
    """The tables of an earlier run, from its --json file's runs (summarized again by this script)."""
    with open(path) as f:
        saved = json.load(f)
    pairs, precisions = {}, []
    for e in saved["runs"]:
        pairs.setdefault((e["threads"], e["preset"]), {}).setdefault(e["who"], []).append(
            (e["report"], e["peak_rss_mb_child"]))
        if e["precision"] not in precisions:
            precisions.append(e["precision"])
    rows = [summarize(preset, threads, p, runs) for (threads, preset), runs in pairs.items() for p in precisions]
    print("compare: the tables of {} (load average {:.2f} at the start, {:.2f} at the end)".format(
        path, saved["load_start"][0], saved["load_end"][0]))
    print_tables(rows, precisions)


def print_tables(rows, precisions):
    for precision in precisions:
        print()
        print("{} products (% of peak: {})".format(
            precision, "the bf16 dot-product peak" if precision == "bf16" else "the FMA peak"))
        print_table([r for r in rows if r["precision"] == precision])
    for precision in precisions:
        mine = [r for r in rows if r["precision"] == precision]
        names = sorted({s for r in mine for s in r["torch_ms"]})
        print("PyTorch {} as run: ".format(precision) + "; ".join(
            "{}: OpenBLAS core {}, torch/OpenBLAS threads {}".format(
                s, ", ".join(sorted({str(r["torch_core"][s]) for r in mine if s in r["torch_core"]})),
                " ".join("{}{}={}/{}".format(r["preset"], r["threads"], *r["torch_threads"][s])
                         for r in mine if s in r["torch_threads"]))
            for s in names))
    if "bf16" not in precisions and not cpu_has_bf16():
        print()
        print("bf16 table: not measured (this CPU has no AVX512_BF16; headlab refuses runtime.precision "
              "= \"bf16\" here, \"bf16_or_fp32\" runs fp32)")
    peak = lambda key: med([r[key] for r in rows if r[key] == r[key]])
    # only bf16 runs measure the bf16 peak
    bf16_peak = peak("bf16_peak")
    print("peaks per core (medians of headlab's runs, the loops of `headlab bench --kernels`): FMA {:.0f} "
          "GFLOP/s, bf16 dot products {}".format(
              peak("fma_peak"), "{:.0f} GFLOP/s".format(bf16_peak) if bf16_peak == bf16_peak else "not measured"))


if __name__ == "__main__":
    main()
