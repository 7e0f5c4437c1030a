"""Run by python_prefix.cmake with PYTHONPATH=<prefix>/lib/python3/dist-packages only: imports
headlab, trains a tiny run with it and checks that every file the process mapped (the package,
libheadlab.so) comes from the prefix, the system or the work directory, none from the build or
source tree, and that headlab.sweep's program is the prefix's bin/headlab.

  python3 python_prefix.py PREFIX BUILD_DIR SOURCE_DIR CONFIG OUT
"""

import os
import sys
from pathlib import Path

prefix, build_dir, source_dir, config, out = (Path(a).resolve() for a in sys.argv[1:6])

import headlab  # noqa: E402

assert Path(headlab.__file__).resolve().is_relative_to(prefix), headlab.__file__
run = headlab.train(config, out=out, overrides={"train.steps": 20, "schedule.warmup_steps": 5,
                                                "train.eval_every": 10, "train.checkpoint_every": 10})
assert run.summary["steps"] == 20, run.summary
assert run.attention().shape[2] == run.config["model"]["heads"]
mapped = {line.split()[-1] for line in open("/proc/self/maps") if "/" in line}
work = Path.cwd().resolve()
# The test's prefix and work directory lie inside the build tree.
tree = [m for m in mapped if not Path(m).is_relative_to(work) and not Path(m).is_relative_to(prefix)
        and (Path(m).is_relative_to(build_dir) or Path(m).is_relative_to(source_dir))]
assert not tree, f"mapped from the build or source tree: {tree}"
lib = [m for m in mapped if Path(m).name.startswith("libheadlab.so")]
assert lib and all(Path(m).is_relative_to(prefix) for m in lib), lib
assert Path(headlab.headlab_executable()).resolve() == prefix / "bin" / "headlab"
print(f"trained {out} from {prefix} alone: eval accuracy {run.summary['eval_accuracy']:.4f}")
