#!/usr/bin/env python3
"""The cost model of docs/distributed.md: a data-parallel step's gradient reduction time and the
scaling efficiency it leaves, for N ranks, a gradient of B bytes, a link of latency alpha and
bandwidth beta, and one core's streaming bandwidth gamma (the adds and copies).

headlab's reduction (train/distributed/reduce.h, GradientReducer::finish) is a chain in rank order,
cut into c = clamp(B / N, 16 KiB, 16 MiB) byte chunks, each rank r > 0 receiving a chunk from
r - 1, adding its A micro-batches into it and sending it on to r + 1; then the last rank divides,
broadcasts the result, and every rank copies it out. Every send waits until its message is taken
(headlab's Comm: MPI_Isend then MPI_Test until complete), so a middle rank's receive, adds and
send of one chunk come one after the other: the chain is simulated chunk by chunk (chain_ms), not
guessed in closed form. With t(c) = alpha + c / beta and a(c) = A c / gamma_add:

  T_chain  = the simulated pipeline (two ranks: C (t(c) + a(c)), C = B / c chunks)
  T_bcast  = Open MPI 4.1's MPI_Ibcast, the collective headlab's broadcast calls (coll/libnbc;
             with its default coll_libnbc_ibcast_skip_dt_decision = true it chooses by rank count
             alone): N <= 4 linear, the root sends all of B to each rank, (N - 1) (alpha + B / beta)
             through the root's link; N > 4 a binomial tree of whole messages,
             ceil(log2 N) (alpha + B / beta)
  T_finish = T_chain + B / gamma_copy (the division) + T_bcast + B / gamma_copy (the copy out)

T_finish is what the step's own "gradient reduction" figure times (last_seconds). The step also
scales its gradient in (B / gamma_copy, in add()) and agrees on its statistics and its stop (2
ceil(log2 N) alpha), so a rank's step costs T_over = T_finish + B / gamma_copy + 2 ceil(log2 N)
alpha more than one process's. Communication does not overlap the backward pass:

  weak scaling (each rank keeps its micro-batch):   E = T_step / (T_step + T_over)

A ring allreduce (what MPI or NCCL would do, in no fixed order) costs 2 (N - 1) alpha + 2 (N - 1)
/ N B / beta; a pipelined broadcast (a chain of chunks back down the ranks) about B / beta + (N -
2) (alpha + c / beta), against the binomial tree's ceil(log2 N) B / beta.

  /usr/bin/python3 bench/dist_cost_model.py                # the tables of docs/distributed.md
  /usr/bin/python3 bench/dist_cost_model.py --bytes 12767360 --step-ms 196 --alpha-us 25 --beta-gbs 1.1
  mpirun -np 3 --oversubscribe build/headlab bench --reduce --json | tail -1 > np3.json
  /usr/bin/python3 bench/dist_cost_model.py --check np2.json np3.json np4.json   # predicted vs measured
"""
import argparse
import json
import math
import statistics

KIB, MIB = 1024, 1024 * 1024
MIN_CHUNK, MAX_CHUNK = 16 * KIB, 16 * MIB  # GradientReducer::kMinChunk, kMaxChunk (x 4 bytes)


