"""Helpers of the run tests: the CLI beside the module, and comparing two run directories."""

import json
import os
import struct
import subprocess
from pathlib import Path

SOURCE = Path(os.environ.get("HEADLAB_SOURCE", Path(__file__).resolve().parents[2]))
CLI = os.environ.get("HEADLAB_CLI", "headlab")
TINY = str(SOURCE / "configs" / "tiny.toml")
# A shorter tiny run: two checkpoints, two evaluations, the analysis.
SHORT = {"train.steps": 40, "train.eval_every": 20, "train.checkpoint_every": 20,
         "train.log_every": 10}


def cli(*args, cwd=None):
    """`headlab ARGS`: (exit code, stdout, stderr)."""
    done = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def sets(overrides):
    out = []
    for key, value in overrides.items():
        out += ["--set", f"{key}={value}"]
    return out


def cli_error(*args):
    """The text after "headlab: error: " of the CLI's last stderr line (it must fail)."""
    code, _, stderr = cli(*args)
    assert code != 0, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("headlab: error: "), last
    return last.removeprefix("headlab: error: ")


# Keys that carry times (wall clock, speeds) or the run directory's random id.
TIMED = ("seconds", "per_second", "run_id", "checksum")


def untimed(value, ignore=()):
    if isinstance(value, dict):
        return {k: untimed(v, ignore) for k, v in value.items()
                if not any(t in k for t in TIMED) and k not in ignore}
    if isinstance(value, list):
        return [untimed(v, ignore) for v in value]
    return value


def safetensors_parts(path):
    """(the header without __metadata__, the tensor bytes): the metadata holds the run's id."""
    data = Path(path).read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__", None)
    return header, data[8 + size:]


def jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


# Files that carry times or the run's id throughout: compared by name only.
NAME_ONLY = {".headlab", ".headlab.lock", "train.log", "run.json", "report.html"}


def assert_same_run(a, b, ignore=()):
    """Every deterministic file of two run directories equal: bytes, or every value but times
    (and the JSON keys in `ignore`)."""
    a, b = Path(a), Path(b)
    # train.log is the CLI's record of its terminal; headlab.train prints nothing.
    files_a = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    files_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    files_a = [f for f in files_a if f != "train.log"]
    files_b = [f for f in files_b if f != "train.log"]
    assert files_a == files_b, (files_a, files_b)
    assert os.readlink(a / "checkpoints/latest") == os.readlink(b / "checkpoints/latest")
    compared = 0
    for name in files_a:
        fa, fb = a / name, b / name
        base = Path(name).name
        if base in NAME_ONLY:
            continue
        if base.endswith(".safetensors"):
            # The data bytes and every tensor's dtype, shape and offsets.
            assert safetensors_parts(fa) == safetensors_parts(fb), name
        elif base in ("state.json", "summary.json"):
            ja, jb = json.loads(fa.read_text()), json.loads(fb.read_text())
            for doc in (ja, jb):  # the tensor files' digests cover their metadata (the run id)
                for tensors in ("model.safetensors", "optimizer.safetensors"):
                    doc.get("files", {}).pop(tensors, None)
            assert untimed(ja, ignore) == untimed(jb, ignore), name
        elif base == "metrics.jsonl":
            assert untimed(jsonl(fa), ignore) == untimed(jsonl(fb), ignore), name
        else:  # attention.npy, heads.json, timeline.jsonl, config.resolved.toml, vocab, ...
            assert fa.read_bytes() == fb.read_bytes(), name
        compared += 1
    return compared
