#!/usr/bin/env python3
"""scripts/flagship_tables.py on fabricated sweep documents (sweep.json and heads.json written
here, no training): the composition table, the pruning table per importance measure, the race
table (which relation loses), the table of settings and the early-dropout tables print the rows
computed by hand below.
Only the fields the script reads are written."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "flagship_tables.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import flagship_tables as ft  # noqa: E402
RELATIONS = ["PREV", "HEAD", "SEM"]


def write(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)


def sweep(out, name, over, runs):
    """runs: [(values, seed, eval_accuracy, heads.json)] or with a fifth element, more fields of
    the run's sweep.json entry; one run directory each."""
    rows = []
    for i, (values, seed, acc, doc, *more) in enumerate(runs):
        rows.append({"dir": f"run-{i}", "ok": True, "values": values, "seed": seed,
                     "eval_accuracy": acc, **(more[0] if more else {})})
        write(os.path.join(out, name, f"run-{i}", "heads.json"), doc)
    write(os.path.join(out, name, "sweep.json"), {"over": over, "runs": rows})


def pruned_doc(heads, special, order, accuracy):
    """One layer of `heads` heads; special: {head: relation} with mass 0.9 on it (claimed),
    every other mass 0.1; heads pruned in `order`, the accuracy after each in `accuracy`
    (accuracy[0]: nothing pruned)."""
    mass = [{r: 0.1 for r in RELATIONS} for _ in range(heads)]
    for h, rel in special.items():
        mass[h][rel] = 0.9
    curve = [{"pruned": None, "accuracy": accuracy[0]}]
    curve += [{"pruned": [0, h], "accuracy": a} for h, a in zip(order, accuracy[1:])]
    return {"relations": RELATIONS,
            "specialization": {"assignment": {rel: [0, h] for h, rel in special.items()}},
            "layers": [{"heads": [{"mass": m} for m in mass]}],
            "pruning": curve}


# Specialists on heads 0-2 (PREV, HEAD, SEM), head 3 a backup.
SPECIAL4 = {0: "PREV", 1: "HEAD", 2: "SEM"}
# Last to go: the backup first; only the specialists left: 0.99; one head left: 0.30.
LAST = pruned_doc(4, SPECIAL4, [3, 2, 1], [1.0, 0.99, 0.70, 0.30])
# Not last: a specialist (head 0) goes first; one head left: 0.20.
NOT_LAST = pruned_doc(4, SPECIAL4, [0, 3, 1], [1.0, 0.95, 0.60, 0.20])
# h = 8, specialists on 0-2: the five others go first (0.97 with only the specialists left).
LAST8 = pruned_doc(8, SPECIAL4, [7, 6, 5, 4, 3, 2, 1],
                   [1.0, 1.0, 1.0, 0.99, 0.98, 0.97, 0.60, 0.10])


def composition_doc(before_head_accuracy, paths):
    """Two layers of four heads; paths: one entry per layer-1 head, (relation, lower head,
    path mass, chance, claimed). Layer-1 head h has HEAD mass 0.5 + 0.1 h, layer-0 head h
    PREV mass 0.6 + 0.1 h."""
    layer0 = [{"mass": {"PREV": 0.6 + 0.1 * h, "HEAD": 0.0, "SEM": 0.0}} for h in range(4)]
    layer1 = [{"mass": {"PREV": 0.0, "HEAD": 0.5 + 0.1 * h, "SEM": 0.0}} for h in range(4)]
    composition = [{"layer": 1, "head": h, "relation": rel, "composes_with": [0, x],
                    "path_mass": pm, "path_mass_baseline": chance, "claimed": claimed}
                   for h, (rel, x, pm, chance, claimed) in enumerate(paths)]
    return {"relations": RELATIONS + ["BEFORE_HEAD"], "layers": [{"heads": layer0},
                                                                 {"heads": layer1}],
            "eval_component_accuracy": {"BEFORE_HEAD": before_head_accuracy},
            "composition": composition}


def race_doc(masses, assignment):
    """One layer, a head per entry of masses ({relation: mass}), the assignment given."""
    return {"relations": RELATIONS, "specialization": {"assignment": assignment},
            "layers": [{"heads": [{"mass": m} for m in masses]}]}


def printed(table, *args):
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        table(*args)
    return text.getvalue().splitlines()


