"""Ctrl-C during headlab.train stops the run as SIGINT stops `headlab train`: a checkpoint of the
step it stopped at, run.json's outcome, then KeyboardInterrupt. An exception in the progress
callback stops it the same way."""

import json
import os
import signal
import threading

import pytest

import headlab
from runs_common import SHORT, TINY, assert_same_run

LONG = {**SHORT, "train.steps": 1000000, "train.checkpoint_every": 1000000}


def outcome(run_dir):
    return json.loads((run_dir / "run.json").read_text())["outcome"]


def test_sigint_while_headlab_computes_writes_a_checkpoint_then_raises(tmp_path):
    started = threading.Event()

    def interrupt():
        # After the first metrics row: the run is under way, in C++, without the GIL.
        started.wait()
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    with pytest.raises(KeyboardInterrupt):
        headlab.train(TINY, out=tmp_path / "r", overrides=LONG,
                      progress=lambda e: started.set())
    sender.join()
    run = headlab.open_run(tmp_path / "r")
    assert outcome(run.path) == "interrupted by SIGINT"
    latest = run.latest_checkpoint
    assert latest is not None and latest.name.startswith("step-")
    step = int(latest.name[5:])
    assert 10 <= step < LONG["train.steps"]
    assert not (run.path / "summary.json").exists()
    # Python's own handler is back: the next SIGINT raises KeyboardInterrupt as usual.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_exception_in_the_progress_callback_stops_the_run(tmp_path):
    def fail_at_20(event):
        if event["event"] == "step" and event["step"] == 20:
            raise ValueError("enough")

    with pytest.raises(ValueError, match="enough"):
        headlab.train(TINY, out=tmp_path / "r", overrides=LONG, progress=fail_at_20)
    run = headlab.open_run(tmp_path / "r")
    assert run.latest_checkpoint.name == "step-000020"
    assert outcome(run.path) == "interrupted by an exception in Python (ValueError)"
    # The interrupted run continues where it stopped.
    resumed = headlab.train(TINY, out=tmp_path / "r", overrides={**LONG, "train.steps": 30},
                            resume=True)
    assert resumed.summary["steps"] == 30


def test_a_run_stopped_from_python_and_resumed_equals_one_trained_at_once(tmp_path):
    def stop_at_20(event):
        if event["event"] == "step" and event["step"] == 20:
            raise KeyboardInterrupt  # what Python's SIGINT handler raises

    with pytest.raises(KeyboardInterrupt):
        headlab.train(TINY, out=tmp_path / "stopped", overrides=SHORT, progress=stop_at_20)
    assert outcome(tmp_path / "stopped") == "interrupted by SIGINT"
    resumed = headlab.train(TINY, out=tmp_path / "stopped", overrides=SHORT, resume=True)
    at_once = headlab.train(TINY, out=tmp_path / "at_once", overrides=SHORT)
    assert resumed.summary["resumed_from_step"] == 20
    assert_same_run(at_once.path, resumed.path, ignore={"resumed_from_step"})
