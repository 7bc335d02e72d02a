"""mpi4py's own collective test suites, fetched from PyPI and run against parvox's facade.

:func:`ensure_tests` downloads the source distribution of the *installed* mpi4py once
(``pip download --no-binary mpi4py --no-deps mpi4py==<version>``: the same sdist file as
``--no-binary :all:``, which would also build every build dependency from source, minutes
here) and unpacks its ``test/`` directory into ``.cache/`` at the repository root (ignored by
git). :func:`run` loads ``test_cco_buf``, ``test_cco_nb_buf``, ``test_cco_vec`` and
``test_cco_nb_vec``, subclasses their ``World`` and ``InplaceWorld`` classes with ``COMM`` set
to :class:`parvox.collectives.Intracomm`, and runs them with unittest on every rank.

mpi4py's own runner disables its Numba and CuPy array backends unless asked (they need a
GPU); so does :func:`run`. The array backends (array, NumPy, DLPack, fake GPU arrays) and
type codes are the suite's own; :func:`run` may restrict them to a share of the
(backend, type code) pairs to keep the time in bounds.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

MODULES = ("test_cco_buf", "test_cco_nb_buf", "test_cco_vec", "test_cco_nb_vec")
CLASSES = {
    "test_cco_buf": ("TestCCOBufWorld", "TestCCOBufInplaceWorld"),
    "test_cco_nb_buf": ("TestCCOBufWorld", "TestCCOBufInplaceWorld"),
    "test_cco_vec": ("TestCCOVecWorld", "TestCCOVecInplaceWorld"),
    "test_cco_nb_vec": ("TestCCOVecWorld", "TestCCOVecInplaceWorld"),
}
#: test method name prefix -> the parvox operation it exercises (longest prefixes first)
OPERATIONS = (
    ("testReduceScatter", "reduce_scatter"),
    ("testAllreduce", "allreduce"),
    ("testReduce", "reduce"),
    ("testExscan", "exscan"),
    ("testScan", "scan"),
    ("testAllgather", "allgather"),
    ("testAlltoallw", "alltoallw"),
    ("testAlltoallv", "alltoallv"),
    ("testAlltoall", "alltoall"),
    ("testGather", "gather"),
    ("testScatter", "scatter"),
    ("testBcast", "bcast"),
    ("testBarrier", "barrier"),
)
ROOT = Path(__file__).resolve().parents[2]


def test_dir() -> Path:
    """Where the test files of the installed mpi4py version are (or will be) cached."""
    import mpi4py

    return ROOT / ".cache" / f"mpi4py-{mpi4py.__version__}-tests"


def ensure_tests() -> Path:
    """Download and unpack mpi4py's test directory once; return it."""
    import mpi4py

    target = test_dir()
    if (target / "arrayimpl.py").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    version = mpi4py.__version__
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", "mpi4py",
               "--no-deps", f"mpi4py=={version}", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"downloading mpi4py {version}'s sdist failed:\n{proc.stderr}")
        (sdist,) = Path(tmp).glob("mpi4py-*.tar.gz")
        unpacked = Path(tmp) / "tests"
        prefix = f"mpi4py-{version}/test/"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers()
                       if m.name.startswith(prefix) and m.isfile() and "/" not in
                       m.name[len(prefix):]]
            for m in members:
                m.name = m.name[len(prefix):]
            tar.extractall(unpacked, members=members, filter="data")
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(target)
        unpacked.rename(target)
    return target


def operation(test_id: str) -> str:
    """The parvox operation a test method exercises."""
    method = test_id.rsplit(".", 1)[-1]
    for prefix, op in OPERATIONS:
        if method.startswith(prefix):
            return op
    raise KeyError(f"no operation known for {test_id}")


@contextlib.contextmanager
def _modules(directory: Path) -> Iterator[dict[str, Any]]:
    """Import mpi4py's test modules (Numba and CuPy hidden, as mpi4py's runner does)."""
    sys.path.insert(0, str(directory))
    hidden = {name: sys.modules.get(name) for name in ("numba", "cupy")}
    try:
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]
        found = {name: importlib.import_module(name) for name in ("arrayimpl", *MODULES)}
    finally:
        for name, module in hidden.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    try:
        yield found
    finally:
        sys.path.remove(str(directory))


def pairs(arrayimpl: Any) -> list[tuple[str, str]]:
    """Every (backend class name, type code) the suite loops over, in its order."""
    return [(b.__name__, tc) for b in arrayimpl.ArrayBackends for tc in b.TypeMap]


@contextlib.contextmanager
def _only(arrayimpl: Any, keep: set[tuple[str, str]] | None) -> Iterator[None]:
    """Restrict the suite's array loop to ``keep`` (all when None)."""
    backends = list(arrayimpl.ArrayBackends)
    maps = {b: b.TypeMap for b in backends}
    try:
        if keep is not None:
            arrayimpl.ArrayBackends[:] = [b for b in backends
                                          if any(k[0] == b.__name__ for k in keep)]
            for b in arrayimpl.ArrayBackends:
                b.TypeMap = {tc: t for tc, t in maps[b].items() if (b.__name__, tc) in keep}
        yield
    finally:
        arrayimpl.ArrayBackends[:] = backends
        for b, m in maps.items():
            b.TypeMap = m


def run(
    comm: Any, operations: Sequence[str] | None, share: tuple[int, int] | None
) -> unittest.TestResult:
    """Run the suites with ``COMM = comm``.

    ``operations``: only the test methods of these operations (None: all). ``share``:
    ``(k, m)`` keeps the (backend, type code) pairs ``k, k + 1, ..., k + m - 1`` (modulo
    their number); None keeps them all.
    """
    directory = test_dir()
    if not (directory / "arrayimpl.py").exists():
        raise RuntimeError(f"{directory} is missing: ensure_tests() runs before the launch")
    with _modules(directory) as mods:
        arrayimpl = mods["arrayimpl"]
        everything = pairs(arrayimpl)
        keep = None
        if share is not None:
            k, m = share
            keep = {everything[(k + j) % len(everything)] for j in range(m)}
        suite = unittest.TestSuite()
        loader = unittest.TestLoader()
        for name in MODULES:
            for cls_name in CLASSES[name]:
                base = getattr(mods[name], cls_name)
                cls = type(cls_name, (base,), {"COMM": comm, "__module__": name})
                for test in loader.loadTestsFromTestCase(cls):
                    if operations is None or operation(test.id()) in operations:
                        suite.addTest(test)
        with _only(arrayimpl, keep), open("/dev/null", "w") as sink:
            return unittest.TextTestRunner(stream=sink, verbosity=0).run(suite)


def report(result: unittest.TestResult, limit: int = 3) -> str:
    """The first failures of a run, for an assertion message."""
    bad = result.failures + result.errors
    text = [f"{len(bad)} of {result.testsRun} tests failed"]
    for test, trace in bad[:limit]:
        text.append(f"--- {test.id()}\n{trace}")
    return "\n".join(text)
