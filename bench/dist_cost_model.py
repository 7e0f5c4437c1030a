#!/usr/bin/env python3
"""The cost model of docs/distributed.md: a data-parallel step's gradient reduction time and the
scaling efficiency it leaves, for N ranks, a gradient of B bytes and a link of latency alpha and
bandwidth beta (measure yours with `mpirun -np 2 headlab bench --reduce`).

headlab's reduction (train/distributed/reduce.h) is a chain in rank order, cut into c = clamp(B / N,
16 KiB, 16 MiB) byte chunks (C = B / c of them), then a broadcast of the result:

  T_chain = (C + N - 2) * (alpha + c / beta + A * c / gamma)     pipelined: C chunks, N - 1 hops
  T_bcast = B / beta + ceil(log2 N) * alpha                       a pipelined tree
  T_local = 3 * B / gamma                                          scale in, divide, copy out
  T_small = 2 * ceil(log2 N) * alpha                               step stats, agreed stop
  T_reduce = T_chain + T_bcast + T_local + T_small

gamma is one core's streaming bandwidth (the adds), A the micro-batches per rank. A ring allreduce
(what MPI or NCCL would do, in no fixed order) costs 2 (N - 1) alpha + 2 (N - 1) / N * B / beta.
Communication does not overlap the backward pass, so with T_step the compute of one rank's step:

  weak scaling (each rank keeps its micro-batch):   E = T_step / (T_step + T_reduce)
  strong scaling (a fixed global batch):            E = (T_step1 / N) / (T_step1 / N + T_reduce)

  /usr/bin/python3 bench/dist_cost_model.py                # the tables of docs/distributed.md
  /usr/bin/python3 bench/dist_cost_model.py --bytes 12767360 --step-ms 196 --alpha-us 25 --beta-gbs 1.1
"""
import argparse
import math

KIB, MIB = 1024, 1024 * 1024


def reduce_ms(n, nbytes, alpha_us, beta_gbs, gamma_gbs=10.0, accum=1):
    if n == 1:
        return 0.0
    a, b, g = alpha_us * 1e-3, beta_gbs * 1e6, gamma_gbs * 1e6  # ms, bytes per ms
    c = min(max(nbytes / n, 16 * KIB), 16 * MIB)
    chunks = math.ceil(nbytes / c)
    chain = (chunks + n - 2) * (a + c / b + accum * c / g)
    depth = math.ceil(math.log2(n))
    return chain + (nbytes / b + depth * a) + 3 * nbytes / g + 2 * depth * a


def ring_ms(n, nbytes, alpha_us, beta_gbs):
    return 2 * (n - 1) * alpha_us * 1e-3 + 2 * (n - 1) / n * nbytes / (beta_gbs * 1e6)


NETWORKS = [("10 GbE", 25.0, 1.1), ("100 Gb/s InfiniBand", 2.0, 11.0)]
MODELS = [("L preset", 3_191_840 * 4, 196.0), ("100 x L", 319_184_000 * 4, 19_600.0)]


def tables(ranks):
    print("| model | network | ranks | reduction ms | ring allreduce ms | weak-scaling efficiency |")
    print("|---|---|---|---|---|---|")
    for model, nbytes, step in MODELS:
        for net, alpha, beta in NETWORKS:
            for n in ranks:
                t = reduce_ms(n, nbytes, alpha, beta)
                print(f"| {model} ({nbytes / 1e6:.4g} MB, step {step:g} ms) | {net} (alpha {alpha:g} us, "
                      f"beta {beta:g} GB/s) | {n} | {t:.1f} | {ring_ms(n, nbytes, alpha, beta):.1f} | "
                      f"{100 * step / (step + t):.0f}% |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bytes", type=float, help="gradient bytes (4 x parameters)")
    p.add_argument("--step-ms", type=float, help="one rank's compute per step")
    p.add_argument("--alpha-us", type=float, default=25.0)
    p.add_argument("--beta-gbs", type=float, default=1.1)
    p.add_argument("--gamma-gbs", type=float, default=10.0)
    p.add_argument("--accum", type=int, default=1, help="micro-batches per rank")
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 8, 64, 512])
    a = p.parse_args()
    if a.bytes is None:
        return tables(a.ranks)
    for n in a.ranks:
        t = reduce_ms(n, a.bytes, a.alpha_us, a.beta_gbs, a.gamma_gbs, a.accum)
        eff = f", efficiency {100 * a.step_ms / (a.step_ms + t):.0f}%" if a.step_ms else ""
        print(f"{n} ranks: reduction {t:.2f} ms (ring {ring_ms(n, a.bytes, a.alpha_us, a.beta_gbs):.2f} ms){eff}")


if __name__ == "__main__":
    main()
