"""Which OpenBLAS headlab runs on in this process.

libheadlab.so links the OpenMP build of OpenBLAS (README: a pthreads build runs a second thread
pool beside oneDNN's OpenMP one). NumPy on Debian links the pthreads build under the same soname
(libopenblas.so.0): when NumPy is imported first, the dynamic loader hands headlab that one, so
its runs are slower beside other threads and summary.json's versions say "openblas ... "
without USE_OPENMP, unlike the CLI's. Import headlab before NumPy to get the CLI's.
"""

import warnings


def loaded_openblas():
    """The OpenBLAS libraries mapped into this process (paths), from /proc/self/maps."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return sorted({line.split()[-1] for line in maps if "libopenblas" in line})
    except OSError:
        return []


def warn_if_pthreads_openblas():
    pthreads = [path for path in loaded_openblas() if "openblas-pthread" in path]
    if pthreads:
        warnings.warn(
            f"headlab runs on the pthreads OpenBLAS ({pthreads[0]}), loaded before it (by "
            "NumPy?): import headlab before numpy to run on the OpenMP one, as the CLI does",
            RuntimeWarning, stacklevel=3)
