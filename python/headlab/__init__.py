"""headlab from Python: runs, trained models and their hook points, tensors and autograd.

The compiled part is headlab._headlab (pybind11, over the same libheadlab.so as the CLI); this
package adds the pure-Python layer on top of it. docs/python.md shows the API by example.
"""

# First: importing _openmp chooses libgomp's wait policy before _headlab loads libgomp, which
# reads it once.
from ._openmp import openmp_wait_policy
from ._headlab import Error, __version__
from ._openblas import warn_if_pthreads_openblas
from .run import Run, Sweep, headlab_executable, open_run, open_sweep, sweep, train
from . import tensors
from .tensors import *  # noqa: F401,F403  Tensor, Var, ops, layers, optimizers, no_grad
from . import model
from .model import Model, evaluate, load_model, patch_head, zero_head

__all__ = ["Error", "__version__", "openmp_wait_policy"]
__all__ += ["Run", "Sweep", "headlab_executable", "open_run", "open_sweep", "sweep", "train"]
__all__ += tensors.__all__
__all__ += model.__all__

warn_if_pthreads_openblas()
