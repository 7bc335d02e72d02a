"""Fixtures of the benchmark scripts' tests: a script under ``bench/`` imported as a module."""

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench_script() -> Iterator[Callable[[str], ModuleType]]:
    """``bench_script("threads")``: ``bench/threads.py`` as a module (``bench/`` on the path
    while the test module runs; the modules it imported are forgotten afterwards)."""
    sys.path.insert(0, str(BENCH))
    loaded: list[str] = []

    def load(name: str) -> ModuleType:
        loaded.append(name)
        return importlib.import_module(name)

    try:
        yield load
    finally:
        sys.path.remove(str(BENCH))
        for name in loaded:
            sys.modules.pop(name, None)
