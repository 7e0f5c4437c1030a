"""headlab.sweep runs `headlab sweep` (found beside the module, or $HEADLAB_CLI) and reads it."""

import pytest

import headlab
from runs_common import TINY, cli_error, sets

QUICK = {"train.steps": 30, "train.eval_every": 10, "train.checkpoint_every": 10}


def test_a_sweep_trains_every_setting_and_reads_back(tmp_path):
    sweep = headlab.sweep(TINY, over={"model.heads": [2, 4]}, seeds=1, jobs=2,
                          out=tmp_path / "s", overrides=QUICK)
    assert [run.path.name for run in sweep.runs] == ["heads-2_seed-1", "heads-4_seed-1"]
    assert [run.config["model"]["heads"] for run in sweep.runs] == [2, 4]
    assert all(run["ok"] for run in sweep.summary["runs"])
    assert headlab.open_sweep(tmp_path / "s").summary == sweep.summary


def test_a_bad_sweep_is_the_cli_error(tmp_path):
    over = {"model.nope": [1]}
    expected = cli_error("sweep", TINY, "--over", "model.nope=1", "--out", tmp_path / "cli",
                         *sets(QUICK))
    with pytest.raises(headlab.Error) as caught:
        headlab.sweep(TINY, over=over, out=tmp_path / "py", overrides=QUICK)
    assert str(caught.value) == expected


def test_the_sweep_program_is_this_build_s(monkeypatch):
    import os

    cli = os.environ["HEADLAB_CLI"]
    assert headlab.headlab_executable() == cli
    monkeypatch.delenv("HEADLAB_CLI")
    monkeypatch.setenv("PATH", "")
    # Found beside the package: <build>/headlab for <build>/python/headlab.
    assert os.path.samefile(headlab.headlab_executable(), cli)
