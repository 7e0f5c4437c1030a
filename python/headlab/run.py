"""Runs from Python: train and sweep as the CLI does, and read a run directory.

headlab.train runs the library's training session, the one `headlab train` runs
(train/run/session.h), in this process: the same files, the same bits, the same errors (as
headlab.Error, whose text is the CLI's line after "headlab: error: "). headlab.sweep runs
`headlab sweep` as a child process (a sweep trains each run in a child of its own; see
headlab_executable). open_run reads what a run directory holds.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

from . import _headlab
from ._headlab import Error


def _toml_value(value):
    """A --set value: TOML's spelling of booleans and lists, the rest as str() writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_toml_value(v) for v in value)
    return str(value)


def _sets(overrides):
    return [f"{key}={_toml_value(value)}" for key, value in (overrides or {}).items()]


def _default_out(config):
    return str(Path("runs") / Path(config).stem)


def train(config, out=None, overrides=None, plugins=(), progress=None, resume=False,
          overwrite=False, analysis=True):
    """Trains as `headlab train CONFIG --out OUT --set K=V ... --plugin P ...` does; returns the Run.

    progress(event) is called with a dict: {"event": "step", "step", "total_steps", "loss",
    "accuracy", "lr", "grad_norm", "tokens_per_second", "elapsed_seconds"} at every metrics row,
    {"event": "eval", "step", "loss", "accuracy", "tokens"} at every evaluation and
    {"event": "checkpoint", "step", "path"} at every checkpoint. An exception it raises stops
    the run the way Ctrl-C does (a checkpoint of that step) and is raised again.
    Ctrl-C (SIGINT) stops the run after the current step: a checkpoint is written, run.json says
    "interrupted by SIGINT", then KeyboardInterrupt is raised; resume=True continues it.
    """
    config = os.fspath(config)
    out = os.fspath(out) if out is not None else _default_out(config)
    sets = _sets(overrides)
    plugins = [os.fspath(p) for p in plugins]
    # run.json records how the session was started: this Python, then headlab.train's
    # arguments as the command line's flags.
    command = [sys.executable, "headlab.train", config, "--out", out]
    for s in sets:
        command += ["--set", s]
    for p in plugins:
        command += ["--plugin", p]
    command += (["--resume"] if resume else []) + (["--overwrite"] if overwrite else [])
    command += [] if analysis else ["--no-analysis"]
    _headlab.train(config, out, sets, plugins, resume, overwrite, not analysis, command, progress)
    return open_run(out)


def headlab_executable():
    """The `headlab` program headlab.sweep starts: $HEADLAB_CLI when set, else the one installed
    beside this package (P/bin/headlab for P/lib/python3/dist-packages/headlab), else the build
    tree's (<build>/headlab for <build>/python/headlab), else `headlab` on PATH."""
    if os.environ.get("HEADLAB_CLI"):
        return os.environ["HEADLAB_CLI"]
    here = Path(__file__).resolve().parent
    for candidate in (here.parents[3] / "bin" / "headlab" if len(here.parents) > 3 else None,
                      here.parents[1] / "headlab"):
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("headlab")
    if found:
        return found
    raise Error("headlab.sweep: cannot find the headlab program: set HEADLAB_CLI to its path, "
                "or put it on PATH")


