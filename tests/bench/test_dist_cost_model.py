#!/usr/bin/env python3
"""The formulas of bench/dist_cost_model.py (docs/distributed.md, "A cost model"): the broadcast
term follows Open MPI 4.1's MPI_Ibcast choice, the simulated chain reduces to its closed form where
there is one, and the chunks are GradientReducer's. No timing: the model's arithmetic only."""
import math
import os
import re
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import dist_cost_model as m  # noqa: E402

B = 12_767_360  # the L preset's gradient bytes
ALPHA, BETA = 25.0, 1.1  # us, GB/s
ONE = ALPHA * 1e-3 + B / (BETA * 1e6)  # ms: one whole message


class Broadcast(unittest.TestCase):
    def test_linear_to_four_ranks(self):
        for n in (2, 3, 4):
            self.assertAlmostEqual(m.bcast_ms(n, B, ALPHA, BETA), (n - 1) * ONE)

    def test_binomial_beyond_four_grows_with_log2_n_whole_messages(self):
        for n in (5, 8, 9, 64, 512):
            self.assertAlmostEqual(m.bcast_ms(n, B, ALPHA, BETA), math.ceil(math.log2(n)) * ONE)
        # log2(N) x B / beta, not B / beta + log2(N) x alpha: 512 ranks cost three times 8's.
        self.assertAlmostEqual(m.bcast_ms(512, B, ALPHA, BETA) / m.bcast_ms(8, B, ALPHA, BETA), 3.0)
        self.assertGreater(m.bcast_ms(512, B, ALPHA, BETA), 8 * B / (BETA * 1e6))

    def test_one_rank_costs_nothing(self):
        self.assertEqual(m.bcast_ms(1, B, ALPHA, BETA), 0.0)
        self.assertEqual(m.finish_ms(1, B, ALPHA, BETA), 0.0)


class Chain(unittest.TestCase):
    def test_two_ranks_receive_and_add_each_chunk_in_turn(self):
        lens = m.chunks(2, B)
        want = sum(ALPHA * 1e-3 + c / (BETA * 1e6) + c / 10e6 for c in lens)
        self.assertAlmostEqual(m.chain_ms(2, B, ALPHA, BETA, 10.0), want)

    def test_a_middle_rank_receives_adds_and_sends_one_after_the_other(self):
        # Many chunks over 3 ranks: the period is rank 1's receive, add and send of one chunk.
        nbytes = 64 * m.MAX_CHUNK
        t = ALPHA * 1e-3 + m.MAX_CHUNK / (BETA * 1e6)
        a = m.MAX_CHUNK / 10e6
        got = m.chain_ms(3, nbytes, ALPHA, BETA, 10.0)
        self.assertGreater(got, 64 * (2 * t + a))
        self.assertLess(got, 66 * (2 * t + a))

    def test_chunks_are_gradient_reducers(self):
        text = open(os.path.join(ROOT, "train", "distributed", "reduce.h")).read()
        shift = {k: int(v) for k, v in re.findall(r"(kM(?:in|ax)Chunk) = int64_t\{1\} << (\d+)", text)}
        self.assertEqual(4 << shift["kMinChunk"], m.MIN_CHUNK)
        self.assertEqual(4 << shift["kMaxChunk"], m.MAX_CHUNK)
        self.assertEqual(m.chunks(2, B), [B // 2, B // 2])
        self.assertEqual(sum(m.chunks(3, B)), B)
        self.assertEqual(set(m.chunks(1024, B)[:-1]), {m.MIN_CHUNK})  # B / 1024 < 16 KiB

    def test_finish_is_chain_local_passes_and_broadcast(self):
        for n in (2, 3, 8):
            want = (m.chain_ms(n, B, ALPHA, BETA, 7.0) + 2 * B / 5e6 + m.bcast_ms(n, B, ALPHA, BETA))
            self.assertAlmostEqual(m.finish_ms(n, B, ALPHA, BETA, 7.0, 5.0), want)


if __name__ == "__main__":
    unittest.main()
