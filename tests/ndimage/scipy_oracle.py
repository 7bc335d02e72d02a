"""scipy.ndimage's own test suite as the oracle for parvox.ndimage (run under ``mpiexec``).

scipy's test modules call ``ndimage.<f>(array, ...)``. This adapter imports them with
``ndimage`` bound to a stand-in module in which every function parvox implements is replaced
by: distribute the array arguments over the ranks (:meth:`DistArray.from_global` with the
configuration's layout), call ``parvox.ndimage.<f>``, and ``allgather`` the DistArrays it
returns. Everything else (``generate_binary_structure``, private helpers, functions parvox
does not have) is scipy's own. Each rank runs the same tests in the same order, so every
collective call matches.

A test counts as *selected* when it calls at least one parvox function; the others only test
scipy and are reported apart. Each rank writes ``REPORT.rank<r>.json``:
``{nodeid: [outcome, parvox_called, short_message]}``.

With ``--thin N`` each scipy test runs its first parametrization and a fixed sample of about
1 in N of the others (chosen by a checksum of the node id, the same on every rank and in every
run: those whose checksum is ``--thin-offset`` modulo N, so that two launches with one N and
different offsets share no sample); ``--thin 0`` runs the first parametrization of each test
only.

Usage (one launch runs every selected test of one configuration)::

    mpiexec -n 4 python tests/ndimage/scipy_oracle.py --layout '{"nblocks": 11}' --report out
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import importlib
import inspect
import json
import os
import re
import sys
import tempfile
import threading
import time
import types
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: scipy's test modules the adapter runs (installed with scipy)
MODULES = (
    "scipy.ndimage.tests.test_filters",
    "scipy.ndimage.tests.test_measurements",
    "scipy.ndimage.tests.test_morphology",
)
#: parameters that hold arrays shaped like ``input``: distributed with its layout
DISTRIBUTED = ("input", "labels", "mask")
#: parameters through which scipy writes results into an array the caller passes
OUTPUTS = ("output", "distances", "indices")
#: the job's own stderr (kept when the silent ranks send theirs to /dev/null)
_STDERR = os.dup(2)
#: seconds one test may take on one rank before the job is declared deadlocked
TEST_TIMEOUT = float(os.environ.get("PARVOX_ORACLE_TIMEOUT", "120"))


class Oracle:
    """The pytest plugin: binds ``ndimage`` in scipy's test modules to parvox and records."""

    def __init__(self, layout: dict[str, Any], report: str) -> None:
        from mpi4py import MPI

        self.layout = layout
        self.rank = MPI.COMM_WORLD.Get_rank()
        self.report = f"{report}.rank{self.rank}.json"
        self.calls = 0
        self.deselected = 0
        self.wrapped: list[str] = []
        self.results: dict[str, list[Any]] = {}
        self.stand_in = self._stand_in()
        self._import_modules()

    # ------------------------------------------------------------------ the stand-in module
    def _stand_in(self) -> types.ModuleType:
        import scipy.ndimage as ndi
        from scipy._lib._array_api import xp_capabilities_table

        import parvox.ndimage as pnd

        module = types.ModuleType("scipy.ndimage")
        module.__dict__.update({k: v for k, v in vars(ndi).items() if not k.startswith("__")})
        module.__path__ = ndi.__path__  # type: ignore[attr-defined]
        for name in pnd.__all__:
            theirs = getattr(ndi, name, None)
            if theirs is None:
                continue  # a parvox extra (rescale, ...)
            wrapper = self._wrap(theirs, getattr(pnd, name))
            self.wrapped.append(name)
            if theirs in xp_capabilities_table:  # make_xp_test_case looks functions up
                xp_capabilities_table[wrapper] = xp_capabilities_table[theirs]
            setattr(module, name, wrapper)
        return module

    def _import_modules(self) -> None:
        import scipy

        real = scipy.ndimage
        scipy.ndimage = self.stand_in  # `from scipy import ndimage` in the test modules
        try:
            for name in MODULES:
                importlib.import_module(name)
        finally:
            scipy.ndimage = real

    def _wrap(self, theirs: Callable[..., Any], ours: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(theirs)

        @functools.wraps(theirs)
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return ours(*args, **kwargs)  # parvox reports the bad call
            return self._call(ours, bound)

        call._parvox_wrapper = True  # type: ignore[attr-defined]
        return call

    def _call(self, ours: Callable[..., Any], bound: inspect.BoundArguments) -> Any:
        from parvox.distarray import DistArray

        args = bound.arguments
        arrays = {k: args[k] for k in DISTRIBUTED if k in args and args[k] is not None}
        converted = {k: _as_array(v) for k, v in arrays.items()}
        if "labels" in converted and "input" in converted:
            if converted["labels"] is not None and converted["input"] is not None:
                # scipy broadcasts labels against input; a DistArray has one shape
                converted["input"], converted["labels"] = np.broadcast_arrays(
                    converted["input"], converted["labels"]
                )
        for k, v in converted.items():
            if v is not None:
                args[k] = DistArray.from_global(np.ascontiguousarray(v), **self.layout)
        given: dict[int, tuple[DistArray, np.ndarray]] = {}
        x = args.get("input")
        for k in OUTPUTS:
            out = args.get(k)
            if not isinstance(out, np.ndarray) or not isinstance(x, DistArray):
                continue
            if out.shape == x.shape:
                d = DistArray.from_global(np.ascontiguousarray(out), **self.layout)
            elif k == "indices" and out.shape == (x.ndim, *x.shape):
                # one feature coordinate per axis: the input's grid, whole along the first axis
                d = DistArray.from_global(
                    np.ascontiguousarray(out), grid=(1, *x.grid.grid),
                    assignment=x.assignment.kind,
                )
            else:
                continue
            given[id(d)] = (d, out)
            args[k] = d
        result = ours(*bound.args, **bound.kwargs)
        for d, out in given.values():
            out[...] = d.allgather()
        return _collect(result, given)


def _as_array(value: Any) -> np.ndarray | None:
    """``value`` as a NumPy array of at least one axis, or ``None`` (left to parvox)."""
    try:
        a = np.asarray(value)
    except Exception:
        return None
    if a.ndim == 0 or a.dtype.hasobject or a.dtype.kind in "SUVMm":
        return None
    return a


def _collect(result: Any, given: dict[int, tuple[Any, np.ndarray]]) -> Any:
    """``result`` with every DistArray gathered (or replaced by the caller's array it fills)."""
    from parvox.distarray import DistArray

    if isinstance(result, DistArray):
        return given[id(result)][1] if id(result) in given else result.allgather()
    if isinstance(result, tuple | list):
        return type(result)(_collect(r, given) for r in result)
    return result


class Recorder:
    """pytest hooks: skip tests that cannot reach parvox, count parvox calls per test, record
    outcomes, watch for deadlocks."""

    def __init__(self, oracle: Oracle, thin: int = 1, offset: int = 0) -> None:
        self.oracle = oracle
        self.thin = thin
        self.offset = offset
        self.pattern = re.compile(r"\bndimage\.(" + "|".join(oracle.wrapped) + r")\b")
        self.started = time.monotonic()
        self.current = ""
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        """Abort the job when one test runs past :data:`TEST_TIMEOUT` (a deadlock)."""
        while True:
            time.sleep(5.0)
            if self.current and time.monotonic() - self.started > TEST_TIMEOUT:
                # pytest captures sys.stderr, and the ranks but 0 run silently: write to the
                # stderr the job started with
                os.write(_STDERR, f"scipy_oracle: {self.current} exceeded {TEST_TIMEOUT:g} s "
                         f"on rank {self.oracle.rank}\n".encode())
                faulthandler.dump_traceback(file=_STDERR, all_threads=True)
                os._exit(3)

    def _reaches_parvox(self, item: Any) -> bool:
        """Whether the test's code (with its class and the module helpers it calls) or its
        parameters mention a function parvox implements."""
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(getattr(v, "_parvox_wrapper", False) for v in params.values()):
            return True
        func = getattr(item, "function", None)
        if func is None:
            return True
        sources = [func]
        cls = getattr(item, "cls", None)
        module = sys.modules.get(func.__module__)
        for name in func.__code__.co_names:  # the class's and the module's helpers it calls
            for owner in (cls, module):
                helper = inspect.getattr_static(owner, name, None) if owner is not None else None
                if inspect.isfunction(helper):
                    sources.append(helper)
        return any(self._mentions(obj) for obj in sources)

    @functools.cache  # noqa: B019 - one Recorder per process
    def _mentions(self, obj: Any) -> bool:
        try:
            return bool(self.pattern.search(inspect.getsource(obj)))
        except (OSError, TypeError):
            return True

    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        keep, drop = [], []
        tests: set[str] = set()  # the scipy tests (parametrizations aside) kept so far
        for item in items:
            test = item.nodeid.split("[")[0]
            if not self._reaches_parvox(item):
                drop.append(item)
            elif test not in tests or (
                self.thin and zlib.crc32(item.nodeid.encode()) % self.thin == self.offset
            ):
                # each test's first parametrization, and a fixed sample of the others (by
                # checksum: a stride could meet a parameter's period and always pick one value)
                tests.add(test)
                keep.append(item)
            else:
                drop.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        self.oracle.deselected = len(drop)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.oracle.calls = 0
        self.started = time.monotonic()
        self.current = nodeid

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.oracle.results.setdefault(report.nodeid, ["passed", False, ""])
        if report.failed:
            entry[0] = "failed"
            entry[2] = _short(report)
        elif report.skipped and entry[0] == "passed":
            entry[0] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        if report.when == "teardown":
            entry[1] = self.oracle.calls > 0
            self.current = ""

    def pytest_sessionfinish(self, session: Any) -> None:
        report = {"deselected": self.oracle.deselected, "tests": self.oracle.results}
        Path(self.oracle.report).write_text(json.dumps(report))


def _short(report: Any) -> str:
    """The last lines of a failure: the exception and where it came from."""
    text = str(report.longrepr)
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-6:])[-1500:]


