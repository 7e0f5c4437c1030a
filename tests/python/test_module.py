"""The package imports from the build tree and carries the library's version and error type."""

import re

import headlab


def test_version_is_the_library_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", headlab.__version__)


def test_error_is_a_runtime_error():
    assert issubclass(headlab.Error, RuntimeError)
