"""headlab.train runs what `headlab train` runs: the same files, the same bits, the same errors."""

# headlab before NumPy: the OpenMP OpenBLAS, as the CLI's (python/headlab/_openblas.py).
import headlab
import numpy as np
import pytest
from runs_common import SHORT, TINY, assert_same_run, cli, cli_error, jsonl, sets


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One tiny run trained by the CLI and one by headlab.train, with the same config."""
    root = tmp_path_factory.mktemp("runs")
    code, _, stderr = cli("train", TINY, "--out", root / "cli", *sets(SHORT))
    assert code == 0, stderr
    events = []
    run = headlab.train(TINY, out=root / "py", overrides=SHORT, progress=events.append)
    return root / "cli", run, events


def test_a_python_run_equals_the_cli_run_bit_for_bit(runs):
    cli_dir, run, _ = runs
    compared = assert_same_run(cli_dir, run.path)
    # checkpoints (2 x 4 files), metrics, timeline, summary, heads, attention, ...
    assert compared >= 14


def test_the_progress_callback_gets_every_metrics_row(runs):
    _, run, events = runs
    steps = [e for e in events if e["event"] == "step"]
    rows = [r for r in jsonl(run.path / "metrics.jsonl") if "lr" in r]
    assert [e["step"] for e in steps] == [r["step"] for r in rows] == [10, 20, 30, 40]
    assert [e["loss"] for e in steps] == [r["loss"] for r in rows]
    assert all(e["total_steps"] == 40 for e in steps)
    assert [e["step"] for e in events if e["event"] == "checkpoint"] == [20, 40]
    assert [e["step"] for e in events if e["event"] == "eval"] == [20, 40]


def test_open_run_reads_the_run(runs):
    _, trained, _ = runs
    run = headlab.open_run(str(trained.path))
    assert run.config["model"]["heads"] == 4
    assert run.config["train"]["steps"] == 40
    assert run.summary["steps"] == 40
    assert run.heads["analysis"]["step"] == 40
    assert [c.name for c in run.checkpoints] == ["step-000020", "step-000040"]
    assert run.latest_checkpoint == run.checkpoints[-1].resolve()
    assert [row["step"] for row in run.timeline] == [20, 40]
    assert run.metrics[0]["step"] == 10
    assert run.run_json["outcome"] == "finished"
    attention = run.attention()
    # Memory-mapped, read-only, equal to the file np.load reads whole.
    assert isinstance(attention, np.memmap) and not attention.flags.writeable
    assert attention.shape[1:3] == (1, 4)
    np.testing.assert_array_equal(attention, np.load(run.path / "attention.npy"))


def test_open_run_names_what_is_missing(tmp_path):
    with pytest.raises(headlab.Error, match="does not exist"):
        headlab.open_run(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(headlab.Error, match=r"empty.*'\.headlab' is missing"):
        headlab.open_run(tmp_path / "empty")


def test_a_run_without_analysis_says_how_to_get_attention(tmp_path):
    run = headlab.train(TINY, out=tmp_path / "r", overrides={**SHORT, "train.steps": 10, "schedule.warmup_steps": 5},
                        analysis=False)
    assert not (run.path / "heads.json").exists()
    with pytest.raises(headlab.Error, match="no attention.npy"):
        run.attention()


@pytest.mark.parametrize("overrides", [{"model.heads": 0}, {"model.no_such_key": 1},
                                       {"train.steps": "many"}])
def test_a_bad_config_is_the_cli_error(tmp_path, overrides):
    expected = cli_error("train", TINY, "--out", tmp_path / "cli", *sets(overrides))
    with pytest.raises(headlab.Error) as caught:
        headlab.train(TINY, out=tmp_path / "py", overrides=overrides)
    assert str(caught.value) == expected
    assert not (tmp_path / "py").exists()


def test_a_missing_config_is_the_cli_error(tmp_path):
    missing = tmp_path / "missing.toml"
    expected = cli_error("train", missing, "--out", tmp_path / "cli")
    with pytest.raises(headlab.Error) as caught:
        headlab.train(missing, out=tmp_path / "py")
    assert str(caught.value) == expected


def test_a_run_directory_in_use_is_the_cli_error(runs):
    cli_dir, _, _ = runs
    expected = cli_error("train", TINY, "--out", cli_dir, *sets(SHORT))
    with pytest.raises(headlab.Error) as caught:
        headlab.train(TINY, out=cli_dir, overrides=SHORT)
    assert str(caught.value) == expected
    assert "--overwrite" in expected


def test_a_bad_plugin_is_the_cli_error(tmp_path):
    not_a_plugin = tmp_path / "plugin.so"
    not_a_plugin.write_text("not a shared library")
    expected = cli_error("train", TINY, "--out", tmp_path / "cli", "--plugin", not_a_plugin)
    with pytest.raises(headlab.Error) as caught:
        headlab.train(TINY, out=tmp_path / "py", plugins=[not_a_plugin])
    assert str(caught.value) == expected


def test_model_without_the_model_bindings_says_so(runs):
    _, run, _ = runs
    if hasattr(headlab._headlab, "load_model"):
        pytest.skip("this build has the model bindings (tests/python/test_model*.py)")
    with pytest.raises(headlab.Error, match="load_model"):
        run.model()