def _deterministic_hypothesis() -> None:
    """scipy's "deterministic" hypothesis profile, loaded before the test modules import.

    Every rank must draw the same examples and run them to the same end: no random seed, no
    example database, no deadline (a slow rank would fail a test the others pass).
    """
    import hypothesis

    hypothesis.settings.register_profile(
        "parvox-oracle", deadline=None, database=None, derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    hypothesis.settings.load_profile("parvox-oracle")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scipy_oracle")
    parser.add_argument("--layout", default="{}", help="DistArray layout keywords as JSON")
    parser.add_argument("--report", required=True, help="report path prefix")
    parser.add_argument(
        "--thin", type=int, default=1,
        help="run each scipy test's first parametrization and about 1 in THIN of the others "
        "(a fixed sample; 1: all; 0: the first only)",
    )
    parser.add_argument(
        "--thin-offset", type=int, default=0,
        help="the sample of --thin N: the parametrizations whose checksum is this modulo N",
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (-k ...)")
    args = parser.parse_args(argv)
    if args.thin > 0 and not 0 <= args.thin_offset < args.thin:
        parser.error(f"argument --thin-offset: must be in [0, {args.thin}), got {args.thin_offset}")

    import pytest
    import scipy
    from mpi4py import MPI

    _deterministic_hypothesis()
    oracle = Oracle(json.loads(args.layout), args.report)
    scipy_dir = Path(scipy.__file__).parent
    files = [str(Path(sys.modules[m].__file__ or "")) for m in MODULES]
    with tempfile.TemporaryDirectory(prefix="parvox-oracle-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        pytest_args = [
            *files,
            "-c", str(ini), "--rootdir", str(scipy_dir), "--confcutdir", str(scipy_dir),
            "-p", "no:cacheprovider", *args.pytest_args,
            "-q", "--tb=native", "-o", "console_output_style=count",
        ]
        rank = MPI.COMM_WORLD.Get_rank()
        if rank != 0:  # the others run silently (or into a log, for debugging)
            log = os.environ.get("PARVOX_ORACLE_LOG")
            fd = os.open(f"{log}.rank{rank}" if log else os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
        code = pytest.main(pytest_args, plugins=[Recorder(oracle, args.thin, args.thin_offset)])
    MPI.COMM_WORLD.Barrier()
    return 0 if code in (0, 1) else int(code)


if __name__ == "__main__":
    sys.exit(main())
