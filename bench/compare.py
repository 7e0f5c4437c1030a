#!/usr/bin/env python3
"""headlab vs PyTorch, side by side: the training step of the same encoder (bench/torch_reference.py
builds it in PyTorch, `headlab bench --preset` in headlab), per preset and thread count.

For every (preset, threads) pair the two programs run alternately, `--rounds` times each, in one
session, so both see the same machine state; each run reports its median ms per step, and the
table gives the ratio torch / headlab of every pair and the median of those ratios. PyTorch runs
in its best setting for the thread count: 1 thread: --threads 1; 2 threads: --threads 2
--blas-threads 1 for S, --threads 1 --blas-threads 2 for M and L (torch.set_num_threads alone does
not limit the OpenBLAS that Debian's torch calls). Peak RSS of each run is read by this script
(wait4's rusage of each child) for both programs alike.

Usage (bench/compare.sh passes its arguments here):
  compare.py [--presets S,M,L] [--threads 1,2] [--rounds 3] [--steps S=100,M=40,L=8] [--json FILE]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Targets of issue 8: minimum speed-up per (preset, threads).
TARGETS = {("S", 1): 2.0, ("M", 1): 1.4, ("L", 1): 1.15, ("S", 2): 3.0, ("M", 2): 2.2, ("L", 2): 1.6}
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
    p.add_argument("--json", help="also write every run's report to this file")
    a = p.parse_args()
    a.presets = [s.strip() for s in a.presets.split(",") if s.strip()]
    a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    steps = dict(DEFAULT_STEPS)
    for item in filter(None, a.steps.split(",")):
        k, v = item.split("=")
        steps[k.strip()] = int(v)
    a.steps = steps
    return a


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


def torch_cmd(a, preset, threads):
    cmd = [a.python, a.reference, "--config", preset, "--steps", str(a.steps[preset]),
           "--warmup", str(WARMUP[preset]), "--infer-steps", str(max(10, a.steps[preset] // 2))]
    if threads == 1:
        cmd += ["--threads", "1"]
    elif preset == "S":
        cmd += ["--threads", str(threads), "--blas-threads", "1"]
    else:
        cmd += ["--threads", "1", "--blas-threads", str(threads)]
    return cmd


def headlab_cmd(a, preset, threads):
    return [a.headlab, "bench", "--preset", preset, "--threads", str(threads), "--steps",
            str(a.steps[preset]), "--warmup", str(WARMUP[preset]), "--json"]


def main():
    a = parse_args()
    if not os.access(a.headlab, os.X_OK):
        sys.exit("compare: no headlab executable at {} (build it, or pass --headlab / HEADLAB=)".format(a.headlab))
    load = os.getloadavg()[0]
    print("compare: headlab {} vs PyTorch ({}), {} round(s) per pair; load average {:.2f} on {} cores"
          .format(a.headlab, a.reference, a.rounds, load, os.cpu_count()), flush=True)
    rows, log = [], []
    for threads in a.threads:
        for preset in a.presets:
            hl, tr, ratios = [], [], []
            for i in range(a.rounds):
                # Alternate which program goes first, so a drift in load favours neither.
                order = ["headlab", "torch"] if i % 2 == 0 else ["torch", "headlab"]
                res = {}
                for who in order:
                    cmd = headlab_cmd(a, preset, threads) if who == "headlab" else torch_cmd(a, preset, threads)
                    rep, rss, wall = run(cmd)
                    res[who] = (rep, rss)
                    log.append({"who": who, "preset": preset, "threads": threads, "round": i,
                                "peak_rss_mb_child": rss, "wall_s": wall, "report": rep})
                h, t = res["headlab"][0], res["torch"][0]
                hl.append(res["headlab"])
                tr.append(res["torch"])
                ratio = t["train_step_ms_median"] / h["train_step_ms_median"]
                ratios.append(ratio)
                print("  {} {} thread(s) round {}: headlab {:8.3f} ms  torch {:8.3f} ms  ratio {:5.2f}x"
                      .format(preset, threads, i + 1, h["train_step_ms_median"], t["train_step_ms_median"], ratio),
                      flush=True)
            med = lambda xs: statistics.median(xs) if xs else float("nan")
            rows.append({
                "preset": preset, "threads": threads,
                "headlab_ms": med([r["train_step_ms_median"] for r, _ in hl]),
                "torch_ms": med([r["train_step_ms_median"] for r, _ in tr]),
                "ratio": med(ratios), "ratios": ratios, "target": TARGETS.get((preset, threads)),
                # Medians over the steps during which no other process used the CPU, where both
                # programs had some (both measure it the same way; None when either had none).
                "clean_ratio": med([t["train_step_ms_median_clean"] / h["train_step_ms_median_clean"]
                                    for (h, _), (t, _) in zip(hl, tr)
                                    if h.get("train_step_ms_median_clean") and t.get("train_step_ms_median_clean")]),
                "gemm_only_ms": med([r["gemm_only_ms"] for r, _ in hl]),
                "step_over_gemm": med([r["step_over_gemm_only"] for r, _ in hl]),
                "gflops": med([r["achieved_gflops"] for r, _ in hl]),
                "allocs": med([r["allocations_per_step"] for r, _ in hl]),
                "headlab_infer_ms": med([r["infer_fwd_ms_median"] for r, _ in hl]),
                "torch_infer_ms": med([r["infer_fwd_ms_median"] for r, _ in tr]),
                "headlab_rss": max(r for _, r in hl),
                "torch_rss": max(r for _, r in tr),
            })
    print()
    hdr = ("| preset | threads | headlab ms | PyTorch ms | ratios | median ratio | target | clean-step ratio | "
           "GEMM-only ms | step / GEMM-only | GFLOP/s | allocs/step | infer ms (headlab / torch) | "
           "peak RSS MB (headlab / torch) |")
    print(hdr)
    print("|" + "|".join(["---"] * (hdr.count("|") - 1)) + "|")
    for r in rows:
        target = r["target"]
        verdict = "" if target is None else (" (met)" if r["ratio"] >= target else " (missed)")
        clean = "-" if r["clean_ratio"] != r["clean_ratio"] else "{:.2f}x".format(r["clean_ratio"])
        print("| {} | {} | {:.2f} | {:.2f} | {} | **{:.2f}x** | {}{} | {} | {:.2f} | {:.2f} | {:.0f} | {:.0f} | {:.2f} / {:.2f} | {} / {} |".format(
            r["preset"], r["threads"], r["headlab_ms"], r["torch_ms"],
            " ".join("{:.2f}".format(x) for x in r["ratios"]), r["ratio"],
            "-" if target is None else "{:.2f}x".format(target), verdict, clean, r["gemm_only_ms"],
            r["step_over_gemm"], r["gflops"], r["allocs"], r["headlab_infer_ms"], r["torch_infer_ms"],
            "{:.0f}".format(r["headlab_rss"]), "{:.0f}".format(r["torch_rss"])))
    print("\nload average now {:.2f} (was {:.2f} at the start)".format(os.getloadavg()[0], load))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "runs": log}, f, indent=1)


if __name__ == "__main__":
    main()
