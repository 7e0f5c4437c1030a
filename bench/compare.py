#!/usr/bin/env python3
"""headlab vs PyTorch at its best, side by side: the training step of the same encoder
(bench/torch_reference.py builds it in PyTorch, `headlab bench --preset` in headlab), per preset and
thread count.

PyTorch's matrix products go through the system OpenBLAS, whose kernels depend on the core type it
detects (or that OPENBLAS_CORETYPE in the environment forces). When that core does not use the CPU's
widest vector unit (bench/openblas_core.py), PyTorch runs twice per round: as the environment gives
it ("env") and with the core type that does ("best", e.g. OPENBLAS_CORETYPE=Cooperlake on AVX-512
with BF16); headlab is compared with the faster of the two (lower median). Otherwise only "env" runs.

For every (preset, threads) pair the programs run alternately, `--rounds` times each, in one session
(the order rotates each round, so a drift in load favours none); each run reports its median ms
per step, the ratio PyTorch / headlab is taken per round, and the table gives the median of those
ratios. PyTorch's thread setting per thread count: 1 thread: --threads 1; 2 threads: --threads 2
--blas-threads 1 for S, --threads 1 --blas-threads 2 for M and L (its fastest on a 2-core machine;
torch.set_num_threads alone does not limit the OpenBLAS that Debian's torch calls). Peak RSS of each
run is read by this script (wait4's rusage of each child) for both programs alike.

Usage (bench/compare.sh passes its arguments here):
  compare.py [--presets S,M,L] [--threads 1,2] [--rounds 3] [--steps S=100,M=40,L=8] [--json FILE]
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
    a = p.parse_args()
    a.presets = [s.strip() for s in a.presets.split(",") if s.strip()]
    a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    a.precisions = [s.strip() for s in a.precisions.split(",") if s.strip()] or \
        (["fp32", "bf16"] if cpu_has_bf16() else ["fp32"])
    a.precision = a.precisions[0]
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


def torch_cmd(a, preset, threads, core):
    cmd = [a.python, a.reference, "--config", preset, "--steps", str(a.steps[preset]),
           "--warmup", str(WARMUP[preset]), "--infer-steps", str(max(10, a.steps[preset] // 2)),
           "--openblas-core", core, "--precision", a.precision]
    if threads == 1:
        cmd += ["--threads", "1"]
    elif preset == "S":
        cmd += ["--threads", str(threads), "--blas-threads", "1"]
    else:
        cmd += ["--threads", "1", "--blas-threads", str(threads)]
    return cmd


def headlab_cmd(a, preset, threads, exe=None):
    return [exe or a.headlab, "bench", "--preset", preset, "--threads", str(threads), "--steps",
            str(a.steps[preset]), "--warmup", str(WARMUP[preset]), "--precision", a.precision, "--json"]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def measure_pair(a, preset, threads, torch_settings, log):
    """All rounds of one (preset, threads): {who: [(report, rss)]} and the per-round ratios."""
    programs = ["headlab"] + (["baseline"] if a.baseline else []) + ["torch-" + s for s in torch_settings]
    runs = {who: [] for who in programs}
    for i in range(a.rounds):
        order = programs[i % len(programs):] + programs[:i % len(programs)]
        for who in order:
            if who == "headlab":
                cmd = headlab_cmd(a, preset, threads)
            elif who == "baseline":
                cmd = headlab_cmd(a, preset, threads, a.baseline)
            else:
                cmd = torch_cmd(a, preset, threads, who[len("torch-"):])
            rep, rss, wall = run(cmd)
            runs[who].append((rep, rss))
            log.append({"who": who, "preset": preset, "threads": threads, "round": i, "precision": a.precision,
                        "load": os.getloadavg()[0], "peak_rss_mb_child": rss, "wall_s": wall, "report": rep})
        print("  {} {} thread(s) round {}: headlab {:8.3f} ms  {}  (load {:.2f})".format(
            preset, threads, i + 1, runs["headlab"][-1][0]["train_step_ms_median"],
            "  ".join("{} {:8.3f} ms".format(w, runs[w][-1][0]["train_step_ms_median"]) for w in programs[1:]),
            os.getloadavg()[0]), flush=True)
    return runs


def summarize(preset, threads, runs):
    ms = lambda who: med([r["train_step_ms_median"] for r, _ in runs[who]])
    torch = [w for w in runs if w.startswith("torch-")]
    best = min(torch, key=ms)  # the faster PyTorch setting
    hl = [r for r, _ in runs["headlab"]]
    ratios = [t["train_step_ms_median"] / h["train_step_ms_median"] for (t, _), h in zip(runs[best], hl)]
    clean = [t["train_step_ms_median_clean"] / h["train_step_ms_median_clean"]
             for (t, _), h in zip(runs[best], hl)
             if h.get("train_step_ms_median_clean") and t.get("train_step_ms_median_clean")]
    base = [b["train_step_ms_median"] / h["train_step_ms_median"] for (b, _), h in zip(runs["baseline"], hl)] \
        if "baseline" in runs else []
    return {
        "preset": preset, "threads": threads,
        "headlab_ms": ms("headlab"),
        "baseline_ms": ms("baseline") if base else None,
        "speedup_over_baseline": med(base) if base else None,
        "torch_ms": {w[len("torch-"):]: ms(w) for w in torch},
        "torch_core": {w[len("torch-"):]: runs[w][0][0].get("openblas_corename") for w in torch},
        "compared_with": best[len("torch-"):],
        "ratio": med(ratios), "ratios": ratios, "target": TARGETS.get((preset, threads)),
        "clean_ratio": med(clean),
        "gemm_only_ms": med([r["gemm_only_ms"] for r in hl]),
        "step_over_gemm": med([r["step_over_gemm_only"] for r in hl]),
        "gflops": med([r["achieved_gflops"] for r in hl]),
        # bf16 runs against the bf16 dot-product peak, fp32 runs against the FMA peak
        "peak_fraction": med([r.get("fraction_of_bf16_peak", r["fraction_of_fma_peak"]) for r in hl]),
        "precision": hl[0].get("precision", "fp32"),
        "allocs": med([r["allocations_per_step"] for r in hl]),
        "headlab_rss": max(r for _, r in runs["headlab"]),
        "torch_rss": max(r for w in torch for _, r in runs[w]),
    }


def print_table(rows, settings):
    with_base = rows and rows[0]["baseline_ms"] is not None
    hdr = ("| preset | threads | headlab ms | " + ("baseline ms | speed-up | " if with_base else "") +
           " | ".join("PyTorch ms ({})".format(s) for s in settings) +
           " | ratios vs faster | median ratio | target | clean-step ratio | GEMM-only ms | step / GEMM-only"
           " | % of peak | allocs/step | peak RSS MB (headlab / torch) |")
    print(hdr)
    print("|" + "|".join(["---"] * (hdr.count("|") - 1)) + "|")
    for r in rows:
        target = r["target"]
        verdict = "" if target is None else (" (met)" if r["ratio"] >= target else " (missed)")
        clean = "-" if r["clean_ratio"] != r["clean_ratio"] else "{:.2f}x".format(r["clean_ratio"])
        torch = " | ".join("{:.2f}{}".format(r["torch_ms"][s], "*" if s == r["compared_with"] else "")
                           for s in settings)
        base = "{:.2f} | {:.2f}x | ".format(r["baseline_ms"], r["speedup_over_baseline"]) if with_base else ""
        print("| {} | {} | {:.2f} | {}{} | {} | **{:.2f}x** | {}{} | {} | {:.2f} | {:.2f} | {:.0f}% | {:.0f} | {:.0f} / {:.0f} |"
              .format(r["preset"], r["threads"], r["headlab_ms"], base, torch,
                      " ".join("{:.2f}".format(x) for x in r["ratios"]), r["ratio"],
                      "-" if target is None else "{:.2f}x".format(target), verdict, clean,
                      r["gemm_only_ms"], r["step_over_gemm"], 100 * r["peak_fraction"], r["allocs"],
                      r["headlab_rss"], r["torch_rss"]))
    print("(* the faster PyTorch setting, which the ratios compare with)")


def main():
    a = parse_args()
    if not os.access(a.headlab, os.X_OK):
        sys.exit("compare: no headlab executable at {} (build it, or pass --headlab / HEADLAB=)".format(a.headlab))
    env_core = env_openblas_core()
    best = openblas_core.best_core()
    fair = openblas_core.core_vector_bits(env_core) >= openblas_core.cpu_vector_bits()
    settings = ["env"] if fair else ["env", "best"]
    load = os.getloadavg()
    print("compare: {} ({} cores); headlab {} vs PyTorch ({}), {} round(s) per pair".format(
        openblas_core.cpu_model(), os.cpu_count(), a.headlab, a.reference, a.rounds))
    print("  PyTorch's OpenBLAS core: env = {} (OPENBLAS_CORETYPE {}){}".format(
        env_core, os.environ.get("OPENBLAS_CORETYPE", "unset"),
        "" if fair else "; best = {} (OPENBLAS_CORETYPE={}, the CPU's {}-bit vectors)".format(
            best, best, openblas_core.cpu_vector_bits())))
    print("  load average {:.2f} {:.2f} {:.2f}".format(*load), flush=True)
    rows, log = [], []
    for precision in a.precisions:
        a.precision = precision
        print("precision {}".format(precision), flush=True)
        for threads in a.threads:
            for preset in a.presets:
                runs = measure_pair(a, preset, threads, settings, log)
                rows.append(summarize(preset, threads, runs))
    for precision in a.precisions:
        print()
        print("{} products (% of peak: {})".format(
            precision, "the bf16 dot-product peak" if precision == "bf16" else "the FMA peak"))
        print_table([r for r in rows if r["precision"] == precision], settings)
    if "fp32" in a.precisions and "bf16" in a.precisions:
        print()
        for r in rows:
            if r["precision"] != "bf16":
                continue
            f = [x for x in rows if x["precision"] == "fp32" and x["preset"] == r["preset"]
                 and x["threads"] == r["threads"]][0]
            print("headlab bf16 vs fp32, {} {} thread(s): {:.2f} ms vs {:.2f} ms = {:.2f}x (medians of separate "
                  "rotations)".format(r["preset"], r["threads"], r["headlab_ms"], f["headlab_ms"],
                                      f["headlab_ms"] / r["headlab_ms"]))
    cores = {s: sorted({c for r in rows for c in [r["torch_core"][s]]}) for s in settings}
    print("PyTorch's OpenBLAS cores as run: " + "; ".join("{}: {}".format(s, ", ".join(map(str, c)))
                                                        for s, c in cores.items()))
    print("load average now {:.2f} {:.2f} {:.2f} (was {:.2f} {:.2f} {:.2f} at the start)".format(
        *os.getloadavg(), *load))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "runs": log, "settings": settings, "env_core": env_core,
                       "best_core": best, "load_start": load, "load_end": os.getloadavg()}, f, indent=1)


if __name__ == "__main__":
    main()
