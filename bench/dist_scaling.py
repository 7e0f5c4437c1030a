#!/usr/bin/env python3
"""The scaling table of docs/distributed.md: the training step of `headlab bench --preset M|L` on one
process with 1 and 2 threads and under `mpirun -np 2` with one thread per rank, against PyTorch
(bench/torch_reference.py) on one process and with DistributedDataParallel over gloo on 2
processes, the same global batch everywhere. Every setting runs once per round, the rounds
alternate the settings (a shared machine's load then hits them alike), and the table gives each
setting's median step over the rounds' medians, its fastest round and the gradient reduction of
that round.

  /usr/bin/python3 bench/dist_scaling.py --headlab build/headlab --rounds 3
  /usr/bin/python3 bench/dist_scaling.py --presets M --rounds 1 --json    # the raw reports
  /usr/bin/python3 bench/dist_scaling.py --no-torch      # headlab alone (no PyTorch installed)

The 2-rank step runs with the reduction overlapping the backward (as training does), with
`--no-overlap` (the reduction after the backward, as before the overlap) and with
`--shard-optimizer` (ZeRO-1: each rank updates half of Adam's state, then the owners broadcast
their parameters), in the same rounds.

As root, mpirun needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (set here when
running as root).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def settings(headlab, preset, torch_core):
    torch = [sys.executable, os.path.join(HERE, "torch_reference.py"), "--config", preset,
             "--blas-threads", "1", "--openblas-core", torch_core]
    return [
        ("headlab, 1 process x 1 thread", [headlab, "bench", "--preset", preset, "--threads", "1", "--json"]),
        ("headlab, 1 process x 2 threads", [headlab, "bench", "--preset", preset, "--threads", "2", "--json"]),
        ("headlab, `mpirun -np 2`, 1 thread per rank",
         ["mpirun", "-np", "2", headlab, "bench", "--preset", preset, "--threads", "1", "--json"]),
        ("headlab, `mpirun -np 2`, 1 thread per rank, --no-overlap",
         ["mpirun", "-np", "2", headlab, "bench", "--preset", preset, "--threads", "1", "--json",
          "--no-overlap"]),
        ("headlab, `mpirun -np 2`, 1 thread per rank, --shard-optimizer (ZeRO-1)",
         ["mpirun", "-np", "2", headlab, "bench", "--preset", preset, "--threads", "1", "--json",
          "--shard-optimizer"]),
    ] + ([] if torch_core is None else [
        ("PyTorch, 1 process x 1 thread", torch + ["--threads", "1"]),
        ("PyTorch DDP (gloo), 2 processes x 1 thread", torch + ["--threads", "1", "--ddp", "2"]),
    ])


def run(cmd):
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--headlab", default="build/headlab")
    p.add_argument("--presets", nargs="+", default=["M", "L"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--torch-openblas-core", default="best", help="see torch_reference.py --openblas-core")
    p.add_argument("--json", action="store_true", help="print every report instead of the table")
    p.add_argument("--no-torch", action="store_true", help="leave out the PyTorch settings")
    a = p.parse_args()
    if a.no_torch:
        a.torch_openblas_core = None
    reports = {}
    for preset in a.presets:
        for _ in range(a.rounds):
            for name, cmd in settings(a.headlab, preset, a.torch_openblas_core):
                reports.setdefault((preset, name), []).append(run(cmd))
    if a.json:
        for (preset, name), rs in reports.items():
            print(json.dumps({"preset": preset, "setting": name, "reports": rs}))
        return
    print("| preset | setting | step ms (median of rounds) | fastest round | rounds | gradient reduction ms "
          "| speed-up | efficiency |")
    print("|---|---|---|---|---|---|---|---|")
    for preset in a.presets:
        base = {}
        for name, _ in settings(a.headlab, preset, a.torch_openblas_core):
            rs = reports[(preset, name)]
            steps = [r["train_step_ms_median"] for r in rs]
            med, best = statistics.median(steps), min(steps)
            fastest = rs[steps.index(best)]
            framework = name.split(",")[0].split(" ")[0]
            base.setdefault(framework, med)
            speedup = base[framework] / med
            two = not name.endswith("1 process x 1 thread")
            reduce = fastest.get("allreduce_ms_median")
            print(f"| {preset} | {name} | {med:.1f} | {best:.1f} | {', '.join(f'{s:.1f}' for s in steps)} | "
                  f"{'-' if reduce is None else f'{reduce:.2f}'} | {speedup:.2f}x | "
                  f"{f'{100 * speedup / 2:.0f}%' if two else '-'} |")


if __name__ == "__main__":
    main()
