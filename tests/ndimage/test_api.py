"""The public API of parvox.ndimage mirrors scipy.ndimage, and the example runs."""

from __future__ import annotations

import inspect
import runpy
from pathlib import Path

import pytest
import scipy.ndimage as ndi

from parvox import ndimage as pnd
from parvox.testing import mpi_test

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ndimage_filters.py"


@pytest.mark.parametrize("name", [n for n in pnd.__all__ if n != "rescale"])
def test_same_parameters_as_scipy(name: str) -> None:
    ours = inspect.signature(getattr(pnd, name)).parameters
    theirs = inspect.signature(getattr(ndi, name)).parameters
    assert list(ours) == list(theirs)
    for p in theirs.values():
        assert ours[p.name].kind == p.kind, p.name
        assert ours[p.name].default == p.default or p.default is inspect.Parameter.empty, p.name


@mpi_test(ranks=(1, 3), timeout=120)
def test_example_runs():
    runpy.run_path(str(EXAMPLE), run_name="__main__")
