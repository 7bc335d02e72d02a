"""Hierarchical composition: an operation as a stage of another, against NumPy and a serial run."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.dataflow import Operation, Stage, Token
from parvox.dataflow.operation import nested_operations, serial
from parvox.testing import mpi_test

BINS = 7


def _image() -> np.ndarray:
    return (np.arange(37 * 23) * 2654435761 % 97 % BINS).reshape(37, 23)


def _nested_histogram(size: int) -> Operation:
    """Tiles of 9 rows go to rank t % size; each tile is split into rows sent to other ranks
    (row r to (r * 3 + 1) % size), counted there and merged on the tile's rank."""

    def rank() -> int:
        from mpi4py import MPI

        return MPI.COMM_WORLD.Get_rank() if MPI.Is_initialized() else 0

    rows = Operation(
        "rows",
        split=lambda tile: [
            Token((int(tile["r0"]) + i) * 3 % size, row) for i, row in enumerate(tile["a"])
        ],
        stages=(Stage(lambda row: np.bincount(row, minlength=BINS), "count"),),
        merge=lambda acc, h: acc + h,
        init=lambda tile: np.zeros(BINS, dtype=np.int64),
        finish=lambda acc: (acc, rank()),
    )
    tiles = Operation(
        "tiles",
        split=lambda a: [
            Token(t % size, {"r0": np.int64(r0), "a": a[r0 : r0 + 9]})
            for t, r0 in enumerate(range(0, a.shape[0], 9))
        ],
        stages=(Stage(rows, "rows", threads=2), Stage(lambda hr: hr, "pass")),
        merge=lambda acc, hr: (acc[0] + hr[0], acc[1] | {hr[1]}),
        init=lambda a: (np.zeros(BINS, dtype=np.int64), set()),
    )
    return tiles


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_nested_split_merge_equals_numpy_and_the_serial_run():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    op = _nested_histogram(size)
    with Dataflow([op], window=1, max_requests=2) as flow:
        assert set(flow.ops) == {"tiles", "rows"}  # the nested operation is registered
        futures = [flow.submit("tiles", _image()) for _ in range(2)]
        for fut in futures:
            hist, where = fut.result(timeout=60)
            np.testing.assert_array_equal(hist, np.bincount(_image().ravel(), minlength=BINS))
            assert where == {t % size for t in range(5)}  # inner merges ran on the tiles' ranks
    want, _ = serial(op, _image())
    np.testing.assert_array_equal(want, np.bincount(_image().ravel(), minlength=BINS))


@mpi_test(ranks=(2, 3), timeout=120)
def test_an_error_in_a_nested_stage_reaches_the_outer_origin():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow, DataflowError

    comm = MPI.COMM_WORLD
    size = comm.Get_size()

    def boom(x):
        raise KeyError("inner")

    inner = Operation("inner", lambda n: [Token(size - 1, n)], (Stage(boom, "boom"),),
                      lambda acc, r: r)
    outer = Operation("outer", lambda n: [Token(1, n)], (Stage(inner, "nest"),), lambda a, r: r)
    with Dataflow([outer]) as flow:
        if comm.Get_rank() == 0:
            with pytest.raises(DataflowError) as info:
                flow.run("outer", 3, timeout=30)
            assert info.value.stage == "nest" and info.value.rank == 1
            assert "boom" in info.value.detail


def test_nesting_in_itself_is_refused_and_nested_operations_are_listed():
    inner = Operation("a", lambda r: [], (Stage(abs),), lambda acc, r: acc)
    outer = Operation("b", lambda r: [], (Stage(inner, "x"), Stage(abs)), lambda acc, r: acc)
    assert [o.name for o in nested_operations(outer)] == ["a"]
    assert Stage(inner).name == "a"
    loop = Operation("b", lambda r: [], (Stage(outer),), lambda acc, r: acc)
    with pytest.raises(ValueError, match="nested in itself"):
        nested_operations(loop)
