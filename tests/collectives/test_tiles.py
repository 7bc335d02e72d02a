"""Pipelined tiles: compressed blocks gathered tile by tile; tile auto-tuning."""

from __future__ import annotations

import zlib

import numpy as np

from parvox.testing import mpi_test


def _block(rank: int, i: int) -> np.ndarray:
    rng = np.random.default_rng(rank * 1000 + i)
    return (rng.integers(0, 4, 500 + 37 * i) * (i % 3)).astype(np.uint8)


def test_pipeline_window_and_padding_serial():
    from parvox.collectives.requests import CompletedRequest
    from parvox.collectives.tiles import pipeline

    started = []

    def start(t, items):
        started.append((t, list(items)))
        return CompletedRequest(len(items))

    assert pipeline(7, lambda i: i, start, tile=3, window=1, ntiles=4) == [3, 3, 1, 0]
    assert started[2] == (2, [6])


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_pipelined_gather_of_compressed_blocks():
    from mpi4py import MPI

    from parvox.collectives import tiles

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    counts = [3 + (i % 3) * 2 for i in range(p)]  # ranks own different numbers of blocks

    def compress(i: int) -> np.ndarray:
        return np.frombuffer(zlib.compress(_block(r, i).tobytes()), np.uint8)

    for tile, window in ((1, 1), (2, 2), (4, 3), ("auto", 2)):
        for mode in ("test", "none"):
            got = tiles.pipelined_gather(counts[r], compress, root=p - 1, tile=tile,
                                         window=window, progress=mode, candidates=(1, 3))
            if r == p - 1:
                ref = [_block(i, j) for i in range(p) for j in range(counts[i])]
                assert len(got) == len(ref)
                for a, b in zip(got, ref, strict=True):
                    np.testing.assert_array_equal(np.frombuffer(zlib.decompress(a), np.uint8), b)
            else:
                assert got is None
    res = tiles.autotune_tile(lambda t: sum(range(20000 // t)), candidates=(1, 2, 4))
    assert res.best in (1, 2, 4) and set(res.times) == {1, 2, 4}
    assert comm.allgather(res.best) == [res.best] * p


class _Spy:
    """A request of ``rounds`` rounds that counts its test calls and completes on wait."""

    def __init__(self, value, rounds, log):
        self.value, self.rounds, self.tests, self.log = value, rounds, 0, log
        self.log["live"] += 1
        self.log["most"] = max(self.log["most"], self.log["live"])

    def test(self):
        self.tests += 1
        return False

    def wait(self, timeout=None):
        self.log["live"] -= 1
        self.log["waited"].append(self)
        return self.value


def _spied(n, tile, window, tests, rounds=3, ntiles=None):
    from parvox.collectives.tiles import pipeline

    log = {"live": 0, "most": 0, "waited": []}
    run = pipeline(n, lambda i: i, lambda t, items: _Spy(sum(items), rounds, log),
                   tile=tile, window=window, ntiles=ntiles, tests=tests, stats=True)
    return run, log


def test_test_calls_per_tile_follow_tests():
    """Each in-flight request is tested ``tests`` times per later tile it overlaps (default:
    once per item), whatever the window."""
    for tile, window, tests in ((4, 1, None), (4, 2, 0), (3, 2, 1), (2, 3, 5), (5, 1, 7)):
        n = 4 * tile
        run, log = _spied(n, tile, window, tests)
        per_tile = tile if tests is None else tests
        assert run.results == [sum(range(t * tile, (t + 1) * tile)) for t in range(4)]
        assert (run.tile, run.window, run.tests) == (tile, window, per_tile)
        for k, req in enumerate(sorted(log["waited"], key=lambda r: r.value)):
            overlapped = min(window, 4 - 1 - k)  # later tiles computed before its wait
            assert req.tests == per_tile * overlapped, (tile, window, tests, k)
        assert log["most"] == window and log["live"] == 0


def test_auto_window_is_chosen_with_the_tile():
    from parvox.collectives.tiles import DEFAULT_WINDOW, auto_window

    assert auto_window(3, 1) == 6 and auto_window(3, 6) == 1 and auto_window(1, 1) == 2
    assert auto_window(9, 2, ntiles=3) == 3 and auto_window(5, 0) == DEFAULT_WINDOW
    assert auto_window(0, 4) == 1
    for tile, tests, rounds in ((1, None, 3), (2, None, 3), (4, None, 3), (2, 1, 4), (3, 0, 2)):
        run, log = _spied(24, tile, "auto", tests, rounds=rounds)
        ntiles = 24 // tile
        want = auto_window(rounds, tile if tests is None else tests, ntiles)
        assert run.window == want and log["most"] == want
        assert f"window={want}" in run.describe()
        # a request waited for because the window was full (all but the last ``want``, which
        # have less later work to overlap) saw at least two test calls per round first
        if tests != 0:
            early = log["waited"][: ntiles - want]
            assert all(q.tests >= 2 * rounds for q in early), [q.tests for q in early]
    # the window shrinks as the tile grows (more test calls per tile)
    windows = [_spied(32, t, "auto", None)[0].window for t in (1, 2, 4, 8)]
    assert windows == sorted(windows, reverse=True) and windows[0] > windows[-1]


def test_bad_tile_window_and_tests_name_the_argument():
    import pytest

    from parvox.collectives import parse_tests, tiles
    from parvox.collectives.progress import overlap
    from parvox.errors import ParameterError

    bad = {
        "tests": (-1, 1.5, "4", True),
        "window": (0, -2, 1.5, "wide", True),
        "tile": (0, -1, 2.5, "big"),
    }
    for param, values in bad.items():
        for v in values:
            with pytest.raises(ParameterError) as info:
                _spied(5, **{"tile": 2, "window": 2, "tests": None, param: v})
            assert info.value.param == param, (param, v)
            with pytest.raises(ParameterError) as info:
                tiles.pipelined_gather(3, lambda i: np.zeros(1, np.uint8),
                                       **{"tile": 2, "window": 2, param: v})
            assert info.value.param == param, (param, v)
    for v in bad["tests"]:
        with pytest.raises(ParameterError) as info:
            parse_tests(v)
        assert info.value.param == "tests"
        with pytest.raises(ParameterError) as info:
            overlap(None, lambda i: i, range(3), tests=v)
        assert info.value.param == "tests"
    with pytest.raises(ParameterError):
        overlap(None, lambda i: i, range(3), tests=None)
    assert parse_tests(None) is None and parse_tests(0) == 0 and parse_tests(12.0) == 12


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_pipelined_gather_any_tests_and_window_equals_serial():
    from mpi4py import MPI

    from parvox.collectives import tiles

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    counts = [5 + 2 * (i % 2) for i in range(p)]

    def compress(i: int) -> np.ndarray:
        return np.frombuffer(zlib.compress(_block(r, i).tobytes()), np.uint8)

    ref = [zlib.compress(_block(i, j).tobytes()) for i in range(p) for j in range(counts[i])]
    for tile, window, tests in ((1, "auto", None), (3, "auto", 0), (2, 1, 1), (2, 3, 4),
                                (4, "auto", 9), ("auto", "auto", 2)):
        run = tiles.pipelined_gather(counts[r], compress, root=0, tile=tile, window=window,
                                     tests=tests, candidates=(1, 2), stats=True)
        assert isinstance(run, tiles.PipelineRun)
        assert run.tile == (tile if tile != "auto" else run.tuning.best) and run.tile >= 1
        assert (run.tuning is not None) == (tile == "auto")
        assert run.window >= 1 and (window == "auto" or run.window == window)
        assert run.tests == (run.tile if tests is None else tests)
        assert f"tile={run.tile}" in run.describe() and f"window={run.window}" in run.describe()
        assert len(set(comm.allgather(run.tile))) == 1
        if r == 0:
            assert [bytes(a) for a in run.results] == ref
        else:
            assert run.results is None
