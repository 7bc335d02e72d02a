"""The docstring examples of parvox.collectives run (one rank, in this process)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["ops", "schedule", "requests", "progress", "algorithms", "api", "alg_gather",
           "alg_reduce", "alg_alltoall", "facade", "tiles"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(f"parvox.collectives.{name}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