def chunks(n, nbytes):
    """The chain's chunk lengths in bytes, as GradientReducer cuts B over n ranks."""
    floats = nbytes // 4
    c = 4 * min(max(-(-floats // n), MIN_CHUNK // 4), MAX_CHUNK // 4)
    return [min(c, nbytes - off) for off in range(0, nbytes, c)]


def chain_ms(n, nbytes, alpha_us, beta_gbs, gamma_add_gbs, accum=1):
    """The chain through n ranks, simulated: end[r][k] is when chunk k has reached rank r."""
    if n == 1:
        return 0.0
    a, b, g = alpha_us * 1e-3, beta_gbs * 1e6, gamma_add_gbs * 1e6  # ms, bytes per ms
    lens = chunks(n, nbytes)
    prev = [0.0] * n  # end[r][k - 1]
    for k, c in enumerate(lens):
        t, add = a + c / b, accum * c / g
        add_prev = accum * lens[k - 1] / g if k else 0.0
        cur = [0.0] * n
        for r in range(1, n):
            # The sender is free once it sent chunk k - 1 (rank 0) or received and added chunk k.
            sender = prev[1] if r == 1 else cur[r - 1] + add
            # The receiver, once it passed chunk k - 1 on (the last rank: added it).
            if k == 0:
                receiver = 0.0
            elif r == n - 1:
                receiver = prev[r] + add_prev
            else:
                receiver = prev[r + 1]
            cur[r] = max(sender, receiver) + t
        prev = cur
    return prev[n - 1] + accum * lens[-1] / g


def bcast_ms(n, nbytes, alpha_us, beta_gbs):
    """Open MPI 4.1's MPI_Ibcast of B bytes (coll/libnbc): linear to 4 ranks, then binomial."""
    if n == 1:
        return 0.0
    one = alpha_us * 1e-3 + nbytes / (beta_gbs * 1e6)
    return (n - 1) * one if n <= 4 else math.ceil(math.log2(n)) * one


def pipelined_bcast_ms(n, nbytes, alpha_us, beta_gbs):
    """A broadcast of the chain's chunks back down the ranks (what a known broadcast would cost)."""
    if n == 1:
        return 0.0
    lens = chunks(n, nbytes)
    t = alpha_us * 1e-3 + lens[0] / (beta_gbs * 1e6)
    return nbytes / (beta_gbs * 1e6) + len(lens) * alpha_us * 1e-3 + (n - 2) * t


def finish_ms(n, nbytes, alpha_us, beta_gbs, gamma_add_gbs=10.0, gamma_copy_gbs=10.0, accum=1,
              bcast=bcast_ms, beta_bcast_gbs=None):
    """GradientReducer::finish on rank 0: what the step reports as its gradient reduction.
    beta_bcast_gbs: the broadcast's bandwidth where it differs from the chain's (default beta)."""
    if n == 1:
        return 0.0
    local = 2 * nbytes / (gamma_copy_gbs * 1e6)
    return (chain_ms(n, nbytes, alpha_us, beta_gbs, gamma_add_gbs, accum) + local
            + bcast(n, nbytes, alpha_us, beta_bcast_gbs or beta_gbs))


def overhead_ms(n, nbytes, alpha_us, beta_gbs, gamma_add_gbs=10.0, gamma_copy_gbs=10.0, accum=1,
                bcast=bcast_ms):
    """What a rank's step costs over one process's: finish, the scaling in, the small exchanges."""
    if n == 1:
        return 0.0
    return (finish_ms(n, nbytes, alpha_us, beta_gbs, gamma_add_gbs, gamma_copy_gbs, accum, bcast)
            + nbytes / (gamma_copy_gbs * 1e6) + 2 * math.ceil(math.log2(n)) * alpha_us * 1e-3)


def ring_ms(n, nbytes, alpha_us, beta_gbs):
    return 2 * (n - 1) * alpha_us * 1e-3 + 2 * (n - 1) / n * nbytes / (beta_gbs * 1e6)


NETWORKS = [("10 GbE", 25.0, 1.1), ("100 Gb/s InfiniBand", 2.0, 11.0)]
MODELS = [("L preset", 3_191_840 * 4, 196.0), ("100 x L", 319_184_000 * 4, 19_600.0)]


def tables(ranks):
    print("| model | network | ranks | reduction ms | of it broadcast ms | with a pipelined broadcast ms"
          " | ring allreduce ms | weak-scaling efficiency (pipelined broadcast) |")
    print("|---|---|---|---|---|---|---|---|")
    for model, nbytes, step in MODELS:
        for net, alpha, beta in NETWORKS:
            for n in ranks:
                t = finish_ms(n, nbytes, alpha, beta)
                tp = finish_ms(n, nbytes, alpha, beta, bcast=pipelined_bcast_ms)
                over = overhead_ms(n, nbytes, alpha, beta)
                overp = overhead_ms(n, nbytes, alpha, beta, bcast=pipelined_bcast_ms)
                print(f"| {model} ({nbytes / 1e6:.4g} MB, step {step:g} ms) | {net} (alpha {alpha:g} us, "
                      f"beta {beta:g} GB/s) | {n} | {t:.1f} | {bcast_ms(n, nbytes, alpha, beta):.1f} | "
                      f"{tp:.1f} | {ring_ms(n, nbytes, alpha, beta):.1f} | "
                      f"{100 * step / (step + over):.0f}% ({100 * step / (step + overp):.0f}%) |")


def load_report(path):
    """The JSON line of `headlab bench --reduce --json` (the last line that parses)."""
    with open(path) as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip().startswith("{")]
    if not lines:
        raise SystemExit(f"dist_cost_model.py: {path}: no JSON report (expected the last line of "
                         "`headlab bench --reduce --json`)")
    return json.loads(lines[-1])


def predict(report):
    """The model's T_finish and T_bcast from a report's own calibration (measured in the same run).
    The chain's sends are timed by their senders (a send ends when the next rank has taken it),
    so its hops take the bandwidth of rank 0 sending to rank 1 as rank 0 times it (beta_up); rank
    0's part of the broadcast is a receive, timed by the receiver (beta_down). On a network the
    two are one figure; on a shared machine a sender that has yielded its core waits for it."""
    c, p, n = report["calibration"], report["preset"], report["ranks"]
    up, down = c["beta_up_gb_per_s"], c["beta_down_gb_per_s"]
    return (finish_ms(n, p["bytes"], c["alpha_us"], up, c["gamma_add_gb_per_s"],
                      c["gamma_copy_gb_per_s"], beta_bcast_gbs=down),
            bcast_ms(n, p["bytes"], c["alpha_us"], down))


def check(paths):
    by_ranks = {}
    for path in paths:
        r = load_report(path)
        by_ranks.setdefault(r["ranks"], []).append(r)
    print("| ranks | runs | predicted ms | alone ms | in the step ms | in the step, the last rank's "
          "lateness removed ms | predicted / in the step (/ lateness removed) | broadcast predicted ms | broadcast measured ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = worst_transfer = 0.0
    for n in sorted(by_ranks):
        runs = by_ranks[n]
        med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
        pred = med(lambda r: predict(r)[0])
        step = med(lambda r: r["preset"]["in_step_ms"])
        transfer = med(lambda r: r["preset"]["in_step_transfer_ms"])
        worst = max(worst, abs(pred / step - 1))
        worst_transfer = max(worst_transfer, abs(pred / transfer - 1))
        print(f"| {n} | {len(runs)} | {pred:.2f} | {med(lambda r: r['preset']['isolated_ms']):.2f} | "
              f"{step:.2f} | {transfer:.2f} | {pred / step:.2f} ({pred / transfer:.2f}) | "
              f"{med(lambda r: predict(r)[1]):.2f} | "
              f"{med(lambda r: r['calibration']['bcast_ms']):.2f} |")
    print(f"\nlargest error against the in-step median: {100 * worst:.0f}% (against it with the last "
          f"rank's lateness removed: {100 * worst_transfer:.0f}%)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", nargs="+", metavar="FILE",
                   help="reports of `headlab bench --reduce --json`: predicted against measured")
    p.add_argument("--bytes", type=int, help="gradient bytes (4 x parameters)")
    p.add_argument("--step-ms", type=float, help="one rank's compute per step")
    p.add_argument("--alpha-us", type=float, default=25.0)
    p.add_argument("--beta-gbs", type=float, default=1.1)
    p.add_argument("--gamma-gbs", type=float, default=10.0, help="the adds and the copies")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per rank")
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 8, 64, 512])
    a = p.parse_args()
    if a.check:
        return check(a.check)
    if a.bytes is None:
        return tables(a.ranks)
    for n in a.ranks:
        args = (n, a.bytes, a.alpha_us, a.beta_gbs, a.gamma_gbs, a.gamma_gbs, a.accum)
        t, over = finish_ms(*args), overhead_ms(*args)
        eff = f", efficiency {100 * a.step_ms / (a.step_ms + over):.0f}%" if a.step_ms else ""
        print(f"{n} ranks: reduction {t:.2f} ms (broadcast {bcast_ms(n, a.bytes, a.alpha_us, a.beta_gbs):.2f}"
              f" ms; ring {ring_ms(n, a.bytes, a.alpha_us, a.beta_gbs):.2f} ms){eff}")


if __name__ == "__main__":
    main()