def _run_cli(args):
    """Runs `headlab ARGS`; its stderr's last "headlab: error: " line becomes headlab.Error.
    Ctrl-C is passed on as SIGINT (the child writes its checkpoints), then raised."""
    child = subprocess.Popen([headlab_executable(), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = child.communicate()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        child.wait()
        raise
    if child.returncode != 0:
        lines = [l for l in stderr.splitlines() if l.startswith("headlab: ")]
        line = lines[-1] if lines else f"headlab {args[0]} exited with {child.returncode}"
        raise Error(line.removeprefix("headlab: error: "))
    return stdout


def sweep(config, over, seeds=1, jobs=1, out=None, overrides=None, plugins=(), resume=False):
    """Runs `headlab sweep CONFIG --over K=V1,V2 ... --seeds N --jobs J --out OUT`; returns a
    Sweep (its sweep.json and its runs)."""
    config = os.fspath(config)
    out = os.fspath(out) if out is not None else str(Path("runs") / f"sweep-{Path(config).stem}")
    args = ["sweep", config, "--seeds", str(seeds), "--jobs", str(jobs), "--out", out,
            "--no-progress"]
    for key, values in over.items():
        args += ["--over", f"{key}={','.join(_toml_value(v) for v in values)}"]
    for s in _sets(overrides):
        args += ["--set", s]
    for p in plugins:
        args += ["--plugin", os.fspath(p)]
    args += ["--resume"] if resume else []
    _run_cli(args)
    return Sweep(out)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise Error(f"'{path}': cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise Error(f"'{path}': not JSON ({e})") from None


def _read_jsonl(path):
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise Error(f"'{path}': line {number} is not JSON ({e})") from None
    return rows


class Run:
    """A run directory that `headlab train` (or headlab.train) wrote."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise Error(f"'{self.path}': not a run directory (it does not exist or is not a "
                        "directory)")
        for required in (".headlab", "config.resolved.toml"):
            if not (self.path / required).is_file():
                raise Error(f"'{self.path}': not a run directory of headlab ('{required}' is "
                            "missing)")

    def __repr__(self):
        return f"headlab.Run('{self.path}')"

    @property
    def config(self):
        """config.resolved.toml as a dict (every key, defaults included)."""
        with open(self.path / "config.resolved.toml", "rb") as f:
            return tomllib.load(f)

    @property
    def summary(self):
        """summary.json (written when the run finished)."""
        return _read_json(self.path / "summary.json")

    @property
    def heads(self):
        """heads.json, the head analysis."""
        return _read_json(self.path / "heads.json")

    @property
    def run_json(self):
        """run.json: how the run was made (sessions, plugins, data files)."""
        return _read_json(self.path / "run.json")

    @property
    def metrics(self):
        """metrics.jsonl: one dict per row (training rows and evaluations)."""
        return _read_jsonl(self.path / "metrics.jsonl")

    @property
    def timeline(self):
        """timeline.jsonl (with train.timeline): one dict per evaluation; [] without it."""
        return _read_jsonl(self.path / "timeline.jsonl")

    @property
    def checkpoints(self):
        """The checkpoint directories, oldest first (names "step-NNNNNN")."""
        directory = self.path / "checkpoints"
        if not directory.is_dir():
            return []
        names = [p for p in directory.iterdir()
                 if p.is_dir() and not p.is_symlink() and p.name.startswith("step-")
                 and p.name[5:].isdigit() and (p / "state.json").is_file()]
        return sorted(names, key=lambda p: int(p.name[5:]))

    @property
    def latest_checkpoint(self):
        """The checkpoint checkpoints/latest points to, or None."""
        latest = self.path / "checkpoints" / "latest"
        return latest.resolve() if latest.is_symlink() else None

    def attention(self):
        """attention.npy (sentences x layers x heads x positions x positions), memory-mapped and
        read-only: nothing is copied until it is read."""
        import numpy as np

        path = self.path / "attention.npy"
        if not path.is_file():
            raise Error(f"'{self.path}': no attention.npy (the analysis did not run: headlab "
                        f"analyze {self.path})")
        return np.load(path, mmap_mode="r")

    def model(self, checkpoint="latest", plugins=()):
        """The trained model (headlab.Model) of a checkpoint: "latest", "step-NNNNNN" or a path."""
        load_model = getattr(_headlab, "load_model", None)
        if load_model is None:
            raise Error("Run.model: this build of headlab has no model bindings "
                        "(_headlab.load_model is missing)")
        return load_model(str(self.path), str(checkpoint), [os.fspath(p) for p in plugins])


class Sweep:
    """A sweep directory that `headlab sweep` (or headlab.sweep) wrote."""

    def __init__(self, path):
        self.path = Path(path)
        if not (self.path / "sweep.json").is_file():
            raise Error(f"'{self.path}': not a sweep directory ('sweep.json' is missing)")

    def __repr__(self):
        return f"headlab.Sweep('{self.path}')"

    @property
    def summary(self):
        """sweep.json."""
        return _read_json(self.path / "sweep.json")

    @property
    def runs(self):
        """Every run directory of the sweep, as a Run."""
        return [Run(p) for p in sorted(self.path.iterdir())
                if p.is_dir() and (p / ".headlab").is_file() and (p / "config.resolved.toml").is_file()]


def open_run(path):
    """The run in `path` (a directory `headlab train` wrote)."""
    return Run(os.fspath(path))


def open_sweep(path):
    """The sweep in `path` (a directory `headlab sweep` wrote)."""
    return Sweep(os.fspath(path))
