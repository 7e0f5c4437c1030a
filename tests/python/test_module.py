"""The package imports from the build tree and carries the library's version and error type."""

import os
import re
import subprocess
import sys

import headlab
from headlab import _headlab, _openmp


def test_version_is_the_library_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", headlab.__version__)


def test_error_is_a_runtime_error():
    assert issubclass(headlab.Error, RuntimeError)


def _import_in_child(env_extra=None, prefix=()):
    """headlab imported in a fresh interpreter: what it says of the wait policy, and what libgomp
    printed of the one it took (OMP_DISPLAY_ENV; GOMP_SPINCOUNT 0 when passive)."""
    mine = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", _openmp.MARK)
    env = {k: v for k, v in os.environ.items() if k not in mine}
    env.update(env_extra or {})
    env["OMP_DISPLAY_ENV"] = "verbose"
    code = "import headlab; print(headlab.openmp_wait_policy())"
    r = subprocess.run([*prefix, sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, check=True)
    return r.stdout.strip(), r.stderr


def test_import_chooses_the_clis_wait_policy_before_libgomp_loads():
    spin = str(_openmp.QUIET_SPIN_COUNT)
    out, err = _import_in_child()
    if out.startswith(f"GOMP_SPINCOUNT={spin} (headlab's choice: the CPUs were idle"):
        assert f"GOMP_SPINCOUNT = '{spin}'" in err
    else:
        assert out.startswith("OMP_WAIT_POLICY=passive (headlab's choice: "), out
        assert "GOMP_SPINCOUNT = '0'" in err
    out, err = _import_in_child(prefix=("taskset", "-c", str(min(os.sched_getaffinity(0)))))
    assert out.startswith("OMP_WAIT_POLICY=passive (headlab's choice: one CPU"), out
    assert "GOMP_SPINCOUNT = '0'" in err
    out, err = _import_in_child({"GOMP_SPINCOUNT": "1234"})  # the user's: kept
    assert out == "GOMP_SPINCOUNT=1234"
    assert "GOMP_SPINCOUNT = '1234'" in err


def test_the_wait_policy_rule_is_the_librarys():
    assert _openmp.QUIET_SPIN_COUNT == _headlab._openmp_quiet_spin_count
    assert _openmp.BUSY_CORES == _headlab._openmp_busy_cores
    assert _openmp.choose(2, 0.2)[:2] == ("GOMP_SPINCOUNT", str(_openmp.QUIET_SPIN_COUNT))
    assert _openmp.choose(2, _openmp.BUSY_CORES)[:2] == ("OMP_WAIT_POLICY", "passive")
    assert _openmp.choose(2, None)[1] == "passive"
    assert _openmp.choose(1, 0.0)[1] == "passive"
    busy = _openmp.busy_cores(sorted(os.sched_getaffinity(0)))
    assert busy is not None and 0.0 <= busy <= len(os.sched_getaffinity(0))