class Race(unittest.TestCase):
    """race_table and settings_table over one fabricated sweep of two values."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        good = race_doc([{"PREV": 0.9, "HEAD": 0.05, "SEM": 0.05},
                         {"PREV": 0.05, "HEAD": 0.9, "SEM": 0.05},
                         {"PREV": 0.05, "HEAD": 0.05, "SEM": 0.9},
                         {"PREV": 0.05, "HEAD": 0.6, "SEM": 0.35}],
                        {"PREV": [0, 0], "HEAD": [0, 1], "SEM": [0, 2]})
        # Two HEAD heads and two SEM heads; PREV's assigned head has 0.07 of it.
        no_prev = race_doc([{"PREV": 0.07, "HEAD": 0.8, "SEM": 0.13},
                            {"PREV": 0.05, "HEAD": 0.15, "SEM": 0.7},
                            {"PREV": 0.05, "HEAD": 0.75, "SEM": 0.2},
                            {"PREV": 0.05, "HEAD": 0.05, "SEM": 0.9}],
                           {"PREV": [0, 0], "HEAD": [0, 2], "SEM": [0, 3]})
        # Every relation claimed, SEM's head the weakest (0.55): s_match 0.78 fails.
        weak_sem = race_doc([{"PREV": 0.9, "HEAD": 0.05, "SEM": 0.05},
                             {"PREV": 0.05, "HEAD": 0.9, "SEM": 0.05},
                             {"PREV": 0.05, "HEAD": 0.4, "SEM": 0.55},
                             {"PREV": 0.05, "HEAD": 0.6, "SEM": 0.35}],
                            {"PREV": [0, 0], "HEAD": [0, 1], "SEM": [0, 2]})
        claims = lambda head, sem, prev: {"first_claims": {"HEAD": head, "SEM": sem,
                                                           "PREV": prev}}
        p = "model.attn_dropout"
        sweep(cls.dir.name, "race", [p], [
            ({p: 0.15}, 1, 1.0, good, {"n_claimed": 3, "s_match": 0.90, **claims(100, 150, 300)}),
            ({p: 0.15}, 2, 1.0, good, {"n_claimed": 3, "s_match": 0.86, **claims(100, 200, 400)}),
            ({p: 0.3}, 1, 0.40, no_prev, {"n_claimed": 2, "s_match": 0.60,
                                          **claims(100, 200, None)}),
            ({p: 0.3}, 2, 1.0, weak_sem, {"n_claimed": 3, "s_match": 0.78,
                                          **claims(150, 250, 200)}),
        ])
        cls.rows = [("dropout 0.15", "race", {p: 0.15}), ("dropout 0.3", "race", {p: 0.3})]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_race_names_the_loser_the_roles_and_the_median_claims(self):
        lines = printed(ft.race_table, self.dir.name, self.rows)
        self.assertEqual(lines[2:], [
            # Medians over 2 runs: SEM (150 + 200) / 2, PREV (300 + 400) / 2.
            "| dropout 0.15 | 2 of 2 | - | - | 100, 175, 350 |",
            # Roles at the end of both failures: no_prev 2 HEAD, 2 SEM; weak_sem PREV, HEAD,
            # SEM, HEAD. PREV's median over the one run that claims it.
            "| dropout 0.3 | 0 of 2 | 1: PREV unclaimed (L0H0 0.07); 2: weakest SEM 0.55 | "
            "4 / 3 / 1 | 125, 225, 200; PREV never on 1 |",
        ])

    def test_settings_give_accuracy_s_match_and_the_failures(self):
        lines = printed(ft.settings_table, self.dir.name, self.rows)
        self.assertEqual(lines[2:], [
            "| dropout 0.15 | 2 of 2 | 1.000 (mean 1.000) | 0.88, 0.86 | - |",
            # Mean accuracy (0.40 + 1.0) / 2, mean s_match (0.60 + 0.78) / 2 = 0.69.
            "| dropout 0.3 | 0 of 2 | 0.400 (mean 0.700) | 0.69, 0.60 | "
            "1: 0.40/0.60/2 PREV unclaimed (L0H0 0.07); 2: 1.00/0.78/3 weakest SEM 0.55 |",
        ])


class Tables(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        out = cls.out = cls.dir.name
        heads = ["model.heads"]
        # The gradient rows: the head-count sweep (3 runs at h = 4, none at 8) and heads-3.
        sweep(out, "heads", heads, [({"model.heads": 4}, s, 1.0, NOT_LAST) for s in (1, 2, 3)])
        sweep(out, "heads-3", heads, [])
        sweep(out, "prune-mean_ablation", heads,
              [({"model.heads": 4}, 1, 1.0, LAST), ({"model.heads": 4}, 2, 1.0, NOT_LAST),
               ({"model.heads": 8}, 1, 1.0, LAST8)])
        sweep(out, "prune-patching", heads, [({"model.heads": 4}, 1, 1.0, NOT_LAST)])
        layers = {"model.layers": 2}
        sweep(out, "composition", ["model.layers"], [
            # Seed 302 (listed first, printed second): the strongest BEFORE_HEAD path is head 2's
            # (0.80 against head 0's 0.70), claimed; head 1's path is HEAD's, not counted.
            (layers, 302, 0.99, composition_doc(0.97, [
                ("BEFORE_HEAD", 1, 0.70, 0.06, True), ("HEAD", 0, 0.90, 0.05, True),
                ("BEFORE_HEAD", 3, 0.80, 0.065, True), ("BEFORE_HEAD", 2, 0.30, 0.06, False)])),
            # Seed 301: claimed, but BEFORE_HEAD accuracy 0.90 < 0.95: does not compose.
            (layers, 301, 0.95, composition_doc(0.90, [
                ("BEFORE_HEAD", 0, 0.40, 0.062, True), ("SEM", 0, 0.20, 0.05, False),
                ("SEM", 0, 0.20, 0.05, False), ("SEM", 0, 0.20, 0.05, False)])),
            # Seed 303: no layer-1 head's strongest path is BEFORE_HEAD's.
            (layers, 303, 0.70, composition_doc(0.40, [("HEAD", 0, 0.5, 0.05, False)] * 4)),
        ])

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def table(self, name):
        done = subprocess.run([sys.executable, SCRIPT, self.out, name], capture_output=True,
                              text=True, check=True)
        return done.stdout.splitlines()

    def test_pruning_by_measure(self):
        lines = self.table("pruning-measures")
        self.assertEqual(lines[0], "### Pruning, by importance measure")
        rows = [line for line in lines if line.startswith("| 4 |") or line.startswith("| 8 |")]
        self.assertEqual(rows, [
            # NOT_LAST x 3: a specialist pruned first; one head left 0.20 on each.
            "| 4 | gradient (3 seeds) | 0 of 3 | - | 0.200 ± 0.000 |",
            # LAST (0.99 with only the specialists; one head 0.30) and NOT_LAST (0.20):
            # mean 0.25, population sd 0.05.
            "| 4 | mean_ablation | 1 of 2 | 0.990 ± 0.000 | 0.250 ± 0.050 |",
            "| 4 | patching | 0 of 1 | - | 0.200 ± 0.000 |",
            "| 8 | gradient (0 seeds) | 0 of 0 | - | - |",
            "| 8 | mean_ablation | 1 of 1 | 0.970 ± 0.000 | 0.100 ± 0.000 |",
            "| 8 | patching | 0 of 0 | - | - |",
        ])

    def test_composition(self):
        lines = self.table("composition")
        rows = [line for line in lines if line.startswith("| 30")]
        self.assertEqual(rows, [
            # Head 0's path: L1 H0 (HEAD 0.50) through L0 H0 (PREV 0.60); 1 of 4 claimed.
            "| 301 | 0.950 | 0.900 | L1 H0 (0.50) | L0 H0 (0.60) | 0.40 | 0.062 | yes | 1 of 4 |",
            # Head 2's path: L1 H2 (HEAD 0.70) through L0 H3 (PREV 0.90); heads 0 and 2 claimed.
            "| 302 | 0.990 | 0.970 | L1 H2 (0.70) | L0 H3 (0.90) | 0.80 | 0.065 | yes | 2 of 4 |",
            "| 303 | 0.700 | 0.400 | none | - | - | - | - | 0 of 4 |",
        ])
        self.assertIn("Composes (the strongest BEFORE_HEAD path claimed, BEFORE_HEAD accuracy "
                      ">= 0.95): 1 of 3.", lines)

    def test_the_script_prints_both_tables_in_its_last_block(self):
        with open(os.path.join(ROOT, "scripts", "flagship-tables.sh")) as f:
            block = f.read().split("# --- Block 4")[1]
        self.assertIn("tables composition pruning-measures", block)
        self.assertIn("tables race region region-fresh", block.split("# --- Block 5")[1])



class Early(unittest.TestCase):
    """early_table and early_fresh_table (block 7: early dropout) over fabricated sweeps."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        out = cls.dir.name
        run = lambda seed, s_match, acc=1.0, claimed=3, steps=300: (
            {"model.heads": 4}, seed, acc, {}, {"s_match": s_match, "n_claimed": claimed,
                                                "steps_to_95": steps})
        # Seeds 41..43: the lowest 0.84 (seed 42) and a seed not specialized (43, accuracy
        # 0.9, s_match 0.9): two under 0.85.
        sweep(out, "early-v-41", ["model.heads"],
              [run(41, 0.95), run(42, 0.84), run(43, 0.90, acc=0.9, steps=None)])
        sweep(out, "early-v-11", ["model.heads"], [run(11, 0.91), run(12, 0.88)])
        h = lambda heads, seed, acc, steps: ({"model.heads": heads}, seed, acc, {},
                                             {"s_match": 0.2, "n_claimed": 1,
                                              "steps_to_95": steps})
        sweep(out, "early-v-h12", ["model.heads"],
              [h(1, 1, 0.40, None), h(1, 2, 0.60, None), h(2, 1, 0.97, 400), h(2, 2, 0.80, None)])
        sweep(out, "early-fresh-recipe-3001", ["model.heads"], [run(3001, 0.90), run(3002, 0.86)])

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_each_variant_gives_its_tail_per_block_and_its_contrast(self):
        saved = ft.EARLY
        ft.EARLY = [("a variant", "v")]
        try:
            lines = printed(ft.early_table, self.dir.name)
        finally:
            ft.EARLY = saved
        self.assertEqual(lines[2:], [
            # 41..43: lowest 0.84 on seed 42; 42 and 43 under. h = 1: mean 0.5, highest 0.6;
            # h = 2: one of two reached 95%.
            "| a variant | 0.840 (42), 2 under | 0.880 (12), 0 under | 0.500, 0.600 | 1 of 2 |"])

    def test_fresh_blocks_that_exist_are_listed(self):
        lines = printed(ft.early_fresh_table, self.dir.name)
        # Only the recipe's block 3001 exists: one row; mean 0.88, lowest 0.86 on seed 3002.
        self.assertEqual(lines[2:], [
            "| configs/dependency.toml | 3001-3002 | 2 of 2 | 0.88 ± 0.02 | 0.86 (3002) | 0 |"])

    def test_the_contrast_table_gives_accuracy_range_and_reached_95_per_setting(self):
        h = lambda heads, seed, acc, s_match, claimed, steps: (
            {"model.heads": heads}, seed, acc, {},
            {"s_match": s_match, "n_claimed": claimed, "steps_to_95": steps})
        sweep(self.dir.name, "contrast", ["model.heads"],
              [h(1, 1, 0.40, 0.20, 1, None), h(1, 2, 0.90, 0.18, 1, None),
               h(4, 1, 1.00, 0.90, 3, 200), h(4, 2, 0.96, 0.70, 3, 300)])
        lines = printed(ft.contrast_table, self.dir.name,
                        [("one head", "contrast", {"model.heads": 1}),
                         ("four heads", "contrast", {"model.heads": 4})])
        self.assertEqual(lines[2:], [
            # h = 1: mean 0.65 of 0.40 and 0.90, neither reached 95%; s_match mean 0.19.
            "| one head | 0 of 2 | 0.650, 0.400-0.900 | 0 of 2 | 0.19, 0.18 |",
            # h = 4: seed 2 has s_match 0.70 (not specialized) though it reached 95%.
            "| four heads | 1 of 2 | 0.980, 0.960-1.000 | 2 of 2 | 0.80, 0.70 |"])

    def test_the_script_prints_the_early_tables_in_block_7(self):
        with open(os.path.join(ROOT, "scripts", "flagship-tables.sh")) as f:
            block = f.read().split("# --- Block 7")[1]
        self.assertIn("tables early early-levers early-fresh early-phase-width-dropout "
                      "early-phase-lr-steps early-s400", block)
        for _, name, _ in ft.EARLY_S400:
            self.assertIn(f'"$out/{name}"', block)
        for _, name in ft.EARLY:
            self.assertIn(f"early {name} ", block)


if __name__ == "__main__":
    unittest.main()
