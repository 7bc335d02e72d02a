"""The MPI harness itself: bodies run at each rank count; failures and deadlocks are caught."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import _REGISTRY, _Body, mpi_test, run_bodies


@mpi_test(ranks=(1, 2, 3, 4), timeout=30)
def test_every_rank_runs_the_body():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    ranks = comm.allgather(comm.Get_rank())
    assert ranks == list(range(comm.Get_size()))
    total = np.zeros(1)
    comm.Allreduce(np.ones(1), total)
    assert total[0] == comm.Get_size()


def _fails_on_rank_one():
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 1:
        raise AssertionError("rank one disagrees")
    MPI.COMM_WORLD.Barrier()


def _deadlocks():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        comm.recv(source=1, tag=99)  # never sent
    comm.Barrier()


def _passes():
    pass


def _changes_state():
    import os
    import signal
    import sys

    from parvox import collectives, comm

    collectives.configure(check=True, timeout=7.0, algorithm="linear")
    comm.abort_on_exception()  # what every `parvox` command run in a body does
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["PARVOX_TEST_LEAK"] = "1"
    os.chdir("/")
    assert sys.excepthook is not sys.__excepthook__


def _sees_a_fresh_state():
    import os
    import signal
    import sys

    from parvox import collectives

    ctx = collectives.configure()
    assert (ctx.check, ctx.timeout, ctx.algorithm) == (False, None, "auto")
    assert sys.excepthook is sys.__excepthook__
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert "PARVOX_TEST_LEAK" not in os.environ
    assert os.getcwd() != "/"


for _f in (_fails_on_rank_one, _deadlocks, _passes, _changes_state, _sees_a_fresh_state):
    _f._parvox_body = _f  # what mpi_test attaches; lets run_bodies find the raw body
_REGISTRY.setdefault(__name__, [])


@pytest.mark.timeout(120)
def test_failure_names_the_rank_and_later_bodies_still_run():
    bodies = [
        _Body(__name__, "_fails_on_rank_one", (2,), 30.0),
        _Body(__name__, "_passes", (2,), 30.0),
    ]
    results = run_bodies(__name__, bodies, 2)
    ok, report = results["_fails_on_rank_one"]
    assert not ok
    assert "rank 1 failed in _fails_on_rank_one" in report
    assert "rank one disagrees" in report
    assert results["_passes"][0] is True


@pytest.mark.timeout(120)
def test_deadlock_fails_within_the_timeout():
    results = run_bodies(__name__, [_Body(__name__, "_deadlocks", (2,), 3.0)], 2)
    ok, report = results["_deadlocks"]
    assert not ok
    assert "timeout of 3 s" in report


@pytest.mark.timeout(120)
def test_a_body_does_not_see_what_the_previous_one_changed():
    bodies = [
        _Body(__name__, "_changes_state", (2,), 30.0),
        _Body(__name__, "_sees_a_fresh_state", (2,), 30.0),
    ]
    results = run_bodies(__name__, bodies, 2)
    assert results["_changes_state"][0], results["_changes_state"][1]
    assert results["_sees_a_fresh_state"][0], results["_sees_a_fresh_state"][1]


class _FakeItem:
    """What apply_batch_timeouts reads of a pytest item."""

    def __init__(self, function, nprocs, timeout=None):
        import types

        self.function = function
        self.callspec = types.SimpleNamespace(params={"nprocs": nprocs})
        self.markers = [] if timeout is None else [pytest.mark.timeout(timeout).mark]

    def get_closest_marker(self, name):
        found = [m for m in self.markers if m.name == name]
        return found[-1] if found else None

    def add_marker(self, marker):
        self.markers.append(marker.mark)


def test_pytest_timeout_of_an_mpi_item_covers_its_whole_batch(request):
    from parvox.testing import LAUNCH_S, apply_batch_timeouts, batch_limit

    fn = test_every_rank_runs_the_body  # an mpi_test of this module (ranks 1-4, 30 s)
    # the bodies at 2 ranks of every module collected: they share one launch
    batch = [b for bodies in _REGISTRY.values() for b in bodies if 2 in b.ranks]
    want = batch_limit(batch) + LAUNCH_S * (len(batch) - 1)
    items = [_FakeItem(fn, 2), _FakeItem(fn, 2, timeout=10), _FakeItem(fn, 2, timeout=1e6)]
    apply_batch_timeouts(items)
    assert [i.get_closest_marker("timeout").args[0] for i in items] == [want, want, 1e6]
    assert want > 30  # more than the body's own watchdog
    # and so it is for the MPI items of this very session
    for item in request.session.items:
        body = getattr(getattr(item, "function", None), "_parvox_body", None)
        if body is None:
            continue
        nprocs = item.callspec.params["nprocs"]
        mine = [b for bodies in _REGISTRY.values() for b in bodies if nprocs in b.ranks]
        limit = item.get_closest_marker("timeout").args[0]
        assert limit >= batch_limit(mine) + LAUNCH_S * (len(mine) - 1), item.nodeid


def test_mpi_tests_makes_one_named_marked_item_per_body():
    from parvox.testing import mpi_tests

    ran = []
    namespace = {"__name__": "tests.test_testing_mpi_tests_example"}
    try:
        names = mpi_tests(namespace, {"one": lambda: ran.append(1),
                                      "two": test_every_rank_runs_the_body},
                          ranks=(5, 16), timeout=7, marks=[pytest.mark.scale])
        assert names == ["test_one", "test_two"]
        one, two = namespace["test_one"], namespace["test_two"]
        assert {m.name for m in one.pytestmark} == {"parametrize", "mpi", "scale"}
        assert one.__module__ == "tests.test_testing_mpi_tests_example"
        registered = _REGISTRY["tests.test_testing_mpi_tests_example"]
        assert [(b.name, b.ranks, b.timeout) for b in registered] == [
            ("test_one", (5, 16), 7.0), ("test_two", (5, 16), 7.0)]
        one._parvox_body()
        assert ran == [1]
        # another module's mpi_test: its body runs, its own rank counts stay
        assert two._parvox_body.__defaults__[0] is test_every_rank_runs_the_body._parvox_body
        assert (1, 2, 3, 4) == next(b.ranks for b in _REGISTRY[__name__]
                                    if b.name == "test_every_rank_runs_the_body")
    finally:
        _REGISTRY.pop("tests.test_testing_mpi_tests_example", None)


def test_spread_batches_puts_the_smallest_batch_first_and_spreads_the_others():
    from types import SimpleNamespace

    from parvox.testing import spread_batches

    def mpi(name, nprocs):
        return SimpleNamespace(name=name, function=SimpleNamespace(_parvox_body=lambda: None),
                               callspec=SimpleNamespace(params={"nprocs": nprocs}))

    plain = [SimpleNamespace(name=f"t{i}") for i in range(6)]
    items = [plain[0], mpi("a4", 4), mpi("a1", 1), plain[1], mpi("a2", 2), plain[2],
             mpi("b1", 1), plain[3], plain[4], mpi("b2", 2), plain[5]]
    spread_batches(items)
    assert [i.name for i in items] == [
        "a1", "b1", "t0", "t1", "a2", "b2", "t2", "t3", "a4", "t4", "t5"]
    only_plain = list(plain)
    spread_batches(only_plain)
    assert only_plain == plain


def test_xdist_sends_a_batch_group_to_one_worker(tmp_path):
    """``./test``'s premise: with ``--dist loadgroup``, items that ``group_batches`` marks in
    ``pytest_collection_modifyitems`` all run on one worker. It broke silently, by the hook
    running after xdist's and by pytest 9.2 (pytest-xdist#1386): each worker then ran every
    MPI batch itself, and a clean clone's ./test took 924-929 s instead of 806. This fails if
    the installed pair, or the hook's order, breaks it again."""
    import os
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"  # as tests/conftest.py's
        "def pytest_collection_modifyitems(config, items):\n"
        "    for item in items:\n"
        "        if 'grouped' in item.name:\n"
        "            item.add_marker(pytest.mark.xdist_group('parvox-mpi-2'))\n"
    )
    body = (
        "import os, pathlib, pytest\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_{kind}(i):\n"
        "    out = pathlib.Path(os.environ['WHERE']) / f'{{__name__}}-{kind}-{{i}}'\n"
        "    out.write_text(os.environ.get('PYTEST_XDIST_WORKER', 'none'))\n"
    )
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(body.format(kind="grouped") + body.format(kind="free"))
    where = tmp_path / "out"
    where.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "--no-loadscope-reorder", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env=dict(os.environ, WHERE=str(where)),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    grouped = {p.read_text() for p in where.iterdir() if "-grouped-" in p.name}
    assert len(list(where.iterdir())) == 16
    assert len(grouped) == 1, f"one group ran on workers {grouped}"
