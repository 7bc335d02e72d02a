"""Every docstring example in parvox runs (one rank, in this process).

The modules are found by walking the package, so a new module's examples are run without
being listed anywhere. ``parvox.cli`` modules are parsers whose help text is their
documentation; they are walked too, and simply hold no examples.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import parvox

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(parvox.__path__, "parvox.")
    if not info.name.endswith("__main__")
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=FLAGS, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_the_walk_finds_the_package():
    assert {"parvox.distarray", "parvox.collectives.api", "parvox.ndimage.filters"} <= set(MODULES)
