"""Testing helpers: run a pytest body on several MPI rank counts with a deadlock timeout.

A test decorated with :func:`mpi_test` becomes one pytest item per rank count. Its body runs
on every rank under ``mpiexec -n K``. All selected bodies at one rank count, of every test
module of the session, run in one ``mpiexec`` launch (launching and importing on every rank is
the slow part on a small machine: 36 modules at 1-4 ranks were about 140 launches); after a
failure the launch is resumed with the bodies that had not run yet, so every item gets its own
verdict. A body runs in the ranks' interpreter, not in pytest: it takes no fixtures and must not
rely on a fixture's side effects (the first item at a rank count runs the other modules' bodies
too). Each body has a watchdog: past ``timeout`` seconds every rank dumps its stack and the
job is killed, so a deadlock fails the test instead of hanging the suite.

Bodies of one launch share an interpreter, so the state a body may change is put back before
the next one runs: the world communicator's collectives settings
(:func:`parvox.collectives.configure`), ``sys.excepthook`` (``parvox.comm.abort_on_exception``
sets it), the SIGINT/SIGTERM handlers, the environment and the working directory.

The item that runs a batch waits for all of it: :func:`apply_batch_timeouts` (called from the
suite's ``conftest.py``) gives every MPI item a pytest-timeout at least as long as its batch
may take (:func:`batch_limit`), so a slow machine reports the body that hung, not the item
that happened to start the batch.

Under pytest-xdist (``./test`` runs ``-n auto --dist loadgroup``) the items of one rank count
must reach the same worker, or each worker would launch the whole batch again:
:func:`group_batches` puts them in one ``xdist_group`` per rank count, so the batches at
different rank counts, and the tests outside any batch, run side by side on the workers.

Examples
--------
In a test module::

    from parvox.testing import mpi_test

    @mpi_test(ranks=(1, 2, 3, 4), timeout=60)
    def test_allreduce():
        from mpi4py import MPI
        assert MPI.COMM_WORLD.allreduce(1) == MPI.COMM_WORLD.Get_size()
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import importlib
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from parvox._text import plural

__all__ = [
    "LAUNCH_S",
    "apply_batch_timeouts",
    "batch_limit",
    "group_batches",
    "mpi_test",
    "mpi_tests",
    "run_bodies",
    "spread_batches",
]

_BEGIN = "=== parvox-test-begin "
_RANKS_DEFAULT = (1, 2, 3, 4)
#: seconds one mpiexec launch may take beyond its bodies (start-up, imports, shutdown)
LAUNCH_S = 60.0


@dataclasses.dataclass(frozen=True)
class _Body:
    module: str
    name: str
    ranks: tuple[int, ...]
    timeout: float


#: module name -> bodies in definition order
_REGISTRY: dict[str, list[_Body]] = {}
#: nprocs -> {(module, body name): (passed, report)}
_RESULTS: dict[int, dict[tuple[str, str], tuple[bool, str]]] = {}


def mpi_test(
    ranks: Sequence[int] = _RANKS_DEFAULT, timeout: float = 60.0
) -> Callable[[Callable[[], None]], Callable[..., None]]:
    """Turn a no-argument body into pytest items that run it under ``mpiexec -n K``.

    Parameters
    ----------
    ranks : sequence of int
        The rank counts to run at (one pytest item each).
    timeout : float
        Seconds the body may take at one rank count before it is declared deadlocked.
    """
    ranks = tuple(int(r) for r in ranks)
    if not ranks or min(ranks) < 1:
        raise ValueError(f"ranks must be positive integers, got {ranks}")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout}")

    def decorate(body: Callable[[], None]) -> Callable[..., None]:
        import pytest

        entry = _Body(body.__module__, body.__name__, ranks, float(timeout))
        bodies = _REGISTRY.setdefault(entry.module, [])
        bodies[:] = [b for b in bodies if b.name != entry.name] + [entry]

        def test(nprocs: int, request: Any) -> None:
            passed, report = _result(entry, nprocs, request)
            if not passed:
                pytest.fail(report, pytrace=False)

        test.__name__ = body.__name__
        test.__qualname__ = body.__qualname__
        test.__module__ = body.__module__
        test.__doc__ = body.__doc__
        test._parvox_body = body  # type: ignore[attr-defined]
        test = pytest.mark.parametrize("nprocs", ranks, ids=[f"np{r}" for r in ranks])(test)
        return pytest.mark.mpi(test)

    return decorate


def mpi_tests(
    namespace: dict[str, Any],
    bodies: Mapping[str, Callable[[], None]],
    ranks: Sequence[int] = _RANKS_DEFAULT,
    timeout: float = 60.0,
    marks: Sequence[Any] = (),
) -> list[str]:
    """Make one :func:`mpi_test` per body of ``bodies`` in the module whose ``globals()`` is
    ``namespace``: many checks, each with its own verdict, in the launches of their rank counts.

    A body may be a plain no-argument function or another module's :func:`mpi_test` item (its
    body runs; the other module keeps its own rank counts). Each test is named
    ``test_<key>``, a module global, so the ranks find it by name.

    Parameters
    ----------
    namespace : dict
        ``globals()`` of the test module.
    bodies : mapping of str to callable
        Test name suffix -> body.
    ranks, timeout
        As for :func:`mpi_test`.
    marks : sequence of pytest marks
        Applied to every test made (e.g. ``pytest.mark.scale``).

    Returns
    -------
    list of str
        The names of the tests made.

    Examples
    --------
    In a test module::

        mpi_tests(globals(), {"sum": check_sum, "halo": check_halo}, ranks=(5, 16))
    """
    names = []
    for key, check in bodies.items():
        run = getattr(check, "_parvox_body", check)

        def body(run: Callable[[], None] = run) -> None:
            run()

        body.__name__ = body.__qualname__ = name = f"test_{key}"
        body.__module__ = namespace["__name__"]
        body.__doc__ = check.__doc__
        test = mpi_test(ranks, timeout)(body)
        for mark in marks:
            test = mark(test)
        namespace[name] = test
        names.append(name)
    return names


def _selected(nprocs: int, request: Any) -> set[tuple[str, str]]:
    """(module, body name) of every selected MPI item at ``nprocs`` ranks in the session."""
    names = set()
    for item in request.session.items:
        found = _mpi_item(item)
        if found is not None and found[1] == nprocs:
            names.add((found[0].__module__, found[0].__name__))
    return names


def _mpi_item(item: Any) -> tuple[Callable[[], None], int] | None:
    """(body, rank count) of an :func:`mpi_test` item; ``None`` for any other item."""
    body = getattr(getattr(item, "function", None), "_parvox_body", None)
    callspec = getattr(item, "callspec", None)
    if body is None or callspec is None:
        return None
    return body, callspec.params.get("nprocs")


def _result(entry: _Body, nprocs: int, request: Any) -> tuple[bool, str]:
    results = _RESULTS.setdefault(nprocs, {})
    key = (entry.module, entry.name)
    if key not in results:
        wanted = _selected(nprocs, request) | {key}
        pending = [
            b
            for bodies in _REGISTRY.values()
            for b in bodies
            if nprocs in b.ranks and (b.module, b.name) in wanted
            and (b.module, b.name) not in results
        ]
        # this item's module first: its verdict is the one waited for
        pending.sort(key=lambda b: b.module != entry.module)
        results.update(_run_batch(pending, nprocs))
    return results[key]


def batch_limit(bodies: Sequence[_Body], relaunches: int = 0) -> float:
    """Seconds a batch of ``bodies`` may take: their timeouts and :data:`LAUNCH_S` per launch
    (the first and ``relaunches`` more after failures).

    Examples
    --------
    >>> batch_limit([_Body("m", "a", (1,), 30.0), _Body("m", "b", (1,), 90.0)])
    180.0
    """
    return sum(b.timeout for b in bodies) + LAUNCH_S * (1 + relaunches)


def apply_batch_timeouts(items: Sequence[Any]) -> None:
    """Give every :func:`mpi_test` item a ``pytest.mark.timeout`` covering its whole batch.

    The first item at a rank count runs every body of the session at that count (and
    relaunches after each failure), so its bound is :func:`batch_limit` of them all, with a
    launch per body. An explicit larger ``timeout`` mark is kept. Call it from
    ``pytest_collection_modifyitems``.
    """
    import pytest

    for item in items:
        found = _mpi_item(item)
        if found is None:
            continue
        nprocs = found[1]
        batch = [b for bodies in _REGISTRY.values() for b in bodies if nprocs in b.ranks]
        limit = batch_limit(batch, relaunches=max(len(batch) - 1, 0))
        marker = item.get_closest_marker("timeout")
        if marker is None or not marker.args or float(marker.args[0]) < limit:
            item.add_marker(pytest.mark.timeout(limit))


def group_batches(items: Sequence[Any]) -> None:
    """Mark every :func:`mpi_test` item ``xdist_group("parvox-mpi-K")`` for its rank count K.

    pytest-xdist's ``--dist loadgroup`` then sends all items of a rank count to one worker,
    where the first of them runs the batch of them all (:func:`_selected` sees the worker's
    session). Without xdist the mark does nothing. Call it from
    ``pytest_collection_modifyitems``.
    """
    import pytest

    for item in items:
        found = _mpi_item(item)
        if found is not None:
            item.add_marker(pytest.mark.xdist_group(f"parvox-mpi-{found[1]}"))


def spread_batches(items: list[Any]) -> None:
    """Reorder ``items`` in place: the smallest rank count's MPI batch first, the other
    batches spread evenly, in rank-count order, through the items that are not MPI tests
    (whose order is kept).

    With ``--dist loadgroup --no-loadscope-reorder`` pytest-xdist hands out work in this
    order. In a clean checkout numba's on-disk cache is empty, and every rank of a batch
    compiles the kernels its bodies call. xdist's default order (largest groups first) started
    the batches at 1 and 2 ranks side by side, so three processes compiled the same kernels at
    once on two cores (213 and 219 s for batches that take 20 and 75 s warm). Here one
    process compiles them while the other worker runs single tests, and the batches after it
    find the cache filled. Call it from ``pytest_collection_modifyitems`` after
    :func:`group_batches`.

    Examples
    --------
    >>> spread_batches([])  # no items: nothing to do
    """
    batches: dict[int, list[Any]] = {}
    others: list[Any] = []
    for item in items:
        found = _mpi_item(item)
        if found is None:
            others.append(item)
        else:
            batches.setdefault(found[1], []).append(item)
    if not batches:
        return
    first, *rest = sorted(batches)
    ordered = list(batches[first])
    step = len(others) / (len(rest) + 1)
    start = 0
    for i, nprocs in enumerate(rest, 1):
        cut = round(i * step)
        ordered += others[start:cut] + batches[nprocs]
        start = cut
    ordered += others[start:]
    items[:] = ordered


def _syspath_for(module: str) -> str:
    """The directory that must be on ``sys.path`` for ``import module`` to find its file."""
    path = Path(sys.modules[module].__file__ or "").resolve()
    for _ in module.split("."):
        path = path.parent
    return str(path)


def run_bodies(module: str, bodies: Sequence[_Body], nprocs: int) -> dict[str, tuple[bool, str]]:
    """Run ``bodies`` of ``module`` under ``mpiexec -n nprocs``; map each name to a verdict."""
    results = _run_batch([dataclasses.replace(b, module=module) for b in bodies], nprocs)
    return {name: verdict for (_, name), verdict in results.items()}


def _run_batch(
    bodies: Sequence[_Body], nprocs: int
) -> dict[tuple[str, str], tuple[bool, str]]:
    """Run ``bodies`` (of any modules) in one ``mpiexec -n nprocs``, relaunching after each
    failure with the bodies not run yet; map each (module, name) to a verdict."""
    from parvox.launch import launch_command

    results: dict[tuple[str, str], tuple[bool, str]] = {}
    pending = list(bodies)
    while pending:
        with tempfile.NamedTemporaryFile("r", suffix=".passed", delete=False) as fh:
            passed_file = fh.name
        try:
            argv = ["-m", "parvox.testing", "--passed", passed_file]
            for path in dict.fromkeys(_syspath_for(b.module) for b in pending):
                argv += ["--syspath", path]
            argv += [f"{b.module}:{b.name}={b.timeout}" for b in pending]
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
            limit = batch_limit(pending)
            try:
                proc = subprocess.run(
                    launch_command(nprocs, argv),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                    timeout=limit,
                )
                output, code = proc.stdout, proc.returncode
            except subprocess.TimeoutExpired as exc:
                raw = exc.stdout or ""
                output = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
                output += f"\n(mpiexec killed after {limit:.0f} s)"
                code = -1
            # A body passed only if every rank says so: after one rank calls MPI_Abort, MPICH
            # can let the others' pending barrier return, so rank 0 alone proves nothing.
            seen: dict[str, set[str]] = {}
            for line in Path(passed_file).read_text().splitlines():
                name, _, who = line.partition(" ")
                seen.setdefault(name, set()).add(who)
            passed = {name for name, ranks in seen.items() if len(ranks) == nprocs}
        finally:
            os.unlink(passed_file)
        sections = _split_sections(output)
        still: list[_Body] = []
        failed_one = False
        for b in pending:
            spec = f"{b.module}:{b.name}"
            if spec in passed:
                results[b.module, b.name] = (True, sections.get(spec, ""))
            elif not failed_one:
                failed_one = True
                why = sections.get(spec, output) or output
                if "Timeout (" in why:
                    why += f"\nbody exceeded its timeout of {b.timeout:g} s at {nprocs} ranks (deadlock?)"
                results[b.module, b.name] = (
                    False,
                    f"failed at {plural(nprocs, 'rank')} (mpiexec exit {code}):\n{why.strip()}",
                )
            else:
                still.append(b)
        pending = still
    return results


def _split_sections(output: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    current: str | None = None
    for line in output.splitlines(keepends=True):
        if line.startswith(_BEGIN):
            current = line[len(_BEGIN) :].strip().rstrip("=").strip()
            sections[current] = ""
        elif current is not None:
            sections[current] += line
    return sections


@dataclasses.dataclass
class _State:
    """What a body may change that the next body of the same launch must not see."""

    collectives: dict[str, Any]
    excepthook: Any
    signals: dict[int, Any]
    environ: dict[str, str]
    cwd: str

    @classmethod
    def save(cls) -> _State:
        """The current state (collective: the first ``configure`` call sets up the world's
        collectives context)."""
        import signal

        from parvox import collectives

        ctx = collectives.configure()
        settings = {k: getattr(ctx, k) for k in ("algorithm", "progress", "timeout", "check")}
        sigs: dict[int, Any] = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        return cls(settings, sys.excepthook, sigs, dict(os.environ), os.getcwd())

    def restore(self) -> None:
        """Put the saved state back (every rank; local only)."""
        import signal

        from parvox import collectives

        c = self.collectives
        collectives.configure(
            algorithm=c["algorithm"], progress=c["progress"],
            timeout=0 if c["timeout"] is None else c["timeout"], check=c["check"],
        )  # fmt: skip
        sys.excepthook = self.excepthook
        for signum, handler in self.signals.items():
            signal.signal(signum, handler)
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        os.chdir(self.cwd)


def _main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m parvox.testing")
    parser.add_argument("--syspath", action="append", required=True)
    parser.add_argument("--passed", required=True)
    parser.add_argument("bodies", nargs="+", help="MODULE:NAME=TIMEOUT")
    args = parser.parse_args(argv)
    sys.path[:0] = args.syspath

    from mpi4py import MPI

    from parvox.comm import abort

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    state = _State.save()
    for spec in args.bodies:
        qualified, timeout = spec.rsplit("=", 1)
        module, name = qualified.split(":")
        state.restore()
        comm.Barrier()
        if rank == 0:
            print(f"{_BEGIN}{qualified} ===", flush=True)
        faulthandler.dump_traceback_later(float(timeout), exit=True)
        try:
            # imported when its first body runs: an import error fails that body
            importlib.import_module(module).__dict__[name]._parvox_body()
        except BaseException:
            text = traceback.format_exc()
            sys.stdout.write(f"parvox-test: rank {rank} failed in {name}:\n{text}")
            sys.stdout.flush()
            abort(1)
        faulthandler.cancel_dump_traceback_later()
        comm.Barrier()
        with open(args.passed, "a") as fh:  # one short O_APPEND write per rank: atomic
            fh.write(f"{qualified} {rank}\n")


if __name__ == "__main__":
    _main()
