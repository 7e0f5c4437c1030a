"""pytest loads this before any test module: headlab is imported before NumPy, so the process
runs on the OpenMP OpenBLAS the CLI links (both builds share one soname, and the first loaded
wins; docs/python.md, "Install"). The bit-for-bit comparisons with the CLI depend on it."""

import headlab  # noqa: F401
